// Pure planning: (group shape, message, parameters) -> schedule. No I/O. The
// choice of algorithm (cost model) and the dispatch to its builder live here; each
// builder has a file of its own (plan/ring.h, plan/recursive_doubling.h,
// plan/hierarchical.h), included below so that this header still declares them all.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "plan/algorithms.h"
#include "plan/cost_model.h"
#include "plan/halving_doubling.h"  // append_halving_doubling
#include "plan/hierarchical.h"  // build_hierarchical
#include "plan/recursive_doubling.h"  // append_recursive_doubling
#include "plan/ring.h"  // append_ring
#include "plan/schedule.h"
#include "topo/topology.h"

namespace gpurdma::plan {

struct PlanParams {
    size_t chunk_size = 256 * 1024;  // largest message put into one landing slot
    size_t small_msg_max = 64 * 1024;  // latency path (direct node form, recursive doubling) up to this size
    size_t node_chunk = 256 * 1024;  // block of the one-node shared-memory allreduce
    Algorithm algorithm = Algorithm::Auto;
    CostModel model;  // auto's choice between nodes
    // The hierarchical schedule's stage between nodes (plan/rail_choice.h): bytes of a
    // slice per rail unit (0: the cost model's choice), the algorithm of a unit (Auto,
    // Ring, RecursiveDoubling or HalvingDoubling), and the sends an exchange keeps ahead
    // of its receives: the landing slots each rail peer has for this rank (never more).
    size_t rail_unit = 0;
    Algorithm rail_algorithm = Algorithm::Auto;
    int rail_window = 1;
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
// small_msg_max that fit a slot), the ring, halving-doubling (ranks on several nodes)
// and hierarchical (nodes of several ranks).
Algorithm choose_algorithm(const topo::Topology &topo, size_t bytes, const PlanParams &params);

// The schedule of `algorithm` (Ring, RecursiveDoubling or Hierarchical, as
// choose_algorithm gives; anything else builds the ring) for one call: size 1 gives
// a local copy, count 0 nothing to do, whatever the algorithm. RecursiveDoubling
// needs the message to fit a slot (choose_algorithm sees to it).
Schedule build(const topo::Topology &topo, int rank, size_t count, size_t elem_size, bool in_place, Algorithm algorithm,
               const PlanParams &params);

// The same with choose_algorithm's choice for the message (tests, the simulator).
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
