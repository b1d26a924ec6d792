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

// Bytes [off, off + bytes) of a buffer.
struct ByteRange {
    size_t off = 0;
    size_t bytes = 0;
};

// Across nodes, the stage within a node that build_collective's reduce-scatter and
// allgather run (the GPU path runs it over CUDA IPC instead): per member of `rank`'s
// node, in member order, the byte ranges of the concatenated vector (every rank's
// block in rank order) that the member carries on its rails.
std::vector<std::vector<ByteRange>> node_rail_ranges(const topo::Topology &topo, int rank, const CollShape &shape);

// Across nodes, bcast's and reduce's tree reaches `node` through one rank on the root's
// rail: the node's head, which the stage within the node starts from (bcast) or ends
// at (reduce).
int rail_head(const topo::Topology &topo, int node, int root);

// Across nodes, only the rail part of build_collective (not Allreduce): its steps with
// peers on other nodes, in the same order and pieces, so that the messages on the wire
// are the same whether a node's stage within it ran in shared memory or on its GPUs.
// The buffers hold what that node stage leaves:
//   ReduceScatter: Send, at their offsets in the vector, the node's partial of every
//                  block of node_rail_ranges for this rank; Stage is the accumulator;
//                  Recv gets this rank's part.
//   Allgather:     Recv holds this rank's block at its offset; it ends with every
//                  block of the rails this rank carries.
//   Bcast:         Recv (rail heads only: the others have no step).
//   Reduce:        Send, at a rail head, the node's partial; Recv gets the result at
//                  the root; Stage is the accumulator.
Schedule build_collective_rail(const topo::Topology &topo, int rank, const CollShape &shape, const PlanParams &params);

}  // namespace gpurdma::plan
