#include "gpu/pinned_buffer.h"

#include <cstdlib>
#include <new>

namespace gpurdma::gpu {

namespace {

constexpr size_t kAlign = 64;

}  // namespace

PinnedBuffer::PinnedBuffer(size_t bytes, CUcontext ctx, std::string *why) : bytes_(bytes), ctx_(ctx)
{
    const auto &d = GpuRuntime::instance();
    std::string reason;
    if (!d.available()) {
        reason = d.why_unavailable();
    } else if (!d.api().mem_host_alloc || !d.api().mem_free_host) {
        reason = "the CUDA driver lacks cuMemHostAlloc/cuMemFreeHost";
    } else {
        ContextScope scope(ctx_);
        void *p = nullptr;
        const int rc = d.api().mem_host_alloc(&p, bytes, kHostAllocPortable);
        if (rc == 0 && p) {
            data_ = static_cast<char *>(p);
            pinned_ = true;
        } else {
            reason = d.error_text("cuMemHostAlloc", rc);
        }
    }
    if (!pinned_) {
        const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
        data_ = static_cast<char *>(std::aligned_alloc(kAlign, rounded));
        if (!data_) throw std::bad_alloc();
    }
    if (why) *why = reason;
}

PinnedBuffer::~PinnedBuffer()
{
    if (!pinned_) {
        std::free(data_);
        return;
    }
    ContextScope scope(ctx_);
    GpuRuntime::instance().api().mem_free_host(data_);
}

}  // namespace gpurdma::gpu
