#include "transport/ucx_memory.h"

namespace gpurdma::transport {

namespace {

Status ucx_error(const std::string &what, ucs_status_t status)
{
    return Status::error(GPURDMA_ERR_NO_RESOURCE, what + ": " + ucs_status_string(status));
}

}  // namespace

Status RegisteredRegion::create(ucp_context_h context, size_t length, std::unique_ptr<RegisteredRegion> *out)
{
    std::unique_ptr<RegisteredRegion> region(new RegisteredRegion(context));
    ucp_mem_map_params_t params{};
    params.field_mask =
        UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    params.address = nullptr;
    params.length = length;
    // Let UCX allocate, so shared-memory transports (sysv/posix) can map it remotely.
    params.flags = UCP_MEM_MAP_ALLOCATE;
    ucs_status_t st = ucp_mem_map(context, &params, &region->memh_);
    if (st != UCS_OK) return ucx_error("ucp_mem_map(" + std::to_string(length) + " bytes)", st);
    // From here on the destructor unmaps.
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    st = ucp_mem_query(region->memh_, &attr);
    if (st != UCS_OK) return ucx_error("ucp_mem_query", st);
    region->base_ = static_cast<char *>(attr.address);
    region->length_ = attr.length;
    void *rkey = nullptr;
    size_t rkey_len = 0;
    st = ucp_rkey_pack(context, region->memh_, &rkey, &rkey_len);
    if (st != UCS_OK) return ucx_error("ucp_rkey_pack", st);
    region->packed_key_.assign(static_cast<const char *>(rkey), rkey_len);
    ucp_rkey_buffer_release(rkey);
    *out = std::move(region);
    return Status::ok();
}

RegisteredRegion::~RegisteredRegion()
{
    if (memh_) ucp_mem_unmap(context_, memh_);
}

Status RemoteKey::unpack(ucp_ep_h ep, const std::string &packed_key, std::shared_ptr<RemoteKey> *out)
{
    ucp_rkey_h rkey = nullptr;
    const ucs_status_t st = ucp_ep_rkey_unpack(ep, packed_key.data(), &rkey);
    if (st != UCS_OK) return ucx_error("ucp_ep_rkey_unpack", st);
    out->reset(new RemoteKey(rkey));
    return Status::ok();
}

RemoteKey::~RemoteKey()
{
    ucp_rkey_destroy(rkey_);
}

Status RemoteRegion::create(ucp_ep_h ep, uint64_t base, const std::string &packed_key,
                            std::unique_ptr<RemoteRegion> *out)
{
    std::shared_ptr<RemoteKey> key;
    const Status unpacked = RemoteKey::unpack(ep, packed_key, &key);
    if (!unpacked.is_ok()) return unpacked;
    *out = std::make_unique<RemoteRegion>(std::move(key), base);
    return Status::ok();
}

}  // namespace gpurdma::transport
