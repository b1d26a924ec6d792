// The UCX calls that register memory for RMA, behind an interface: the GPUDirect RDMA
// registration (transport/registered_range.h) runs against a fake in the unit tests, since
// the development machine's UCX has no CUDA support. The real one is a thin pass-through.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>

namespace gpurdma::transport {

class UcxMemoryApi {
public:
    virtual ~UcxMemoryApi() = default;
    // ucp_context_query's memory_types: bit UCS_BIT(t) for each ucs_memory_type_t t supported.
    virtual ucs_status_t memory_types(uint64_t *types) = 0;
    virtual ucs_status_t mem_map(const ucp_mem_map_params_t &params, ucp_mem_h *memh) = 0;
    virtual ucs_status_t rkey_pack(ucp_mem_h memh, void **buffer, size_t *length) = 0;
    virtual void rkey_buffer_release(void *buffer) = 0;
    virtual ucs_status_t mem_unmap(ucp_mem_h memh) = 0;
};

// The calls on a live context (not owned: it must outlive this).
class UcpMemoryApi final : public UcxMemoryApi {
public:
    explicit UcpMemoryApi(ucp_context_h context) : context_(context) {}
    ucs_status_t memory_types(uint64_t *types) override;
    ucs_status_t mem_map(const ucp_mem_map_params_t &params, ucp_mem_h *memh) override;
    ucs_status_t rkey_pack(ucp_mem_h memh, void **buffer, size_t *length) override;
    void rkey_buffer_release(void *buffer) override;
    ucs_status_t mem_unmap(ucp_mem_h memh) override;

private:
    ucp_context_h context_;
};

}  // namespace gpurdma::transport
