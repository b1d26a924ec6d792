#include <gtest/gtest.h>

#include <algorithm>

#include "topo/placement.h"

using gpurdma::topo::decide_wait;
using gpurdma::topo::parse_cpu_list;
using gpurdma::topo::RankPlacement;

namespace {

RankPlacement on(std::vector<int> cpus, int processes, int host_cpus)
{
    RankPlacement p;
    p.cpus = std::move(cpus);
    p.job_processes = processes;
    p.host_cpus = host_cpus;
    return p;
}

}  // namespace

// Open MPI's default at np <= 2: each rank bound to a core of its own. The old rule
// read each rank's own mask (1 CPU) and yielded.
TEST(Placement, BoundToDistinctCoresSpins)
{
    const auto d = decide_wait({on({0}, 2, 2), on({1}, 2, 2)});
    EXPECT_FALSE(d.yield) << d.describe();
    EXPECT_EQ(d.own_cpu, 2);
    EXPECT_EQ(d.cpus, 2);
}

TEST(Placement, UnboundWithEnoughCoresSpins)
{
    const auto d = decide_wait({on({0, 1, 2, 3}, 2, 4), on({0, 1, 2, 3}, 2, 4)});
    EXPECT_FALSE(d.yield) << d.describe();
}

TEST(Placement, AllOnOneCoreYields)
{
    const auto d = decide_wait({on({0}, 2, 2), on({0}, 2, 2)});
    EXPECT_TRUE(d.yield) << d.describe();
    EXPECT_EQ(d.own_cpu, 1);
}

// Open MPI's default above np=2 binds to a package: 4 ranks on the same 2 CPUs.
TEST(Placement, BoundToPackageOversubscribedYields)
{
    std::vector<RankPlacement> ranks(4, on({0, 1}, 4, 2));
    const auto d = decide_wait(ranks);
    EXPECT_TRUE(d.yield) << d.describe();
    EXPECT_EQ(d.own_cpu, 2);
}

TEST(Placement, UnboundOversubscribedYields)
{
    std::vector<RankPlacement> ranks(3, on({0, 1}, 3, 2));
    EXPECT_TRUE(decide_wait(ranks).yield);
}

// A sub-communicator of 2 ranks in a 4-process job on 2 CPUs: the other two
// processes compete for the same cores.
TEST(Placement, OtherJobProcessesCount)
{
    const auto d = decide_wait({on({0, 1}, 4, 2), on({0, 1}, 4, 2)});
    EXPECT_TRUE(d.yield) << d.describe();
    EXPECT_EQ(d.processes, 4);
    // The same job on a 4-CPU host, each process bound to its own core: spin.
    EXPECT_FALSE(decide_wait({on({0}, 4, 4), on({2}, 4, 4)}).yield);
}

// A CPU quota of 1.5 CPUs (rounded up to 2) under masks of 4 CPUs: 3 ranks yield.
TEST(Placement, CgroupQuotaLimits)
{
    std::vector<RankPlacement> ranks(3, on({0, 1, 2, 3}, 3, 2));
    const auto d = decide_wait(ranks);
    EXPECT_TRUE(d.yield) << d.describe();
    EXPECT_EQ(d.own_cpu, 2);
    EXPECT_FALSE(decide_wait(std::vector<RankPlacement>(2, on({0, 1, 2, 3}, 2, 2))).yield);
}

// Masks that overlap but still admit one CPU each ({0,1},{0},{1,2}): a matching, not a count.
TEST(Placement, OverlappingMasksNeedAMatching)
{
    EXPECT_FALSE(decide_wait({on({0, 1}, 3, 4), on({0}, 3, 4), on({1, 2}, 3, 4)}).yield);
    EXPECT_TRUE(decide_wait({on({0, 1}, 3, 4), on({0}, 3, 4), on({0, 1}, 3, 4)}).yield);
}

// Every rank of a host reaches the same decision whatever order it lists them in.
TEST(Placement, SameDecisionInAnyOrder)
{
    std::vector<RankPlacement> ranks = {on({0, 1}, 3, 4), on({0}, 3, 4), on({1, 2}, 3, 4)};
    const auto a = decide_wait(ranks);
    std::reverse(ranks.begin(), ranks.end());
    const auto b = decide_wait(ranks);
    EXPECT_EQ(a.yield, b.yield);
    EXPECT_EQ(a.describe(), b.describe());
}

TEST(Placement, DescribeNamesTheNumbers)
{
    const auto d = decide_wait({on({0, 1}, 4, 2), on({0, 1}, 4, 2), on({0, 1}, 4, 2), on({0, 1}, 4, 2)});
    EXPECT_EQ(d.describe(),
              "yield when idle: 4 ranks, only 2 with a CPU of their own (masks cover 2 CPUs); 4 job "
              "processes on 2 host CPUs (more processes than CPUs)");
}

// Per-task cgroups (e.g. a resource manager's cpuset per rank): each rank's budget is
// its own CPU, and the host's is their sum, not the smallest.
TEST(Placement, BudgetsOfDistinctCgroupsAddUp)
{
    std::vector<RankPlacement> ranks;
    for (int i = 0; i < 4; ++i) {
        ranks.push_back(on({i}, 4, 1));
        ranks.back().cgroup = "/job/task_" + std::to_string(i);
    }
    const auto d = decide_wait(ranks);
    EXPECT_FALSE(d.yield) << d.describe();
    EXPECT_EQ(d.host_cpus, 4);
    for (auto &r : ranks) r.cgroup = "/job";  // one cgroup of one CPU for all four
    EXPECT_TRUE(decide_wait(ranks).yield);
}

TEST(Placement, OwnMaskAndBudgetAreReadable)
{
    EXPECT_FALSE(gpurdma::topo::own_cpus().empty());
    EXPECT_GE(gpurdma::topo::host_cpu_budget(), 1);
}

TEST(Placement, ParseCpuList)
{
    std::vector<int> cpus;
    ASSERT_TRUE(parse_cpu_list("0-3,8,10-11\n", &cpus));
    EXPECT_EQ(cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
    EXPECT_FALSE(parse_cpu_list("", &cpus));
    EXPECT_FALSE(parse_cpu_list("3-1", &cpus));
    EXPECT_FALSE(parse_cpu_list("a", &cpus));
    EXPECT_FALSE(parse_cpu_list("99999", &cpus));
    EXPECT_EQ(gpurdma::topo::format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
    EXPECT_EQ(gpurdma::topo::format_cpu_list({5}), "5");
    ASSERT_TRUE(parse_cpu_list(gpurdma::topo::format_cpu_list(gpurdma::topo::own_cpus()), &cpus));
    EXPECT_EQ(cpus, gpurdma::topo::own_cpus());
}
