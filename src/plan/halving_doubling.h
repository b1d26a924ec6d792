// Rabenseifner's allreduce among a group: a reduce-scatter by recursive halving, then an
// allgather by recursive doubling. Each member sends and receives 2(p-1)/p of the data
// (the bandwidth bound) in 2 log2(p) exchanges, p the largest power of two <= n: the
// algorithm for large messages across many nodes, where a ring's 2(n-1) steps of
// latency dominate.
//
// The partners' distance grows 1, 2, 4, ... through the reduce-scatter and shrinks back
// through the allgather, so the exchanges that carry the most data (half, then a
// quarter, ...) are between the nearest members: in a rail group in node order under
// linear placement, members of one leaf switch; only the last, smallest ones cross
// the spines.
//
// A group that is not a power of two folds its n - p last members into the members p
// before them, as recursive doubling does (plan/recursive_doubling.h): each sends its data
// to that partner, which takes part for both and sends the result back at the end. The
// fold costs one whole message each way on those pairs; its partners are recursive
// doubling's, and the exchanges' are at distances 2^k: no channel beyond the ones the
// other schedules already have (plan::peers).
//
// Every exchange streams its range in pieces of at most `chunk` bytes, one landing slot
// each, with `window` sends ahead of the first receive (deadlock-free while window is at
// most the landing slots per peer: the caller passes the agreed coll_gpurdma_rail_slots).
// Each block is reduced by one member only: every member ends with the same bits.
#pragma once

#include <cstddef>
#include <vector>

#include "plan/schedule.h"

namespace gpurdma::plan {

struct Group;  // plan/planner.h

// Allreduce of [first, first + count) elements in place on Recv; `own` is where this
// member's contribution is (Send, or Recv in place).
void append_halving_doubling(std::vector<Step> &steps, const Group &g, Buf own, size_t first, size_t count,
                             size_t elem_size, size_t chunk, int window);

// The members (indices into the group) that member `index` of a group of n exchanges
// with: its fold partner and its halving partners (for the channels, plan::peers).
std::vector<int> halving_doubling_partners(int index, int n);

}  // namespace gpurdma::plan
