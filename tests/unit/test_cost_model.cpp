// The alpha-beta model behind auto's choice: estimates move the way the formulas say,
// and choose_algorithm follows the cheapest estimate within its limits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/cost_model.h"
#include "plan/planner.h"

using gpurdma::plan::Algorithm;
using gpurdma::plan::CostModel;
using gpurdma::plan::PlanParams;

namespace {

// Nodes of the given sizes, ranks numbered node by node.
gpurdma::topo::Topology nodes(const std::vector<int> &sizes)
{
    std::vector<std::string> hosts;
    for (size_t k = 0; k < sizes.size(); ++k)
        for (int i = 0; i < sizes[k]; ++i) hosts.push_back("host" + std::to_string(k));
    std::string warning;
    return gpurdma::topo::build_topology(hosts, "", &warning);
}

}  // namespace

TEST(CostModel, DoublingWinsSmallRingWinsLarge)
{
    const CostModel m;
    const auto t = nodes({1, 1, 1, 1, 1, 1, 1, 1});
    EXPECT_LT(gpurdma::plan::recursive_doubling_us(m, t, 64), gpurdma::plan::ring_us(m, t, 64, 256 << 10));
    EXPECT_GT(gpurdma::plan::recursive_doubling_us(m, t, 16 << 20), gpurdma::plan::ring_us(m, t, 16 << 20, 256 << 10));
}

TEST(CostModel, NetworkRoundsCostMoreThanNodeRounds)
{
    const CostModel m;
    // Same size: one node of 4 against 4 nodes of 1.
    EXPECT_LT(gpurdma::plan::recursive_doubling_us(m, nodes({4}), 1024),
              gpurdma::plan::recursive_doubling_us(m, nodes({1, 1, 1, 1}), 1024));
    // Two nodes of two: one round inside, one across.
    const double mixed = gpurdma::plan::recursive_doubling_us(m, nodes({2, 2}), 1024);
    EXPECT_GT(mixed, gpurdma::plan::recursive_doubling_us(m, nodes({4}), 1024));
    EXPECT_LT(mixed, gpurdma::plan::recursive_doubling_us(m, nodes({1, 1, 1, 1}), 1024));
}

TEST(CostModel, HierarchicalHalvesTheNetworkBytes)
{
    const PlanParams p;
    const auto t = nodes({4, 4});
    const size_t big = 64 << 20;
    EXPECT_LT(gpurdma::plan::hierarchical_us(t, big, p), gpurdma::plan::ring_us(p.model, t, big, 256 << 10));
}

TEST(CostModel, ChoiceFollowsTheModel)
{
    PlanParams p;
    p.small_msg_max = 4 << 20;  // let the model, not the caps, decide
    p.chunk_size = 4 << 20;
    const size_t top = 4 << 20;
    const auto t = nodes({1, 1, 1, 1, 1, 1, 1, 1});
    EXPECT_EQ(gpurdma::plan::choose_algorithm(t, 8, p), Algorithm::RecursiveDoubling);
    // Large: a bandwidth-optimal one (the ring, or halving-doubling with log2(n) steps).
    const Algorithm large = gpurdma::plan::choose_algorithm(t, top, p);
    EXPECT_TRUE(large == Algorithm::Ring || large == Algorithm::HalvingDoubling)
        << gpurdma::plan::algorithm_name(large);
    // The crossover moves up with the per-message cost.
    size_t crossover_cheap = 0, crossover_costly = 0;
    for (size_t b = 8; b <= top; b *= 2)
        if (gpurdma::plan::choose_algorithm(t, b, p) == Algorithm::RecursiveDoubling) crossover_cheap = b;
    p.model.net.alpha_us *= 10;
    for (size_t b = 8; b <= top; b *= 2)
        if (gpurdma::plan::choose_algorithm(t, b, p) == Algorithm::RecursiveDoubling) crossover_costly = b;
    EXPECT_GT(crossover_costly, crossover_cheap);
}

TEST(CostModel, CapsStillApply)
{
    PlanParams p;
    p.small_msg_max = 0;  // latency path off: never recursive doubling
    EXPECT_NE(gpurdma::plan::choose_algorithm(nodes({1, 1}), 8, p), Algorithm::RecursiveDoubling);
    p.small_msg_max = 64 << 10;
    p.chunk_size = 4096;  // recursive doubling needs the message in one slot
    EXPECT_NE(gpurdma::plan::choose_algorithm(nodes({1, 1}), 8192, p), Algorithm::RecursiveDoubling);
    p.algorithm = Algorithm::Ring;  // forced
    EXPECT_EQ(gpurdma::plan::choose_algorithm(nodes({1, 1}), 8, p), Algorithm::Ring);
}

TEST(CostModel, Describe)
{
    EXPECT_EQ(gpurdma::plan::describe(CostModel{}), "shm 0.5 us + 10 GB/s, net 30 us + 3 GB/s, reduce 15 GB/s");
}
