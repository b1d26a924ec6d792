#include "plan/hierarchical.h"

#include <algorithm>

#include "plan/planner.h"
#include "plan/rail_choice.h"
#include "plan/step_helpers.h"

namespace gpurdma::plan {

using namespace detail;

Schedule build_hierarchical(const topo::Topology &t, int rank, size_t count, size_t elem, const PlanParams &params)
{
    Schedule s = empty_schedule(Algorithm::Hierarchical, t.size, rank, count, elem);
    const int node = t.node_of[static_cast<size_t>(rank)];
    const auto &members = t.members[static_cast<size_t>(node)];
    const int slices = t.max_ppn();
    // A block is one rail unit per slice; the node stages stream it in pieces of a
    // landing slot, the rail takes each slice of it whole (plan/rail_choice.h).
    const size_t piece_elems = std::max<size_t>(1, params.chunk_size / elem);
    const size_t block_elems = rail_unit_elems(t, count, elem, params) * static_cast<size_t>(slices);
    const size_t blocks = (count + block_elems - 1) / block_elems;
    auto slice_of = [&](size_t b, int sl) {
        const size_t base = b * block_elems;
        return segment(base, std::min(block_elems, count - base), slices, sl);
    };
    // Slices are handled in order, each by all ranks of the node at once (owner
    // receives, the others send), piece by piece: no rank waits on a slice its peers
    // have not reached, so one landing slot per peer is enough, whatever the node sizes.
    auto node_reduce_scatter = [&](size_t b) {
        for (int sl = 0; sl < slices; ++sl) {
            const Range r = slice_of(b, sl);
            const int o = owner(t, node, sl);
            for (size_t q = 0; r.count && q < pieces_of(r, piece_elems); ++q) {
                const Range p = piece(r, piece_elems, q);
                if (o != rank) {
                    s.steps.push_back(send(Phase::NodeReduceScatter, o, Buf::Send, p.first * elem, p.count * elem));
                } else if (members.size() == 1) {
                    s.steps.push_back(local_copy(p.first * elem, p.count * elem));
                } else {
                    bool first_in = true;
                    for (int m : members) {
                        if (m == rank) continue;
                        s.steps.push_back(recv_reduce(Phase::NodeReduceScatter, m, m < rank,
                                                      first_in ? Buf::Send : Buf::Recv, p.first * elem,
                                                      p.count * elem));
                        first_in = false;
                    }
                }
            }
        }
    };
    auto inter_node = [&](size_t b) {
        if (t.nodes() < 2) return;
        for (int sl = 0; sl < slices; ++sl) {
            const Range r = slice_of(b, sl);
            if (!r.count || owner(t, node, sl) != rank) continue;
            append_rail(s.steps, rail(t, sl, node), Buf::Recv, r.first, r.count, elem, params);
        }
    };
    auto node_allgather = [&](size_t b) {
        if (members.size() < 2) return;
        for (int sl = 0; sl < slices; ++sl) {
            const Range r = slice_of(b, sl);
            const int o = owner(t, node, sl);
            for (size_t q = 0; r.count && q < pieces_of(r, piece_elems); ++q) {
                const Range p = piece(r, piece_elems, q);
                if (o != rank) {
                    s.steps.push_back(recv_copy(Phase::NodeAllgather, o, p.first * elem, p.count * elem));
                    continue;
                }
                for (int m : members)
                    if (m != rank)
                        s.steps.push_back(send(Phase::NodeAllgather, m, Buf::Recv, p.first * elem, p.count * elem));
            }
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

}  // namespace gpurdma::plan
