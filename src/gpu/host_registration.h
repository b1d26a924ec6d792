// Existing host memory page-locked and mapped for the GPU (RAII): cuMemHostRegister
// (portable, device-mapped), so that kernels read it where it lies, over PCIe, and
// copies to and from it are one DMA. The rail stage registers the host team's landing
// region this way: arrivals are reduced on the GPU straight out of their slots.
// Unregistered in the destructor; whoever owns the memory must keep it until then.
#pragma once

#include <cstddef>
#include <memory>

#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

class HostRegistration : private NonCopyable {
public:
    // Fails (naming the driver call) where the driver lacks the entry points or refuses.
    static Status create(CUcontext ctx, const void *base, size_t bytes, std::unique_ptr<HostRegistration> *out);
    ~HostRegistration();

    bool contains(const void *p) const
    {
        const auto *c = static_cast<const char *>(p);
        return c >= base_ && c < base_ + bytes_;
    }
    // p (inside the range) as the GPU addresses it.
    const void *device_view(const void *p) const
    {
        return reinterpret_cast<const void *>(device_ + static_cast<size_t>(static_cast<const char *>(p) - base_));
    }
    const char *base() const { return base_; }
    size_t bytes() const { return bytes_; }

private:
    HostRegistration(CUcontext ctx, const char *base, size_t bytes, CUdeviceptr device)
        : ctx_(ctx), base_(base), bytes_(bytes), device_(device)
    {}

    CUcontext ctx_;
    const char *base_;
    size_t bytes_;
    CUdeviceptr device_;
};

}  // namespace gpurdma::gpu
