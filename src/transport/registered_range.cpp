#include "transport/registered_range.h"

#include <cstdio>

namespace gpurdma::transport {

namespace {

const char *type_name(ucs_memory_type_t type)
{
    return type < UCS_MEMORY_TYPE_LAST ? ucs_memory_type_names[type] : "unknown";
}

}  // namespace

Status RegisteredRange::create(UcxMemoryApi &ucx, void *address, size_t length, ucs_memory_type_t type,
                               std::unique_ptr<RegisteredRange> *out)
{
    ucp_mem_map_params_t params{};
    params.field_mask =
        UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    params.address = address;
    params.length = length;
    params.memory_type = type;
    ucp_mem_h memh = nullptr;
    ucs_status_t st = ucx.mem_map(params, &memh);
    if (st != UCS_OK) {
        char where[96];
        std::snprintf(where, sizeof where, "ucp_mem_map(%s, %zu bytes at %p): ", type_name(type), length, address);
        return Status::error(GPURDMA_ERR_NO_RESOURCE, where + std::string(ucs_status_string(st)));
    }
    // From here on the destructor unmaps.
    std::unique_ptr<RegisteredRange> range(new RegisteredRange(ucx, memh));
    void *key = nullptr;
    size_t key_length = 0;
    st = ucx.rkey_pack(memh, &key, &key_length);
    if (st != UCS_OK)
        return Status::error(GPURDMA_ERR_NO_RESOURCE, std::string("ucp_rkey_pack: ") + ucs_status_string(st));
    range->packed_key_.assign(static_cast<const char *>(key), key_length);
    ucx.rkey_buffer_release(key);
    *out = std::move(range);
    return Status::ok();
}

RegisteredRange::~RegisteredRange()
{
    ucx_.mem_unmap(memh_);
}

}  // namespace gpurdma::transport
