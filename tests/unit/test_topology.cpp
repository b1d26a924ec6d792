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
