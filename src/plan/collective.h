// The collectives beyond allreduce as schedules: what one call is (its shape, known
// alike on every rank) and the builder that turns it into one rank's steps over the
// host team's router. Buffers as exec::Executor addresses them:
//   ReduceScatter: Send holds the whole input (sum of counts; in place: Recv does),
//                  Recv gets this rank's part; Stage is the accumulator (stage_bytes).
//   Allgather:     Send holds this rank's block (in place: already at Recv + rank's
//                  offset); Recv gets every rank's block, in rank order.
//   Bcast:         Recv is the one buffer (the root's is sent); Send aliases it.
//   Reduce:        Send holds the input (root in place: Recv does); Recv is the
//                  root's result; non-roots accumulate in Stage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plan/schedule.h"
#include "topo/topology.h"

namespace gpurdma::plan {

struct PlanParams;  // plan/planner.h

enum class Coll : uint8_t { Allreduce, ReduceScatter, Allgather, Bcast, Reduce };

// "allreduce", "reduce-scatter", "allgather", "bcast", "reduce".
const char *coll_name(Coll coll);

struct CollShape {
    Coll coll = Coll::Allreduce;
    size_t elem = 1;  // bytes per element
    // Elements per rank, one entry per rank: ReduceScatter, each rank's result;
    // Allgather, each rank's block (all alike in MPI_Allgather). Bcast and Reduce: one
    // entry, the message.
    std::vector<size_t> counts;
    int root = 0;  // Bcast, Reduce
    bool in_place = false;
    bool operator<(const CollShape &o) const;
};

// One rank's schedule for a call of `shape` (not Allreduce: plan::build). Within a node
// every member is a peer; between nodes only plan::peers' ranks are.
Schedule build_collective(const topo::Topology &topo, int rank, const CollShape &shape, const PlanParams &params);

}  // namespace gpurdma::plan
