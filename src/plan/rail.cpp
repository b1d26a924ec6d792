#include "plan/rail.h"

#include <algorithm>

#include "plan/planner.h"
#include "plan/rail_choice.h"
#include "plan/step_helpers.h"

namespace gpurdma::plan {

using namespace detail;

std::vector<RailUnit> hierarchical_units(const topo::Topology &t, size_t count, size_t elem, const PlanParams &params)
{
    // The blocks and slices of build_hierarchical.
    std::vector<RailUnit> units;
    const int slices = t.max_ppn();
    const size_t block_elems = rail_unit_elems(t, count, elem, params) * static_cast<size_t>(slices);
    for (size_t base = 0; base < count; base += block_elems) {
        const size_t block = std::min(block_elems, count - base);
        for (int sl = 0; sl < slices; ++sl) {
            const Range r = segment(base, block, slices, sl);
            if (r.count) units.push_back(RailUnit{r.first, r.count, sl});
        }
    }
    return units;
}

int slice_owner(const topo::Topology &t, int node, int slice)
{
    return owner(t, node, slice);
}

Schedule build_rail_allreduce(const topo::Topology &t, int rank, int slice, size_t count, size_t elem,
                              const PlanParams &params)
{
    Schedule s = empty_schedule(Algorithm::Hierarchical, t.size, rank, count, elem);
    const int node = t.node_of[static_cast<size_t>(rank)];
    if (count == 0 || t.nodes() < 2 || owner(t, node, slice) != rank) return s;
    append_rail(s.steps, rail(t, slice, node), Buf::Recv, 0, count, elem, params);
    return s;
}

}  // namespace gpurdma::plan
