#include "plan/planner.h"

#include <algorithm>

#include "plan/neighbors.h"
#include "plan/rail_choice.h"
#include "plan/step_helpers.h"

namespace gpurdma::plan {

using namespace detail;

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
        case Algorithm::Ring: return Algorithm::Ring;
        case Algorithm::RecursiveDoubling: return fits_slot ? Algorithm::RecursiveDoubling : Algorithm::Ring;
        case Algorithm::Hierarchical: return Algorithm::Hierarchical;
        case Algorithm::HalvingDoubling: return Algorithm::HalvingDoubling;
        case Algorithm::Auto:
        case Algorithm::Node: break;  // node: schedules as auto where the node path does not apply
    }
    // Ties go to recursive doubling, then hierarchical: fewer messages.
    Algorithm best = Algorithm::Ring;
    double best_us = ring_us(params.model, topo, bytes, params.chunk_size);
    if (topo.nodes() > 1) {  // across nodes, all ranks one group: the rail's algorithm over them
        const double us = rail_us(params, Algorithm::HalvingDoubling, topo.size, bytes);
        if (us < best_us) best = Algorithm::HalvingDoubling, best_us = us;
    }
    if (multi_level) {
        const double us = hierarchical_us(topo, bytes, params);
        if (us <= best_us) best = Algorithm::Hierarchical, best_us = us;
    }
    if (fits_slot && bytes <= params.small_msg_max && recursive_doubling_us(params.model, topo, bytes) <= best_us)
        best = Algorithm::RecursiveDoubling;
    return best;
}

topo::Topology single_node(int size)
{
    std::string unused;
    return topo::build_topology(std::vector<std::string>(static_cast<size_t>(size), "localhost"), "", &unused);
}

Schedule build(const topo::Topology &t, int rank, size_t count, size_t elem, bool in_place, Algorithm algorithm,
               const PlanParams &params)
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
    switch (algorithm) {
        case Algorithm::Hierarchical: return build_hierarchical(t, rank, count, elem, params);
        case Algorithm::RecursiveDoubling: {
            Schedule s = empty_schedule(Algorithm::RecursiveDoubling, size, rank, count, elem);
            if (!in_place) s.steps.push_back(local_copy(0, bytes));
            append_recursive_doubling(s.steps, all, 0, count, elem);
            return s;
        }
        case Algorithm::HalvingDoubling: {
            Schedule s = empty_schedule(Algorithm::HalvingDoubling, size, rank, count, elem);
            append_halving_doubling(s.steps, all, Buf::Send, 0, count, elem, params.chunk_size,
                                    rail_window_for(params, t.nodes(), std::min(params.chunk_size, bytes / 2)));
            return s;
        }
        default: {
            Schedule s = empty_schedule(Algorithm::Ring, size, rank, count, elem);
            append_ring(s.steps, all, Buf::Send, 0, count, elem, params.chunk_size);
            return s;
        }
    }
}

Schedule build(const topo::Topology &t, int rank, size_t count, size_t elem, bool in_place, const PlanParams &params)
{
    return build(t, rank, count, elem, in_place, choose_algorithm(t, count * elem, params), params);
}

Schedule build(int size, int rank, size_t count, size_t elem, bool in_place, const PlanParams &params)
{
    return build(single_node(size), rank, count, elem, in_place, params);
}

std::vector<int> peers(const topo::Topology &t, int rank)
{
    std::vector<int> out = neighbors(t.size, rank);
    for (int k : halving_doubling_partners(rank, t.size)) out.push_back(k);
    const int node = t.node_of[static_cast<size_t>(rank)];
    for (int m : t.members[static_cast<size_t>(node)]) out.push_back(m);
    if (t.nodes() > 1) {
        for (int sl = 0; sl < t.max_ppn(); ++sl) {
            if (owner(t, node, sl) != rank) continue;
            const Group g = rail(t, sl, node);
            for (int k : neighbors(g.size(), g.me)) out.push_back(g.ranks[static_cast<size_t>(k)]);
            for (int k : halving_doubling_partners(g.me, g.size())) out.push_back(g.ranks[static_cast<size_t>(k)]);
            // Binomial trees rotated to any root (bcast, reduce: plan/coll_trees.h):
            // the members at distance 2^j either way around the rail.
            const int n = g.size();
            for (int d = 1; d < n; d <<= 1) {
                out.push_back(g.ranks[static_cast<size_t>((g.me + d) % n)]);
                out.push_back(g.ranks[static_cast<size_t>((g.me + n - d) % n)]);
            }
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    out.erase(std::remove(out.begin(), out.end(), rank), out.end());
    return out;
}

}  // namespace gpurdma::plan
