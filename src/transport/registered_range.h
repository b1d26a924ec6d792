// An existing range of memory registered with UCX for RMA, with its memory type given
// (UCS_MEMORY_TYPE_CUDA for GPUDirect RDMA from a cuMemAlloc range) so that UCX need
// not detect it, and its packed rkey for peers. Unlike RegisteredRegion
// (transport/ucx_memory.h) UCX allocates nothing. Unmapped in the destructor.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <string>

#include "base/noncopyable.h"
#include "base/status.h"
#include "transport/ucx_memory_api.h"

namespace gpurdma::transport {

class RegisteredRange : private NonCopyable {
public:
    // Maps and packs, or a failed Status naming the call and UCX's status, with nothing
    // left mapped. `ucx` must outlive the range.
    static Status create(UcxMemoryApi &ucx, void *address, size_t length, ucs_memory_type_t type,
                         std::unique_ptr<RegisteredRange> *out);
    ~RegisteredRange();

    const std::string &packed_key() const { return packed_key_; }

private:
    RegisteredRange(UcxMemoryApi &ucx, ucp_mem_h memh) : ucx_(ucx), memh_(memh) {}

    UcxMemoryApi &ucx_;
    ucp_mem_h memh_;
    std::string packed_key_;
};

}  // namespace gpurdma::transport
