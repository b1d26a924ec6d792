// The node collectives' mailbox form (node_collective.h): small messages in the posting
// ranks' mailbox lines, one block, one wait.
#include "algo/node_collective.h"

#include <algorithm>
#include <cstring>

namespace gpurdma::algo {

using plan::Coll;

bool NodeCollCall::writes_mail() const
{
    switch (coll_) {
        case Coll::Bcast: return me_ == root_;
        case Coll::Reduce: return me_ != root_ || !own_from_buffer_;
        default: return true;
    }
}

void NodeCollCall::post_mail(const char *src) const
{
    const int box = static_cast<int>(first_ % static_cast<uint64_t>(NodeArenaLayout::kMailSlots));
    for (int l = 0; l < mail_lines_; ++l) {
        const size_t off = static_cast<size_t>(l) * NodeArenaLayout::kMailLineBytes;
        std::memcpy(arena_.mail(me_, box, l), src + off, std::min(NodeArenaLayout::kMailLineBytes, mail_bytes_ - off));
        arena_.set_mail_seq(me_, box, l, first_ + 1);
    }
}

bool NodeCollCall::reads_mail() const
{
    switch (coll_) {
        case Coll::Bcast: return me_ != root_;
        case Coll::Reduce: return me_ == root_;
        // A reduce-scatter's rank with nothing to receive reads nobody's lines.
        case Coll::ReduceScatter: return counts_[static_cast<size_t>(me_)] > 0;
        default: return true;
    }
}

int NodeCollCall::mail_lagging() const
{
    const int box = static_cast<int>(first_ % static_cast<uint64_t>(NodeArenaLayout::kMailSlots));
    // Every line read before any is tested: their misses overlap.
    int lag = -1;
    if (!reads_mail()) return lag;
    for (int j = 0; j < ranks_; ++j) {
        if (j == me_ || (coll_ == Coll::Bcast && j != root_)) continue;
        bool all = true;
        for (int l = 0; l < mail_lines_; ++l) all &= arena_.mail_seq(j, box, l) == first_ + 1;
        if (!all && lag < 0) lag = j;
    }
    return lag;
}

void NodeCollCall::copy_mail(char *dst, int j, size_t from, size_t bytes) const
{
    const int box = static_cast<int>(first_ % static_cast<uint64_t>(NodeArenaLayout::kMailSlots));
    const size_t line = NodeArenaLayout::kMailLineBytes;
    for (size_t lo = from, end = from + bytes; lo < end;) {
        const size_t l = lo / line, hi = std::min(end, (l + 1) * line);
        std::memcpy(dst + (lo - from), arena_.mail(j, box, static_cast<int>(l)) + (lo - l * line), hi - lo);
        lo = hi;
    }
}

// The mailbox form's one block, once every rank I read from has posted it.
void NodeCollCall::work_mail()
{
    const int box = static_cast<int>(first_ % static_cast<uint64_t>(NodeArenaLayout::kMailSlots));
    const size_t line = NodeArenaLayout::kMailLineBytes;
    switch (coll_) {
        case Coll::Bcast:
            if (me_ != root_) copy_mail(recv_, root_, 0, mail_bytes_);
            break;
        case Coll::Allgather:
            for (int j = 0; j < ranks_; ++j)
                if (j != me_) copy_mail(recv_ + static_cast<size_t>(j) * mail_bytes_, j, 0, mail_bytes_);
            break;
        case Coll::Reduce:
            if (me_ != root_) break;
            for (int l = 0; l < mail_lines_; ++l) {
                const size_t off = static_cast<size_t>(l) * line;
                fold(recv_ + off, std::min(line, mail_bytes_ - off), [&](int j) -> const char * {
                    return j == me_ && own_from_buffer_ ? send_ + off : arena_.mail(j, box, l);
                });
            }
            break;
        case Coll::ReduceScatter: {
            // My piece out of every rank's input, a line at a time; in place my own input
            // is read from my lines (my result overwrites the front of my buffer).
            const size_t from = offsets_[static_cast<size_t>(me_)] * elem_;
            const size_t end = from + counts_[static_cast<size_t>(me_)] * elem_;
            for (size_t lo = from; lo < end;) {
                const size_t l = lo / line, hi = std::min(end, (l + 1) * line);
                fold(recv_ + (lo - from), hi - lo, [&](int j) -> const char * {
                    return j == me_ && !in_place_ ? send_ + lo
                                                  : arena_.mail(j, box, static_cast<int>(l)) + (lo - l * line);
                });
                lo = hi;
            }
            break;
        }
        case Coll::Allreduce: break;
    }
    mark(NodeCounter::Consumed, first_);
}

}  // namespace gpurdma::algo
