#include "transport/ucx_memory_api.h"

namespace gpurdma::transport {

ucs_status_t UcpMemoryApi::memory_types(uint64_t *types)
{
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    const ucs_status_t st = ucp_context_query(context_, &attr);
    if (st == UCS_OK) *types = attr.memory_types;
    return st;
}

ucs_status_t UcpMemoryApi::mem_map(const ucp_mem_map_params_t &params, ucp_mem_h *memh)
{
    return ucp_mem_map(context_, &params, memh);
}

ucs_status_t UcpMemoryApi::rkey_pack(ucp_mem_h memh, void **buffer, size_t *length)
{
    return ucp_rkey_pack(context_, memh, buffer, length);
}

void UcpMemoryApi::rkey_buffer_release(void *buffer)
{
    ucp_rkey_buffer_release(buffer);
}

ucs_status_t UcpMemoryApi::mem_unmap(ucp_mem_h memh)
{
    return ucp_mem_unmap(context_, memh);
}

}  // namespace gpurdma::transport
