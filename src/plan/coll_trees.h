// Bcast and reduce as pipelined trees: the tree of one root over the whole topology (a
// tree along the root's rail between nodes, then one within each node from the rail's
// member), binomial for small messages and a chain for large ones, run piece by piece.
// Each rank per piece receives from its parent and then sends to its children (bcast),
// or the reverse (reduce): trees are acyclic, so one landing slot per pair suffices.
// Internal to src/plan.
#pragma once

#include <cstddef>
#include <vector>

#include "plan/planner.h"
#include "plan/schedule.h"
#include "topo/topology.h"

namespace gpurdma::plan::detail {

enum class TreeShape { Binomial, Chain };

// One rank's place in a tree: its parent (-1 at the root) and its children (ranks), in
// the order it serves them.
struct TreeLinks {
    int parent = -1;
    std::vector<int> children;
};

// This rank's links in the tree of `shape` over group g rooted at position root_pos
// (binomial: positions at distance 2^j around the group, rotated to the root; chain:
// each position feeds the next). Appends to links (a rank may be in two trees: the
// rail's and its node's).
void add_tree_links(TreeLinks &links, const Group &g, int root_pos, TreeShape shape);

// The whole topology's tree rooted at `root`: across nodes along the rail of the
// root's local index (the root's node first), within each node from that rail's member.
TreeLinks collective_tree(const topo::Topology &t, int rank, int root, TreeShape shape);
// Only its links between nodes (empty off the root's rail, and on one node).
TreeLinks rail_tree(const topo::Topology &t, int rank, int root, TreeShape shape);

// Bcast of Recv[0, bytes): per piece, receive from the parent, send to each child.
void append_tree_bcast(std::vector<Step> &steps, const TreeLinks &links, size_t bytes, size_t piece_bytes);

// Reduce of Send[0, bytes) into `acc` (the root's Recv, others' Stage): per piece, each
// child's partial folded in (the first onto this rank's own input, in child order), then
// the result sent to the parent (a leaf sends its input as it is).
void append_tree_reduce(std::vector<Step> &steps, const TreeLinks &links, Buf acc, size_t bytes, size_t piece_bytes);

}  // namespace gpurdma::plan::detail
