// auto's estimate of where the rail stage reduces (gpu/rail_cost.h): the rail schedule
// counted, each mode's terms, and the choice that follows (gpu/rail_mode.h).
#include <gtest/gtest.h>

#include "gpu/rail_cost.h"
#include "gpu/rail_mode.h"
#include "plan/planner.h"
#include "plan/rail.h"
#include "support/shapes.h"

using gpurdma::gpu::choose_rail_mode;
using gpurdma::gpu::count_rail_work;
using gpurdma::gpu::estimate_rail_cost;
using gpurdma::gpu::RailCost;
using gpurdma::gpu::RailModeInputs;
using gpurdma::gpu::RailRates;
using gpurdma::gpu::RailReduce;
using gpurdma::gpu::RailWorkload;
using gpurdma::testing::nodes_of;

namespace {

constexpr size_t kSlice = 256 * 1024;

// Rank 0's rail of slice 0 for one full unit (kSlice bytes of floats), one rank per node.
RailWorkload unit_of(int nodes, gpurdma::plan::LinkCost net = {})
{
    const auto t = nodes_of(std::vector<int>(static_cast<size_t>(nodes), 1));
    gpurdma::plan::PlanParams p;
    p.chunk_size = kSlice;
    p.rail_algorithm = gpurdma::plan::Algorithm::Ring;  // what these tests count
    return count_rail_work(gpurdma::plan::build_rail_allreduce(t, 0, 0, kSlice / 4, 4, p), net);
}

RailRates rates(double pcie_gbps, double step_us, double cpu_gbps)
{
    return RailRates{pcie_gbps, pcie_gbps, step_us, cpu_gbps};
}

}  // namespace

TEST(RailCost, CountsTheRingOfOneUnit)
{
    for (int nodes : {2, 4}) {
        const RailWorkload w = unit_of(nodes);
        const size_t n = static_cast<size_t>(nodes);
        EXPECT_EQ(kSlice, w.slice_bytes);
        // Reduce-scatter then allgather: each sends and takes in nodes - 1 pieces of a
        // 1/nodes share of the slice.
        EXPECT_EQ(2 * (n - 1), w.sends) << nodes;
        EXPECT_EQ(n - 1, w.reduces) << nodes;
        EXPECT_EQ(n - 1, w.arrival_copies) << nodes;
        EXPECT_EQ(0u, w.local_copies) << nodes;
        EXPECT_EQ((n - 1) * kSlice / n, w.reduce_bytes) << nodes;
        EXPECT_EQ(w.reduce_bytes, w.arrival_copy_bytes) << nodes;
        EXPECT_EQ(w.reduce_bytes + w.arrival_copy_bytes, w.send_bytes) << nodes;
    }
}

TEST(RailCost, NetworkTimeIsEachSendsAlphaPlusItsBytes)
{
    const RailWorkload w = unit_of(2, gpurdma::plan::LinkCost{3.0, 50.0});
    EXPECT_NEAR(2 * 3.0 + static_cast<double>(kSlice) / 50e3, w.net_us, 1e-9);
}

TEST(RailCost, HostTakesTheLargerOfItsCopiesAndTheRailWithTheCpuReducing)
{
    const RailWorkload w = unit_of(2, gpurdma::plan::LinkCost{3.0, 50.0});
    // PCIe slow: the copies bound the unit.
    const RailCost slow_copies = estimate_rail_cost(w, rates(1.0, 5.0, 100.0), false, false);
    EXPECT_NEAR(2 * static_cast<double>(kSlice) / 1e3, slow_copies.host_us, 1e-6);
    // The CPU slow: the rail does.
    const RailCost slow_cpu = estimate_rail_cost(w, rates(1000.0, 5.0, 1.0), false, false);
    EXPECT_NEAR(w.net_us + static_cast<double>(w.reduce_bytes + w.arrival_copy_bytes) / 1e3, slow_cpu.host_us, 1e-6);
}

TEST(RailCost, DevicePaysAStepPerPieceOfWorkAndStagedSendsAndArrivalReads)
{
    const RailWorkload w = unit_of(4, gpurdma::plan::LinkCost{3.0, 50.0});
    const RailRates r = rates(20.0, 7.0, 15.0);
    const RailCost gdr = estimate_rail_cost(w, r, true, true);
    EXPECT_NEAR(w.net_us + 6 * 7.0, gdr.device_us, 1e-6);  // 3 reductions, 3 copies
    const RailCost host_landing = estimate_rail_cost(w, r, true, false);
    EXPECT_NEAR(gdr.device_us + static_cast<double>(w.reduce_bytes + w.arrival_copy_bytes) / 20e3,
                host_landing.device_us, 1e-6);
    const RailCost staged = estimate_rail_cost(w, r, false, false);
    EXPECT_NEAR(host_landing.device_us + 6 * 7.0 + static_cast<double>(w.send_bytes) / 20e3, staged.device_us, 1e-6);
    // The host's side does not depend on how the GPU would send or receive.
    EXPECT_EQ(gdr.host_us, staged.host_us);
    EXPECT_NE(std::string::npos, staged.detail.find("per 256 KiB slice")) << staged.detail;
    EXPECT_NE(std::string::npos, staged.detail.find("12 GPU steps x 7.0 us")) << staged.detail;
}

TEST(RailCost, AutoTakesTheModeEstimatedFaster)
{
    const RailWorkload w = unit_of(2, gpurdma::plan::LinkCost{3.0, 50.0});
    RailModeInputs in;
    in.direct_sends = true;
    in.direct_why = "GPUDirect RDMA: eligible";
    // A slow CPU and GPUDirect RDMA: the GPU.
    in.cost = estimate_rail_cost(w, rates(50.0, 5.0, 1.0), true, true);
    auto m = choose_rail_mode(in);
    EXPECT_EQ(RailReduce::Device, m.reduce);
    EXPECT_TRUE(m.direct_sends);
    EXPECT_NE(std::string::npos, m.reason.find("auto: the GPU is estimated faster, per 256 KiB slice")) << m.reason;
    // Launching is slow: the host, even though sends could go straight.
    in.cost = estimate_rail_cost(w, rates(50.0, 500.0, 15.0), true, true);
    m = choose_rail_mode(in);
    EXPECT_EQ(RailReduce::Host, m.reduce);
    EXPECT_FALSE(m.direct_sends);
    EXPECT_NE(std::string::npos, m.reason.find("auto: the host is estimated faster")) << m.reason;
    EXPECT_NE(std::string::npos, m.reason.find("GPUDirect RDMA: eligible")) << m.reason;
    // Staged sends with slow copies out: the host, and device staged when the CPU crawls.
    in.direct_sends = false;
    in.cost = estimate_rail_cost(w, rates(2.0, 5.0, 15.0), false, false);
    EXPECT_EQ(RailReduce::Host, choose_rail_mode(in).reduce);
    in.cost = estimate_rail_cost(w, rates(50.0, 5.0, 0.5), false, false);
    m = choose_rail_mode(in);
    EXPECT_EQ(RailReduce::Device, m.reduce);
    EXPECT_FALSE(m.direct_sends);
}

TEST(RailCost, AnExplicitRequestOverridesTheEstimate)
{
    RailModeInputs in;
    in.cost = RailCost{1.0, 1000.0, "device slow"};
    in.requested = "device";
    EXPECT_EQ(RailReduce::Device, choose_rail_mode(in).reduce);
    in.cost = RailCost{1000.0, 1.0, "host slow"};
    in.requested = "host";
    EXPECT_EQ(RailReduce::Host, choose_rail_mode(in).reduce);
}
