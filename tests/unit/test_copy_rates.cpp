// The copy rate that auto's estimate uses (gpu/copy_rates.h): a step's fixed cost taken
// off a copy's time, and what two noisy times give; the probe that measures the rates
// (gpu/copy_rate_probe.h) in steps, once per device.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "gpu/copy_rate_probe.h"
#include "gpu/copy_rates.h"
#include "gpu/gpu_runtime.h"

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

// ---- the probe: against a CUDA driver where one loads (a GPU, or the stand-in with
// LD_LIBRARY_PATH=tests/gpu/fake), else the driver's absence.

namespace {

// Steps until done (the test may wait; the probe never does); the number of steps.
int step_until_done(gpurdma::gpu::CopyRateProbe &probe, gpurdma::Status *st)
{
    int steps = 0;
    bool done = false;
    uint64_t position = probe.position();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done && std::chrono::steady_clock::now() < until) {
        *st = probe.step(&done);
        ++steps;
        EXPECT_GE(probe.position(), position) << "the idle clock's position never goes back";
        position = probe.position();
        if (!done) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    EXPECT_TRUE(done) << "not done within 30 s: " << probe.describe_wait();
    return steps;
}

}  // namespace

TEST(CopyRateProbe, WithoutADriverUnsupportedAtTheFirstStep)
{
    const auto &drv = gpurdma::gpu::GpuRuntime::instance();
    if (drv.available()) GTEST_SKIP() << "a CUDA driver is present";
    gpurdma::gpu::CopyRateProbe probe(nullptr, 65536);
    bool done = false;
    const gpurdma::Status st = probe.step(&done);
    EXPECT_TRUE(done);
    EXPECT_TRUE(st.is_unsupported()) << st.message();
    EXPECT_EQ(st.message(), drv.why_unavailable());
    const gpurdma::Status again = probe.step(&done);
    EXPECT_TRUE(done);
    EXPECT_EQ(again.message(), st.message()) << "a finished probe says the same again";
}

TEST(CopyRateProbe, MeasuresInStepsOncePerDevice)
{
    const auto &drv = gpurdma::gpu::GpuRuntime::instance();
    if (!drv.available()) GTEST_SKIP() << "no CUDA driver: " << drv.why_unavailable();
    const auto &api = drv.api();
    gpurdma::gpu::CUdevice dev = 0;
    gpurdma::gpu::CUcontext ctx = nullptr;
    ASSERT_EQ(api.device_get(&dev, 0), 0);
    ASSERT_EQ(api.primary_ctx_retain(&ctx, dev), 0);
    gpurdma::gpu::CopyRates first;
    {
        gpurdma::gpu::CopyRateProbe probe(ctx, 65536);
        bool done = true;
        const gpurdma::Status queued = probe.step(&done);
        ASSERT_TRUE(queued.is_ok()) << queued.message();
        EXPECT_FALSE(done) << "the first step queues the first try; none has run";
        EXPECT_EQ(probe.position(), 0u);
        gpurdma::Status st;
        const int steps = step_until_done(probe, &st);
        ASSERT_TRUE(st.is_ok()) << st.message();
        // Each kind: a warm-up and at least one measured try, each seen finished by a step.
        EXPECT_GE(probe.position(), 6u);
        EXPECT_GE(steps, 6);
        first = probe.rates();
        EXPECT_GT(first.step_us, 0.0);
        EXPECT_GT(first.d2h_gbps, 0.0);
        EXPECT_GT(first.h2d_gbps, 0.0);
        EXPECT_LE(first.d2h_gbps, 1000.0);
        EXPECT_LE(first.h2d_gbps, 1000.0);
    }
    // Another communicator on this device: the rates kept, nothing queued.
    gpurdma::gpu::CopyRateProbe again(ctx, 1 << 20);
    bool done = false;
    const gpurdma::Status st = again.step(&done);
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_TRUE(done);
    EXPECT_EQ(again.position(), 0u);
    EXPECT_EQ(again.rates().step_us, first.step_us);
    EXPECT_EQ(again.rates().d2h_gbps, first.d2h_gbps);
    EXPECT_EQ(again.rates().h2d_gbps, first.h2d_gbps);
    api.primary_ctx_release(dev);
}
