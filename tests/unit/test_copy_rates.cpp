// The copy rate that auto's estimate uses (gpu/copy_rates.h): a step's fixed cost taken
// off a copy's time, and what two noisy times give.
#include <gtest/gtest.h>

#include "gpu/copy_rates.h"

using gpurdma::gpu::copy_gbps;

TEST(CopyRates, TakesTheStepsFixedCostOffTheCopy)
{
    // 4 MiB in 100 us of which 20 us are the step: 4194304 B / 80 us.
    EXPECT_NEAR(copy_gbps(4 << 20, 100.0, 20.0), 4194304.0 / 80e3, 1e-9);
    EXPECT_NEAR(copy_gbps(4 << 20, 100.0, 0.0), 4194304.0 / 100e3, 1e-9);
}

TEST(CopyRates, AStepTimedSlowerThanTheCopyTakesOffHalfAtMost)
{
    // Seen on 4 ranks sharing 2 cores: a step timed at 108 us beside copies of 5 us. The
    // rate was then "1000 GB/s", and auto's estimate took the copies as free.
    EXPECT_NEAR(copy_gbps(262144, 5.0, 108.0), 262144.0 / 2.5e3, 1e-9);
    EXPECT_NEAR(copy_gbps(262144, 50.0, 30.0), 262144.0 / 25e3, 1e-9);
    EXPECT_LT(copy_gbps(262144, 5.0, 108.0), 1000.0);
}

TEST(CopyRates, AtMostAThousandGBs)
{
    EXPECT_EQ(copy_gbps(4 << 20, 0.0, 0.0), 1000.0);
    EXPECT_EQ(copy_gbps(4 << 20, 1.0, 0.0), 1000.0);  // 4194 GB/s: not a copy, a clock
}
