// The topology-aware allreduce: shared memory within each node, one rail per slice
// between nodes.
#pragma once

#include <cstddef>

#include "plan/schedule.h"
#include "topo/topology.h"

namespace gpurdma::plan {

struct PlanParams;  // plan/planner.h

// Topology-aware: node reduce-scatter of S = max ranks-per-node slices to their
// owners, allreduce of each slice among its owners on all nodes (one rail per
// slice), node allgather; pipelined over blocks of S x rail unit (plan/rail_choice.h)
// so that the stages of consecutive blocks overlap, the node stages in pieces of a
// landing slot. Handles nodes of different sizes.
Schedule build_hierarchical(const topo::Topology &topo, int rank, size_t count, size_t elem_size,
                            const PlanParams &params);

}  // namespace gpurdma::plan
