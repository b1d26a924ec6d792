// Slot channels between ranks of one node through shared memory: the sender
// copies into the receiver's slot and publishes the flag with a release store; no
// UCX, no system call on the data path.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "base/status.h"
#include "transport/slot_channels.h"

namespace gpurdma::transport {

class ShmChannels : public SlotChannels {
public:
    // node_members: the node's ranks, ascending; region i of the memory at base belongs
    // to node_members[i]. Fails if bytes is less than segment_bytes(...).
    static Status create(int rank, int size, const std::vector<int> &node_members, int slots, size_t slot_size,
                         char *base, size_t bytes, std::unique_ptr<ShmChannels> *out);
    // What must start zero in that memory: each region's flags and credits.
    static std::vector<std::pair<size_t, size_t>> cleared(int local_ranks, int slots, size_t slot_size);

    static size_t region_stride(int local_ranks, int slots, size_t slot_size);
    static size_t segment_bytes(int local_ranks, int slots, size_t slot_size);

    bool source_busy(const void *, size_t) override { return false; }
    bool sends_pending() override { return false; }

protected:
    // Node peers never offer memory: every message lands in the slot.
    Poll deliver(Link &link, int slot, const void *src, size_t bytes, uint64_t flag, Reader) override;
    void return_credit(Link &link, uint64_t consumed) override;

private:
    ShmChannels(int rank, int size, const std::vector<int> &node_members, int slots, size_t slot_size, char *base);
    char *region_of(int rank) const;

    std::vector<int> members_;
    size_t stride_;
    char *segment_base_;
};

}  // namespace gpurdma::transport
