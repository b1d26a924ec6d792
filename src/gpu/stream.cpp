#include "gpu/stream.h"

namespace gpurdma::gpu {

Status Stream::create(CUcontext ctx, std::unique_ptr<Stream> *out)
{
    const auto &d = GpuRuntime::instance();
    const auto &a = d.api();
    if (!d.available()) return Status::unsupported(d.why_unavailable());
    if (!a.stream_create || !a.stream_destroy || !a.stream_query)
        return Status::unsupported("the CUDA driver lacks cuStreamCreate/cuStreamDestroy/cuStreamQuery");
    ContextScope scope(ctx);
    CUstream stream = nullptr;
    const int rc = a.stream_create(&stream, kStreamNonBlocking);
    if (rc != 0) return d.failure("cuStreamCreate", rc);
    out->reset(new Stream(ctx, stream));
    return Status::ok();
}

Stream::~Stream()
{
    ContextScope scope(ctx_);
    GpuRuntime::instance().api().stream_destroy(stream_);
}

Status Stream::done(bool *finished) const
{
    const auto &d = GpuRuntime::instance();
    ContextScope scope(ctx_);
    const int rc = d.api().stream_query(stream_);
    if (rc != 0 && rc != kErrorNotReady) return d.failure("cuStreamQuery", rc);
    *finished = rc == 0;
    return Status::ok();
}

}  // namespace gpurdma::gpu
