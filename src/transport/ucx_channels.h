// Message channels of one communicator over UCX RMA: a message is a put into the
// receiver's landing slot, then (after a fence) a put of the slot's arrival flag.
// The receiver polls the flag, uses the data in place and returns a credit by a put
// into the sender's region. Nothing is registered per message.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/channel_layout.h"
#include "transport/transport.h"
#include "transport/ucx_context.h"
#include "transport/ucx_memory.h"

namespace gpurdma::transport {

// What a rank publishes about itself at set-up.
struct PeerInfo {
    std::string worker_address;
    uint64_t region_base = 0;
    std::string region_key;
    std::string host;
};

class UcxChannels : public PeerTransport {
public:
    // Registers this rank's landing region. Throws std::runtime_error on failure.
    UcxChannels(UcxContext &context, int rank, int size, int slots, size_t slot_size);
    ~UcxChannels() override;

    PeerInfo local_info(const std::string &host) const;

    // Connects to every neighbor. Throws std::runtime_error naming the peer.
    void connect(const std::vector<PeerInfo> &peers);

    Poll try_send(int peer, const void *src, size_t bytes) override;
    const void *try_receive(int peer, size_t bytes) override;
    void release(int peer) override;
    bool source_busy(const void *ptr, size_t bytes) override;
    bool sends_pending() override;
    const char *error() const override { return error_.c_str(); }

    bool failed() const override { return !error_.empty(); }
    // Waits (with progress, at most timeout_s) until every message we sent has been
    // consumed, so no peer writes into our region after it is gone.
    bool drain(double timeout_s);
    uint64_t bytes_put() const { return bytes_put_; }
    size_t region_bytes() const { return layout_.bytes(); }

private:
    struct Link {
        int rank = -1;
        int index_there = -1;   // our index in the peer's neighbor list
        ChannelLayout remote_layout;
        std::shared_ptr<UcxEndpoint> ep;
        std::unique_ptr<RemoteRegion> region;
        uint64_t sent = 0;
        uint64_t received = 0;
        std::vector<uint64_t> flag_values;  // stable sources for flag puts
        uint64_t credit_value = 0;
    };
    struct Pending {
        void *request;
        const char *lo;
        const char *hi;
        int peer;
    };

    Link *link(int peer);
    bool put(Link &l, const void *src, size_t bytes, size_t remote_offset, bool user_source);
    void reap();
    uint64_t load(size_t offset) const;

    UcxContext &context_;
    int rank_;
    int size_;
    ChannelLayout layout_;
    std::unique_ptr<RegisteredRegion> region_;
    std::vector<int> neighbor_ranks_;
    std::vector<int> link_of_rank_;  // -1 for non-neighbors
    std::vector<Link> links_;
    std::vector<Pending> pending_;
    std::string error_;
    uint64_t bytes_put_ = 0;
};

}  // namespace gpurdma::transport
