// The layout of the node's shared segment that the node allreduce and the other node
// collectives (node_collective.h) share, on one block sequence (NodeSequence):
// every local rank's progress counters together (a line of their own each, two lines
// apart so that the adjacent-line prefetcher does not pair two writers: a call that only
// reads counters touches one page, not one per rank, which is what a communicator costs
// in memory), then per local rank kMailSlots mailboxes of kMailLines lines each (every
// line a sequence number and 48 bytes: a small message travels with its flags, so that
// a reader's misses on its lines go out together rather than one on a counter, then one
// on the data; many mailboxes, so that a rank seldom has to read the others' counters
// to reuse one), then per rank `slots` input blocks, then `slots` output blocks shared
// by all.
// Only rank i writes its counters, mailboxes and inputs;
// output block slices are written by their reducing rank. Counters only grow, so a
// reader compares them with the block sequence number it needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpurdma::algo {

enum class NodeCounter : int {
    Posted = 0,  // blocks whose input this rank has published
    Reduced = 1,  // blocks whose slice this rank has reduced into the output
    Consumed = 2,  // blocks this rank no longer reads (its slot may be reused)
};

struct NodeArenaLayout {
    int ranks = 1;
    int slots = 1;
    size_t block = 0;  // bytes per input/output block

    static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
    static constexpr size_t kLine = 64;
    static constexpr size_t kMailPayload = 16;  // payload offset in a mailbox line (16-byte aligned)
    static constexpr size_t kMailLineBytes = kLine - kMailPayload;  // payload per line
    // Lines per mailbox: up to 288 bytes. 256 B took 6% less time this way than the direct
    // form (a counter, then the data); 512 B in 11 lines took 18% more.
    static constexpr int kMailLines = 6;
    static constexpr size_t kMailBytes = kMailLineBytes * kMailLines;
    static constexpr int kMailSlots = 16;

    static constexpr size_t kCounterStride = 2 * kLine;
    size_t mail_lines_per_rank() const { return static_cast<size_t>(kMailSlots) * kMailLines; }
    size_t mail_start() const { return round_up(static_cast<size_t>(ranks) * kCounterStride, kLine); }
    size_t data_start() const
    {
        return round_up(mail_start() + static_cast<size_t>(ranks) * mail_lines_per_rank() * kLine, 4096);
    }
    size_t counter_offset(int rank, NodeCounter c) const
    {
        return static_cast<size_t>(rank) * kCounterStride + static_cast<size_t>(c) * sizeof(uint64_t);
    }
    size_t mailbox_offset(int rank, int slot, int line) const
    {
        return mail_start() + (static_cast<size_t>(rank) * mail_lines_per_rank() +
                               static_cast<size_t>(slot) * kMailLines + static_cast<size_t>(line)) *
                                  kLine;
    }
    size_t input_offset(int rank, int slot) const
    {
        return data_start() + (static_cast<size_t>(rank) * slots + static_cast<size_t>(slot)) * block;
    }
    size_t output_offset(int slot) const
    {
        return data_start() + (static_cast<size_t>(ranks) * slots + static_cast<size_t>(slot)) * block;
    }
    size_t bytes() const { return data_start() + static_cast<size_t>(ranks + 1) * slots * block; }
};

// The layout applied to a mapping.
class NodeArena {
public:
    NodeArena(char *base, const NodeArenaLayout &layout) : base_(base), layout_(layout) {}

    const NodeArenaLayout &layout() const { return layout_; }
    uint64_t load(int rank, NodeCounter c) const { return __atomic_load_n(counter(rank, c), __ATOMIC_ACQUIRE); }
    // Publishes everything this rank wrote before (data, then the counter).
    void store(int rank, NodeCounter c, uint64_t value) const
    {
        __atomic_store_n(counter(rank, c), value, __ATOMIC_RELEASE);
    }
    const void *counter_line(int rank) const { return counter(rank, NodeCounter::Posted); }
    char *input(int rank, int slot) const { return base_ + layout_.input_offset(rank, slot); }
    // A mailbox line: its sequence word (block + 1 once the line's payload is there) and payload.
    uint64_t mail_seq(int rank, int slot, int line) const
    {
        return __atomic_load_n(reinterpret_cast<uint64_t *>(base_ + layout_.mailbox_offset(rank, slot, line)),
                               __ATOMIC_ACQUIRE);
    }
    void set_mail_seq(int rank, int slot, int line, uint64_t value) const
    {
        __atomic_store_n(reinterpret_cast<uint64_t *>(base_ + layout_.mailbox_offset(rank, slot, line)), value,
                         __ATOMIC_RELEASE);
    }
    char *mail(int rank, int slot, int line) const
    {
        return base_ + layout_.mailbox_offset(rank, slot, line) + NodeArenaLayout::kMailPayload;
    }
    char *output(int slot) const { return base_ + layout_.output_offset(slot); }

private:
    uint64_t *counter(int rank, NodeCounter c) const
    {
        return reinterpret_cast<uint64_t *>(base_ + layout_.counter_offset(rank, c));
    }

    char *base_;
    NodeArenaLayout layout_;
};

// What carries over from call to call among every path over one arena (the node
// allreduce and the other node collectives): the sequence number of the next arena
// block, which every rank counts alike whatever collectives run in whatever order,
// and the node ranks' Consumed counters as last read (they only grow: a remembered
// value that suffices spares reading a line its rank keeps writing). One per arena,
// owned by whoever creates the paths and passed to each by reference.
struct NodeSequence {
    explicit NodeSequence(int ranks) : consumed_seen(static_cast<size_t>(ranks), 0) {}
    uint64_t next_block = 0;
    std::vector<uint64_t> consumed_seen;
};

}  // namespace gpurdma::algo
