// Allreduce among the ranks of one node through their shared arena, as a resumable
// state machine like Executor. The message is cut into blocks (one arena slot each);
// for every block:
//   post:     copy my data for the other ranks' slices into my input slot;
//   reduce:   once all have posted, reduce my slice from every rank's input, in rank
//             order, into the shared output slot (and my receive buffer);
//   copy-out: once all have reduced, copy the other slices from the output slot.
// Each element is reduced once, by one rank, in rank order: every rank gets the same
// bits. Two waits per block whatever the rank count (a ring needs 2 (P-1)), and each
// byte is copied about once in and once out, with reductions read from the arena.
// Small messages take the direct form: every rank posts its whole block and reduces
// all of it itself (one wait). Tiny ones travel in the mailbox line with their flag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "exec/executor.h"
#include "gpurdma/gpurdma.h"
#include "transport/node_arena.h"

namespace gpurdma::exec {

class NodeAllreduce {
public:
    // me: this rank's index among the node's ranks. first_block: the sequence number
    // of this call's first block (every rank counts blocks the same way). sendbuf ==
    // nullptr means in place. direct_max: largest message for the direct form.
    // consumed_seen: the caller's memory, kept from call to call, of each rank's
    // Consumed counter as last read (one entry per rank, zero at first; null: always
    // read). Counters only grow, so a remembered value that suffices spares reading a
    // line the other rank keeps writing.
    NodeAllreduce(const transport::NodeArena &arena, int me, uint64_t first_block, gpurdma_op_t op,
                  gpurdma_dtype_t dtype, const void *sendbuf, void *recvbuf, size_t count, size_t direct_max,
                  uint64_t *consumed_seen = nullptr);

    State advance();

    // Blocks this call uses: the caller's sequence advances by this much.
    uint64_t blocks() const { return blocks_; }
    // Grows whenever anything moved (for the caller's timeout).
    uint64_t position() const { return posted_ + reduced_ + copied_; }
    bool direct() const { return direct_; }
    // What the machine waits for, e.g. "rank 2 to post block 7", and that peer's
    // local index (or -1).
    std::string waiting_for(int *peer) const;

    // How a block of `elems` elements is cut into per-rank slices (64-byte aligned
    // boundaries where the element size allows, so writers never share a line).
    static void slice(size_t elems, size_t elem_size, int ranks, int i, size_t *first, size_t *count);

private:
    bool try_post();
    bool try_reduce();
    bool try_copy_out();
    // First rank whose counter c is below need, or -1.
    int lagging(transport::NodeCounter c, uint64_t need) const;
    // The same for Consumed, through consumed_seen.
    int lagging_consumed(uint64_t need) const;
    int slot_of(uint64_t block) const;
    int mail_slot_of(uint64_t block) const;
    size_t block_elems(uint64_t b) const;
    size_t block_offset(uint64_t b) const;  // bytes into the user buffers
    void copy_other_slices(char *dst, const char *src, size_t elems) const;
    template <typename Source>
    void fold(char *dst, size_t bytes, Source source) const;

    transport::NodeArena arena_;
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
    bool mail_;  // direct, one block, fits a mailbox line
    bool own_from_buffer_;  // direct, not mail: my operand read from send_, not my posted copy
    uint64_t *consumed_seen_;
    // Local progress: blocks posted, reduced, copied out (each <= the previous).
    uint64_t posted_ = 0;
    uint64_t reduced_ = 0;
    uint64_t copied_ = 0;
};

}  // namespace gpurdma::exec
