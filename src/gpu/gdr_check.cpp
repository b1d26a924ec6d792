#include "gpu/gdr_check.h"

#include <memory>

#include "gpu/gpu_runtime.h"
#include "transport/registered_range.h"

namespace gpurdma::gpu {

namespace {

// "host, cuda" from ucp_context_query's memory_types.
std::string type_list(uint64_t types)
{
    std::string out;
    for (int t = 0; t < UCS_MEMORY_TYPE_LAST; ++t)
        if (types & UCS_BIT(t)) out += (out.empty() ? "" : ", ") + std::string(ucs_memory_type_names[t]);
    return out.empty() ? "none" : out;
}

}  // namespace

ucs_memory_type_t device_memory_type()
{
    return GpuRuntime::instance().vendor() == Vendor::Hip ? UCS_MEMORY_TYPE_ROCM : UCS_MEMORY_TYPE_CUDA;
}

GdrDecision check_gdr(transport::UcxMemoryApi *ucx, const std::string &ucx_why, GdrInputs in,
                      const WithDeviceRange &with_range)
{
    in.memory = device_memory_type() == UCS_MEMORY_TYPE_ROCM ? "ROCm" : "CUDA";
    uint64_t types = 0;
    ucs_status_t st = UCS_OK;
    if (!ucx) {
        in.ucx_cuda = Answer::Unknown;
        in.ucx_why = ucx_why;
    } else if ((st = ucx->memory_types(&types)) != UCS_OK) {
        in.ucx_cuda = Answer::Unknown;
        in.ucx_why = std::string("ucp_context_query: ") + ucs_status_string(st);
    } else {
        in.ucx_cuda = (types & UCS_BIT(device_memory_type())) ? Answer::Yes : Answer::No;
        in.ucx_why = "its memory types: " + type_list(types);
    }
    if (!gdr_probe_worthwhile(in)) return decide_gdr(in);

    bool allocated = false;
    Status registered;
    const Status st_range = with_range(kGdrProbeBytes, [&](void *address) {
        allocated = true;
        std::unique_ptr<transport::RegisteredRange> range;
        registered = transport::RegisteredRange::create(*ucx, address, kGdrProbeBytes, device_memory_type(), &range);
        return registered;
    });
    if (!allocated) {
        in.probe = Probe::NotRun;
        in.probe_why = st_range.message();
    } else {
        in.probe = registered.is_ok() ? Probe::Accepted : Probe::Refused;
        in.probe_why = registered.message();
    }
    return decide_gdr(in);
}

}  // namespace gpurdma::gpu
