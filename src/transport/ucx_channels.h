// Slot channels over UCX RMA: a message is a put into the receiver's landing slot,
// a worker fence, then a put of the slot's flag; credits are puts too. The region
// is allocated and registered once (ucp_mem_map), nothing per message.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/slot_channels.h"
#include "transport/ucx_context.h"
#include "transport/ucx_memory.h"

namespace gpurdma::transport {

// What a rank publishes about its UCX side at set-up.
struct UcxPeerInfo {
    std::string worker_address;
    uint64_t region_base = 0;
    std::string region_key;
};

class UcxChannels : public SlotChannels {
public:
    // Registers this rank's landing region. Throws std::runtime_error on failure.
    UcxChannels(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots,
                size_t slot_size);
    ~UcxChannels() override;

    UcxPeerInfo local_info() const;
    // Connects to every peer. `hosts` names them in errors. Throws std::runtime_error.
    void connect(const std::vector<UcxPeerInfo> &peers, const std::vector<std::string> &hosts);

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
        uint64_t credit_value = 0;
    };
    struct Pending {
        void *request;
        const char *lo;  // user source range, null for our own words
        const char *hi;
        int peer;
    };

    Remote &remote_of(const Link &l);
    bool put(const Link &l, const void *src, size_t bytes, size_t remote_offset, bool user_source);
    void reap();

    UcxContext &context_;
    std::unique_ptr<RegisteredRegion> region_;
    std::vector<Remote> remotes_;  // parallel to links_
    std::vector<Pending> pending_;
};

}  // namespace gpurdma::transport
