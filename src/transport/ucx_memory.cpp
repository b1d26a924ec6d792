#include "transport/ucx_memory.h"

#include <cstring>
#include <stdexcept>

namespace gpurdma::transport {

RegisteredRegion::RegisteredRegion(ucp_context_h context, size_t length) : context_(context)
{
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                        UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    params.address = nullptr;
    params.length = length;
    // Let UCX allocate, so shared-memory transports (sysv/posix) can map it remotely.
    params.flags = UCP_MEM_MAP_ALLOCATE;
    ucs_status_t st = ucp_mem_map(context_, &params, &memh_);
    if (st != UCS_OK)
        throw std::runtime_error(std::string("ucp_mem_map(") + std::to_string(length) +
                                 " bytes): " + ucs_status_string(st));
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    st = ucp_mem_query(memh_, &attr);
    if (st != UCS_OK) {
        ucp_mem_unmap(context_, memh_);
        throw std::runtime_error(std::string("ucp_mem_query: ") + ucs_status_string(st));
    }
    base_ = static_cast<char *>(attr.address);
    length_ = attr.length;
    std::memset(base_, 0, length_);
    void *rkey = nullptr;
    size_t rkey_len = 0;
    st = ucp_rkey_pack(context_, memh_, &rkey, &rkey_len);
    if (st != UCS_OK) {
        ucp_mem_unmap(context_, memh_);
        throw std::runtime_error(std::string("ucp_rkey_pack: ") + ucs_status_string(st));
    }
    packed_key_.assign(static_cast<const char *>(rkey), rkey_len);
    ucp_rkey_buffer_release(rkey);
}

RegisteredRegion::~RegisteredRegion()
{
    ucp_mem_unmap(context_, memh_);
}

RemoteRegion::RemoteRegion(ucp_ep_h ep, uint64_t base, const std::string &packed_key) : base_(base)
{
    const ucs_status_t st = ucp_ep_rkey_unpack(ep, packed_key.data(), &rkey_);
    if (st != UCS_OK) throw std::runtime_error(std::string("ucp_ep_rkey_unpack: ") + ucs_status_string(st));
}

RemoteRegion::~RemoteRegion()
{
    ucp_rkey_destroy(rkey_);
}

}  // namespace gpurdma::transport
