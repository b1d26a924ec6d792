// How many puts a rank may have in flight to one peer between nodes (the landing slots
// of its UCX channels; coll_gpurdma_rail_slots): what the receiver-driven admission on
// the rails allows. The automatic choice is the fabric model's (docs/FABRIC.md). What
// decides is the size of the rail's writes, about chunk_size / nodes (the hierarchical
// schedule allreduces each chunk-sized slice by a ring across the nodes). Small writes
// make the rail stage latency-bound, and the credit round trip is what counts, so the
// node's depth (coll_gpurdma_slots) stays. Large writes from flows that meet on a spine
// link fill its queue past 2 each, and draw DCQCN's rate cuts and PFC pauses. With few
// nodes there is little to collide: the model found 2 and 4 alike at 2 and 4 nodes, and
// over this machine's shared-memory UCX 4 were faster (docs/FABRIC.md), so the node's
// depth stays below 8 nodes.
#pragma once

#include <algorithm>
#include <cstddef>

namespace gpurdma::algo {

constexpr size_t kLargeRailWrite = size_t{128} << 10;  // from this size on: 2 in flight ...
constexpr int kCollidingNodes = 8;  // ... on this many nodes or more

// rail_slots: the parameter (0: automatic); slots, chunk_size: coll_gpurdma_slots and
// coll_gpurdma_chunk_size; nodes: the communicator's (agreed, so every rank gets the same).
inline int rail_slots_for(int rail_slots, int slots, size_t chunk_size, int nodes)
{
    if (rail_slots > 0) return rail_slots;
    const size_t write = chunk_size / static_cast<size_t>(std::max(nodes, 1));
    return nodes >= kCollidingNodes && write >= kLargeRailWrite ? std::min(2, slots) : slots;
}

}  // namespace gpurdma::algo
