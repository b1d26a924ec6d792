// Ring allgather and ring reduce-scatter over a Group whose positions hold segments of
// any sizes: each segment a list of byte ranges (blocks of ranks anywhere in the
// buffer), cut into pieces of at most one slot that sender and receiver list alike.
// The collectives' builders (plan/collective_build.cpp) run them within a node and
// along rails. Internal to src/plan.
#pragma once

#include <cstddef>
#include <vector>

#include "plan/collective.h"
#include "plan/planner.h"
#include "plan/schedule.h"

namespace gpurdma::plan::detail {

using Segment = std::vector<ByteRange>;

// The segment's ranges cut into pieces of at most piece_bytes, in order (empty ranges
// give none).
std::vector<ByteRange> cut_pieces(const Segment &segment, size_t piece_bytes);

// Largest whole-element piece that fits a slot of chunk_size bytes (at least one element).
size_t piece_bytes_of(size_t chunk_size, size_t elem);

// Ring allgather in Recv: position i starts with segs[i] (at its natural offsets) and
// every position ends with all of them. Steps alternate send and receive per piece, so
// one landing slot per pair suffices.
void append_ring_allgather(std::vector<Step> &steps, Phase phase, const Group &g, const std::vector<Segment> &segs,
                           size_t piece_bytes);

// Ring reduce-scatter accumulating in Stage (natural offsets): every position's
// contribution to each segment is in `own` (Send: the input; Stage: an earlier stage's
// result); position i ends with the full reduction of segs[i] in Stage. The partial
// from the left comes first in every fold (one fixed order per shape).
void append_ring_reduce_scatter(std::vector<Step> &steps, Phase phase, const Group &g, const std::vector<Segment> &segs,
                                Buf own, size_t piece_bytes);

}  // namespace gpurdma::plan::detail
