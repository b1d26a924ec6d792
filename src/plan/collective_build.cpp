// build_collective: the schedules of reduce-scatter, allgather, bcast and reduce.
// Across nodes they follow the hierarchical allreduce's shape: a stage within each
// node (every member a peer) and rails between nodes (plan::peers), with segments of
// whole ranks' blocks (plan/coll_rings.h) or one tree over the topology
// (plan/coll_trees.h).
#include <algorithm>

#include "plan/coll_rings.h"
#include "plan/coll_trees.h"
#include "plan/collective.h"
#include "plan/planner.h"
#include "plan/step_helpers.h"

namespace gpurdma::plan {

using namespace detail;

namespace {

// Each rank's block in the concatenated buffer (reduce-scatter's input, allgather's
// output): counts in elements as prefix sums, in bytes.
struct Blocks {
    std::vector<ByteRange> of;  // per rank
    size_t total = 0;
    Blocks(const CollShape &shape, int size)
    {
        for (int r = 0; r < size; ++r) {
            const size_t i = static_cast<size_t>(r);
            const size_t bytes = (i < shape.counts.size() ? shape.counts[i] : 0) * shape.elem;
            of.push_back(ByteRange{total, bytes});
            total += bytes;
        }
    }
};

Step copy(Buf dst, size_t dst_off, Buf src, size_t src_off, size_t bytes)
{
    return Step{StepKind::Copy, Phase::Local, false, -1, dst, src, dst_off, src_off, bytes};
}

Schedule start(Algorithm algorithm, const topo::Topology &t, int rank, size_t bytes, size_t elem)
{
    Schedule s = empty_schedule(algorithm, t.size, rank, 0, elem);
    s.bytes = bytes;
    return s;
}

int my_node(const topo::Topology &t, int rank)
{
    return t.node_of[static_cast<size_t>(rank)];
}

Group node_group(const topo::Topology &t, int rank)
{
    Group g;
    g.ranks = t.members[static_cast<size_t>(my_node(t, rank))];
    g.me = static_cast<int>(std::find(g.ranks.begin(), g.ranks.end(), rank) - g.ranks.begin());
    return g;
}

// The rank with local index `slot` on node k, or -1 where the node is smaller.
int at_slot(const topo::Topology &t, int k, int slot)
{
    const auto &m = t.members[static_cast<size_t>(k)];
    return static_cast<size_t>(slot) < m.size() ? m[static_cast<size_t>(slot)] : -1;
}

// Along rail `slot`, position k's segment: the block of node k's rank at that slot.
std::vector<Segment> rail_segments(const topo::Topology &t, const Blocks &b, int slot)
{
    std::vector<Segment> segs(static_cast<size_t>(t.nodes()));
    for (int k = 0; k < t.nodes(); ++k) {
        const int r = at_slot(t, k, slot);
        if (r >= 0) segs[static_cast<size_t>(k)].push_back(b.of[static_cast<size_t>(r)]);
    }
    return segs;
}

// Within a node, member j's segment: the blocks of every rail it owns (slots j, j + m,
// ... below max_ppn), each rail's blocks in node order.
std::vector<Segment> node_segments(const topo::Topology &t, const Blocks &b, int rank)
{
    const size_t m = t.members[static_cast<size_t>(my_node(t, rank))].size();
    std::vector<Segment> segs(m);
    for (int slot = 0; slot < t.max_ppn(); ++slot)
        for (int k = 0; k < t.nodes(); ++k) {
            const int r = at_slot(t, k, slot);
            if (r >= 0) segs[static_cast<size_t>(slot) % m].push_back(b.of[static_cast<size_t>(r)]);
        }
    return segs;
}

// The rails this rank carries for its node, ascending.
std::vector<int> owned_slots(const topo::Topology &t, int rank)
{
    std::vector<int> out;
    for (int slot = 0; slot < t.max_ppn(); ++slot)
        if (owner(t, my_node(t, rank), slot) == rank) out.push_back(slot);
    return out;
}

// The rails between nodes, one ring per slot this rank owns; the host schedules and the
// rail-only schedules (build_collective_rail) share these, so their messages are the same.
void append_rail_allgather(std::vector<Step> &steps, const topo::Topology &t, int rank, const Blocks &b, size_t piece)
{
    for (int slot : owned_slots(t, rank))
        append_ring_allgather(steps, Phase::RingAllgather, rail(t, slot, my_node(t, rank)), rail_segments(t, b, slot),
                              piece);
}

void append_rail_reduce_scatter(std::vector<Step> &steps, const topo::Topology &t, int rank, const Blocks &b,
                                Buf partial, size_t piece)
{
    for (int slot : owned_slots(t, rank))
        append_ring_reduce_scatter(steps, Phase::RingReduceScatter, rail(t, slot, my_node(t, rank)),
                                   rail_segments(t, b, slot), partial, piece);
}

Schedule build_allgather(const topo::Topology &t, int rank, const CollShape &shape, const PlanParams &params)
{
    const Blocks b(shape, t.size);
    if (b.total == 0) return start(Algorithm::Auto, t, rank, 0, shape.elem);
    const size_t piece = piece_bytes_of(params.chunk_size, shape.elem);
    const ByteRange mine = b.of[static_cast<size_t>(rank)];
    Schedule s = start(t.nodes() > 1 ? Algorithm::Hierarchical : Algorithm::Ring, t, rank, b.total, shape.elem);
    if (!shape.in_place && mine.bytes) s.steps.push_back(copy(Buf::Recv, mine.off, Buf::Send, 0, mine.bytes));
    if (t.size == 1) {
        s.algorithm = Algorithm::Auto;
        return s;
    }
    const Group node = node_group(t, rank);
    if (t.nodes() == 1) {
        const bool small = b.total <= params.small_msg_max &&
                           std::all_of(b.of.begin(), b.of.end(), [&](const ByteRange &r) { return r.bytes <= piece; });
        if (small) {
            // Direct: one message to each member, then one from each (one slot each way).
            s.algorithm = Algorithm::Auto;
            for (int m : node.ranks)
                if (m != rank && mine.bytes)
                    s.steps.push_back(send(Phase::NodeAllgather, m, Buf::Recv, mine.off, mine.bytes));
            for (int m : node.ranks) {
                const ByteRange r = b.of[static_cast<size_t>(m)];
                if (m != rank && r.bytes) s.steps.push_back(recv_copy(Phase::NodeAllgather, m, r.off, r.bytes));
            }
            return s;
        }
        std::vector<Segment> segs;
        for (int m : node.ranks) segs.push_back(Segment{b.of[static_cast<size_t>(m)]});
        append_ring_allgather(s.steps, Phase::RingAllgather, node, segs, piece);
        return s;
    }
    // Each rail gathers its slot's blocks from every node, then each node gathers its rails.
    append_rail_allgather(s.steps, t, rank, b, piece);
    append_ring_allgather(s.steps, Phase::NodeAllgather, node, node_segments(t, b, rank), piece);
    return s;
}

Schedule build_reduce_scatter(const topo::Topology &t, int rank, const CollShape &shape, const PlanParams &params)
{
    const Blocks b(shape, t.size);
    if (b.total == 0) return start(Algorithm::Auto, t, rank, 0, shape.elem);
    const size_t piece = piece_bytes_of(params.chunk_size, shape.elem);
    const ByteRange mine = b.of[static_cast<size_t>(rank)];
    if (t.size == 1) {
        Schedule s = start(Algorithm::Auto, t, rank, b.total, shape.elem);
        if (!shape.in_place && mine.bytes) s.steps.push_back(copy(Buf::Recv, 0, Buf::Send, 0, mine.bytes));
        return s;
    }
    Schedule s = start(t.nodes() > 1 ? Algorithm::Hierarchical : Algorithm::Ring, t, rank, b.total, shape.elem);
    s.stage_bytes = b.total;  // the accumulator, every block at its input offset
    const Group node = node_group(t, rank);
    Buf partial = Buf::Send;  // where this rank's contribution to the rails is
    if (t.nodes() == 1) {
        std::vector<Segment> segs;
        for (int m : node.ranks) segs.push_back(Segment{b.of[static_cast<size_t>(m)]});
        append_ring_reduce_scatter(s.steps, Phase::RingReduceScatter, node, segs, Buf::Send, piece);
    } else {
        // The node reduces each rail's blocks onto the rail's member, then each rail
        // reduces its slot's blocks onto their ranks.
        if (node.size() > 1) {
            append_ring_reduce_scatter(s.steps, Phase::NodeReduceScatter, node, node_segments(t, b, rank), Buf::Send,
                                       piece);
            partial = Buf::Stage;
        }
        append_rail_reduce_scatter(s.steps, t, rank, b, partial, piece);
    }
    if (mine.bytes) s.steps.push_back(copy(Buf::Recv, 0, Buf::Stage, mine.off, mine.bytes));
    return s;
}

size_t message_bytes(const CollShape &shape)
{
    return (shape.counts.empty() ? 0 : shape.counts[0]) * shape.elem;
}

TreeShape tree_shape(size_t bytes, const PlanParams &params)
{
    return bytes <= params.small_msg_max ? TreeShape::Binomial : TreeShape::Chain;
}

Schedule build_bcast(const topo::Topology &t, int rank, const CollShape &shape, const PlanParams &params)
{
    const size_t bytes = message_bytes(shape);
    if (bytes == 0 || t.size == 1) return start(Algorithm::Auto, t, rank, bytes, shape.elem);
    Schedule s = start(t.nodes() > 1 ? Algorithm::Hierarchical : Algorithm::Auto, t, rank, bytes, shape.elem);
    const TreeLinks links = collective_tree(t, rank, shape.root, tree_shape(bytes, params));
    append_tree_bcast(s.steps, links, bytes, piece_bytes_of(params.chunk_size, shape.elem));
    return s;
}

Schedule build_reduce(const topo::Topology &t, int rank, const CollShape &shape, const PlanParams &params)
{
    const size_t bytes = message_bytes(shape);
    if (bytes == 0) return start(Algorithm::Auto, t, rank, 0, shape.elem);
    Schedule s = start(t.nodes() > 1 ? Algorithm::Hierarchical : Algorithm::Auto, t, rank, bytes, shape.elem);
    const TreeLinks links = collective_tree(t, rank, shape.root, tree_shape(bytes, params));
    const bool root = rank == shape.root;
    if (root && links.children.empty()) {  // alone
        if (!shape.in_place) s.steps.push_back(copy(Buf::Recv, 0, Buf::Send, 0, bytes));
        return s;
    }
    if (!root && !links.children.empty()) s.stage_bytes = bytes;
    append_tree_reduce(s.steps, links, root ? Buf::Recv : Buf::Stage, bytes,
                       piece_bytes_of(params.chunk_size, shape.elem));
    return s;
}

// The rail parts alone (build_collective_rail): the same helpers as above, with the
// node's stage left to the caller.
Schedule rail_allgather(const topo::Topology &t, int rank, const CollShape &shape, const PlanParams &params)
{
    const Blocks b(shape, t.size);
    Schedule s = start(Algorithm::Hierarchical, t, rank, b.total, shape.elem);
    if (b.total == 0) return s;
    append_rail_allgather(s.steps, t, rank, b, piece_bytes_of(params.chunk_size, shape.elem));
    return s;
}

Schedule rail_reduce_scatter(const topo::Topology &t, int rank, const CollShape &shape, const PlanParams &params)
{
    const Blocks b(shape, t.size);
    Schedule s = start(Algorithm::Hierarchical, t, rank, b.total, shape.elem);
    if (b.total == 0) return s;
    s.stage_bytes = b.total;
    append_rail_reduce_scatter(s.steps, t, rank, b, Buf::Send, piece_bytes_of(params.chunk_size, shape.elem));
    const ByteRange mine = b.of[static_cast<size_t>(rank)];
    if (mine.bytes) s.steps.push_back(copy(Buf::Recv, 0, Buf::Stage, mine.off, mine.bytes));
    return s;
}

Schedule rail_tree_schedule(const topo::Topology &t, int rank, const CollShape &shape, const PlanParams &params)
{
    const size_t bytes = message_bytes(shape);
    Schedule s = start(Algorithm::Hierarchical, t, rank, bytes, shape.elem);
    if (bytes == 0) return s;
    const TreeLinks links = rail_tree(t, rank, shape.root, tree_shape(bytes, params));
    const size_t piece = piece_bytes_of(params.chunk_size, shape.elem);
    if (shape.coll == Coll::Bcast) {
        append_tree_bcast(s.steps, links, bytes, piece);
        return s;
    }
    const bool root = rank == shape.root;
    if (root && links.children.empty()) {
        if (links.parent < 0) s.steps.push_back(copy(Buf::Recv, 0, Buf::Send, 0, bytes));
        return s;
    }
    if (!root && !links.children.empty()) s.stage_bytes = bytes;
    append_tree_reduce(s.steps, links, root ? Buf::Recv : Buf::Stage, bytes, piece);
    return s;
}

}  // namespace

std::vector<std::vector<ByteRange>> node_rail_ranges(const topo::Topology &topo, int rank, const CollShape &shape)
{
    return node_segments(topo, Blocks(shape, topo.size), rank);
}

int rail_head(const topo::Topology &topo, int node, int root)
{
    return owner(topo, node, topo.local_rank[static_cast<size_t>(root)]);
}

Schedule build_collective_rail(const topo::Topology &topo, int rank, const CollShape &shape, const PlanParams &params)
{
    switch (shape.coll) {
        case Coll::ReduceScatter: return rail_reduce_scatter(topo, rank, shape, params);
        case Coll::Allgather: return rail_allgather(topo, rank, shape, params);
        case Coll::Bcast:
        case Coll::Reduce: return rail_tree_schedule(topo, rank, shape, params);
        case Coll::Allreduce: break;
    }
    return start(Algorithm::Hierarchical, topo, rank, 0, shape.elem);
}

Schedule build_collective(const topo::Topology &topo, int rank, const CollShape &shape, const PlanParams &params)
{
    switch (shape.coll) {
        case Coll::ReduceScatter: return build_reduce_scatter(topo, rank, shape, params);
        case Coll::Allgather: return build_allgather(topo, rank, shape, params);
        case Coll::Bcast: return build_bcast(topo, rank, shape, params);
        case Coll::Reduce: return build_reduce(topo, rank, shape, params);
        case Coll::Allreduce: break;
    }
    const size_t count = shape.counts.empty() ? 0 : shape.counts[0];
    return build(topo, rank, count, shape.elem, shape.in_place, params);
}

}  // namespace gpurdma::plan
