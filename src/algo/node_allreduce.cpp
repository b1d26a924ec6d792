#include "algo/node_allreduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/text.h"
#include "reduce/reduce.h"

namespace gpurdma::algo {

using exec::State;

namespace {

// Reductions run over sub-blocks that stay in L1 between their passes.
constexpr size_t kSubBlock = 16 * 1024;

}  // namespace

NodeCall::NodeCall(const NodeArena &arena, int me, uint64_t first_block, gpurdma_op_t op, gpurdma_dtype_t dtype,
                   const void *sendbuf, void *recvbuf, size_t count, size_t direct_max, uint64_t *consumed_seen)
    : arena_(arena),
      me_(me),
      ranks_(arena.layout().ranks),
      first_(first_block),
      op_(op),
      dtype_(dtype),
      elem_(reduce::dtype_size(dtype)),
      send_(static_cast<const char *>(sendbuf ? sendbuf : recvbuf)),
      recv_(static_cast<char *>(recvbuf)),
      count_(count),
      // A message within one block (every small one) needs no division.
      per_block_(count * elem_ <= arena.layout().block ? std::max<size_t>(1, count)
                                                       : std::max<size_t>(1, arena.layout().block / elem_)),
      blocks_(count <= per_block_ ? (count > 0 ? 1 : 0) : (count + per_block_ - 1) / per_block_),
      direct_(count * elem_ <= direct_max),
      mail_lines_(
          static_cast<int>((count * elem_ + NodeArenaLayout::kMailLineBytes - 1) / NodeArenaLayout::kMailLineBytes)),
      // A message over several lines is folded line by line: its elements must not straddle one.
      mail_(direct_ && blocks_ == 1 && count * elem_ <= NodeArenaLayout::kMailBytes &&
            (mail_lines_ == 1 || NodeArenaLayout::kMailLineBytes % elem_ == 0)),
      consumed_seen_(consumed_seen)
{
    // The direct form reads my own operand from my buffer rather than the copy I
    // posted: the peers read that copy now, and with two ranks 4 KiB-1 MiB took 10-25%
    // less time this way (1 MiB: 96-123 against 80-93 us). For a mailed message the
    // copy was just stored into lines a peer held: reading it back waits until this core
    // owns them again (about 150 cycles of an 8-byte call here). Not in place with more than
    // two ranks (fold writes dst before it reads source(me) there), nor when the
    // buffers overlap without being the same (erroneous in MPI; the arena copy keeps
    // the result defined).
    own_from_buffer_ =
        !reduce::partially_overlap(send_, recv_, count * elem_) && (send_ != recv_ || ranks_ == 2 || me_ == 0);
}

void NodeCall::slice(size_t elems, size_t elem_size, int ranks, int i, size_t *first, size_t *count)
{
    const size_t unit = (elem_size <= 64 && 64 % elem_size == 0) ? 64 / elem_size : 1;
    const size_t units = (elems + unit - 1) / unit;
    const size_t n = static_cast<size_t>(ranks), idx = static_cast<size_t>(i);
    const size_t base = units / n, extra = units % n;
    const size_t first_unit = idx * base + std::min(idx, extra);
    const size_t end_unit = first_unit + base + (idx < extra ? 1 : 0);
    *first = std::min(first_unit * unit, elems);
    *count = std::min(end_unit * unit, elems) - *first;
}

int NodeCall::slot_of(uint64_t block) const
{
    return static_cast<int>((first_ + block) % static_cast<uint64_t>(arena_.layout().slots));
}

int NodeCall::mail_slot_of(uint64_t block) const
{
    return static_cast<int>((first_ + block) % static_cast<uint64_t>(NodeArenaLayout::kMailSlots));
}

size_t NodeCall::block_elems(uint64_t b) const
{
    return std::min(per_block_, count_ - static_cast<size_t>(b) * per_block_);
}

size_t NodeCall::block_offset(uint64_t b) const
{
    return static_cast<size_t>(b) * per_block_ * elem_;
}

// The slices of a block of `elems` elements that other ranks reduce: posted from my
// data into my input slot, and later copied from the output into my buffer.
void NodeCall::copy_other_slices(char *dst, const char *src, size_t elems) const
{
    for (int i = 0; i < ranks_; ++i) {
        if (i == me_) continue;
        size_t first = 0, n = 0;
        slice(elems, elem_, ranks_, i, &first, &n);
        if (n) std::memcpy(dst + first * elem_, src + first * elem_, n * elem_);
    }
}

int NodeCall::lagging(NodeCounter c, uint64_t need) const
{
    for (int j = 0; j < ranks_; ++j)
        if (arena_.load(j, c) < need) return j;
    return -1;
}

int NodeCall::lagging_consumed(uint64_t need) const
{
    if (!consumed_seen_) return lagging(NodeCounter::Consumed, need);
    for (int j = 0; j < ranks_; ++j) {
        if (consumed_seen_[j] >= need) continue;
        consumed_seen_[j] = arena_.load(j, NodeCounter::Consumed);
        if (consumed_seen_[j] < need) return j;
    }
    return -1;
}

// dst = source(0) OP source(1) OP ... in rank order. dst may be source(0) only.
template <typename Source> void NodeCall::fold(char *dst, size_t bytes, Source source) const
{
    const size_t n = bytes / elem_;
    if (ranks_ == 1) {
        if (dst != source(0)) std::memcpy(dst, source(0), bytes);
        return;
    }
    reduce::apply(op_, dtype_, dst, source(0), source(1), n);
    for (int j = 2; j < ranks_; ++j) reduce::apply(op_, dtype_, dst, dst, source(j), n);
}

bool NodeCall::try_post()
{
    const uint64_t b = posted_;
    if (b >= blocks_) return false;
    const uint64_t g = first_ + b;
    // The slot (input block or mailbox) last held block g - slots: every rank must be
    // done with it.
    const uint64_t slots = static_cast<uint64_t>(mail_ ? NodeArenaLayout::kMailSlots : arena_.layout().slots);
    if (g + 1 > slots && lagging_consumed(g + 1 - slots) >= 0) return false;
    const size_t elems = block_elems(b);
    const char *src = send_ + block_offset(b);
    char *in = arena_.input(me_, slot_of(b));
    if (mail_) {
        // Payload and flag in each cache line: a reader's one miss on a line brings both.
        const int mailbox = mail_slot_of(b);
        const size_t bytes = elems * elem_;
        for (int l = 0; l < mail_lines_; ++l) {
            const size_t off = static_cast<size_t>(l) * NodeArenaLayout::kMailLineBytes;
            std::memcpy(arena_.mail(me_, mailbox, l), src + off,
                        std::min(NodeArenaLayout::kMailLineBytes, bytes - off));
            arena_.set_mail_seq(me_, mailbox, l, g + 1);
        }
    } else if (direct_) {
        std::memcpy(in, src, elems * elem_);
    } else {
        // Only the others' slices: my own is read from my buffer when I reduce it.
        copy_other_slices(in, src, elems);
    }
    arena_.store(me_, NodeCounter::Posted, g + 1);
    ++posted_;
    return true;
}

bool NodeCall::try_reduce()
{
    const uint64_t b = reduced_;
    if (b >= posted_) return false;
    const uint64_t g = first_ + b;
    // The poll a small call spins on: it reads the peers' lines and nothing else (the
    // slot's modulo waits until they have posted).
    const int mailbox = mail_slot_of(b);
    if (mail_) {
        // Every line read before any is tested: their misses overlap.
        bool all = true;
        for (int j = 0; j < ranks_; ++j)
            for (int l = 0; l < mail_lines_; ++l) all &= j == me_ || arena_.mail_seq(j, mailbox, l) == g + 1;
        if (!all) return false;
    } else if (lagging(NodeCounter::Posted, g + 1) >= 0) {
        return false;
    }
    const int slot = slot_of(b);
    const size_t elems = block_elems(b);
    const size_t block_off = block_offset(b);
    if (mail_) {
        // Everyone reduces the whole message itself, line by line, from the mailboxes.
        const size_t bytes = elems * elem_;
        for (int l = 0; l < mail_lines_; ++l) {
            const size_t off = static_cast<size_t>(l) * NodeArenaLayout::kMailLineBytes;
            fold(recv_ + off, std::min(NodeArenaLayout::kMailLineBytes, bytes - off), [&](int j) -> const char * {
                return j == me_ && own_from_buffer_ ? send_ + off : arena_.mail(j, mailbox, l);
            });
        }
    } else if (direct_) {
        // Everyone reduces the whole (small) block itself: no second wait.
        fold(recv_ + block_off, elems * elem_, [&](int j) -> const char * {
            return j == me_ && own_from_buffer_ ? send_ + block_off : arena_.input(j, slot);
        });
    }
    if (direct_) {
        arena_.store(me_, NodeCounter::Reduced, g + 1);
        arena_.store(me_, NodeCounter::Consumed, g + 1);
        ++reduced_;
        ++copied_;
        return true;
    }
    size_t first = 0, n = 0;
    slice(elems, elem_, ranks_, me_, &first, &n);
    const size_t step = kSubBlock - kSubBlock % elem_;
    char *out = arena_.output(slot);
    for (size_t off = first * elem_, end = (first + n) * elem_; off < end; off += step) {
        const size_t bytes = std::min(step, end - off);
        // Into the shared output first: in place, my own operand is the receive
        // buffer, which must not change before every rank's value is folded in.
        fold(out + off, bytes,
             [&](int j) -> const char * { return (j == me_ ? send_ + block_off : arena_.input(j, slot)) + off; });
        std::memcpy(recv_ + block_off + off, out + off, bytes);
    }
    arena_.store(me_, NodeCounter::Reduced, g + 1);
    ++reduced_;
    return true;
}

bool NodeCall::try_copy_out()
{
    const uint64_t b = copied_;
    if (b >= reduced_) return false;
    const uint64_t g = first_ + b;
    if (lagging(NodeCounter::Reduced, g + 1) >= 0) return false;
    copy_other_slices(recv_ + block_offset(b), arena_.output(slot_of(b)), block_elems(b));
    arena_.store(me_, NodeCounter::Consumed, g + 1);
    ++copied_;
    return true;
}

void NodeCall::prefetch_peers() const
{
    if (!direct_ || blocks_ != 1) return;
    const int mailbox = mail_slot_of(0);
    for (int j = 0; j < ranks_; ++j) {
        if (j == me_) continue;
        if (mail_) {
            for (int l = 0; l < mail_lines_; ++l) __builtin_prefetch(arena_.mail(j, mailbox, l));
        } else {
            __builtin_prefetch(arena_.counter_line(j));
        }
    }
}

State NodeCall::advance()
{
    for (;;) {
        // Oldest work first: finishing a block frees its slot for the next post.
        bool moved = try_post();
        moved = try_copy_out() || moved;
        moved = try_reduce() || moved;
        if (copied_ == blocks_) return State::Done;
        if (!moved) return State::Running;
    }
}

std::string NodeCall::waiting_for(int *peer) const
{
    const uint64_t slots = static_cast<uint64_t>(mail_ ? NodeArenaLayout::kMailSlots : arena_.layout().slots);
    if (copied_ < reduced_) {
        const uint64_t g = first_ + copied_;
        *peer = lagging(NodeCounter::Reduced, g + 1);
        return "to reduce its slice of block " + std::to_string(g);
    }
    if (reduced_ < posted_) {
        const uint64_t g = first_ + reduced_;
        *peer = lagging(NodeCounter::Posted, g + 1);
        return "to post its data for block " + std::to_string(g);
    }
    const uint64_t g = first_ + posted_;
    *peer = g + 1 > slots ? lagging(NodeCounter::Consumed, g + 1 - slots) : -1;
    return "to release the slot of block " + std::to_string(g - std::min(g, slots));
}

NodeArenaLayout NodeAllreduce::layout(int ranks, int slots, size_t block)
{
    NodeArenaLayout l;
    l.ranks = ranks;
    l.slots = slots;
    l.block = block;
    return l;
}

size_t NodeAllreduce::direct_max(int ranks, size_t small_msg_max)
{
    return ranks == 2 && small_msg_max > 0 ? SIZE_MAX : small_msg_max;
}

NodeAllreduce::NodeAllreduce(NodeArena arena, NodeSequence &sequence, std::vector<int> members, int index,
                             size_t direct_max, std::vector<std::string> hosts)
    : arena_(arena),
      members_(std::move(members)),
      index_(index),
      direct_max_(direct_max),
      hosts_(std::move(hosts)),
      seq_(&sequence)
{}

NodeAllreduce::NodeAllreduce(NodeArena arena, std::vector<int> members, int index, size_t direct_max,
                             std::vector<std::string> hosts)
    : arena_(arena),
      members_(std::move(members)),
      index_(index),
      direct_max_(direct_max),
      hosts_(std::move(hosts)),
      own_seq_(std::make_unique<NodeSequence>(static_cast<int>(members_.size()))),
      seq_(own_seq_.get())
{}

Status NodeAllreduce::start(const Call &call)
{
    call_.emplace(arena_, index_, seq_->next_block, call.op, call.dtype, call.sendbuf, call.recvbuf, call.count,
                  direct_max_, seq_->consumed_seen.data());
    call_->prefetch_peers();
    name_ = call_name(call);
    return Status::ok();
}

std::string NodeAllreduce::describe_wait() const
{
    int local = -1;
    const std::string what = call_->waiting_for(&local);
    const int peer = local >= 0 ? members_[static_cast<size_t>(local)] : -1;
    return std::string(call_->direct() ? "node allreduce (intra-node, direct)"
                                       : "node reduce-scatter/allgather (intra-node)") +
           ", waiting for " + describe_rank(peer, hosts_) + " " + what;
}

std::string NodeAllreduce::describe_failure() const
{
    // Shared memory does not fail: only a peer that stops moving (the timeout).
    return std::string(name_) + " failed in the node allreduce";
}

std::string NodeAllreduce::describe_call() const
{
    return call_->direct() ? "node allreduce, direct" : "node allreduce";
}

}  // namespace gpurdma::algo
