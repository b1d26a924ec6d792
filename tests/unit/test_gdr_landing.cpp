// Where arrivals from other nodes land for a GPU-reducing rail (gpu/gdr_landing.h):
// every branch, each reason naming what decided it.
#include <gtest/gtest.h>

#include "gpu/gdr_landing.h"

using gpurdma::gpu::decide_gdr_landing;
using gpurdma::gpu::GdrLandingInputs;

namespace {

GdrLandingInputs eligible()
{
    GdrLandingInputs in;
    in.rail_on_gpu = true;
    in.net_channels = true;
    in.gdr_eligible = true;
    in.gdr_why = "NIC mlx5_0 at PIX";
    in.writes_ordering = 0;
    in.flush_options = 1;
    in.flush_entry = true;
    return in;
}

bool says(const std::string &reason, const char *what)
{
    return reason.find(what) != std::string::npos;
}

}  // namespace

TEST(GdrLanding, HostMemoryWhereTheCpuReducesOrNothingCrossesNodes)
{
    GdrLandingInputs in = eligible();
    in.rail_on_gpu = false;
    auto l = decide_gdr_landing(in);
    EXPECT_FALSE(l.offer);
    EXPECT_TRUE(says(l.reason, "the CPU reduces")) << l.reason;
    in = eligible();
    in.net_channels = false;
    l = decide_gdr_landing(in);
    EXPECT_FALSE(l.offer);
    EXPECT_TRUE(says(l.reason, "no UCX channels")) << l.reason;
}

TEST(GdrLanding, HostMemoryWhenTurnedOff)
{
    GdrLandingInputs in = eligible();
    in.allowed = false;
    const auto l = decide_gdr_landing(in);
    EXPECT_FALSE(l.offer);
    EXPECT_TRUE(says(l.reason, "coll_gpurdma_gdr_recv 0")) << l.reason;
}

TEST(GdrLanding, HostMemoryWithoutGpuDirect)
{
    GdrLandingInputs in = eligible();
    in.gdr_eligible = false;
    in.gdr_why = "UCX has no CUDA memory support";
    const auto l = decide_gdr_landing(in);
    EXPECT_FALSE(l.offer);
    EXPECT_TRUE(says(l.reason, "UCX has no CUDA memory support")) << l.reason;
}

TEST(GdrLanding, GpuMemoryFlushedUnlessTheGpuOrdersWrites)
{
    auto l = decide_gdr_landing(eligible());
    EXPECT_TRUE(l.offer);
    EXPECT_TRUE(l.flush);
    EXPECT_FALSE(l.register_as_host);
    EXPECT_TRUE(says(l.reason, "cuFlushGPUDirectRDMAWrites")) << l.reason;
    GdrLandingInputs in = eligible();
    in.writes_ordering = 100;  // owner
    l = decide_gdr_landing(in);
    EXPECT_TRUE(l.offer);
    EXPECT_FALSE(l.flush);
    in.writes_ordering = 200;  // all devices
    in.flush_options = 0;
    EXPECT_TRUE(decide_gdr_landing(in).offer);
}

TEST(GdrLanding, NoOfferWhereWritesCanBeNeitherOrderedNorFlushed)
{
    for (int variant = 0; variant < 3; ++variant) {
        GdrLandingInputs in = eligible();
        if (variant == 0) in.flush_options = 0;  // no host flush
        if (variant == 1) in.flush_options = -1;  // attribute unknown (old driver)
        if (variant == 2) in.flush_entry = false;  // no entry point
        const auto l = decide_gdr_landing(in);
        EXPECT_FALSE(l.offer) << variant;
        EXPECT_TRUE(says(l.reason, "neither orders")) << l.reason;
    }
}

TEST(GdrLanding, StandInRegistersItsDeviceMemoryAsHost)
{
    GdrLandingInputs in = eligible();
    in.gdr_eligible = false;
    in.gdr_why = "no RDMA NIC";
    in.stand_in_host_memory = true;
    const auto l = decide_gdr_landing(in);
    EXPECT_TRUE(l.offer);
    EXPECT_TRUE(l.register_as_host);
    EXPECT_TRUE(l.flush);
    EXPECT_TRUE(says(l.reason, "stand-in")) << l.reason;
}
