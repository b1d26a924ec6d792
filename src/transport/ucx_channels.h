// Slot channels over UCX: a message is a put into the receiver's landing slot, a
// worker fence, then a put of the slot's flag. Messages up to kActiveMessageMax and
// all credits are active messages instead, which the receiver's handler writes into
// the same slot, flag and credit words: one send where the puts take two plus, on
// transports that emulate RMA (tcp), an acknowledgement each. The region is a slice
// of memory the process registered once for all its communicators (landing_pool.h),
// nothing per message.
// A rank whose GPU reads its arrivals may offer GPU memory as well (offer_landing):
// registered with its memory type, the key sent to each peer as an active message.
// A peer's message for a GPU reader that is put rather than sent then goes there
// (GPUDirect RDMA into GPU memory); the flag still lands in host memory. The data
// and the flag may then take different lanes, which UCX before 1.14 does not order
// across (its worker fence is per lane: seen here between two processes, the data by
// UCX's emulated put over active messages, the flag by shared memory, the flag
// first), so there the flag waits for a flush of the endpoint.
// Lanes (coll_gpurdma_rail_qps): a peer's messages may go over several endpoints, slot s
// on lane s % lanes, so that an RDMA NIC sends them on separate QPs and the fabric's ECMP
// hashes those onto different spine links. A slot's data and flag share its lane (the
// worker fence orders them as before); slots are independent of each other, and credits
// and offers stay on lane 0.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/landing_pool.h"
#include "transport/registered_range.h"
#include "transport/slot_channels.h"
#include "transport/ucx_context.h"
#include "transport/ucx_memory.h"
#include "transport/ucx_memory_api.h"

namespace gpurdma::transport {

// What a rank publishes about its UCX side at set-up.
struct UcxPeerInfo {
    std::string worker_address;
    uint64_t region_base = 0;  // our landing slice
    uint64_t key_region = 0;  // the registered region it is in, whose key region_key is
    std::string region_key;
    uint64_t channel_id = 0;  // addresses our active messages (never reused in a process)
};

class UcxChannels : public SlotChannels, private AmSink {
public:
    // Registers this rank's landing region, or says why not.
    static Status create(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots, size_t slot_size,
                         int lanes, std::unique_ptr<UcxChannels> *out);
    ~UcxChannels() override;

    // Endpoints per peer (at least 1).
    int lanes() const { return lanes_; }

    // Largest message sent as an active message where UCX does RMA natively (RDMA,
    // shared memory): above it a put moves the data without the receiver's copy.
    // Where RMA is emulated (tcp), every message up to a slot goes this way: between
    // two network namespaces 8 B took 25 us against 47 us by puts, 256 KiB 112 us.
    static constexpr size_t kActiveMessageMax = 8 * 1024;

    UcxPeerInfo local_info() const;
    // Connects to every peer. `hosts` names them in errors.
    Status connect(const std::vector<UcxPeerInfo> &peers, const std::vector<std::string> &hosts);

    // Offers [base, base + offered_bytes()), memory of `type` (UCS_MEMORY_TYPE_CUDA:
    // GPU memory), to every peer for its messages to a GPU reader here; to_host copies
    // such a message for a CPU reader. Once per channel, after connect().
    Status offer_landing(void *base, ucs_memory_type_t type, OfferedToHost to_host);
    // Before the offered memory goes, with no call in flight: unregistered, and an
    // arrival there from now on is an error. The offers' sends read the key: their
    // owner first lets requests_finished() come true under its wait loop; a send still
    // running here is abandoned (cancelled and freed).
    void withdraw_landing();
    // One look that never waits: reaps the requests that finished and drives UCX once;
    // whether none is left. requests_outstanding() counts them (puts, active messages,
    // flushes holding back a flag).
    bool requests_finished();
    size_t requests_outstanding() const { return pending_.size() + deferred_.size(); }
    // Peers whose offered memory our messages to a GPU reader may be put into.
    int peers_offering() const;

    bool source_busy(const void *ptr, size_t bytes) override;
    bool sends_pending() override;
    size_t region_bytes() const { return layout_.bytes(); }
    // A peer may still write into our slice (its release did not finish in time): the
    // slice is never handed to another communicator.
    void keep_landing() { region_->keep_forever(); }

protected:
    Poll deliver(Link &link, int slot, const void *src, size_t bytes, uint64_t flag, Reader receiver) override;
    void return_credit(Link &link, uint64_t consumed) override;
    unsigned progress() override { return context_.progress(); }
    void poll_sends() override
    {
        if (!deferred_.empty()) post_deferred_flags();
    }

private:
    struct Lane {  // one endpoint to the peer, and the peer's keys unpacked on it
        std::shared_ptr<UcxEndpoint> ep;
        std::unique_ptr<RemoteRegion> region;
        std::unique_ptr<RemoteRegion> offered;  // the peer's offered memory, once its key came
    };
    struct Remote {
        std::vector<Lane> lanes;  // at least one; slot s uses lanes[s % lanes.size()]
        Lane &lane_of(int slot) { return lanes[static_cast<size_t>(slot) % lanes.size()]; }
        std::vector<uint64_t> flag_values;  // stable sources for flag puts
        std::vector<AmHeader> data_headers;  // stable headers of active-message sends, per slot
        AmHeader credit_header;
        AmHeader offer_header;
        size_t message_max = 0;  // largest message sent as an active message
        uint64_t channel_id = 0;  // the peer's, for our active messages
    };
    struct Pending {
        void *request;
        const char *lo;  // user source range, null for our own words
        const char *hi;
        int peer;
    };

    UcxChannels(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots, size_t slot_size,
                int lanes);
    Remote &remote_of(const Link &l);
    bool put(const Link &l, const Lane &lane, const RemoteRegion &to, const void *src, size_t bytes,
             size_t remote_offset, bool user_source);
    // Unpacks the keys of offers that came (active-message handlers only store them).
    void adopt_offers();
    // Puts the flags whose endpoint flush has completed.
    void post_deferred_flags();
    bool put_flag(const Link &l, int slot, uint64_t flag);
    // On lane `lane` of the link's peer (0: credits, offers).
    bool send_message(const Link &l, const AmHeader &header, const void *src, size_t bytes, int lane = 0);
    void on_message(const AmHeader &header, const void *data, size_t bytes) override;
    // A send's request: false (and error_) if it failed; otherwise pending until it
    // completes, src (null: our own words) counted busy until then.
    bool track(ucs_status_ptr_t request, const char *what, const void *src, size_t bytes, int peer);
    void reap();
    // Cancels and frees every request still tracked (nobody waits for them any more).
    void abandon_requests();

    UcxContext &context_;
    std::unique_ptr<LandingSlice> region_;  // from the context's pool
    std::unique_ptr<UcxMemoryApi> memory_api_;  // before offered_range_: outlives it
    std::unique_ptr<RegisteredRange> offered_range_;
    // Offers from peers (base, packed key) by link, written by the handler.
    struct IncomingOffer {
        uint64_t base;
        std::string key;
    };
    std::mutex offers_lock_;
    std::vector<std::optional<IncomingOffer>> offers_in_;
    std::atomic<bool> offers_waiting_{false};
    // Flags of messages put into offered memory, waiting for their endpoint's flush.
    struct DeferredFlag {
        void *flush;  // ucp_ep_flush_nbx's request
        size_t link;
        int slot;
    };
    std::vector<DeferredFlag> deferred_;
    bool flush_before_flag_;  // UCX < 1.14: fences order within a lane only
    std::vector<Remote> remotes_;  // parallel to links_
    std::vector<Pending> pending_;
    int lanes_;  // endpoints per peer
    uint64_t channel_id_;  // ours: a stale message for a freed channel can never match a new one
};

}  // namespace gpurdma::transport
