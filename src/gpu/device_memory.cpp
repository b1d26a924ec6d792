#include "gpu/device_memory.h"

namespace gpurdma::gpu {

Status DeviceMemory::create(CUcontext ctx, size_t bytes, std::unique_ptr<DeviceMemory> *out)
{
    const auto &d = GpuRuntime::instance();
    if (!d.api().mem_alloc || !d.api().mem_free) return Status::unsupported("the CUDA driver lacks cuMemAlloc");
    ContextScope scope(ctx);
    CUdeviceptr ptr = 0;
    const int rc = d.api().mem_alloc(&ptr, bytes);
    if (rc != 0) return d.failure("cuMemAlloc", rc);
    out->reset(new DeviceMemory(ctx, ptr));
    return Status::ok();
}

DeviceMemory::~DeviceMemory()
{
    ContextScope scope(ctx_);
    GpuRuntime::instance().api().mem_free(ptr_);
}

}  // namespace gpurdma::gpu
