// Where nodes sit in the switch fabric (Slurm's topology.conf and environment), and the
// node order that follows from it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "topo/fabric_order.h"
#include "topo/switch_topology.h"

using namespace gpurdma::topo;

TEST(Hostlist, ExpandsSlurmSyntax)
{
    std::vector<std::string> n;
    ASSERT_TRUE(expand_hostlist("tux[0-2,7],login1", &n));
    EXPECT_EQ(n, (std::vector<std::string>{"tux0", "tux1", "tux2", "tux7", "login1"}));
    ASSERT_TRUE(expand_hostlist("n[08-10]", &n));
    EXPECT_EQ(n, (std::vector<std::string>{"n08", "n09", "n10"}));
    ASSERT_TRUE(expand_hostlist("r[1-2]n[1-2]x", &n));
    EXPECT_EQ(n, (std::vector<std::string>{"r1n1x", "r1n2x", "r2n1x", "r2n2x"}));
    for (const char *bad : {"", "a[", "a[1-", "a[3-1]", "a]", "a[x]", "a,,b"})
        EXPECT_FALSE(expand_hostlist(bad, &n)) << bad;
    EXPECT_FALSE(expand_hostlist("n[0-999999]", &n, 1000));
}

TEST(SwitchTopology, AddressesFromTopologyConf)
{
    SwitchTopology t;
    std::string error;
    ASSERT_TRUE(
        t.parse("# two leaves under one spine\n"
                "SwitchName=leaf1 Nodes=node[1-2] LinkSpeed=400\n"
                "switchname=leaf2 nodes=node[3-4]\n"
                "SwitchName=spine Switches=leaf[1-2]\n"
                "SwitchName=lonely Nodes=solo\n",
                &error))
        << error;
    EXPECT_EQ(t.address_of("node1"), "spine.leaf1");
    EXPECT_EQ(t.address_of("node4"), "spine.leaf2");
    EXPECT_EQ(t.address_of("node4.cluster.example"), "spine.leaf2");  // the short name matches
    EXPECT_EQ(t.address_of("solo"), "lonely");
    EXPECT_EQ(t.address_of("node9"), "");
    EXPECT_EQ(t.nodes().size(), 5u);
}

TEST(SwitchTopology, RefusesWhatSlurmWouldRefuse)
{
    SwitchTopology t;
    std::string error;
    EXPECT_FALSE(t.parse("Nodes=a\n", &error));
    EXPECT_NE(error.find("line 1"), std::string::npos) << error;
    EXPECT_FALSE(t.parse("SwitchName=s1 Nodes=a\nSwitchName=s2 Nodes=a\n", &error));
    EXPECT_NE(error.find("two leaf switches"), std::string::npos) << error;
    EXPECT_FALSE(t.parse("SwitchName=s1 Switches=s2\nSwitchName=s2 Switches=s1\n", &error));
    EXPECT_NE(error.find("cycle"), std::string::npos) << error;
    EXPECT_FALSE(t.parse("SwitchName=s1 Nodes=a[\n", &error));
    EXPECT_FALSE(t.read("/nonexistent/topology.conf", &error));
}

TEST(SwitchTopology, AddressFromSlurmEnvironment)
{
    EXPECT_EQ(address_from_slurm("s0.s3.tux7", "switch.switch.node"), "s0.s3");
    EXPECT_EQ(address_from_slurm("s3.tux7", ""), "s3");
    EXPECT_EQ(address_from_slurm("tux7", "node"), "");
    EXPECT_EQ(address_from_slurm("", ""), "");
}

TEST(SwitchTopology, TheFileComesFirstThenSlurm)
{
    const std::string path = testing::TempDir() + "gpurdma-topology.conf";
    {
        std::ofstream f(path);
        f << "SwitchName=leafA Nodes=hostA\n";
    }
    setenv("SLURM_TOPOLOGY_ADDR", "top.leafS.hostA", 1);
    setenv("SLURM_TOPOLOGY_ADDR_PATTERN", "switch.switch.node", 1);
    FabricAddress a = find_fabric_address(path, "hostA");
    EXPECT_EQ(a.address, "leafA");
    EXPECT_EQ(a.source, "topology file " + path);
    a = find_fabric_address(path, "hostB");  // not in the file: Slurm's, with a warning
    EXPECT_EQ(a.address, "top.leafS");
    EXPECT_NE(a.warning.find("lists no node hostB"), std::string::npos) << a.warning;
    a = find_fabric_address("", "hostA");
    EXPECT_EQ(a.source, "SLURM_TOPOLOGY_ADDR");
    unsetenv("SLURM_TOPOLOGY_ADDR");
    unsetenv("SLURM_TOPOLOGY_ADDR_PATTERN");
    a = find_fabric_address("", "hostA");
    EXPECT_EQ(a.address, "");
    EXPECT_TRUE(a.warning.empty());
    std::remove(path.c_str());
}

TEST(FabricOrder, GroupsEachSwitchsNodesInLowestRankOrder)
{
    // Nodes 0..5 scattered over two leaves under spine a and one under spine b.
    const std::vector<std::string> address = {"a.l1", "b.l3", "a.l2", "a.l1", "b.l3", "a.l2"};
    EXPECT_EQ(fabric_order(address), (std::vector<int>{0, 3, 2, 5, 1, 4}));
    // Already grouped: today's order.
    EXPECT_EQ(fabric_order({"l1", "l1", "l2"}), (std::vector<int>{0, 1, 2}));
    // Any node unknown: no order.
    EXPECT_TRUE(fabric_order({"l1", "", "l1"}).empty());
}

TEST(FabricOrder, ReorderKeepsRanksAndRenumbersNodes)
{
    std::string warn;
    Topology t = build_topology({"h0", "h1", "h2", "h0", "h1", "h2"}, "", &warn);
    const std::vector<std::string> address = {"l1", "l2", "l1"};  // of nodes h0, h1, h2
    const std::vector<int> order = fabric_order(address);
    ASSERT_EQ(order, (std::vector<int>{0, 2, 1}));
    reorder_nodes(&t, order);
    EXPECT_EQ(t.node_names, (std::vector<std::string>{"h0", "h2", "h1"}));
    EXPECT_EQ(t.members[1], (std::vector<int>{2, 5}));
    EXPECT_EQ(t.node_of, (std::vector<int>{0, 2, 1, 0, 2, 1}));
    EXPECT_EQ(t.local_rank, (std::vector<int>{0, 0, 0, 1, 1, 1}));
    EXPECT_EQ(describe_fabric(t, {"l1", "l1", "l2"}), "3 nodes under 2 leaf switches (l1: 2, l2: 1)");
    EXPECT_EQ(describe_fabric(t, {"s.l1", "s.l1", "s.l1"}), "3 nodes under 1 leaf switch (l1: 3)");
}
