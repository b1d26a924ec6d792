// The ring allreduce: reduce-scatter then allgather around the group, pipelined in
// slot-sized pieces. Bandwidth-optimal for large messages; the flat schedule and the
// hierarchical schedule's inter-node stage for large slices.
#pragma once

#include <cstddef>
#include <vector>

#include "plan/schedule.h"

namespace gpurdma::plan {

struct Group;  // plan/planner.h

// Ring reduce-scatter + allgather of Recv[first, first + count) among the group,
// pipelined in pieces of at most chunk_size bytes. The rank's own contribution is
// read from `own` (Send or Recv), results land in Recv.
void append_ring(std::vector<Step> &steps, const Group &g, Buf own, size_t first, size_t count, size_t elem_size,
                 size_t chunk_size);

}  // namespace gpurdma::plan
