// Pure planning: (group shape, message, parameters) -> schedule. No I/O.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "plan/algorithms.h"
#include "plan/cost_model.h"
#include "plan/schedule.h"
#include "topo/topology.h"

namespace gpurdma::plan {

struct PlanParams {
    size_t chunk_size = 256 * 1024;  // largest message put into one landing slot
    size_t small_msg_max = 64 * 1024;  // latency path (direct node form, recursive doubling) up to this size
    size_t node_chunk = 256 * 1024;  // block of the one-node shared-memory allreduce
    Algorithm algorithm = Algorithm::Auto;
    CostModel model;  // auto's choice between nodes
};

// An ordered set of ranks working together and this rank's index in it.
struct Group {
    std::vector<int> ranks;
    int me = 0;
    int size() const { return static_cast<int>(ranks.size()); }
};

// Whether every call on this topology takes the one-node shared-memory allreduce
// (algo/node_allreduce.h) instead of a schedule: all ranks on one node, and the
// algorithm is auto or node.
bool uses_node_allreduce(const topo::Topology &topo, const PlanParams &params);

// The schedule algorithm for a message of `bytes` on this topology (never Node). Auto
// takes the cheapest by the cost model among recursive doubling (messages up to
// small_msg_max that fit a slot), the ring, and hierarchical (nodes of several ranks).
Algorithm choose_algorithm(const topo::Topology &topo, size_t bytes, const PlanParams &params);

// Ring reduce-scatter + allgather of Recv[first, first + count) among the group,
// pipelined in pieces of at most chunk_size bytes. The rank's own contribution is
// read from `own` (Send or Recv), results land in Recv.
void append_ring(std::vector<Step> &steps, const Group &g, Buf own, size_t first, size_t count, size_t elem_size,
                 size_t chunk_size);

// Recursive doubling on Recv[first, first + count) in place (own data already in
// Recv); ranks beyond the largest power of two fold in before and out after.
void append_recursive_doubling(std::vector<Step> &steps, const Group &g, size_t first, size_t count, size_t elem_size);

// Topology-aware: node reduce-scatter of S = max ranks-per-node slices to their
// owners, allreduce of each slice among its owners on all nodes (one rail per
// slice), node allgather; pipelined over blocks of S x chunk so that the stages of
// consecutive blocks overlap. Handles nodes of different sizes.
Schedule build_hierarchical(const topo::Topology &topo, int rank, size_t count, size_t elem_size,
                            const PlanParams &params);

// The schedule for one call: size 1 gives a local copy, count 0 nothing to do.
Schedule build(const topo::Topology &topo, int rank, size_t count, size_t elem_size, bool in_place,
               const PlanParams &params);

// Flat-only convenience (one node): the whole group as one ring / RD.
Schedule build(int size, int rank, size_t count, size_t elem_size, bool in_place, const PlanParams &params);

// A topology of one node holding `size` ranks (tests, one-host runs).
topo::Topology single_node(int size);

// For each rank, the ranks any schedule on this topology may exchange messages with
// (sorted, symmetric).
std::vector<int> peers(const topo::Topology &topo, int rank);

}  // namespace gpurdma::plan
