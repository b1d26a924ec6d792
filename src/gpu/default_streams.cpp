#include "gpu/default_streams.h"

namespace gpurdma::gpu {

namespace {

// cuda.h's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD handles.
const CUstream kLegacyStream = reinterpret_cast<CUstream>(0x1);
const CUstream kPerThreadStream = reinterpret_cast<CUstream>(0x2);

Status settle(CUcontext ctx)
{
    const auto &d = CudaDriver::instance();
    ContextScope scope(ctx);
    for (CUstream stream : {kLegacyStream, kPerThreadStream}) {
        const CUresult rc = d.api().stream_synchronize(stream);
        if (rc != 0)
            return d.failure(stream == kLegacyStream ? "cuStreamSynchronize (the application's legacy default stream)"
                                                     : "cuStreamSynchronize (the caller's per-thread default stream)",
                             rc);
    }
    return Status::ok();
}

}  // namespace

Status settle_default_streams(CUcontext send_context, CUcontext recv_context)
{
    const auto &d = CudaDriver::instance();
    if (!d.available() || !d.api().stream_synchronize) return Status::ok();  // no GPU buffers then
    if (recv_context) {
        const Status st = settle(recv_context);
        if (!st.is_ok()) return st;
    }
    if (send_context && send_context != recv_context) return settle(send_context);
    return Status::ok();
}

}  // namespace gpurdma::gpu
