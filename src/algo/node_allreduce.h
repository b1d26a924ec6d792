// Allreduce among the ranks of one node through their shared arena (node_arena.h, in
// the node's shared segment). The message is cut into blocks (one arena slot each);
// for every block:
//   post:     copy my data for the other ranks' slices into my input slot;
//   reduce:   once all have posted, reduce my slice from every rank's input, in rank
//             order, into the shared output slot (and my receive buffer);
//   copy-out: once all have reduced, copy the other slices from the output slot.
// Each element is reduced once, by one rank, in rank order: every rank gets the same
// bits. Two waits per block whatever the rank count (a ring needs 2 (P-1)), and each
// byte is copied about once in and once out, with reductions read from the arena.
// Small messages take the direct form: every rank posts its whole block and reduces
// all of it itself (one wait). The smallest travel in mailbox lines, each line with its flag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/node_arena.h"
#include "exec/task.h"
#include "gpurdma/gpurdma.h"

namespace gpurdma::algo {

// One call's blocks through the arena, as a resumable state machine.
class NodeCall {
public:
    // me: this rank's index among the node's ranks. first_block: the sequence number
    // of this call's first block (every rank counts blocks the same way). sendbuf ==
    // nullptr means in place. direct_max: largest message for the direct form.
    // consumed_seen: the caller's memory, kept from call to call, of each rank's
    // Consumed counter as last read (one entry per rank, zero at first; null: always
    // read). Counters only grow, so a remembered value that suffices spares reading a
    // line the other rank keeps writing.
    NodeCall(const NodeArena &arena, int me, uint64_t first_block, gpurdma_op_t op, gpurdma_dtype_t dtype,
             const void *sendbuf, void *recvbuf, size_t count, size_t direct_max, uint64_t *consumed_seen = nullptr);

    exec::State advance();
    // Starts the peers' lines this call will poll on their way here (a rank that comes
    // second finds them written already).
    void prefetch_peers() const;

    // Blocks this call uses: the caller's sequence advances by this much.
    uint64_t blocks() const { return blocks_; }
    // Grows whenever anything moved (for the caller's timeout).
    uint64_t position() const { return posted_ + reduced_ + copied_; }
    bool direct() const { return direct_; }
    // The message travels in mailbox lines with their flags (the smallest calls).
    bool mailed() const { return mail_; }
    // What the machine waits for, e.g. "to post its data for block 7", and that
    // peer's local index (or -1).
    std::string waiting_for(int *peer) const;

    // How a block of `elems` elements is cut into per-rank slices (64-byte aligned
    // boundaries where the element size allows, so writers never share a line).
    static void slice(size_t elems, size_t elem_size, int ranks, int i, size_t *first, size_t *count);

private:
    bool try_post();
    bool try_reduce();
    bool try_copy_out();
    // First rank whose counter c is below need, or -1.
    int lagging(NodeCounter c, uint64_t need) const;
    // The same for Consumed, through consumed_seen.
    int lagging_consumed(uint64_t need) const;
    int slot_of(uint64_t block) const;
    int mail_slot_of(uint64_t block) const;
    size_t block_elems(uint64_t b) const;
    size_t block_offset(uint64_t b) const;  // bytes into the user buffers
    void copy_other_slices(char *dst, const char *src, size_t elems) const;
    template <typename Source> void fold(char *dst, size_t bytes, Source source) const;

    NodeArena arena_;
    int me_;
    int ranks_;
    uint64_t first_;
    gpurdma_op_t op_;
    gpurdma_dtype_t dtype_;
    size_t elem_;
    const char *send_;
    char *recv_;
    size_t count_;
    size_t per_block_;  // elements per full block
    uint64_t blocks_;
    bool direct_;
    int mail_lines_;  // mailbox lines the message would take
    bool mail_;  // direct, one block, fits a mailbox
    bool own_from_buffer_;  // direct: my operand read from send_, not my posted copy
    uint64_t *consumed_seen_;
    // Local progress: blocks posted, reduced, copied out (each <= the previous).
    uint64_t posted_ = 0;
    uint64_t reduced_ = 0;
    uint64_t copied_ = 0;
};

// The algorithm: the arena and what carries over from call to call (NodeSequence: the
// block sequence, the Consumed counters as last read), shared with NodeCollective.
class NodeAllreduce final : public Algorithm {
public:
    // The arena for a node of `ranks`, `slots` blocks of `block` bytes each.
    static NodeArenaLayout layout(int ranks, int slots, size_t block);
    // Largest message for the direct form: with two ranks it moves the same bytes per
    // rank as reduce-scatter/allgather and waits half as often, measured faster at
    // every size (1 MiB: 91 against 126 us), so it takes everything unless the latency
    // path is off (small_msg_max 0); with more ranks, up to small_msg_max.
    static size_t direct_max(int ranks, size_t small_msg_max);

    // members: the node's ranks, ascending (this rank is members[index]); hosts name
    // them in messages. sequence: the arena's, shared with the other paths over it
    // (algo::NodeCollective), outliving this object.
    NodeAllreduce(NodeArena arena, NodeSequence &sequence, std::vector<int> members, int index, size_t direct_max,
                  std::vector<std::string> hosts);
    // The same with a sequence of its own (nothing else uses the arena).
    NodeAllreduce(NodeArena arena, std::vector<int> members, int index, size_t direct_max,
                  std::vector<std::string> hosts);

    Status start(const Call &call) override;
    Status run(const exec::ProgressLoop &loop) override { return loop.run_as(*this); }
    exec::State advance() override { return call_->advance(); }
    uint64_t position() const override { return call_->position(); }
    std::string describe_wait() const override;
    std::string describe_failure() const override;
    const char *collective() const override { return name_; }
    void finish() override { seq_->next_block += call_->blocks(); }
    uint64_t gpurdma_comm_stats_t::*counter() const override { return &gpurdma_comm_stats_t::node_calls; }
    std::string describe_call() const override;

    uint64_t next_block() const { return seq_->next_block; }

private:
    NodeArena arena_;
    std::vector<int> members_;
    int index_;
    size_t direct_max_;
    std::vector<std::string> hosts_;
    std::unique_ptr<NodeSequence> own_seq_;  // without a shared one
    NodeSequence *seq_;  // the block sequence, the Consumed counters as last read
    std::optional<NodeCall> call_;
    const char *name_ = "allreduce";  // the current call's, for messages ("barrier" too)
};

}  // namespace gpurdma::algo
