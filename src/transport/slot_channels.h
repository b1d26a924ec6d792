// Credit-limited message channels through landing slots, independent of how bytes
// reach the peer. Each rank owns a region laid out by ChannelLayout; a message is
// written into the receiver's next slot and announced by that slot's flag (sequence
// number + 1) once the data is visible; the receiver uses it in place and returns
// the slot by writing its consumed count into the sender's credit word.
// Subclasses say how data, flags and credits travel (UCX RMA, node shared memory).
// A receiver may also offer memory of its own, GPU memory say, with the data slots'
// layout: a sender may then put a message there (flag bit kLandedOffered), and a
// CPU reader of such a message gets a host copy of it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/channel_layout.h"
#include "transport/transport.h"

namespace gpurdma::transport {

// The sorted peer list of any rank for this medium (symmetric relation).
using PeerListFn = std::function<std::vector<int>(int rank)>;

class SlotChannels : public PeerTransport {
public:
    Poll try_send(int peer, const void *src, size_t bytes, Reader receiver) override;
    const void *try_receive(int peer, size_t bytes, Reader reader) override;
    void release(int peer) override;
    bool failed() const override { return !error_.empty(); }
    const char *error() const override { return error_.c_str(); }

    // One look that never waits (its owner runs it under the wait loop before the
    // release): moves on sends waiting for the medium, drives the medium once, and says
    // whether every message we sent has been consumed and every send has finished, so no
    // peer writes into our region after it is released.
    bool drained();
    // Messages sent that peers have not yet consumed (returned their slots for), and the
    // peers holding them: what drained() still waits for.
    uint64_t slots_held() const;
    std::vector<int> peers_holding_slots() const;
    bool has_peer(int peer) const { return link_index(peer) >= 0; }
    uint64_t bytes_sent() const { return bytes_sent_; }
    const ChannelLayout &layout() const { return layout_; }
    // This rank's region: where its peers' messages land.
    MemoryRange landing() const { return MemoryRange{base_, layout_.bytes()}; }

    // Copies bytes of offered (GPU) memory into host memory, or says why not.
    using OfferedToHost = std::function<bool(void *dst, const void *src, size_t bytes, std::string *why)>;
    // Size an offered region needs: the data slots of landing(), same offsets.
    size_t offered_bytes() const { return layout_.bytes() - layout_.data_start(); }
    // The offered region, empty if none (or withdrawn).
    MemoryRange offered() const { return MemoryRange{offered_.base, offered_.base ? offered_bytes() : 0}; }
    // Messages that landed in the offered region, and how many of them a CPU reader
    // needed copied to host memory.
    uint64_t offered_arrivals() const { return offered_arrivals_; }
    uint64_t offered_copies() const { return offered_copies_; }

protected:
    struct Link {
        int rank = -1;
        int index_there = -1;  // our index in the peer's list
        ChannelLayout remote;  // the peer's region layout
        uint64_t sent = 0;
        uint64_t received = 0;
    };

    // peers must be symmetric: symmetric() says whether a relation is.
    SlotChannels(int rank, int size, const PeerListFn &peers, int slots, size_t slot_size);
    static Status symmetric(int rank, const PeerListFn &peers);
    // Must be called once the region exists.
    void attach_region(char *base) { base_ = base; }
    // Arrivals may land at base (offered_bytes() of it) from now on; null: no more.
    void attach_offered(char *base, OfferedToHost to_host);

    // A flag's top bit: the message landed in the receiver's offered region.
    static constexpr uint64_t kLandedOffered = uint64_t(1) << 63;

    // Write bytes into the peer's slot (or the same slot of its offered region, with
    // kLandedOffered in the flag), then (ordered after it) the slot flag.
    virtual Poll deliver(Link &link, int slot, const void *src, size_t bytes, uint64_t flag, Reader receiver) = 0;
    // Write the consumed count into the peer's credit word for us.
    virtual void return_credit(Link &link, uint64_t consumed) = 0;
    // Drives the medium (no-op for memory-mapped ones).
    virtual unsigned progress() { return 0; }
    // Moves on sends that wait for the medium (called by every try_send and try_receive).
    virtual void poll_sends() {}

    int link_index(int peer) const;
    uint64_t load(size_t offset) const;
    // Publishes a flag or credit word of our own region (release: after the data).
    void store(size_t offset, uint64_t value);
    char *region() const { return base_; }

    int rank_;
    int size_;
    ChannelLayout layout_;
    std::vector<int> peer_ranks_;
    std::vector<Link> links_;
    std::string error_;
    uint64_t bytes_sent_ = 0;

private:
    const void *offered_arrival(size_t link, int slot, size_t bytes, Reader reader);

    char *base_ = nullptr;
    struct Offered {
        char *base = nullptr;
        OfferedToHost to_host;
        std::vector<std::unique_ptr<char[]>> copies;  // per link: a CPU reader's copy
    } offered_;
    uint64_t offered_arrivals_ = 0;
    uint64_t offered_copies_ = 0;
};

}  // namespace gpurdma::transport
