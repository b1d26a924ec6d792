#include "gpu/unit_work.h"

namespace gpurdma::gpu {

UnitWork::UnitWork(CUcontext ctx, CUstream stream, ReduceKernels &kernels, DeviceRailWork *rail)
    : ctx_(ctx), stream_(stream), kernels_(kernels), rail_(rail), fence_(ctx, stream)
{}

void UnitWork::set_call(const void *send, const void *recv, size_t bytes)
{
    send_ = static_cast<const char *>(send);
    recv_ = static_cast<const char *>(recv);
    bytes_ = bytes;
}

namespace {

bool within(const void *p, const char *base, size_t bytes)
{
    const char *c = static_cast<const char *>(p);
    return base && c >= base && c < base + bytes;
}

}  // namespace

bool UnitWork::on_device(const void *p) const
{
    return within(p, recv_, bytes_) || within(p, send_, bytes_);
}

Status UnitWork::queued(int rc, const char *call)
{
    if (rc != 0) return GpuRuntime::instance().failure(call, rc);
    return fence_.record();
}

Status UnitWork::copy(void *dst, const void *src, size_t bytes)
{
    const bool dst_gpu = on_device(dst), src_gpu = on_device(src);
    if (rail_) {
        // The rail's copies are the rail work's (arrivals it maps or flushes); the unit's
        // own is a node of one's copy of its send buffer into its receive buffer.
        const bool own = within(src, send_, bytes_) && !within(src, recv_, bytes_) && within(dst, recv_, bytes_);
        if (!own) return rail_->copy(dst, src, bytes);
    } else if (!dst_gpu && !src_gpu) {
        return exec::HostLocalWork::instance().copy(dst, src, bytes);  // the rail's, in the chunk
    }
    if (dst == src) return Status::ok();
    const auto &a = GpuRuntime::instance().api();
    ContextScope scope(ctx_);
    const auto d = reinterpret_cast<CUdeviceptr>(dst);
    const auto s = reinterpret_cast<CUdeviceptr>(src);
    if (dst_gpu && src_gpu) return queued(a.memcpy_dtod_async(d, s, bytes, stream_), "cuMemcpyDtoDAsync");
    if (src_gpu && a.memcpy_dtoh_async) return queued(a.memcpy_dtoh_async(dst, s, bytes, stream_), "cuMemcpyDtoHAsync");
    if (dst_gpu && a.memcpy_htod_async) return queued(a.memcpy_htod_async(d, src, bytes, stream_), "cuMemcpyHtoDAsync");
    return queued(a.memcpy_async(d, s, bytes, stream_), "cuMemcpyAsync");
}

Status UnitWork::reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b, size_t count)
{
    if (rail_) return rail_->reduce(op, dtype, dst, a, b, count);
    return exec::HostLocalWork::instance().reduce(op, dtype, dst, a, b, count);
}

Status UnitWork::reduce_many(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *const *srcs, int n,
                             size_t count, size_t elem_size)
{
    (void)elem_size;
    const Status launched = kernels_.reduce(op, dtype, dst, srcs, n, count, stream_);
    if (!launched.is_ok()) return Status::error(launched.code(), "kernel: " + launched.message());
    return fence_.record();
}

Status UnitWork::send_source(const void *src, size_t bytes, const void **from)
{
    if (rail_) return rail_->send_source(src, bytes, from);
    *from = src;  // the page-locked chunk: the network reads it
    return Status::ok();
}

Status UnitWork::finished(bool *done)
{
    Status st = fence_.reached(done);
    if (!st.is_ok() || !*done || !rail_) return st;
    return rail_->finished(done);
}

}  // namespace gpurdma::gpu
