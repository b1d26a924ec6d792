#include "plan/coll_rings.h"

#include <algorithm>

namespace gpurdma::plan::detail {

std::vector<ByteRange> cut_pieces(const Segment &segment, size_t piece_bytes)
{
    std::vector<ByteRange> out;
    for (const ByteRange &r : segment)
        for (size_t at = 0; at < r.bytes; at += piece_bytes)
            out.push_back(ByteRange{r.off + at, std::min(piece_bytes, r.bytes - at)});
    return out;
}

size_t piece_bytes_of(size_t chunk_size, size_t elem)
{
    return std::max<size_t>(1, chunk_size / elem) * elem;
}

namespace {

int wrap(int i, int n)
{
    return ((i % n) + n) % n;
}

Step make(StepKind kind, Phase phase, int peer, Buf dst, size_t dst_off, Buf src, size_t src_off, size_t bytes)
{
    return Step{kind, phase, kind == StepKind::RecvReduce, peer, dst, src, dst_off, src_off, bytes};
}

// One ring step: the pieces of `out` to the right interleaved with those of `in` from
// the left (send p, receive p), the order that keeps one slot per pair enough.
template <class SendFn, class RecvFn>
void interleave(const std::vector<ByteRange> &out, const std::vector<ByteRange> &in, SendFn send_piece,
                RecvFn recv_piece)
{
    for (size_t p = 0; p < std::max(out.size(), in.size()); ++p) {
        if (p < out.size()) send_piece(out[p]);
        if (p < in.size()) recv_piece(in[p]);
    }
}

}  // namespace

void append_ring_allgather(std::vector<Step> &steps, Phase phase, const Group &g, const std::vector<Segment> &segs,
                           size_t piece_bytes)
{
    const int n = g.size();
    if (n < 2) return;
    const int right = g.ranks[static_cast<size_t>(wrap(g.me + 1, n))];
    const int left = g.ranks[static_cast<size_t>(wrap(g.me - 1, n))];
    // Step t forwards segment me-t and receives segment me-t-1.
    for (int t = 0; t + 1 < n; ++t) {
        const auto out = cut_pieces(segs[static_cast<size_t>(wrap(g.me - t, n))], piece_bytes);
        const auto in = cut_pieces(segs[static_cast<size_t>(wrap(g.me - t - 1, n))], piece_bytes);
        interleave(
            out, in,
            [&](const ByteRange &r) {
                steps.push_back(make(StepKind::Send, phase, right, Buf::Recv, 0, Buf::Recv, r.off, r.bytes));
            },
            [&](const ByteRange &r) {
                steps.push_back(make(StepKind::RecvCopy, phase, left, Buf::Recv, r.off, Buf::Recv, 0, r.bytes));
            });
    }
}

void append_ring_reduce_scatter(std::vector<Step> &steps, Phase phase, const Group &g, const std::vector<Segment> &segs,
                                Buf own, size_t piece_bytes)
{
    const int n = g.size();
    if (n < 2) return;
    const int right = g.ranks[static_cast<size_t>(wrap(g.me + 1, n))];
    const int left = g.ranks[static_cast<size_t>(wrap(g.me - 1, n))];
    // Step t sends segment me-t-1 (step 0: this position's own contribution; later the
    // partial folded in at step t-1) and folds segment me-t-2 in: the last step folds
    // segment me, which is then complete.
    for (int t = 0; t + 1 < n; ++t) {
        const auto out = cut_pieces(segs[static_cast<size_t>(wrap(g.me - t - 1, n))], piece_bytes);
        const auto in = cut_pieces(segs[static_cast<size_t>(wrap(g.me - t - 2, n))], piece_bytes);
        const Buf from = t == 0 ? own : Buf::Stage;
        interleave(
            out, in,
            [&](const ByteRange &r) {
                steps.push_back(make(StepKind::Send, phase, right, Buf::Recv, 0, from, r.off, r.bytes));
            },
            [&](const ByteRange &r) {
                steps.push_back(make(StepKind::RecvReduce, phase, left, Buf::Stage, r.off, own, r.off, r.bytes));
            });
    }
}

}  // namespace gpurdma::plan::detail
