// Small pieces the schedule builders share (planner, ring, recursive doubling,
// hierarchical): element ranges, the step constructors, and the hierarchical slice
// owners and rails (peers() needs them too). Internal to src/plan.
#pragma once

#include <algorithm>
#include <cstddef>

#include "plan/planner.h"
#include "plan/schedule.h"
#include "topo/topology.h"

namespace gpurdma::plan::detail {

// Element range [first, first + count).
struct Range {
    size_t first;
    size_t count;
};

// Segment i of `count` elements split into n nearly equal parts (the first count % n
// get one more), offset by `base`.
inline Range segment(size_t base, size_t count, int n, int i)
{
    const size_t b = count / static_cast<size_t>(n);
    const size_t extra = count % static_cast<size_t>(n);
    const size_t idx = static_cast<size_t>(i);
    return Range{base + idx * b + std::min(idx, extra), b + (idx < extra ? 1 : 0)};
}

inline size_t pieces_of(const Range &r, size_t piece_elems)
{
    return (r.count + piece_elems - 1) / piece_elems;
}

inline Range piece(const Range &r, size_t piece_elems, size_t p)
{
    const size_t first = r.first + p * piece_elems;
    return Range{first, std::min(piece_elems, r.first + r.count - first)};
}

inline Step send(Phase ph, int peer, Buf src, size_t off, size_t bytes)
{
    return Step{StepKind::Send, ph, false, peer, Buf::Recv, src, 0, off, bytes};
}

inline Step recv_reduce(Phase ph, int peer, bool landed_first, Buf local, size_t off, size_t bytes)
{
    return Step{StepKind::RecvReduce, ph, landed_first, peer, Buf::Recv, local, off, off, bytes};
}

inline Step recv_copy(Phase ph, int peer, size_t off, size_t bytes)
{
    return Step{StepKind::RecvCopy, ph, false, peer, Buf::Recv, Buf::Recv, off, 0, bytes};
}

inline Step local_copy(size_t off, size_t bytes)
{
    return Step{StepKind::Copy, Phase::Local, false, -1, Buf::Recv, Buf::Send, off, off, bytes};
}

inline Schedule empty_schedule(Algorithm algorithm, int size, int rank, size_t count, size_t elem_size)
{
    Schedule s;
    s.algorithm = algorithm;
    s.rank = rank;
    s.size = size;
    s.bytes = count * elem_size;
    s.elem_size = elem_size;
    return s;
}

// The rank of node `node` that owns slice s: slices go round-robin over the node's ranks.
inline int owner(const topo::Topology &t, int node, int s)
{
    const auto &m = t.members[static_cast<size_t>(node)];
    return m[static_cast<size_t>(s) % m.size()];
}

inline Group rail(const topo::Topology &t, int s, int my_node)
{
    Group g;
    for (int k = 0; k < t.nodes(); ++k) g.ranks.push_back(owner(t, k, s));
    g.me = my_node;
    return g;
}

}  // namespace gpurdma::plan::detail
