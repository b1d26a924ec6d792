#include "plan/planner.h"

#include <algorithm>

#include "plan/neighbors.h"

namespace gpurdma::plan {

namespace {

// Element range [first, first + count).
struct Range {
    size_t first;
    size_t count;
};

// Segment i of `count` elements split into n nearly equal parts (the first count % n
// get one more), offset by `base`.
Range segment(size_t base, size_t count, int n, int i)
{
    const size_t b = count / static_cast<size_t>(n);
    const size_t extra = count % static_cast<size_t>(n);
    const size_t idx = static_cast<size_t>(i);
    return Range{base + idx * b + std::min(idx, extra), b + (idx < extra ? 1 : 0)};
}

size_t pieces_of(const Range &r, size_t piece_elems)
{
    return (r.count + piece_elems - 1) / piece_elems;
}

Range piece(const Range &r, size_t piece_elems, size_t p)
{
    const size_t first = r.first + p * piece_elems;
    return Range{first, std::min(piece_elems, r.first + r.count - first)};
}

Step send(Phase ph, int peer, Buf src, size_t off, size_t bytes)
{
    return Step{StepKind::Send, ph, false, peer, Buf::Recv, src, 0, off, bytes};
}

Step recv_reduce(Phase ph, int peer, bool landed_first, Buf local, size_t off, size_t bytes)
{
    return Step{StepKind::RecvReduce, ph, landed_first, peer, Buf::Recv, local, off, off, bytes};
}

Step recv_copy(Phase ph, int peer, size_t off, size_t bytes)
{
    return Step{StepKind::RecvCopy, ph, false, peer, Buf::Recv, Buf::Recv, off, 0, bytes};
}

Step local_copy(size_t off, size_t bytes)
{
    return Step{StepKind::Copy, Phase::Local, false, -1, Buf::Recv, Buf::Send, off, off, bytes};
}

Schedule empty_schedule(Algorithm algorithm, int size, int rank, size_t count, size_t elem_size)
{
    Schedule s;
    s.algorithm = algorithm;
    s.rank = rank;
    s.size = size;
    s.bytes = count * elem_size;
    s.elem_size = elem_size;
    return s;
}

// The rank of node `node` that owns slice s: slices go round-robin over the node's ranks.
int owner(const topo::Topology &t, int node, int s)
{
    const auto &m = t.members[static_cast<size_t>(node)];
    return m[static_cast<size_t>(s) % m.size()];
}

Group rail(const topo::Topology &t, int s, int my_node)
{
    Group g;
    for (int k = 0; k < t.nodes(); ++k) g.ranks.push_back(owner(t, k, s));
    g.me = my_node;
    return g;
}

}  // namespace

bool uses_node_allreduce(const topo::Topology &topo, const PlanParams &params)
{
    return topo.nodes() == 1 && topo.size > 1 &&
           (params.algorithm == Algorithm::Auto || params.algorithm == Algorithm::Node);
}

Algorithm choose_algorithm(const topo::Topology &topo, size_t bytes, const PlanParams &params)
{
    const bool fits_slot = bytes <= params.chunk_size;
    const bool multi_level = topo.nodes() > 1 && topo.max_ppn() > 1;
    switch (params.algorithm) {
        case Algorithm::Ring:
            return Algorithm::Ring;
        case Algorithm::RecursiveDoubling:
            return fits_slot ? Algorithm::RecursiveDoubling : Algorithm::Ring;
        case Algorithm::Hierarchical:
            return Algorithm::Hierarchical;
        case Algorithm::Auto:
        case Algorithm::Node:
            break;  // node: schedules as auto where the node path does not apply
    }
    // Ties go to recursive doubling, then hierarchical: fewer messages.
    Algorithm best = Algorithm::Ring;
    double best_us = ring_us(params.model, topo, bytes, params.chunk_size);
    if (multi_level) {
        const double us = hierarchical_us(params.model, topo, bytes, params.chunk_size, params.small_msg_max);
        if (us <= best_us) best = Algorithm::Hierarchical, best_us = us;
    }
    if (fits_slot && bytes <= params.small_msg_max && recursive_doubling_us(params.model, topo, bytes) <= best_us)
        best = Algorithm::RecursiveDoubling;
    return best;
}

void append_ring(std::vector<Step> &steps, const Group &g, Buf own, size_t first, size_t count, size_t elem,
                 size_t chunk_size)
{
    const int n = g.size();
    if (n < 2 || count == 0) return;
    const int right = g.ranks[static_cast<size_t>((g.me + 1) % n)];
    const int left = g.ranks[static_cast<size_t>((g.me + n - 1) % n)];
    const size_t piece_elems = std::max<size_t>(1, chunk_size / elem);
    auto wrap = [n](int i) { return ((i % n) + n) % n; };

    // Reduce-scatter: at step t, send segment me-t, fold segment me-t-1 in; this
    // rank ends up owning the full reduction of segment me+1.
    for (int t = 0; t + 1 < n; ++t) {
        const Range out = segment(first, count, n, wrap(g.me - t));
        const Range in = segment(first, count, n, wrap(g.me - t - 1));
        const size_t n_out = pieces_of(out, piece_elems), n_in = pieces_of(in, piece_elems);
        for (size_t p = 0; p < std::max(n_out, n_in); ++p) {
            if (p < n_out) {
                const Range r = piece(out, piece_elems, p);
                // Step 0 sends this rank's own contribution; later steps partial sums.
                steps.push_back(
                    send(Phase::RingReduceScatter, right, t == 0 ? own : Buf::Recv, r.first * elem, r.count * elem));
            }
            if (p < n_in) {
                const Range r = piece(in, piece_elems, p);
                steps.push_back(recv_reduce(Phase::RingReduceScatter, left, true, own, r.first * elem, r.count * elem));
            }
        }
    }
    // Allgather: at step t, forward segment me+1-t, receive segment me-t.
    for (int t = 0; t + 1 < n; ++t) {
        const Range out = segment(first, count, n, wrap(g.me + 1 - t));
        const Range in = segment(first, count, n, wrap(g.me - t));
        const size_t n_out = pieces_of(out, piece_elems), n_in = pieces_of(in, piece_elems);
        for (size_t p = 0; p < std::max(n_out, n_in); ++p) {
            if (p < n_out) {
                const Range r = piece(out, piece_elems, p);
                steps.push_back(send(Phase::RingAllgather, right, Buf::Recv, r.first * elem, r.count * elem));
            }
            if (p < n_in) {
                const Range r = piece(in, piece_elems, p);
                steps.push_back(recv_copy(Phase::RingAllgather, left, r.first * elem, r.count * elem));
            }
        }
    }
}

void append_recursive_doubling(std::vector<Step> &steps, const Group &g, size_t first, size_t count, size_t elem)
{
    const int n = g.size();
    if (n < 2 || count == 0) return;
    const size_t off = first * elem, bytes = count * elem;
    const int p2 = power_of_two_floor(n);
    auto rank_of = [&g](int i) { return g.ranks[static_cast<size_t>(i)]; };
    if (g.me >= p2) {
        const int partner = rank_of(g.me - p2);
        steps.push_back(send(Phase::RdFoldIn, partner, Buf::Recv, off, bytes));
        steps.push_back(recv_copy(Phase::RdFoldOut, partner, off, bytes));
        return;
    }
    const bool has_extra = g.me + p2 < n;
    // The extra member is later in the group, so its contribution goes second.
    if (has_extra) steps.push_back(recv_reduce(Phase::RdFoldIn, rank_of(g.me + p2), false, Buf::Recv, off, bytes));
    for (int mask = 1; mask < p2; mask <<= 1) {
        const int partner = g.me ^ mask;
        steps.push_back(send(Phase::RdExchange, rank_of(partner), Buf::Recv, off, bytes));
        // The earlier member's value first, on both sides: both compute the same bits.
        steps.push_back(recv_reduce(Phase::RdExchange, rank_of(partner), partner < g.me, Buf::Recv, off, bytes));
    }
    if (has_extra) steps.push_back(send(Phase::RdFoldOut, rank_of(g.me + p2), Buf::Recv, off, bytes));
}

Schedule build_hierarchical(const topo::Topology &t, int rank, size_t count, size_t elem, const PlanParams &params)
{
    Schedule s = empty_schedule(Algorithm::Hierarchical, t.size, rank, count, elem);
    const int node = t.node_of[static_cast<size_t>(rank)];
    const auto &members = t.members[static_cast<size_t>(node)];
    const int slices = t.max_ppn();
    const size_t piece_elems = std::max<size_t>(1, params.chunk_size / elem);
    const size_t block_elems = piece_elems * static_cast<size_t>(slices);
    const size_t blocks = (count + block_elems - 1) / block_elems;
    auto slice_of = [&](size_t b, int sl) {
        const size_t base = b * block_elems;
        return segment(base, std::min(block_elems, count - base), slices, sl);
    };
    // Slices are handled in order, each by all ranks of the node at once (owner
    // receives, the others send): no rank waits on a slice its peers have not reached,
    // so one landing slot per peer is enough, whatever the node sizes.
    auto node_reduce_scatter = [&](size_t b) {
        for (int sl = 0; sl < slices; ++sl) {
            const Range r = slice_of(b, sl);
            const int o = owner(t, node, sl);
            if (!r.count) continue;
            if (o != rank) {
                s.steps.push_back(send(Phase::NodeReduceScatter, o, Buf::Send, r.first * elem, r.count * elem));
            } else if (members.size() == 1) {
                s.steps.push_back(local_copy(r.first * elem, r.count * elem));
            } else {
                bool first_in = true;
                for (int m : members) {
                    if (m == rank) continue;
                    s.steps.push_back(recv_reduce(Phase::NodeReduceScatter, m, m < rank,
                                                  first_in ? Buf::Send : Buf::Recv, r.first * elem, r.count * elem));
                    first_in = false;
                }
            }
        }
    };
    auto inter_node = [&](size_t b) {
        if (t.nodes() < 2) return;
        for (int sl = 0; sl < slices; ++sl) {
            const Range r = slice_of(b, sl);
            if (!r.count || owner(t, node, sl) != rank) continue;
            const Group g = rail(t, sl, node);
            if (r.count * elem <= params.small_msg_max)
                append_recursive_doubling(s.steps, g, r.first, r.count, elem);
            else
                append_ring(s.steps, g, Buf::Recv, r.first, r.count, elem, params.chunk_size);
        }
    };
    auto node_allgather = [&](size_t b) {
        if (members.size() < 2) return;
        for (int sl = 0; sl < slices; ++sl) {
            const Range r = slice_of(b, sl);
            const int o = owner(t, node, sl);
            if (!r.count) continue;
            if (o != rank) {
                s.steps.push_back(recv_copy(Phase::NodeAllgather, o, r.first * elem, r.count * elem));
                continue;
            }
            for (int m : members)
                if (m != rank)
                    s.steps.push_back(send(Phase::NodeAllgather, m, Buf::Recv, r.first * elem, r.count * elem));
        }
    };
    // Software pipeline: block b is in the node stage while b-1 crosses the network
    // and b-2 is gathered back.
    for (size_t tick = 0; tick < blocks + 2; ++tick) {
        if (tick < blocks) node_reduce_scatter(tick);
        if (tick >= 1 && tick - 1 < blocks) inter_node(tick - 1);
        if (tick >= 2 && tick - 2 < blocks) node_allgather(tick - 2);
    }
    return s;
}

topo::Topology single_node(int size)
{
    std::string unused;
    return topo::build_topology(std::vector<std::string>(static_cast<size_t>(size), "localhost"), "", &unused);
}

Schedule build(const topo::Topology &t, int rank, size_t count, size_t elem, bool in_place, const PlanParams &params)
{
    const int size = t.size;
    if (count == 0) return empty_schedule(Algorithm::Auto, size, rank, 0, elem);
    const size_t bytes = count * elem;
    if (size == 1) {
        Schedule s = empty_schedule(Algorithm::Auto, size, rank, count, elem);
        if (!in_place) s.steps.push_back(local_copy(0, bytes));
        return s;
    }
    Group all;
    for (int r = 0; r < size; ++r) all.ranks.push_back(r);
    all.me = rank;
    switch (choose_algorithm(t, bytes, params)) {
        case Algorithm::Hierarchical:
            return build_hierarchical(t, rank, count, elem, params);
        case Algorithm::RecursiveDoubling: {
            Schedule s = empty_schedule(Algorithm::RecursiveDoubling, size, rank, count, elem);
            if (!in_place) s.steps.push_back(local_copy(0, bytes));
            append_recursive_doubling(s.steps, all, 0, count, elem);
            return s;
        }
        default: {
            Schedule s = empty_schedule(Algorithm::Ring, size, rank, count, elem);
            append_ring(s.steps, all, Buf::Send, 0, count, elem, params.chunk_size);
            return s;
        }
    }
}

Schedule build(int size, int rank, size_t count, size_t elem, bool in_place, const PlanParams &params)
{
    return build(single_node(size), rank, count, elem, in_place, params);
}

std::vector<int> peers(const topo::Topology &t, int rank)
{
    std::vector<int> out = neighbors(t.size, rank);
    const int node = t.node_of[static_cast<size_t>(rank)];
    for (int m : t.members[static_cast<size_t>(node)]) out.push_back(m);
    if (t.nodes() > 1) {
        for (int sl = 0; sl < t.max_ppn(); ++sl) {
            if (owner(t, node, sl) != rank) continue;
            const Group g = rail(t, sl, node);
            for (int k : neighbors(g.size(), g.me)) out.push_back(g.ranks[static_cast<size_t>(k)]);
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    out.erase(std::remove(out.begin(), out.end(), rank), out.end());
    return out;
}

}  // namespace gpurdma::plan
