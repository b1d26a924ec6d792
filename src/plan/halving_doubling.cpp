#include "plan/halving_doubling.h"

#include <algorithm>
#include <cstdint>

#include "plan/neighbors.h"
#include "plan/planner.h"
#include "plan/step_helpers.h"

namespace gpurdma::plan {

using namespace detail;

namespace {

// The fold of a group of n into p = the largest power of two <= n: the members from p on
// fold into the member p before them (recursive doubling's pairs: no new channel).
struct Fold {
    int n, p;
    explicit Fold(int size) : n(size), p(power_of_two_floor(size)) {}
    bool folded_away(int m) const { return m >= p; }
    // A folding member's partner: the member p before it (or after, for the one that stays).
    int fold_partner(int m) const { return m >= p ? m - p : m + p; }
    bool folds(int m) const { return m >= p || m + p < n; }
};

// One exchange with a partner: ranges to send and to receive, each split into pieces of
// a landing slot, in the order they go. Its first `early` pieces may be posted before the
// previous exchange ends, once that one has posted all its sends and taken in `ready`
// receives (what those pieces' data depends on).
struct Exchange {
    int peer;
    Phase phase;
    std::vector<Range> out, in;
    Buf from, local;
    bool reduce, landed_first;
    size_t ready = SIZE_MAX, early = 0;
};

// Pieces of `ranges`, in order.
std::vector<Range> pieces(const std::vector<Range> &ranges, size_t piece_elems)
{
    std::vector<Range> out;
    for (const Range &r : ranges)
        for (size_t q = 0; r.count && q < pieces_of(r, piece_elems); ++q) out.push_back(piece(r, piece_elems, q));
    return out;
}

// The exchanges one after another, each keeping at most `window` sends ahead of its
// receives. Across a boundary, once an exchange has posted all its sends and taken in
// what the next one's data depends on, the next one posts up to `window` pieces before
// this one's last receives: the link stays busy instead of draining and refilling at
// every exchange. Deadlock-free: no member has more than `window` (at most the landing
// slots) unreceived messages toward any one partner outstanding that the partner has
// not yet reached in its own order.
void emit(std::vector<Step> &steps, const std::vector<Exchange> &xs, size_t elem, size_t window)
{
    size_t posted_next = 0;  // sends of xs[i + 1] already posted
    for (size_t i = 0; i < xs.size(); ++i) {
        const Exchange &x = xs[i];
        const Exchange *next = i + 1 < xs.size() ? &xs[i + 1] : nullptr;
        size_t s = posted_next, r = 0;
        posted_next = 0;
        auto send_of = [&](const Exchange &e, size_t k) {
            const Range &p = e.out[k];
            steps.push_back(send(e.phase, e.peer, e.from, p.first * elem, p.count * elem));
        };
        auto presend = [&] {
            if (!next || s < x.out.size() || r < next->ready) return;
            while (posted_next < std::min(window, next->early)) send_of(*next, posted_next++);
        };
        presend();
        while (s < x.out.size() || r < x.in.size()) {
            if (s < x.out.size() && (s < r + window || r >= x.in.size())) {
                send_of(x, s++);
            } else {
                const Range &p = x.in[r++];
                steps.push_back(
                    x.reduce ? recv_reduce(x.phase, x.peer, x.landed_first, x.local, p.first * elem, p.count * elem)
                             : recv_copy(x.phase, x.peer, p.first * elem, p.count * elem));
            }
            presend();
        }
    }
}

}  // namespace

std::vector<int> halving_doubling_partners(int index, int n)
{
    std::vector<int> out;
    if (n < 2) return out;
    const Fold f(n);
    if (f.folds(index)) out.push_back(f.fold_partner(index));
    for (int d = 1; !f.folded_away(index) && d < f.p; d <<= 1) out.push_back(index ^ d);
    return out;
}

void append_halving_doubling(std::vector<Step> &steps, const Group &g, Buf own, size_t first, size_t count, size_t elem,
                             size_t chunk, int window)
{
    const int n = g.size();
    if (n < 2 || count == 0) return;
    const Fold f(n);
    const size_t piece_elems = std::max<size_t>(1, chunk / elem);
    const size_t w = static_cast<size_t>(std::max(1, window));
    const std::vector<Range> all = pieces({Range{first, count}}, piece_elems);
    auto member = [&g](int m) { return g.ranks[static_cast<size_t>(m)]; };
    std::vector<Exchange> xs;
    if (f.folded_away(g.me)) {
        // The whole contribution to the even neighbour, the result back from it.
        const int even = member(f.fold_partner(g.me));
        xs.push_back(Exchange{even, Phase::RdFoldIn, all, {}, own, Buf::Recv, false, false});
        xs.push_back(Exchange{even, Phase::RdFoldOut, {}, all, Buf::Recv, Buf::Recv, false, false});
        emit(steps, xs, elem, w);
        return;
    }
    Buf local = own;  // where this member's partial sums are: its contribution until the first reduction
    if (f.folds(g.me)) {
        // The folding member's data is later in the group: this member's value first.
        xs.push_back(Exchange{member(f.fold_partner(g.me)), Phase::RdFoldIn, {}, all, own, own, true, false});
        local = Buf::Recv;
    }
    const int c = g.me;  // its index among the p that exchange (the first p)
    auto blocks = [&](int lo, int hi) {  // blocks [lo, hi) of p, as one element range
        const Range a = segment(first, count, f.p, lo), b = segment(first, count, f.p, hi - 1);
        return Range{a.first, b.first + b.count - a.first};
    };
    // Blocks [lo, hi) as the level of `bit` works on them: whole where there is no such
    // level, else in two halves, the one that level works on first: in the reduce-scatter
    // the half it gives away, in the allgather the half held before (ready at once). That
    // is the lower half where bit `bit` of the member's index is 1 on the reduce-scatter's
    // way down and 0 on the allgather's way back; partners at distance d < bit agree on
    // that bit, so sender and receiver split and order every range alike.
    auto halves = [&](int lo, int hi, int bit, bool gather) {
        if (bit >= f.p) return std::vector<Range>{blocks(lo, hi)};
        const int mid = (lo + hi) / 2;
        const bool lower_first = ((c & bit) != 0) != gather;
        return lower_first ? std::vector<Range>{blocks(lo, mid), blocks(mid, hi)}
                           : std::vector<Range>{blocks(mid, hi), blocks(lo, mid)};
    };
    // Reduce-scatter: at distance d = 1, 2, 4, ... keep the half that bit d of this
    // member's index selects, send the other half to the partner, which keeps it. Each
    // half goes in the order the next exchange needs it (the part given next first), so
    // the next exchange can begin before this one's last pieces are in.
    int lo = 0, hi = f.p;
    size_t ready = SIZE_MAX;  // the first exchange: none early (after the whole fold-in, if any)
    for (int d = 1; d < f.p; d <<= 1) {
        const int partner = c ^ d, mid = (lo + hi) / 2;
        const bool keep_low = (c & d) == 0;
        const int keep_lo = keep_low ? lo : mid, keep_hi = keep_low ? mid : hi;
        const int give_lo = keep_low ? mid : lo, give_hi = keep_low ? hi : mid;
        const bool last = d * 2 >= f.p;
        const std::vector<Range> keep = halves(keep_lo, keep_hi, d * 2, false);
        const std::vector<Range> give = halves(give_lo, give_hi, d * 2, false);
        // The lower-indexed member's value first, on both sides of every pair.
        Exchange x{member(partner),
                   Phase::HalvingReduceScatter,
                   pieces(give, piece_elems),
                   pieces(keep, piece_elems),
                   local,
                   local,
                   true,
                   partner < c};
        x.ready = ready;
        x.early = x.out.size();  // all of it came in first in the exchange before
        xs.push_back(std::move(x));
        ready = last ? SIZE_MAX : pieces({keep[0]}, piece_elems).size();
        lo = keep_lo, hi = keep_hi;
        local = Buf::Recv;
    }
    // Allgather: the same pairs in reverse, each sending all it holds, split as it grew
    // (what it held before the last exchange first, ready at once, then what that
    // exchange brought: the next exchange may begin as soon as this one's sends are out).
    for (int d = f.p / 2; d >= 1; d >>= 1) {
        const int partner = c ^ d, size = hi - lo;
        const bool held_low = (c & d) == 0;
        const int their_lo = held_low ? hi : lo - size, their_hi = their_lo + size;
        const bool first_gather = d * 2 >= f.p;
        const std::vector<Range> out = halves(lo, hi, d * 2, true), in = halves(their_lo, their_hi, d * 2, true);
        Exchange x{member(partner),
                   Phase::DoublingAllgather,
                   pieces(out, piece_elems),
                   pieces(in, piece_elems),
                   Buf::Recv,
                   Buf::Recv,
                   false,
                   false};
        if (!first_gather) {  // what it held before the exchange before: nothing to wait for
            x.ready = 0;
            x.early = pieces({out[0]}, piece_elems).size();
        }
        xs.push_back(std::move(x));
        lo = std::min(lo, their_lo), hi = std::max(hi, their_hi);
    }
    if (f.folds(g.me))
        xs.push_back(
            Exchange{member(f.fold_partner(g.me)), Phase::RdFoldOut, all, {}, Buf::Recv, Buf::Recv, false, false});
    emit(steps, xs, elem, w);
}

}  // namespace gpurdma::plan
