// Landing memory for every communicator's UCX channels, carved from a few regions
// that are allocated and registered once per process. A communicator takes a slice
// at set-up and gives it back when it is freed, so creating one costs neither a
// registration (on RDMA NICs: pinning) nor a page of memory it never touches, and
// peers unpack a region's key once (UcxEndpoint::remote_key), not per communicator.
// Untouched pages stay unallocated: only the slice's control part (flags, credits)
// is cleared; its data slots are only read once a flag says a message is there.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/noncopyable.h"
#include "base/status.h"
#include "transport/ucx_memory.h"

namespace gpurdma::transport {

class LandingPool;

// A piece of a registered region, returned to the pool when it goes (unless kept).
class LandingSlice : private NonCopyable {
public:
    ~LandingSlice();

    char *base() const { return base_; }
    size_t bytes() const { return bytes_; }
    // The region's: what a peer needs to put into any slice of it.
    const std::string &packed_key() const { return region_->packed_key(); }
    uint64_t region_base() const { return reinterpret_cast<uint64_t>(region_->base()); }
    // A peer may still write here (its release timed out): never handed out again.
    void keep_forever() { kept_ = true; }

private:
    friend class LandingPool;
    LandingSlice(LandingPool &pool, const RegisteredRegion *region, size_t offset, size_t bytes)
        : pool_(pool), region_(region), offset_(offset), bytes_(bytes), base_(region->base() + offset)
    {}
    LandingPool &pool_;
    const RegisteredRegion *region_;
    size_t offset_;
    size_t bytes_;
    char *base_;
    bool kept_ = false;
};

class LandingPool : private NonCopyable {
public:
    // Regions are at least this large: a few communicators' slices at the defaults
    // (2 ring neighbours x 4 slots x 256 KiB and a page of flags each).
    static constexpr size_t kRegionBytes = size_t(8) << 20;

    explicit LandingPool(ucp_context_h context) : context_(context) {}

    // A slice of at least `bytes` (whole pages), its first `cleared` bytes zero; a new
    // region if no free range fits, or why not (UCX's reason).
    Status take(size_t bytes, size_t cleared, std::unique_ptr<LandingSlice> *out);

    // What the pool holds (for tests and the set-up line).
    size_t regions() const;
    size_t bytes_free() const;

private:
    friend class LandingSlice;
    void give_back(const RegisteredRegion *region, size_t offset, size_t bytes);

    struct Region {
        std::unique_ptr<RegisteredRegion> memory;
        std::map<size_t, size_t> free;  // offset -> length, coalesced
    };
    ucp_context_h context_;
    mutable std::mutex lock_;  // communicators set up and freed from any thread
    std::vector<Region> regions_;
};

}  // namespace gpurdma::transport
