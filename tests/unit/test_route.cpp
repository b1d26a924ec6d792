// The path rule (algo/route.h): each boundary on its own, then synthetic teams (nodes of
// several sizes, buffer kinds per rank, every boundary of the call's size) where every
// rank derives its facts from what the ranks agreed, and the paths must fit together:
// one rank declining means all do, a node's GPU ranks take one path, and a device path
// only where its peers run the schedule it joins.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algo/route.h"

namespace {

using gpurdma::algo::DeviceSetUp;
using gpurdma::algo::Path;
using gpurdma::algo::route;
using gpurdma::algo::RouteFacts;

RouteFacts device_call(size_t bytes)
{
    RouteFacts f;
    f.bytes = bytes;
    f.device_buffers = true;
    f.size = 4;
    f.device_stage_max = 4096;
    return f;
}

TEST(Route, HostBuffersTakeTheHostPath)
{
    RouteFacts f = device_call(1 << 20);
    f.device_buffers = false;
    f.node_all_device = false;
    EXPECT_EQ(route(f).path, Path::Host);
    f.host_path = false;
    EXPECT_EQ(route(f).path, Path::Decline);
    f.size = 1;  // a single rank needs no host team
    EXPECT_EQ(route(f).path, Path::Host);
}

TEST(Route, StageMaxIsInclusive)
{
    EXPECT_EQ(route(device_call(4096)).path, Path::Staged);
    EXPECT_EQ(route(device_call(4097)).path, Path::DeviceOneNode);
    RouteFacts single = device_call(8);
    single.size = 1;  // nothing to gain by staging a single rank's copy
    EXPECT_EQ(route(single).path, Path::DeviceOneNode);
    RouteFacts across = device_call(8);
    across.across_nodes = true;
    across.host_hierarchical = true;  // across nodes the host plan's size rule decides
    EXPECT_EQ(route(across).path, Path::DeviceHierarchical);
}

TEST(Route, EachReasonToStage)
{
    RouteFacts f = device_call(1 << 20);
    f.node_all_device = false;
    EXPECT_EQ(route(f).path, Path::Staged);
    EXPECT_STREQ(route(f).why, "a node peer passes host buffers");
    f = device_call(1 << 20);
    f.device_kernel = false;
    EXPECT_EQ(route(f).path, Path::Staged);
    f = device_call(1 << 20);
    f.device = DeviceSetUp::Staged;
    EXPECT_EQ(route(f).path, Path::Staged);
    f = device_call(1 << 20);
    f.across_nodes = true;
    EXPECT_EQ(route(f).path, Path::Staged);  // the host plan runs this size flat
    f.host_hierarchical = true;
    EXPECT_EQ(route(f).path, Path::DeviceHierarchical);
    f.device = DeviceSetUp::Ready;
    EXPECT_EQ(route(f).path, Path::DeviceHierarchical);
}

// The other vendor's buffer stages on every path the call could have taken, a single
// rank's too; without a host path the call still goes back with everyone else's.
TEST(Route, TheOtherVendorsBufferStagesAlways)
{
    for (const bool across : {false, true}) {
        for (const int size : {1, 4}) {
            RouteFacts f = device_call(1 << 26);
            f.other_vendor = true;
            f.across_nodes = across;
            f.host_hierarchical = true;
            f.size = size;
            f.device = DeviceSetUp::Ready;
            EXPECT_EQ(route(f).path, Path::Staged);
            EXPECT_STREQ(route(f).why, "a buffer of the other GPU vendor's runtime");
            f.host_path = false;
            EXPECT_EQ(route(f).path, size > 1 ? Path::Decline : Path::Staged);
        }
    }
}

// The other collectives: the one-node device path takes them; across nodes the
// hierarchical one (algo/device_node_rail.h) at every size above device_stage_max,
// whatever the host plan does with an allreduce of that size.
TEST(Route, OtherCollectivesOnBothDevicePaths)
{
    RouteFacts f = device_call(1 << 20);
    f.allreduce = false;
    EXPECT_EQ(route(f).path, Path::DeviceOneNode);
    f.bytes = 4096;  // small messages stage as allreduce's do
    EXPECT_EQ(route(f).path, Path::Staged);
    f.across_nodes = true;
    EXPECT_EQ(route(f).path, Path::Staged);  // small across nodes too
    EXPECT_STREQ(route(f).why, "small message (coll_gpurdma_device_stage_max)");
    f.bytes = 1 << 20;
    f.host_hierarchical = false;
    EXPECT_EQ(route(f).path, Path::DeviceHierarchical);
    f.device = DeviceSetUp::Staged;
    EXPECT_EQ(route(f).path, Path::Staged);
    f.device = DeviceSetUp::Ready;
    f.node_all_device = false;
    EXPECT_EQ(route(f).path, Path::Staged);
    f.node_all_device = true;
    f.device_kernel = false;  // long double reductions
    EXPECT_EQ(route(f).path, Path::Staged);
    // An allreduce of the same size across nodes still follows the host plan's size rule.
    f.device_kernel = true;
    f.allreduce = true;
    f.bytes = 4096;
    f.host_hierarchical = true;
    EXPECT_EQ(route(f).path, Path::DeviceHierarchical);
}

TEST(Route, NoHostPathDeclinesEverything)
{
    RouteFacts f = device_call(64);
    f.host_path = false;
    EXPECT_EQ(route(f).path, Path::Decline);
    f.bytes = 1 << 20;  // no board to agree the node's buffer kinds on
    EXPECT_EQ(route(f).path, Path::Decline);
    f.size = 1;
    EXPECT_EQ(route(f).path, Path::DeviceOneNode);
}

// A synthetic team: the ranks of each node, and which ranks pass GPU buffers.
struct Team {
    std::vector<int> nodes;  // ranks per node
    std::vector<bool> device;  // per rank
};

TEST(Route, RanksOfSyntheticTeamsFitTogether)
{
    const std::vector<std::vector<int>> layouts = {{1}, {4}, {2, 2}, {3, 1, 2}, {1, 1}};
    const size_t stage_max = 4096;
    const std::vector<size_t> sizes = {1, 8, stage_max - 1, stage_max, stage_max + 1, 1 << 20};
    int cases = 0;
    for (const auto &nodes : layouts) {
        int ranks = 0;
        for (int n : nodes) ranks += n;
        // Buffer kinds: all GPU, all host, each single rank on host, the first node on host.
        std::vector<std::vector<bool>> kinds = {std::vector<bool>(size_t(ranks), true),
                                                std::vector<bool>(size_t(ranks), false)};
        for (int r = 0; r < ranks; ++r) {
            kinds.emplace_back(size_t(ranks), true);
            kinds.back()[size_t(r)] = false;
        }
        kinds.emplace_back(size_t(ranks), true);
        for (int r = 0; r < nodes[0]; ++r) kinds.back()[size_t(r)] = false;
        for (const auto &device : kinds)
            for (size_t bytes : sizes)
                for (bool kernel : {true, false})
                    for (bool host_path : {true, false})
                        for (bool hier : {true, false})
                            for (DeviceSetUp set_up : {DeviceSetUp::NotYet, DeviceSetUp::Ready, DeviceSetUp::Staged}) {
                                std::vector<Path> paths;
                                std::vector<int> node_of;
                                int first = 0;
                                for (size_t n = 0; n < nodes.size(); ++n) {
                                    bool all = true;
                                    for (int r = first; r < first + nodes[n]; ++r) all = all && device[size_t(r)];
                                    for (int r = first; r < first + nodes[n]; ++r) {
                                        RouteFacts f;
                                        f.bytes = bytes;
                                        f.device_buffers = device[size_t(r)];
                                        f.node_all_device = all;
                                        f.device_kernel = kernel;
                                        f.host_hierarchical = hier;
                                        f.size = ranks;
                                        f.host_path = host_path;
                                        f.across_nodes = nodes.size() > 1;
                                        f.device_stage_max = stage_max;
                                        f.device = set_up;
                                        paths.push_back(route(f).path);
                                        node_of.push_back(int(n));
                                    }
                                    first += nodes[n];
                                }
                                ++cases;
                                const std::set<Path> all(paths.begin(), paths.end());
                                // Declining is all or nothing: the previous module needs every rank.
                                if (all.count(Path::Decline)) {
                                    EXPECT_EQ(all.size(), 1u) << "case " << cases;
                                }
                                // A node's GPU ranks take one path (they share its control block).
                                for (size_t a = 0; a < paths.size(); ++a)
                                    for (size_t b = 0; b < paths.size(); ++b)
                                        if (node_of[a] == node_of[b] && device[a] && device[b]) {
                                            EXPECT_EQ(paths[a], paths[b]) << "case " << cases;
                                        }
                                // One node: never the hierarchical path; several: never the one-node one,
                                // and the hierarchical one only where the others run that schedule.
                                if (nodes.size() == 1) {
                                    EXPECT_EQ(all.count(Path::DeviceHierarchical), 0u);
                                } else {
                                    EXPECT_EQ(all.count(Path::DeviceOneNode), 0u);
                                    if (all.count(Path::DeviceHierarchical)) {
                                        EXPECT_TRUE(hier);
                                    }
                                }
                            }
    }
    EXPECT_GT(cases, 1000);
}

}  // namespace
