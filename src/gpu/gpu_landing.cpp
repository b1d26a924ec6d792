#include "gpu/gpu_landing.h"

#include <string>

#include "exec/channel_release.h"
#include "gpu/gdr_check.h"

namespace gpurdma::gpu {

Status GpuLanding::create(CUcontext ctx, transport::UcxChannels &channels, bool register_as_host,
                          const exec::WaitPolicy &waits, std::unique_ptr<GpuLanding> *out)
{
    std::unique_ptr<GpuLanding> landing(new GpuLanding(channels, waits));
    const Status allocated = DeviceMemory::create(ctx, channels.offered_bytes(), &landing->memory_);
    if (!allocated.is_ok()) return allocated;
    void *base = landing->memory_->data();
    auto to_host = [ctx](void *dst, const void *src, size_t bytes, std::string *why) {
        const Status st = GpuRuntime::instance().copy(dst, src, bytes, ctx);
        if (!st.is_ok()) *why = st.message();
        return st.is_ok();
    };
    const Status offered =
        channels.offer_landing(base, register_as_host ? UCS_MEMORY_TYPE_HOST : device_memory_type(), to_host);
    if (!offered.is_ok()) {
        landing->withdraw();  // whatever part of it was done; the destructor frees the memory
        return offered;
    }
    landing->offered_ = true;
    *out = std::move(landing);
    return Status::ok();
}

GpuLanding::~GpuLanding()
{
    // Withdrawn before memory_ goes: no arrival lands there after.
    if (offered_) withdraw();
}

void GpuLanding::withdraw()
{
    // The offers' sends read the key that the withdrawal frees: they finish first (one
    // still running after the bound is cancelled).
    exec::UcxRequestsFinished sends(channels_);
    (void)exec::run_teardown(sends, waits_, kWithdrawBound, exec::WaitSite{"GPU landing", 0, ""});
    channels_.withdraw_landing();
}

}  // namespace gpurdma::gpu
