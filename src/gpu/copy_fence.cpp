#include "gpu/copy_fence.h"

namespace gpurdma::gpu {

CopyFence::CopyFence(CUcontext ctx, CUstream stream) : ctx_(ctx), stream_(stream)
{
    const auto &a = GpuRuntime::instance().api();
    if (!a.event_create || !a.event_record || !a.event_query || !a.event_destroy) return;
    ContextScope scope(ctx_);
    if (a.event_create(&event_, kEventDisableTiming) != 0) event_ = nullptr;
}

CopyFence::~CopyFence()
{
    if (!event_) return;
    ContextScope scope(ctx_);
    GpuRuntime::instance().api().event_destroy(event_);
}

Status CopyFence::record()
{
    pending_ = true;
    if (!event_) return Status::ok();
    const auto &d = GpuRuntime::instance();
    ContextScope scope(ctx_);
    const int rc = d.api().event_record(event_, stream_);
    return rc == 0 ? Status::ok() : d.failure("cuEventRecord", rc);
}

Status CopyFence::reached(bool *done)
{
    *done = !pending_;
    if (!pending_) return Status::ok();
    const auto &d = GpuRuntime::instance();
    ContextScope scope(ctx_);
    const int rc = event_ ? d.api().event_query(event_) : d.api().stream_query(stream_);
    if (rc != 0 && rc != kErrorNotReady) return d.failure(event_ ? "cuEventQuery" : "cuStreamQuery", rc);
    *done = rc == 0;
    if (*done) pending_ = false;
    return Status::ok();
}

}  // namespace gpurdma::gpu
