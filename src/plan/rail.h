// The hierarchical allreduce's inter-node stage on its own, for a path that does the
// node stages elsewhere (the GPU path: algo/device_hierarchical.h reduces and gathers
// within the node on the GPUs and runs only this stage over the host team's router,
// on pinned copies of its slices). The decomposition and the rail schedules are the
// host hierarchical schedule's (plan/hierarchical.cpp) exactly: the same blocks of
// S x rail unit elements, the same slices and owners, the same rail algorithm per unit
// (plan/rail_choice.h), in the same order. So the messages on the wire between two
// rail peers are the same whichever of the two runs them, and a node whose ranks run
// the host hierarchical schedule interoperates with a node whose ranks run the GPU path.
#pragma once

#include <cstddef>
#include <vector>

#include "plan/schedule.h"
#include "topo/topology.h"

namespace gpurdma::plan {

struct PlanParams;  // plan/planner.h

// One slice of one block of the hierarchical decomposition: elements
// [first, first + count) of the message, owned on each node by owner(node, slice).
struct RailUnit {
    size_t first = 0;
    size_t count = 0;
    int slice = 0;
};

// Every non-empty unit of a message of `count` elements, in the order the host
// hierarchical schedule runs their rail stages: block by block, slices ascending.
std::vector<RailUnit> hierarchical_units(const topo::Topology &topo, size_t count, size_t elem_size,
                                         const PlanParams &params);

// The rank of `node` that owns `slice` (round-robin over the node's ranks).
int slice_owner(const topo::Topology &topo, int node, int slice);

// The inter-node stage for one slice: allreduce of Recv[0, count) in place among the
// rail group of `slice` (the slice's owner on every node), by the algorithm the
// hierarchical schedule takes for a unit of that size (append_rail). Empty when
// `rank` does not own `slice` on its node, or on a single node.
Schedule build_rail_allreduce(const topo::Topology &topo, int rank, int slice, size_t count, size_t elem_size,
                              const PlanParams &params);

}  // namespace gpurdma::plan
