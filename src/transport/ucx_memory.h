// Memory other processes write into: allocated and registered through UCX once, so
// that shared-memory transports can map it and RDMA NICs can write it. Its pages are
// the allocator's fresh ones (zero), untouched until written: landing_pool.h clears
// what a reused slice needs cleared.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "base/noncopyable.h"
#include "base/status.h"

namespace gpurdma::transport {

class RegisteredRegion : private NonCopyable {
public:
    // Allocates and registers `length` bytes, or says why not.
    static Status create(ucp_context_h context, size_t length, std::unique_ptr<RegisteredRegion> *out);
    ~RegisteredRegion();

    char *base() const { return base_; }
    size_t length() const { return length_; }
    const std::string &packed_key() const { return packed_key_; }

private:
    explicit RegisteredRegion(ucp_context_h context) : context_(context) {}

    ucp_context_h context_;
    ucp_mem_h memh_ = nullptr;
    char *base_ = nullptr;
    size_t length_ = 0;
    std::string packed_key_;
};

// Our unpacked key for a peer's registered region (UcxEndpoint keeps one per region).
class RemoteKey : private NonCopyable {
public:
    static Status unpack(ucp_ep_h ep, const std::string &packed_key, std::shared_ptr<RemoteKey> *out);
    ~RemoteKey();
    ucp_rkey_h get() const { return rkey_; }

private:
    explicit RemoteKey(ucp_rkey_h rkey) : rkey_(rkey) {}
    ucp_rkey_h rkey_;
};

// A peer's memory as seen from here: its address and the key of the region it is in.
class RemoteRegion : private NonCopyable {
public:
    // Unpacks a key of its own (memory the peer registered for this channel alone).
    static Status create(ucp_ep_h ep, uint64_t base, const std::string &packed_key, std::unique_ptr<RemoteRegion> *out);
    RemoteRegion(std::shared_ptr<RemoteKey> key, uint64_t base) : key_(std::move(key)), base_(base) {}

    ucp_rkey_h key() const { return key_->get(); }
    uint64_t base() const { return base_; }

private:
    std::shared_ptr<RemoteKey> key_;
    uint64_t base_;
};

}  // namespace gpurdma::transport
