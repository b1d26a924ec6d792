#include <gtest/gtest.h>

#include "topo/topology.h"

using gpurdma::topo::build_topology;
using gpurdma::topo::parse_node_sizes;

TEST(Topology, ByHostWithInterleavedRanks)
{
    std::string warn;
    const auto t = build_topology({"b", "a", "b", "a", "c"}, "", &warn);
    EXPECT_TRUE(warn.empty());
    ASSERT_EQ(t.nodes(), 3);
    EXPECT_EQ(t.members[0], (std::vector<int>{0, 2}));  // node of rank 0 first
    EXPECT_EQ(t.members[1], (std::vector<int>{1, 3}));
    EXPECT_EQ(t.members[2], (std::vector<int>{4}));
    EXPECT_EQ(t.node_of, (std::vector<int>{0, 1, 0, 1, 2}));
    EXPECT_EQ(t.local_rank, (std::vector<int>{0, 0, 1, 1, 0}));
    EXPECT_FALSE(t.regular());
    EXPECT_EQ(t.summary(), "3 nodes (2+2+1 ranks)");
}

TEST(Topology, LogicalNodesOfK)
{
    std::string warn;
    const auto t = build_topology(std::vector<std::string>(8, "h"), "2", &warn);
    EXPECT_TRUE(warn.empty());
    ASSERT_EQ(t.nodes(), 4);
    EXPECT_EQ(t.summary(), "4 nodes x 2 ranks");
    EXPECT_EQ(t.node_names[3], "h#3");
    EXPECT_EQ(t.local_rank[7], 1);
}

TEST(Topology, LogicalNodesIrregularAndRemainder)
{
    std::string warn;
    auto t = build_topology(std::vector<std::string>(6, "h"), "3,1,2", &warn);
    EXPECT_TRUE(warn.empty());
    EXPECT_EQ(t.summary(), "3 nodes (3+1+2 ranks)");
    t = build_topology(std::vector<std::string>(5, "h"), "2", &warn);
    EXPECT_EQ(t.summary(), "3 nodes (2+2+1 ranks)");
}

TEST(Topology, BadOverridesWarnAndAreIgnored)
{
    for (const char *bad : {"x", "0", "2,", ",2", "1,,2", "-1", "3,3"}) {
        std::string warn;
        const auto t = build_topology(std::vector<std::string>(4, "h"), bad, &warn);
        EXPECT_FALSE(warn.empty()) << bad;
        EXPECT_EQ(t.nodes(), 1) << bad;
    }
}

TEST(Topology, ParseNodeSizes)
{
    std::vector<int> s;
    EXPECT_TRUE(parse_node_sizes("8", &s));
    EXPECT_EQ(s, (std::vector<int>{8}));
    EXPECT_TRUE(parse_node_sizes("3,1,2", &s));
    EXPECT_EQ(s, (std::vector<int>{3, 1, 2}));
    EXPECT_FALSE(parse_node_sizes("", &s));
    EXPECT_FALSE(parse_node_sizes("99999999999", &s));
    EXPECT_FALSE(parse_node_sizes(" 2", &s));
}

// A process's logical node comes from its local rank in the job, so a communicator
// split across logical nodes (world ranks 0 and 2 with nodes of 2) spans two nodes.
TEST(Topology, LogicalNodeFollowsTheProcess)
{
    using gpurdma::topo::logical_node;
    std::string warn;
    EXPECT_EQ(logical_node("h", "2", 0, 4, &warn), "h#0");
    EXPECT_EQ(logical_node("h", "2", 2, 4, &warn), "h#1");
    EXPECT_EQ(logical_node("h", "", 3, 4, &warn), "h");
    const char *expected[] = {"h#0", "h#0", "h#0", "h#1", "h#2", "h#2"};
    for (int r = 0; r < 6; ++r) EXPECT_EQ(logical_node("h", "3,1,2", r, 6, &warn), expected[r]) << r;
    EXPECT_TRUE(warn.empty());
    const auto split = build_topology({logical_node("h", "2", 0, 4, &warn), logical_node("h", "2", 2, 4, &warn)});
    EXPECT_EQ(split.nodes(), 2);
    EXPECT_EQ(split.summary(), "2 nodes x 1 rank");
    EXPECT_EQ(logical_node("h", "1,1", 1, 4, &warn), "h");
    EXPECT_NE(warn.find("does not add up to the 4 processes on host h"), std::string::npos) << warn;
    warn.clear();
    EXPECT_EQ(logical_node("h", "2", -1, 4, &warn), "h");
    EXPECT_NE(warn.find("local rank"), std::string::npos) << warn;
}
