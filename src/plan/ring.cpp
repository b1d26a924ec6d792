#include "plan/ring.h"

#include <algorithm>

#include "plan/planner.h"
#include "plan/step_helpers.h"

namespace gpurdma::plan {

using namespace detail;

void append_ring(std::vector<Step> &steps, const Group &g, Buf own, size_t first, size_t count, size_t elem,
                 size_t chunk_size)
{
    const int n = g.size();
    if (n < 2 || count == 0) return;
    const int right = g.ranks[static_cast<size_t>((g.me + 1) % n)];
    const int left = g.ranks[static_cast<size_t>((g.me + n - 1) % n)];
    const size_t piece_elems = std::max<size_t>(1, chunk_size / elem);
    auto wrap = [n](int i) { return ((i % n) + n) % n; };

    // Reduce-scatter: at step t, send segment me-t, fold segment me-t-1 in; this
    // rank ends up owning the full reduction of segment me+1.
    for (int t = 0; t + 1 < n; ++t) {
        const Range out = segment(first, count, n, wrap(g.me - t));
        const Range in = segment(first, count, n, wrap(g.me - t - 1));
        const size_t n_out = pieces_of(out, piece_elems), n_in = pieces_of(in, piece_elems);
        for (size_t p = 0; p < std::max(n_out, n_in); ++p) {
            if (p < n_out) {
                const Range r = piece(out, piece_elems, p);
                // Step 0 sends this rank's own contribution; later steps partial sums.
                steps.push_back(
                    send(Phase::RingReduceScatter, right, t == 0 ? own : Buf::Recv, r.first * elem, r.count * elem));
            }
            if (p < n_in) {
                const Range r = piece(in, piece_elems, p);
                steps.push_back(recv_reduce(Phase::RingReduceScatter, left, true, own, r.first * elem, r.count * elem));
            }
        }
    }
    // Allgather: at step t, forward segment me+1-t, receive segment me-t.
    for (int t = 0; t + 1 < n; ++t) {
        const Range out = segment(first, count, n, wrap(g.me + 1 - t));
        const Range in = segment(first, count, n, wrap(g.me - t));
        const size_t n_out = pieces_of(out, piece_elems), n_in = pieces_of(in, piece_elems);
        for (size_t p = 0; p < std::max(n_out, n_in); ++p) {
            if (p < n_out) {
                const Range r = piece(out, piece_elems, p);
                steps.push_back(send(Phase::RingAllgather, right, Buf::Recv, r.first * elem, r.count * elem));
            }
            if (p < n_in) {
                const Range r = piece(in, piece_elems, p);
                steps.push_back(recv_copy(Phase::RingAllgather, left, r.first * elem, r.count * elem));
            }
        }
    }
}

}  // namespace gpurdma::plan
