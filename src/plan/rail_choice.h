// The stage between nodes of the hierarchical schedule, for both of its paths (host
// buffers, plan/hierarchical.h; GPU buffers, plan/rail.h): which algorithm allreduces a
// rail unit among the nodes, and how large a unit is. A unit is one slice of one block;
// it is independent of the landing slot (coll_gpurdma_chunk_size), which only bounds
// each message: a unit streams through the slots in pieces. Pure functions of agreed
// facts (the topology, the message, the parameters): every rank computes the same.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "plan/algorithms.h"
#include "plan/schedule.h"
#include "topo/topology.h"

namespace gpurdma::plan {

struct Group;  // plan/planner.h
struct PlanParams;

// The sends a rail exchange keeps ahead of its receives for writes of `write_bytes`
// among `nodes`: rail_window (the landing slots each peer has), but 2 for writes of 128
// KiB or more on 8 nodes or more. The fabric model's admission finding (docs/FABRIC.md):
// large writes from flows that meet on a spine link fill its queue past 2 each and draw
// DCQCN's cuts and PFC's pauses; small ones are latency-bound, where more in flight hides
// the credit's round trip.
int rail_window_for(const PlanParams &p, int nodes, size_t write_bytes);
constexpr size_t kLargeRailWrite = size_t{128} << 10;
constexpr int kCollidingNodes = 8;

// Whether `a` may be the rail's algorithm (coll_gpurdma_rail_algorithm): Auto, Ring,
// RecursiveDoubling or HalvingDoubling.
inline bool is_rail_algorithm(Algorithm a)
{
    return a == Algorithm::Auto || a == Algorithm::Ring || a == Algorithm::RecursiveDoubling ||
           a == Algorithm::HalvingDoubling;
}

// Estimated microseconds of the allreduce of `bytes` among `nodes` members by `a` (Ring,
// RecursiveDoubling, HalvingDoubling) over the cost model's network link: messages of at
// most chunk_size bytes, rail_window of them in flight to a peer, each credit a round
// trip behind its message. RecursiveDoubling sends the whole range per exchange.
double rail_us(const PlanParams &p, Algorithm a, int nodes, size_t bytes);

// The rail algorithm for a unit of `bytes` among `nodes` (params.rail_algorithm where it
// is forced): recursive doubling only where the unit fits one message and small_msg_max,
// else the cheaper of the ring and halving-doubling by rail_us.
Algorithm choose_rail_algorithm(const PlanParams &p, int nodes, size_t bytes);

// The elements of one slice per rail unit, for a message of `count` elements on this
// topology: params.rail_unit where set; one chunk below 8 nodes (at most 6 exchanges
// per unit: chunk-sized units, hot in the cache between the stages, measured fastest on
// 2 nodes); else the unit (1, 2, 4, ... chunks, or the whole slice) with the least
// estimated time of the pipeline over the units (node reduce-scatter, rail, node
// allgather; the cost model's links), the larger of two within 2%: small units overlap
// the node stages with the rail, each unit pays the rail's latency once, so the whole
// slice on many nodes.
size_t rail_unit_elems(const topo::Topology &t, size_t count, size_t elem_size, const PlanParams &p);

// Estimated microseconds of the whole rail stage of a message of `bytes` (its slice, in
// rail_unit_elems' units, one after another).
double rail_stage_us(const topo::Topology &t, size_t bytes, const PlanParams &p);

// For the set-up line: how the rail stage of a float message of 64 KiB, 1 MiB, 16 MiB and
// 256 MiB runs on this topology ("1 MiB: units of 128 KiB by halving-doubling, ...").
std::string describe_rail_plan(const topo::Topology &t, const PlanParams &p);

// The allreduce of [first, first + count) among g by choose_rail_algorithm, in place on
// Recv (`own`: where this member's contribution is).
void append_rail(std::vector<Step> &steps, const Group &g, Buf own, size_t first, size_t count, size_t elem_size,
                 const PlanParams &p);

}  // namespace gpurdma::plan
