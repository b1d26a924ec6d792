// Memory other processes write into: allocated and registered through UCX once, so
// that shared-memory transports can map it and RDMA NICs can write it.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <string>

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

// A peer's region as seen from here: its address and our unpacked key for it.
class RemoteRegion : private NonCopyable {
public:
    static Status create(ucp_ep_h ep, uint64_t base, const std::string &packed_key, std::unique_ptr<RemoteRegion> *out);
    ~RemoteRegion();

    ucp_rkey_h key() const { return rkey_; }
    uint64_t base() const { return base_; }

private:
    RemoteRegion(ucp_rkey_h rkey, uint64_t base) : rkey_(rkey), base_(base) {}

    ucp_rkey_h rkey_ = nullptr;
    uint64_t base_;
};

}  // namespace gpurdma::transport
