// Pure planning: (group shape, message, parameters) -> schedule. No I/O.
#pragma once

#include <cstddef>
#include <string>

#include "plan/schedule.h"

namespace gpurdma::plan {

enum class Algorithm { Auto, Ring, RecursiveDoubling };

// Parses "auto", "ring", "rd" / "recursive_doubling"; false for anything else.
bool parse_algorithm(const std::string &text, Algorithm *out);
const char *algorithm_name(Algorithm algorithm);

struct PlanParams {
    size_t chunk_size = 256 * 1024;    // largest message put into one landing slot
    size_t small_msg_max = 16 * 1024;  // auto: recursive doubling up to this size
    Algorithm algorithm = Algorithm::Auto;
};

// The algorithm `auto` resolves to for this message. Recursive doubling only fits a
// message into one landing slot, so it is never chosen for larger ones.
Algorithm choose_algorithm(size_t bytes, const PlanParams &params);

// Bandwidth-optimal: ring reduce-scatter then ring allgather, pipelined in pieces of
// at most chunk_size bytes (whole elements).
Schedule build_ring(int size, int rank, size_t count, size_t elem_size, size_t chunk_size);

// Latency-optimal for small messages: recursive doubling, with ranks beyond the
// largest power of two folding in before and out after. bytes <= chunk_size.
Schedule build_recursive_doubling(int size, int rank, size_t count, size_t elem_size);

// The schedule for one call (size 1 gives a local copy; count 0 gives nothing to do).
Schedule build(int size, int rank, size_t count, size_t elem_size, bool in_place,
               const PlanParams &params);

}  // namespace gpurdma::plan
