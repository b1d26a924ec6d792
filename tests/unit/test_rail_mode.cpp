// Where the rail stage of a GPU-buffer call reduces (gpu/rail_mode.h): each input and
// each request, and the reason verbose 1 prints.
#include <gtest/gtest.h>

#include "gpu/rail_mode.h"

using gpurdma::gpu::choose_rail_mode;
using gpurdma::gpu::rail_mode_name;
using gpurdma::gpu::RailModeInputs;
using gpurdma::gpu::RailReduce;

namespace {

RailModeInputs inputs(const char *requested, bool direct)
{
    RailModeInputs in;
    in.requested = requested;
    in.direct_sends = direct;
    in.direct_why = direct ? "GPUDirect RDMA: eligible" : "GPUDirect RDMA not eligible: UCX has no CUDA";
    return in;
}

}  // namespace

TEST(RailMode, AutoReducesOnTheGpuOnlyWhereSendsGoStraightFromItsMemory)
{
    const auto direct = choose_rail_mode(inputs("auto", true));
    EXPECT_EQ(RailReduce::Device, direct.reduce);
    EXPECT_TRUE(direct.direct_sends);
    EXPECT_NE(std::string::npos, direct.reason.find("GPUDirect RDMA: eligible")) << direct.reason;
    EXPECT_EQ("device, sends straight from GPU memory", rail_mode_name(direct));

    const auto staged = choose_rail_mode(inputs("auto", false));
    EXPECT_EQ(RailReduce::Host, staged.reduce);
    EXPECT_FALSE(staged.direct_sends);
    EXPECT_NE(std::string::npos, staged.reason.find("UCX has no CUDA")) << staged.reason;
    EXPECT_EQ("host", rail_mode_name(staged));
}

TEST(RailMode, DeviceIsTakenEvenWithoutDirectSends)
{
    const auto m = choose_rail_mode(inputs("device", false));
    EXPECT_EQ(RailReduce::Device, m.reduce);
    EXPECT_FALSE(m.direct_sends);
    EXPECT_EQ("device, sends staged through page-locked memory", rail_mode_name(m));
    EXPECT_NE(std::string::npos, m.reason.find("coll_gpurdma_rail_reduce device")) << m.reason;
    EXPECT_TRUE(choose_rail_mode(inputs("device", true)).direct_sends);
}

TEST(RailMode, HostIsTakenEvenWithDirectSends)
{
    const auto m = choose_rail_mode(inputs("host", true));
    EXPECT_EQ(RailReduce::Host, m.reduce);
    EXPECT_FALSE(m.direct_sends);
    EXPECT_EQ("coll_gpurdma_rail_reduce host", m.reason);
}
