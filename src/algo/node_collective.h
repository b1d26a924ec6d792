// Reduce-scatter, allgather, bcast and reduce among the ranks of one node through the
// node allreduce's arena (node_arena.h) and on its block sequence (NodeSequence), so
// that these calls and allreduces interleave on one communicator in any order. Every
// rank counts every call's blocks alike; for each block g each rank stores Posted,
// Reduced and Consumed = g + 1 (Consumed only once it reads nothing of g's slots any
// more), and nobody writes a slot for block g before every rank Consumed g - slots.
// Per block, with slots blocks in flight:
//   Allgather:     each rank posts its part of chunk b of its own block into its input
//                  slot; once all have posted, each copies the others' chunks to its
//                  receive buffer (its own straight from its send buffer). One wait.
//   Bcast:         the root posts block b; the others copy it out once it is there.
//   ReduceScatter: a block carries piece b of every rank's result segment (a slot holds
//                  one piece per rank): each posts the pieces the others reduce; once all
//                  have posted, each folds its own piece from every rank's input, in rank
//                  order, straight into its receive buffer. One wait, every rank reducing.
//                  In place, each rank posts its own piece too and reads it from there:
//                  piece b of the result overwrites input only of pieces <= b, posted.
//   Reduce:        as the node allreduce: each folds its slice of the block from every
//                  rank's input into the output slot; the root copies it out once all
//                  have reduced (and only then is Consumed). Small ones (direct_max) take
//                  the direct form: every rank posts the whole block and is done with it;
//                  the root, once all have posted, folds it into its buffer. One wait.
// Small messages (up to NodeArenaLayout::kMailBytes: a bcast's or reduce's message, an
// allgather's block, a reduce-scatter's whole input) take the mailbox form instead, as
// the node allreduce's: the data travels in the posting rank's mailbox lines, each line
// with its sequence word, so that a reader's one miss on a line brings flag and data
// (the block forms cost one miss on a counter, then one on the data). One block, one
// wait: bcast's others copy the root's lines; allgather's copy every other rank's;
// reduce's root folds every rank's lines, in rank order; reduce-scatter's ranks each fold
// their own piece out of every rank's lines.
// Each element is reduced once, by one rank, in rank order, as by the node allreduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/node_arena.h"
#include "exec/task.h"
#include "gpurdma/gpurdma.h"
#include "plan/collective.h"
#include "reduce/reduce.h"

namespace gpurdma::algo {

// One call's blocks through the arena, as a resumable state machine.
class NodeCollCall {
public:
    // me: this rank's index among the node's ranks; first_block: the sequence number of
    // the call's first block; call: not Allreduce, root and counts already checked
    // (counts: empty or one per rank); direct_max: largest Reduce for the direct form;
    // consumed_seen: NodeSequence::consumed_seen.
    // counts, offsets: the caller's scratch for ReduceScatter's per-rank counts and input
    // offsets, kept from call to call (a latency-bound call allocates nothing).
    NodeCollCall(const NodeArena &arena, int me, uint64_t first_block, const Call &call, size_t direct_max,
                 uint64_t *consumed_seen, std::vector<size_t> &counts, std::vector<size_t> &offsets);

    exec::State advance();
    // Blocks this call uses: the caller's sequence advances by this much (alike on every rank).
    uint64_t blocks() const { return blocks_; }
    // Grows whenever anything moved (for the caller's timeout).
    uint64_t position() const { return posted_ + worked_ + finished_; }
    bool direct() const { return direct_; }
    bool mail() const { return mail_; }
    // What the machine waits for, e.g. "to post its data for block 7", and that
    // peer's local index (or -1).
    std::string waiting_for(int *peer) const;
    // Elements of a reduce-scatter piece: a slot holds one per rank (64-byte aligned
    // where the element size allows).
    static size_t piece_elems(size_t block_elems, size_t elem_size, int ranks);

private:
    // Three steps per block, each after the previous: post (write my input slot), work
    // (read the others': copy out or reduce), finish (Reduce's root: copy the output out).
    bool try_post();
    bool try_work();
    bool try_finish();
    void post(uint64_t b, char *in);
    void work(uint64_t b, int slot);
    void reduce_whole(uint64_t b, int slot);
    bool writes_slot() const;  // whether post writes my input slot
    int lagging(NodeCounter c, uint64_t need) const;
    int lagging_consumed(uint64_t need) const;
    int slot_of(uint64_t b) const;
    void mark(NodeCounter last, uint64_t g) const;  // Posted .. last = g + 1
    size_t chunk_elems(uint64_t b) const;  // Allgather, Bcast, Reduce: elements of block b
    size_t rs_piece(int rank, uint64_t b) const;  // ReduceScatter: elements of rank's piece b
    template <typename Source> void fold(char *dst, size_t bytes, Source source) const;
    // The mailbox form (one block, g = first_).
    bool writes_mail() const;  // whether I post into my mailbox lines
    bool reads_mail() const;  // whether I read any other rank's lines
    void post_mail(const char *src) const;
    int mail_lagging() const;  // a rank whose lines I read that has not posted, or -1
    void work_mail();
    // bytes of rank j's mailed data from byte `from` of it into dst, line by line.
    void copy_mail(char *dst, int j, size_t from, size_t bytes) const;

    NodeArena arena_;
    int me_;
    int ranks_;
    uint64_t first_;
    plan::Coll coll_;
    gpurdma_op_t op_;
    gpurdma_dtype_t dtype_;
    size_t elem_;
    int root_;
    const char *send_;  // Allgather: my block; ReduceScatter, Reduce: my input; Bcast: unused
    char *recv_;
    bool in_place_;
    size_t count_;  // Allgather: each rank's block; Bcast, Reduce: the message
    std::vector<size_t> &counts_, &offsets_;  // ReduceScatter: each rank's result and its input offset
    size_t per_block_;  // elements per block (ReduceScatter: per piece)
    uint64_t blocks_ = 0;
    bool direct_;  // Reduce: every rank posts whole blocks, the root reduces them
    bool own_from_buffer_;  // direct: the root reads its operand from its buffer
    size_t mail_bytes_ = 0;  // what each posting rank mails (0: no mailbox form)
    int mail_lines_ = 0;
    bool mail_ = false;
    uint64_t *consumed_seen_;
    uint64_t posted_ = 0, worked_ = 0, finished_ = 0;  // each <= the previous
};

// dst = source(0) OP source(1) OP ... in rank order, as NodeCall::fold. dst may be
// source(0) or source(1) only.
template <typename Source> inline void NodeCollCall::fold(char *dst, size_t bytes, Source source) const
{
    const size_t n = bytes / elem_;
    if (ranks_ == 1) {
        if (dst != source(0)) std::memcpy(dst, source(0), bytes);
        return;
    }
    reduce::apply(op_, dtype_, dst, source(0), source(1), n);
    for (int j = 2; j < ranks_; ++j) reduce::apply(op_, dtype_, dst, dst, source(j), n);
}

// The algorithm for the collectives beyond allreduce on one node (Allreduce: Unsupported,
// NodeAllreduce takes it).
class NodeCollective final : public Algorithm {
public:
    // arena, members, index, hosts: as NodeAllreduce's. sequence: the arena's, shared
    // with the NodeAllreduce over the same arena, outliving this object. direct_max:
    // largest Reduce (bytes) for the direct form (NodeAllreduce::direct_max: every size
    // with two ranks, else the latency path's small_msg_max).
    NodeCollective(NodeArena arena, NodeSequence &sequence, std::vector<int> members, int index,
                   std::vector<std::string> hosts, size_t direct_max);

    Status start(const Call &call) override;
    Status run(const exec::ProgressLoop &loop) override { return loop.run_as(*this); }
    exec::State advance() override { return call_->advance(); }
    uint64_t position() const override { return call_->position(); }
    std::string describe_wait() const override;
    std::string describe_failure() const override;
    void finish() override { seq_->next_block += call_->blocks(); }
    uint64_t gpurdma_comm_stats_t::*counter() const override { return &gpurdma_comm_stats_t::node_calls; }
    const char *collective() const override { return plan::coll_name(coll_); }
    std::string describe_call() const override;

    uint64_t next_block() const { return seq_->next_block; }

private:
    NodeArena arena_;
    NodeSequence *seq_;
    std::vector<int> members_;
    int index_;
    std::vector<std::string> hosts_;
    size_t direct_max_;
    plan::Coll coll_ = plan::Coll::Bcast;
    std::vector<size_t> counts_, offsets_;  // NodeCollCall's scratch
    std::optional<NodeCollCall> call_;
};

}  // namespace gpurdma::algo
