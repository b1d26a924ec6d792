#include "gpu/gpu_landing.h"

#include <string>

namespace gpurdma::gpu {

Status GpuLanding::create(CUcontext ctx, transport::UcxChannels &channels, bool register_as_host,
                          std::unique_ptr<GpuLanding> *out)
{
    const auto &d = CudaDriver::instance();
    if (!d.api().mem_alloc || !d.api().mem_free) return Status::unsupported("the CUDA driver lacks cuMemAlloc");
    std::unique_ptr<GpuLanding> landing(new GpuLanding(ctx, channels));
    {
        ContextScope scope(ctx);
        const int rc = d.api().mem_alloc(&landing->memory_, channels.offered_bytes());
        if (rc != 0) return d.failure("cuMemAlloc", rc);
    }
    void *base = reinterpret_cast<void *>(static_cast<uintptr_t>(landing->memory_));
    auto to_host = [ctx](void *dst, const void *src, size_t bytes, std::string *why) {
        const Status st = CudaDriver::instance().copy(dst, src, bytes, ctx);
        if (!st.is_ok()) *why = st.message();
        return st.is_ok();
    };
    const Status offered =
        channels.offer_landing(base, register_as_host ? UCS_MEMORY_TYPE_HOST : UCS_MEMORY_TYPE_CUDA, to_host);
    if (!offered.is_ok()) {
        channels.withdraw_landing();  // whatever part of it was done; the destructor frees the memory
        return offered;
    }
    landing->offered_ = true;
    *out = std::move(landing);
    return Status::ok();
}

GpuLanding::~GpuLanding()
{
    if (offered_) channels_.withdraw_landing();
    if (!memory_) return;
    ContextScope scope(ctx_);
    CudaDriver::instance().api().mem_free(memory_);
}

}  // namespace gpurdma::gpu
