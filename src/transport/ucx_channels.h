// Slot channels over UCX: a message is a put into the receiver's landing slot, a
// worker fence, then a put of the slot's flag. Messages up to kActiveMessageMax and
// all credits are active messages instead, which the receiver's handler writes into
// the same slot, flag and credit words: one send where the puts take two plus, on
// transports that emulate RMA (tcp), an acknowledgement each. The region is
// allocated and registered once (ucp_mem_map), nothing per message.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/slot_channels.h"
#include "transport/ucx_context.h"
#include "transport/ucx_memory.h"

namespace gpurdma::transport {

// What a rank publishes about its UCX side at set-up.
struct UcxPeerInfo {
    std::string worker_address;
    uint64_t region_base = 0;
    std::string region_key;
    uint64_t channel_id = 0;  // addresses our active messages (never reused in a process)
};

class UcxChannels : public SlotChannels, private AmSink {
public:
    // Registers this rank's landing region, or says why not.
    static Status create(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots, size_t slot_size,
                         std::unique_ptr<UcxChannels> *out);
    ~UcxChannels() override;

    // Largest message sent as an active message where UCX does RMA natively (RDMA,
    // shared memory): above it a put moves the data without the receiver's copy.
    // Where RMA is emulated (tcp), every message up to a slot goes this way: between
    // two network namespaces 8 B took 25 us against 47 us by puts, 256 KiB 112 us.
    static constexpr size_t kActiveMessageMax = 8 * 1024;

    UcxPeerInfo local_info() const;
    // Connects to every peer. `hosts` names them in errors.
    Status connect(const std::vector<UcxPeerInfo> &peers, const std::vector<std::string> &hosts);

    bool source_busy(const void *ptr, size_t bytes) override;
    bool sends_pending() override;
    size_t region_bytes() const { return layout_.bytes(); }

protected:
    Poll deliver(Link &link, int slot, const void *src, size_t bytes, uint64_t flag) override;
    void return_credit(Link &link, uint64_t consumed) override;
    unsigned progress() override { return context_.progress(); }

private:
    struct Remote {
        std::shared_ptr<UcxEndpoint> ep;
        std::unique_ptr<RemoteRegion> region;
        std::vector<uint64_t> flag_values;  // stable sources for flag puts
        std::vector<AmHeader> data_headers;  // stable headers of active-message sends, per slot
        AmHeader credit_header;
        size_t message_max = 0;  // largest message sent as an active message
        uint64_t channel_id = 0;  // the peer's, for our active messages
    };
    struct Pending {
        void *request;
        const char *lo;  // user source range, null for our own words
        const char *hi;
        int peer;
    };

    UcxChannels(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots, size_t slot_size);
    Remote &remote_of(const Link &l);
    bool put(const Link &l, const void *src, size_t bytes, size_t remote_offset, bool user_source);
    bool send_message(const Link &l, const AmHeader &header, const void *src, size_t bytes);
    void on_message(const AmHeader &header, const void *data, size_t bytes) override;
    // A send's request: false (and error_) if it failed; otherwise pending until it
    // completes, src (null: our own words) counted busy until then.
    bool track(ucs_status_ptr_t request, const char *what, const void *src, size_t bytes, int peer);
    void reap();

    UcxContext &context_;
    std::unique_ptr<RegisteredRegion> region_;
    std::vector<Remote> remotes_;  // parallel to links_
    std::vector<Pending> pending_;
    uint64_t channel_id_;  // ours: a stale message for a freed channel can never match a new one
};

}  // namespace gpurdma::transport
