#include "gpu/host_registration.h"

namespace gpurdma::gpu {

namespace {

constexpr unsigned kRegisterDeviceMap = 2;  // CU_MEMHOSTREGISTER_DEVICEMAP

}  // namespace

Status HostRegistration::create(CUcontext ctx, const void *base, size_t bytes, std::unique_ptr<HostRegistration> *out)
{
    const auto &d = GpuRuntime::instance();
    const auto &a = d.api();
    if (!d.available()) return Status::unsupported(d.why_unavailable());
    if (!a.mem_host_register || !a.mem_host_unregister || !a.mem_host_get_device_pointer)
        return Status::unsupported(
            "the CUDA driver lacks cuMemHostRegister/cuMemHostUnregister/cuMemHostGetDevicePointer");
    void *p = const_cast<void *>(base);
    ContextScope scope(ctx);
    int rc = a.mem_host_register(p, bytes, kHostRegisterPortable | kRegisterDeviceMap);
    if (rc != 0) return d.failure(("cuMemHostRegister of " + std::to_string(bytes) + " bytes").c_str(), rc);
    CUdeviceptr device = 0;
    rc = a.mem_host_get_device_pointer(&device, p, 0);
    if (rc != 0) {
        a.mem_host_unregister(p);
        return d.failure("cuMemHostGetDevicePointer", rc);
    }
    out->reset(new HostRegistration(ctx, static_cast<const char *>(base), bytes, device));
    return Status::ok();
}

HostRegistration::~HostRegistration()
{
    ContextScope scope(ctx_);
    GpuRuntime::instance().api().mem_host_unregister(const_cast<char *>(base_));
}

}  // namespace gpurdma::gpu
