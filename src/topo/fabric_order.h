// The order of a communicator's nodes, from where they sit in the switch fabric
// (topo/switch_topology.h). Every inter-node schedule walks the nodes by index: rings
// go node k -> k + 1, halving-doubling pairs k with k ^ 2^i nearest first. With the
// nodes of one leaf switch next to each other, a ring crosses the spines once per leaf
// instead of at almost every step, and halving-doubling's first exchanges stay under
// one leaf: fewer flows for ECMP to hash onto the same spine link.
#pragma once

#include <string>
#include <vector>

#include "topo/topology.h"

namespace gpurdma::topo {

// The nodes in fabric order: grouped by their address's first switch, then within that
// by the next, down to the leaf; groups, and nodes within a leaf, in the order of their
// lowest index (so the order is today's wherever the fabric does not say otherwise).
// Empty when any address is unknown (""): a half-known fabric keeps today's order.
std::vector<int> fabric_order(const std::vector<std::string> &address_of_node);

// Renumbers t's nodes so that node k is the old node order[k] (node_of, members and
// node_names follow; ranks and local ranks do not change).
void reorder_nodes(Topology *t, const std::vector<int> &order);

// For the set-up line, address_of_node in t's numbering: "4 nodes under 2 leaf
// switches (s1: 2, s2: 2)", leaves in node order.
std::string describe_fabric(const Topology &t, const std::vector<std::string> &address_of_node);

}  // namespace gpurdma::topo
