// The node's shared memory as a medium: the node's first rank provides the bytes the
// chosen algorithm asks for (slot channels for schedules, or an algorithm's own layout
// such as the node arena), the others map them from its set-up record. The bytes are a
// slice of that rank's shared-memory arena (shm_arena.h: no file, no mapping, no page
// per communicator), or, without an arena, a segment of their own whose name goes once
// every rank is connected.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/medium.h"
#include "transport/shm_arena.h"
#include "transport/shm_channels.h"
#include "transport/shm_segment.h"

namespace gpurdma::transport {

// A communicator's node shared memory, whichever way it came.
struct NodeMemory {
    char *base = nullptr;
    size_t bytes = 0;
    std::string name;  // unique to it, the same on every rank of the node
};

class ShmMedium : public Medium {
public:
    // What the chosen algorithm needs from the segment.
    struct Request {
        size_t bytes = 0;  // the segment's size
        bool slot_channels = false;  // lay ShmChannels over it (schedules)
        int slots = 1;
        size_t slot_size = 0;
        // (offset, bytes) that must start zero: counters, flags, sequence words. The
        // rest is only read after such a word says it was written.
        std::vector<std::pair<size_t, size_t>> cleared;
    };

    // node_members: this rank's node, ascending. With one member the medium is idle.
    // arenas: the process's; the first rank takes a slice of its own arena when that is
    // enabled, else makes a segment; the others follow its record.
    ShmMedium(int rank, int size, std::vector<int> node_members, Request request, ShmArenas *arenas = nullptr);

    const char *name() const override { return "shared memory"; }
    Status setup(wire::Writer &record) override;
    Status connect(std::vector<wire::Reader> &records) override;
    void connected() override;

    // After connect: the node's shared memory (null if the node has one rank), the
    // channels over it (null unless asked for), and the segment if it is one of its own.
    const NodeMemory *memory() const { return memory_.base ? &memory_ : nullptr; }
    ShmChannels *channels() const { return channels_.get(); }
    ShmSegment *segment() const { return segment_.get(); }
    bool from_arena() const { return slice_ != nullptr; }

private:
    enum Source : uint32_t { None = 0, Segment = 1, Arena = 2 };
    Status map_memory(wire::Reader &leader);

    int rank_;
    int size_;
    std::vector<int> members_;
    Request request_;
    ShmArenas *arenas_;
    NodeMemory memory_;
    // Declared in release order: the channels go before the memory they use.
    std::unique_ptr<ShmSlice> slice_;
    std::unique_ptr<ShmSegment> segment_;
    std::unique_ptr<ShmChannels> channels_;
};

}  // namespace gpurdma::transport
