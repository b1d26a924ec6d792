#include "algo/node_collective.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "algo/node_allreduce.h"
#include "base/text.h"
#include "reduce/reduce.h"

namespace gpurdma::algo {

using exec::State;
using plan::Coll;

namespace {

// Reductions run over sub-blocks that stay in L1 between their passes (as NodeCall's).
constexpr size_t kSubBlock = 16 * 1024;
// Smallest block a bcast or reduce is cut into for pipelining.
constexpr size_t kMinPipelineBlock = 64 * 1024;

}  // namespace

size_t NodeCollCall::piece_elems(size_t block_elems, size_t elem_size, int ranks)
{
    const size_t unit = (elem_size <= 64 && 64 % elem_size == 0) ? 64 / elem_size : 1;
    size_t q = block_elems / static_cast<size_t>(ranks);
    if (q >= unit) q -= q % unit;
    return std::max<size_t>(1, q);
}

NodeCollCall::NodeCollCall(const NodeArena &arena, int me, uint64_t first_block, const Call &call, size_t direct_max,
                           uint64_t *consumed_seen, std::vector<size_t> &counts, std::vector<size_t> &offsets)
    : arena_(arena),
      me_(me),
      ranks_(arena.layout().ranks),
      first_(first_block),
      coll_(call.coll),
      op_(call.op),
      dtype_(call.dtype),
      elem_(reduce::dtype_size(call.dtype)),
      root_(call.root),
      send_(static_cast<const char *>(call.sendbuf ? call.sendbuf : call.recvbuf)),
      recv_(static_cast<char *>(call.recvbuf)),
      in_place_(call.in_place()),
      count_(call.count),
      counts_(counts),
      offsets_(offsets),
      per_block_(std::max<size_t>(1, arena.layout().block / std::max<size_t>(1, elem_))),
      direct_(coll_ == Coll::Reduce && count_ * elem_ <= direct_max),
      // In place, the root's operand is its receive buffer: the fold writes it before it
      // reads it unless it is source 0 or 1 (dst may be exactly a or b).
      own_from_buffer_(!in_place_ || root_ < 2),
      consumed_seen_(consumed_seen)
{
    size_t most = count_;  // elements of the largest part cut into blocks
    if (coll_ == Coll::ReduceScatter) {
        if (call.counts.empty()) counts_.assign(static_cast<size_t>(ranks_), call.count);
        else counts_.assign(call.counts.begin(), call.counts.end());
        offsets_.assign(counts_.size(), 0);
        for (size_t i = 1; i < counts_.size(); ++i) offsets_[i] = offsets_[i - 1] + counts_[i - 1];
        per_block_ = piece_elems(per_block_, elem_, ranks_);
        most = *std::max_element(counts_.begin(), counts_.end());
    }
    if (coll_ == Coll::Bcast || coll_ == Coll::Allgather || (coll_ == Coll::Reduce && !direct_)) {
        // One rank's copies (or folds) feed the others': blocks of a quarter of the message
        // let the readers start while the writer goes on. At least 64 KiB: at np=2 a
        // 64 KiB bcast in 16 KiB blocks took 7.2 us against 5.3 in one block (256 KiB in
        // 64 KiB blocks: 16 against 20).
        const size_t quarter = (count_ * elem_ / 4 + 63) / 64 * 64;
        const size_t bytes = std::min(arena.layout().block, std::max<size_t>(kMinPipelineBlock, quarter));
        per_block_ = std::max<size_t>(1, bytes / std::max<size_t>(1, elem_));
    }
    blocks_ = (most + per_block_ - 1) / per_block_;
    // The mailbox form: a small message (within the latency path's reach) in one block.
    size_t total = count_;
    if (coll_ == Coll::ReduceScatter) total = offsets_.back() + counts_.back();
    const size_t mailed = total * elem_;
    const size_t line = NodeArenaLayout::kMailLineBytes;
    const int lines = static_cast<int>((mailed + line - 1) / line);
    const bool reduces = coll_ == Coll::Reduce || coll_ == Coll::ReduceScatter;
    // A reduction folds line by line: its elements must not straddle one.
    // (For a reduce, mailed <= direct_max is its direct form: the root folds.)
    mail_ = mailed > 0 && mailed <= NodeArenaLayout::kMailBytes && mailed <= direct_max &&
            (!reduces || lines == 1 || line % elem_ == 0);
    if (mail_) {
        mail_bytes_ = mailed;
        mail_lines_ = lines;
        blocks_ = 1;
    }
}

int NodeCollCall::slot_of(uint64_t b) const
{
    return static_cast<int>((first_ + b) % static_cast<uint64_t>(arena_.layout().slots));
}

size_t NodeCollCall::chunk_elems(uint64_t b) const
{
    return std::min(per_block_, count_ - static_cast<size_t>(b) * per_block_);
}

size_t NodeCollCall::rs_piece(int rank, uint64_t b) const
{
    const size_t c = counts_[static_cast<size_t>(rank)], first = static_cast<size_t>(b) * per_block_;
    return c > first ? std::min(per_block_, c - first) : 0;
}

int NodeCollCall::lagging(NodeCounter c, uint64_t need) const
{
    for (int j = 0; j < ranks_; ++j)
        if (arena_.load(j, c) < need) return j;
    return -1;
}

int NodeCollCall::lagging_consumed(uint64_t need) const
{
    if (!consumed_seen_) return lagging(NodeCounter::Consumed, need);
    for (int j = 0; j < ranks_; ++j) {
        if (consumed_seen_[j] >= need) continue;
        consumed_seen_[j] = arena_.load(j, NodeCounter::Consumed);
        if (consumed_seen_[j] < need) return j;
    }
    return -1;
}

void NodeCollCall::mark(NodeCounter last, uint64_t g) const
{
    for (int c = static_cast<int>(NodeCounter::Posted); c <= static_cast<int>(last); ++c)
        if (arena_.load(me_, static_cast<NodeCounter>(c)) < g + 1)
            arena_.store(me_, static_cast<NodeCounter>(c), g + 1);
}

bool NodeCollCall::writes_slot() const
{
    return coll_ != Coll::Bcast || me_ == root_;
}

// My data for block b into my input slot `in`.
void NodeCollCall::post(uint64_t b, char *in)
{
    const size_t first = static_cast<size_t>(b) * per_block_;
    switch (coll_) {
        case Coll::Allgather: {
            const size_t n = chunk_elems(b);
            char *mine = recv_ + (static_cast<size_t>(me_) * count_ + first) * elem_;
            const char *src = in_place_ ? mine : send_ + first * elem_;
            std::memcpy(in, src, n * elem_);
            break;
        }
        case Coll::Bcast: std::memcpy(in, recv_ + first * elem_, chunk_elems(b) * elem_); break;
        case Coll::ReduceScatter:
            // Piece i at i * per_block_. My own piece too in place: my result overwrites my input.
            for (int i = 0; i < ranks_; ++i) {
                const size_t n = rs_piece(i, b);
                if (n == 0 || (i == me_ && !in_place_)) continue;
                std::memcpy(in + static_cast<size_t>(i) * per_block_ * elem_,
                            send_ + (offsets_[static_cast<size_t>(i)] + first) * elem_, n * elem_);
            }
            break;
        case Coll::Reduce: {
            if (direct_) {
                // The whole block, for the root to reduce (its own only where it cannot
                // read it from its buffer).
                if (me_ != root_ || !own_from_buffer_) std::memcpy(in, send_ + first * elem_, chunk_elems(b) * elem_);
                break;
            }
            // Only the others' slices: my own is read from my buffer when I reduce it.
            const size_t elems = chunk_elems(b);
            for (int i = 0; i < ranks_; ++i) {
                if (i == me_) continue;
                size_t f = 0, n = 0;
                NodeCall::slice(elems, elem_, ranks_, i, &f, &n);
                if (n) std::memcpy(in + f * elem_, send_ + (first + f) * elem_, n * elem_);
            }
            break;
        }
        case Coll::Allreduce: break;
    }
}

bool NodeCollCall::try_post()
{
    const uint64_t b = posted_;
    if (b >= blocks_) return false;
    const uint64_t g = first_ + b;
    if (mail_) {
        if (writes_mail()) {
            // My mailbox last held block g - kMailSlots: every rank must be done with it.
            const auto boxes = static_cast<uint64_t>(NodeArenaLayout::kMailSlots);
            if (g + 1 > boxes && lagging_consumed(g + 1 - boxes) >= 0) return false;
            const char *src = send_;
            if (coll_ == Coll::Bcast) src = recv_;
            if (coll_ == Coll::Allgather && in_place_) src = recv_ + static_cast<size_t>(me_) * mail_bytes_;
            post_mail(src);
        }
        // A rank that reads nobody's lines (bcast's root, reduce's others, a reduce-scatter's
        // rank that receives nothing) is done with the block.
        mark(reads_mail() ? NodeCounter::Posted : NodeCounter::Consumed, g);
        if (coll_ == Coll::Allgather && !in_place_)
            std::memcpy(recv_ + static_cast<size_t>(me_) * mail_bytes_, send_, mail_bytes_);
        ++posted_;
        return true;
    }
    if (writes_slot()) {
        // The slot last held block g - slots: every rank must be done with it.
        const uint64_t slots = static_cast<uint64_t>(arena_.layout().slots);
        if (g + 1 > slots && lagging_consumed(g + 1 - slots) >= 0) return false;
        post(b, arena_.input(me_, slot_of(b)));
        // Bcast's root and direct Reduce's others read nothing of the block's slots: done with it.
        mark(coll_ == Coll::Bcast || (direct_ && me_ != root_) ? NodeCounter::Consumed : NodeCounter::Posted, g);
        if (coll_ == Coll::Allgather && !in_place_) {
            // My own chunk needs nobody: straight to its place, once the others can read the slot.
            const size_t first = static_cast<size_t>(b) * per_block_;
            std::memcpy(recv_ + (static_cast<size_t>(me_) * count_ + first) * elem_, send_ + first * elem_,
                        chunk_elems(b) * elem_);
        }
    }
    ++posted_;
    return true;
}

// Block b, once everyone it reads from has posted it.
void NodeCollCall::work(uint64_t b, int slot)
{
    const uint64_t g = first_ + b;
    const size_t first = static_cast<size_t>(b) * per_block_;
    switch (coll_) {
        case Coll::Allgather: {
            const size_t n = chunk_elems(b);
            for (int j = 0; j < ranks_; ++j)
                if (j != me_)
                    std::memcpy(recv_ + (static_cast<size_t>(j) * count_ + first) * elem_, arena_.input(j, slot),
                                n * elem_);
            mark(NodeCounter::Consumed, g);
            break;
        }
        case Coll::Bcast:
            if (me_ != root_) {
                std::memcpy(recv_ + first * elem_, arena_.input(root_, slot), chunk_elems(b) * elem_);
                mark(NodeCounter::Consumed, g);
            }
            break;
        case Coll::ReduceScatter: {
            const size_t n = rs_piece(me_, b);
            const size_t piece_off = static_cast<size_t>(me_) * per_block_ * elem_;
            const char *own = send_ + (offsets_[static_cast<size_t>(me_)] + first) * elem_;
            const size_t step = kSubBlock - kSubBlock % elem_;
            for (size_t off = 0, end = n * elem_; off < end; off += step)
                fold(recv_ + first * elem_ + off, std::min(step, end - off), [&](int j) -> const char * {
                    return (j == me_ && !in_place_ ? own : arena_.input(j, slot) + piece_off) + off;
                });
            mark(NodeCounter::Consumed, g);
            break;
        }
        case Coll::Reduce: {
            if (direct_) {
                if (me_ == root_) reduce_whole(b, slot);
                break;
            }
            size_t f = 0, n = 0;
            NodeCall::slice(chunk_elems(b), elem_, ranks_, me_, &f, &n);
            const size_t block_off = first * elem_;
            const size_t step = kSubBlock - kSubBlock % elem_;
            char *out = arena_.output(slot);
            for (size_t off = f * elem_, end = (f + n) * elem_; off < end; off += step) {
                const size_t bytes = std::min(step, end - off);
                // Into the shared output first: the root's own operand may be its receive buffer.
                fold(out + off, bytes, [&](int j) -> const char * {
                    return (j == me_ ? send_ + block_off : arena_.input(j, slot)) + off;
                });
                if (me_ == root_) std::memcpy(recv_ + block_off + off, out + off, bytes);
            }
            // The root reads the output slot until it has copied the others' slices.
            mark(me_ == root_ ? NodeCounter::Reduced : NodeCounter::Consumed, g);
            break;
        }
        case Coll::Allreduce: break;
    }
}

// Direct Reduce, at the root: block b folded whole from every rank's input into my buffer.
void NodeCollCall::reduce_whole(uint64_t b, int slot)
{
    const size_t block_off = static_cast<size_t>(b) * per_block_ * elem_;
    const size_t step = kSubBlock - kSubBlock % elem_;
    for (size_t off = 0, end = chunk_elems(b) * elem_; off < end; off += step)
        fold(recv_ + block_off + off, std::min(step, end - off), [&](int j) -> const char * {
            return (j == me_ && own_from_buffer_ ? send_ + block_off : arena_.input(j, slot)) + off;
        });
    mark(NodeCounter::Consumed, first_ + b);
}

bool NodeCollCall::try_work()
{
    const uint64_t b = worked_;
    if (b >= posted_) return false;
    const uint64_t g = first_ + b;
    if (mail_) {
        if (mail_lagging() >= 0) return false;
        work_mail();
        ++worked_;
        return true;
    }
    if (coll_ == Coll::Bcast) {
        if (me_ != root_ && arena_.load(root_, NodeCounter::Posted) < g + 1) return false;
    } else if (direct_ && me_ != root_) {
        // Nothing to wait for: the root reads what I posted.
    } else if (coll_ == Coll::ReduceScatter && rs_piece(me_, b) == 0) {
        // Nothing of block b is mine to fold (a short or empty result): nothing to wait for.
    } else if (lagging(NodeCounter::Posted, g + 1) >= 0) {
        return false;
    }
    work(b, slot_of(b));
    ++worked_;
    return true;
}

bool NodeCollCall::try_finish()
{
    const uint64_t b = finished_;
    if (b >= worked_) return false;
    if (coll_ == Coll::Reduce && me_ == root_ && !direct_) {
        const uint64_t g = first_ + b;
        if (lagging(NodeCounter::Reduced, g + 1) >= 0) return false;
        const size_t elems = chunk_elems(b), block_off = static_cast<size_t>(b) * per_block_ * elem_;
        const char *out = arena_.output(slot_of(b));
        for (int i = 0; i < ranks_; ++i) {
            if (i == me_) continue;
            size_t f = 0, n = 0;
            NodeCall::slice(elems, elem_, ranks_, i, &f, &n);
            if (n) std::memcpy(recv_ + block_off + f * elem_, out + f * elem_, n * elem_);
        }
        arena_.store(me_, NodeCounter::Consumed, g + 1);
    }
    ++finished_;
    return true;
}

State NodeCollCall::advance()
{
    for (;;) {
        // Oldest work first: finishing a block frees its slot for the next post.
        bool moved = try_post();
        moved = try_finish() || moved;
        moved = try_work() || moved;
        if (finished_ == blocks_) return State::Done;
        if (!moved) return State::Running;
    }
}

std::string NodeCollCall::waiting_for(int *peer) const
{
    *peer = -1;
    if (finished_ < worked_) {
        const uint64_t g = first_ + finished_;
        *peer = lagging(NodeCounter::Reduced, g + 1);
        return "to reduce its slice of block " + std::to_string(g);
    }
    if (worked_ < posted_) {
        const uint64_t g = first_ + worked_;
        if (mail_) *peer = mail_lagging();
        else if (coll_ != Coll::Bcast) *peer = lagging(NodeCounter::Posted, g + 1);
        else if (arena_.load(root_, NodeCounter::Posted) < g + 1) *peer = root_;
        return "to post its data for block " + std::to_string(g);
    }
    const uint64_t slots = static_cast<uint64_t>(mail_ ? NodeArenaLayout::kMailSlots : arena_.layout().slots);
    const uint64_t g = first_ + posted_;
    if (g + 1 > slots) *peer = lagging(NodeCounter::Consumed, g + 1 - slots);
    return std::string("to release the ") + (mail_ ? "mailbox" : "slot") + " of block " +
           std::to_string(g - std::min(g, slots));
}

NodeCollective::NodeCollective(NodeArena arena, NodeSequence &sequence, std::vector<int> members, int index,
                               std::vector<std::string> hosts, size_t direct_max)
    : arena_(arena),
      seq_(&sequence),
      members_(std::move(members)),
      index_(index),
      hosts_(std::move(hosts)),
      direct_max_(direct_max)
{}

Status NodeCollective::start(const Call &call)
{
    if (call.coll == Coll::Allreduce) return Status::unsupported("allreduce takes the node allreduce");
    const std::string what = std::string("node ") + plan::coll_name(call.coll);
    if (reduce::dtype_size(call.dtype) == 0) return Status::error(GPURDMA_ERR_INVALID, what + ": unknown datatype");
    const int ranks = static_cast<int>(members_.size());
    if ((call.coll == Coll::Bcast || call.coll == Coll::Reduce) && (call.root < 0 || call.root >= ranks))
        return Status::error(GPURDMA_ERR_INVALID, what + ": root " + std::to_string(call.root) + " outside the " +
                                                      std::to_string(ranks) + " ranks of the node");
    if (call.coll == Coll::ReduceScatter && !call.counts.empty() && call.counts.size() != members_.size())
        return Status::error(GPURDMA_ERR_INVALID, what + ": " + std::to_string(call.counts.size()) + " counts for " +
                                                      std::to_string(ranks) + " ranks");
    coll_ = call.coll;
    call_.emplace(arena_, index_, seq_->next_block, call, direct_max_, seq_->consumed_seen.data(), counts_, offsets_);
    return Status::ok();
}

std::string NodeCollective::describe_wait() const
{
    int local = -1;
    const std::string what = call_->waiting_for(&local);
    const int peer = local >= 0 ? members_[static_cast<size_t>(local)] : -1;
    return std::string("node ") + plan::coll_name(coll_) + " (intra-node), waiting for " + describe_rank(peer, hosts_) +
           " " + what;
}

std::string NodeCollective::describe_failure() const
{
    // Shared memory does not fail: only a peer that stops moving (the timeout).
    const std::string name = plan::coll_name(coll_);
    return name + " failed in the node " + name;
}

std::string NodeCollective::describe_call() const
{
    return std::string("node ") + plan::coll_name(coll_) +
           (call_->mail()     ? ", mailbox"
            : call_->direct() ? ", direct"
                              : "");
}

}  // namespace gpurdma::algo
