#include "plan/planner.h"

#include <algorithm>

#include "plan/neighbors.h"

namespace gpurdma::plan {

namespace {

Step local_copy(Buf dst, Buf src, size_t bytes)
{
    return Step{StepKind::Copy, Phase::Local, false, -1, dst, src, 0, 0, bytes};
}

// Element range [first, first + count) of segment i when count elements are split
// into n nearly equal segments (the first count % n get one more).
struct Range {
    size_t first;
    size_t count;
};

Range segment(size_t count, int n, int i)
{
    const size_t base = count / static_cast<size_t>(n);
    const size_t extra = count % static_cast<size_t>(n);
    const size_t idx = static_cast<size_t>(i);
    return Range{idx * base + std::min(idx, extra), base + (idx < extra ? 1 : 0)};
}

size_t pieces_of(const Range &r, size_t piece_elems)
{
    return (r.count + piece_elems - 1) / piece_elems;
}

Range piece(const Range &r, size_t piece_elems, size_t p)
{
    const size_t first = r.first + p * piece_elems;
    return Range{first, std::min(piece_elems, r.first + r.count - first)};
}

}  // namespace

bool parse_algorithm(const std::string &text, Algorithm *out)
{
    if (text == "auto" || text.empty()) *out = Algorithm::Auto;
    else if (text == "ring") *out = Algorithm::Ring;
    else if (text == "rd" || text == "recursive_doubling") *out = Algorithm::RecursiveDoubling;
    else return false;
    return true;
}

const char *algorithm_name(Algorithm algorithm)
{
    switch (algorithm) {
    case Algorithm::Auto: return "auto";
    case Algorithm::Ring: return "ring";
    case Algorithm::RecursiveDoubling: return "recursive-doubling";
    }
    return "unknown";
}

Algorithm choose_algorithm(size_t bytes, const PlanParams &params)
{
    const bool fits_slot = bytes <= params.chunk_size;
    switch (params.algorithm) {
    case Algorithm::Ring: return Algorithm::Ring;
    case Algorithm::RecursiveDoubling:
        return fits_slot ? Algorithm::RecursiveDoubling : Algorithm::Ring;
    case Algorithm::Auto: break;
    }
    return (fits_slot && bytes <= params.small_msg_max) ? Algorithm::RecursiveDoubling
                                                        : Algorithm::Ring;
}

Schedule build_ring(int size, int rank, size_t count, size_t elem_size, size_t chunk_size)
{
    Schedule s;
    s.algorithm = "ring";
    s.rank = rank;
    s.size = size;
    s.bytes = count * elem_size;
    s.elem_size = elem_size;
    const int right = (rank + 1) % size;
    const int left = (rank + size - 1) % size;
    const size_t piece_elems = std::max<size_t>(1, chunk_size / elem_size);
    auto wrap = [size](int i) { return ((i % size) + size) % size; };

    // Reduce-scatter: at step t, send segment rank-t, fold segment rank-t-1 in.
    // Afterwards this rank owns the full reduction of segment rank+1.
    for (int t = 0; t + 1 < size; ++t) {
        const Range out = segment(count, size, wrap(rank - t));
        const Range in = segment(count, size, wrap(rank - t - 1));
        const size_t n_out = pieces_of(out, piece_elems), n_in = pieces_of(in, piece_elems);
        for (size_t p = 0; p < std::max(n_out, n_in); ++p) {
            if (p < n_out) {
                const Range r = piece(out, piece_elems, p);
                // Step 0 sends this rank's own contribution; later steps the partial sums.
                s.steps.push_back(Step{StepKind::Send, Phase::RingReduceScatter, false, right,
                                       Buf::Recv, t == 0 ? Buf::Send : Buf::Recv, 0,
                                       r.first * elem_size, r.count * elem_size});
            }
            if (p < n_in) {
                const Range r = piece(in, piece_elems, p);
                s.steps.push_back(Step{StepKind::RecvReduce, Phase::RingReduceScatter, true, left,
                                       Buf::Recv, Buf::Send, r.first * elem_size,
                                       r.first * elem_size, r.count * elem_size});
            }
        }
    }
    // Allgather: at step t, forward segment rank+1-t, receive segment rank-t.
    for (int t = 0; t + 1 < size; ++t) {
        const Range out = segment(count, size, wrap(rank + 1 - t));
        const Range in = segment(count, size, wrap(rank - t));
        const size_t n_out = pieces_of(out, piece_elems), n_in = pieces_of(in, piece_elems);
        for (size_t p = 0; p < std::max(n_out, n_in); ++p) {
            if (p < n_out) {
                const Range r = piece(out, piece_elems, p);
                s.steps.push_back(Step{StepKind::Send, Phase::RingAllgather, false, right, Buf::Recv,
                                       Buf::Recv, 0, r.first * elem_size, r.count * elem_size});
            }
            if (p < n_in) {
                const Range r = piece(in, piece_elems, p);
                s.steps.push_back(Step{StepKind::RecvCopy, Phase::RingAllgather, false, left,
                                       Buf::Recv, Buf::Recv, r.first * elem_size, 0,
                                       r.count * elem_size});
            }
        }
    }
    return s;
}

Schedule build_recursive_doubling(int size, int rank, size_t count, size_t elem_size)
{
    Schedule s;
    s.algorithm = "recursive-doubling";
    s.rank = rank;
    s.size = size;
    s.bytes = count * elem_size;
    s.elem_size = elem_size;
    const size_t bytes = s.bytes;
    const int p2 = power_of_two_floor(size);
    auto send = [&](Phase ph, int peer) {
        s.steps.push_back(Step{StepKind::Send, ph, false, peer, Buf::Recv, Buf::Recv, 0, 0, bytes});
    };
    // All steps work on the receive buffer: the caller's plan copies the input there first.
    if (rank >= p2) {
        const int partner = rank - p2;
        send(Phase::RdFoldIn, partner);
        s.steps.push_back(Step{StepKind::RecvCopy, Phase::RdFoldOut, false, partner, Buf::Recv,
                               Buf::Recv, 0, 0, bytes});
        return s;
    }
    const int extra = rank + p2;
    if (extra < size) {
        // The extra rank is higher, so its contribution goes second.
        s.steps.push_back(Step{StepKind::RecvReduce, Phase::RdFoldIn, false, extra, Buf::Recv,
                               Buf::Recv, 0, 0, bytes});
    }
    for (int mask = 1; mask < p2; mask <<= 1) {
        const int partner = rank ^ mask;
        send(Phase::RdExchange, partner);
        // Lower rank's value first, on both sides, so both compute the same bits.
        s.steps.push_back(Step{StepKind::RecvReduce, Phase::RdExchange, partner < rank, partner,
                               Buf::Recv, Buf::Recv, 0, 0, bytes});
    }
    if (extra < size) send(Phase::RdFoldOut, extra);
    return s;
}

Schedule build(int size, int rank, size_t count, size_t elem_size, bool in_place,
               const PlanParams &params)
{
    const size_t bytes = count * elem_size;
    if (count == 0) {
        Schedule s;
        s.algorithm = "empty";
        s.rank = rank;
        s.size = size;
        s.elem_size = elem_size;
        return s;
    }
    if (size == 1) {
        Schedule s;
        s.algorithm = "copy";
        s.rank = rank;
        s.size = size;
        s.bytes = bytes;
        s.elem_size = elem_size;
        if (!in_place) s.steps.push_back(local_copy(Buf::Recv, Buf::Send, bytes));
        return s;
    }
    if (choose_algorithm(bytes, params) == Algorithm::RecursiveDoubling) {
        Schedule s = build_recursive_doubling(size, rank, count, elem_size);
        if (!in_place) s.steps.insert(s.steps.begin(), local_copy(Buf::Recv, Buf::Send, bytes));
        return s;
    }
    return build_ring(size, rank, count, elem_size, params.chunk_size);
}

}  // namespace gpurdma::plan
