// Recursive doubling: log2(n) whole-message exchanges, the latency path for small
// messages; the flat schedule and the hierarchical schedule's inter-node stage for
// small slices.
#pragma once

#include <cstddef>
#include <vector>

#include "plan/schedule.h"

namespace gpurdma::plan {

struct Group;  // plan/planner.h

// Recursive doubling on Recv[first, first + count) in place (own data already in
// Recv); ranks beyond the largest power of two fold in before and out after.
void append_recursive_doubling(std::vector<Step> &steps, const Group &g, size_t first, size_t count, size_t elem_size);

}  // namespace gpurdma::plan
