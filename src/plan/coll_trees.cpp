#include "plan/coll_trees.h"

#include <algorithm>

#include "plan/step_helpers.h"

namespace gpurdma::plan::detail {

void add_tree_links(TreeLinks &links, const Group &g, int root_pos, TreeShape shape)
{
    const int n = g.size();
    if (n < 2) return;
    const int v = (g.me - root_pos + n) % n;  // position relative to the root
    auto rank_at = [&](int rel) { return g.ranks[static_cast<size_t>((rel + root_pos) % n)]; };
    if (shape == TreeShape::Chain) {
        if (v > 0) links.parent = rank_at(v - 1);
        if (v + 1 < n) links.children.push_back(rank_at(v + 1));
        return;
    }
    // Binomial: v's parent is v without its highest bit; its children are v + 2^j for
    // every 2^j above v's highest bit, the largest subtree first.
    int high = 1;
    while (high <= v) high <<= 1;
    if (v > 0) links.parent = rank_at(v - (high >> 1));
    std::vector<int> kids;
    for (int d = high; v + d < n; d <<= 1) kids.push_back(rank_at(v + d));
    links.children.insert(links.children.end(), kids.rbegin(), kids.rend());
}

TreeLinks rail_tree(const topo::Topology &t, int rank, int root, TreeShape shape)
{
    TreeLinks links;
    const int node = t.node_of[static_cast<size_t>(rank)];
    const int slot = t.local_rank[static_cast<size_t>(root)];
    if (t.nodes() > 1 && owner(t, node, slot) == rank)  // this node's member on the root's rail
        add_tree_links(links, rail(t, slot, node), t.node_of[static_cast<size_t>(root)], shape);
    return links;
}

TreeLinks collective_tree(const topo::Topology &t, int rank, int root, TreeShape shape)
{
    // The rail's links first: a head serves its rail children before its node's.
    TreeLinks links = rail_tree(t, rank, root, shape);
    const int node = t.node_of[static_cast<size_t>(rank)];
    const int head = owner(t, node, t.local_rank[static_cast<size_t>(root)]);
    const auto &members = t.members[static_cast<size_t>(node)];
    Group g;
    g.ranks = members;
    g.me = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
    const int head_pos = static_cast<int>(std::find(members.begin(), members.end(), head) - members.begin());
    add_tree_links(links, g, head_pos, shape);
    return links;
}

void append_tree_bcast(std::vector<Step> &steps, const TreeLinks &links, size_t bytes, size_t piece_bytes)
{
    for (size_t at = 0; at < bytes; at += piece_bytes) {
        const size_t n = std::min(piece_bytes, bytes - at);
        if (links.parent >= 0) steps.push_back(recv_copy(Phase::TreeBcast, links.parent, at, n));
        for (int c : links.children) steps.push_back(send(Phase::TreeBcast, c, Buf::Recv, at, n));
    }
}

void append_tree_reduce(std::vector<Step> &steps, const TreeLinks &links, Buf acc, size_t bytes, size_t piece_bytes)
{
    for (size_t at = 0; at < bytes; at += piece_bytes) {
        const size_t n = std::min(piece_bytes, bytes - at);
        Buf local = Buf::Send;
        for (int c : links.children) {
            // this rank's partial OP the child's: one fixed order per shape
            steps.push_back(Step{StepKind::RecvReduce, Phase::TreeReduce, false, c, acc, local, at, at, n});
            local = acc;
        }
        if (links.parent >= 0) steps.push_back(send(Phase::TreeReduce, links.parent, local, at, n));
    }
}

}  // namespace gpurdma::plan::detail
