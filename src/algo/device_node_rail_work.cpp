#include "algo/device_node_rail_work.h"

#include <algorithm>

#include "algo/call_spans.h"
#include "plan/collective.h"
#include "reduce/reduce.h"

namespace gpurdma::algo {

using plan::Coll;

namespace {

int node_of(const topo::Topology &t, int rank)
{
    return t.node_of[static_cast<size_t>(rank)];
}

const std::vector<int> &members_of(const topo::Topology &t, int rank)
{
    return t.members[static_cast<size_t>(node_of(t, rank))];
}

size_t index_of(const topo::Topology &t, int rank)
{
    const auto &m = members_of(t, rank);
    return static_cast<size_t>(std::find(m.begin(), m.end(), rank) - m.begin());
}

size_t bytes_of(const std::vector<plan::ByteRange> &ranges)
{
    size_t total = 0;
    for (const auto &r : ranges) total += r.bytes;
    return total;
}

// This rank's block in the vector (reduce-scatter's input, allgather's result), bytes.
plan::ByteRange block_of(const Call &call, int rank)
{
    const size_t elem = reduce::dtype_size(call.dtype);
    size_t off = 0;
    for (int q = 0; q < rank; ++q) off += part_count(call, q);
    return {off * elem, part_count(call, rank) * elem};
}

bool is_head(const topo::Topology &t, int rank, const Call &call)
{
    return plan::rail_head(t, node_of(t, rank), call.root) == rank;
}

}  // namespace

NodeRailSizes node_rail_sizes(const topo::Topology &t, int rank, const Call &call)
{
    const size_t elem = reduce::dtype_size(call.dtype);
    NodeRailSizes s;
    const bool several = members_of(t, rank).size() > 1;
    switch (call.coll) {
        case Coll::ReduceScatter: {
            s.rail_send = total_count(call, t.size) * elem;
            s.rail_recv = part_count(call, rank) * elem;
            if (several)
                s.scratch = bytes_of(plan::node_rail_ranges(t, rank, shape_of(call, t.size))[index_of(t, rank)]);
            break;
        }
        case Coll::Allgather: s.rail_recv = total_count(call, t.size) * elem; break;
        case Coll::Bcast:
            if (is_head(t, rank, call)) s.rail_recv = call.count * elem;
            break;
        case Coll::Reduce:
            if (is_head(t, rank, call)) {
                s.rail_send = call.count * elem;
                if (several) s.scratch = s.rail_send;
            }
            if (rank == call.root) s.rail_recv = call.count * elem;
            break;
        case Coll::Allreduce: break;
    }
    return s;
}

BufferSides node_rail_shared(const topo::Topology &t, int rank, const Call &call)
{
    switch (call.coll) {
        case Coll::ReduceScatter: return {true, false};
        case Coll::Allgather: return {false, true};
        case Coll::Bcast: return {false, is_head(t, rank, call)};
        case Coll::Reduce: return {!is_head(t, rank, call), false};
        case Coll::Allreduce: break;
    }
    return {};
}

NodeRailWork node_rail_work(const topo::Topology &t, int rank, const Call &call, const std::vector<const char *> &srcs,
                            const std::vector<char *> &dsts, char *rail_send, char *rail_recv, char *scratch)
{
    const size_t elem = reduce::dtype_size(call.dtype);
    const size_t me = index_of(t, rank);
    const size_t members = members_of(t, rank).size();
    NodeRailWork w;
    auto copy = [](std::vector<DeviceCopy> &to, char *dst, const char *src, size_t bytes) {
        if (bytes > 0 && dst != src) to.push_back({dst, src, bytes});
    };
    // Every member's input at byte `off`, member order (the fold order).
    auto inputs_at = [&](size_t off) {
        std::vector<const void *> in(members);
        for (size_t q = 0; q < members; ++q) in[q] = srcs[q] + off;
        return in;
    };
    switch (call.coll) {
        case Coll::ReduceScatter: {
            w.reads_before_rail = true;
            const auto ranges = plan::node_rail_ranges(t, rank, shape_of(call, t.size))[me];
            size_t packed = 0;
            for (const auto &r : ranges) {
                if (r.bytes == 0) continue;
                if (members == 1) {
                    copy(w.out, rail_send + r.off, srcs[me] + r.off, r.bytes);
                    continue;
                }
                w.reductions.push_back({scratch + packed, inputs_at(r.off), r.bytes / elem});
                copy(w.out, rail_send + r.off, scratch + packed, r.bytes);
                packed += r.bytes;
            }
            copy(w.in, dsts[me], rail_recv, part_count(call, rank) * elem);
            break;
        }
        case Coll::Allgather: {
            const plan::ByteRange mine = block_of(call, rank);
            const char *own = call.in_place() ? dsts[me] + mine.off : static_cast<const char *>(call.sendbuf);
            copy(w.local, dsts[me] + mine.off, own, mine.bytes);
            copy(w.out, rail_recv + mine.off, own, mine.bytes);
            const auto ranges = plan::node_rail_ranges(t, rank, shape_of(call, t.size));
            for (const auto &r : ranges[me])
                if (r.off != mine.off) copy(w.in, dsts[me] + r.off, rail_recv + r.off, r.bytes);
            for (size_t q = 0; q < members; ++q)
                if (q != me)
                    for (const auto &r : ranges[q]) copy(w.gather, dsts[me] + r.off, dsts[q] + r.off, r.bytes);
            break;
        }
        case Coll::Bcast: {
            const size_t bytes = call.count * elem;
            const int head = plan::rail_head(t, node_of(t, rank), call.root);
            if (head != rank) {
                copy(w.gather, dsts[me], dsts[index_of(t, head)], bytes);
            } else if (rank == call.root) {
                copy(w.out, rail_recv, dsts[me], bytes);
            } else {
                copy(w.in, dsts[me], rail_recv, bytes);
            }
            break;
        }
        case Coll::Reduce: {
            w.reads_before_rail = true;
            const size_t bytes = call.count * elem;
            if (is_head(t, rank, call) && bytes > 0) {
                if (members == 1) {
                    copy(w.out, rail_send, srcs[me], bytes);
                } else {
                    w.reductions.push_back({scratch, inputs_at(0), call.count});
                    copy(w.out, rail_send, scratch, bytes);
                }
            }
            if (rank == call.root) copy(w.in, dsts[me], rail_recv, bytes);
            break;
        }
        case Coll::Allreduce: break;
    }
    return w;
}

}  // namespace gpurdma::algo
