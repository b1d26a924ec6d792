#include "gpu/device_rail_work.h"

#include "reduce/reduce.h"

namespace gpurdma::gpu {

Status DeviceRailWork::create(const RailWorkSetup &setup, std::unique_ptr<DeviceRailWork> *out)
{
    if (!setup.kernels || !setup.transport) return Status::unsupported("no kernels or transport");
    if (!setup.landing.base || setup.landing.bytes == 0)
        return Status::unsupported("no landing region between nodes to map for the GPU");
    if (!GpuRuntime::instance().api().memcpy_async) return Status::unsupported("the CUDA driver lacks cuMemcpyAsync");
    std::unique_ptr<DeviceRailWork> work(new DeviceRailWork(setup));
    Status st = Stream::create(setup.ctx, &work->stream_);
    if (!st.is_ok()) return st.prefixed("rail stream: ");
    st = HostRegistration::create(setup.ctx, setup.landing.base, setup.landing.bytes, &work->landing_);
    if (!st.is_ok()) return st.prefixed("mapping the landing region for the GPU: ");
    if (!setup.direct_sends) {
        for (int i = 0; i < setup.send_buffers; ++i) {
            std::string why;
            work->buffers_.push_back(std::make_unique<PinnedBuffer>(setup.send_buffer_bytes, setup.ctx, &why));
            if (!why.empty()) work->pageable_why_ = why;
        }
        if (work->buffers_.empty()) return Status::unsupported("no send buffers");
    }
    work->fence_ = std::make_unique<CopyFence>(setup.ctx, work->stream_->get());
    *out = std::move(work);
    return Status::ok();
}

const void *DeviceRailWork::device_view(const void *p) const
{
    return landing_->contains(p) ? landing_->device_view(p) : p;
}

Status DeviceRailWork::visible(const void *p, size_t bytes)
{
    if (!flush_ || !gpu_landing_.contains(p, bytes)) return Status::ok();
    // The flag that announced it came by another path (host memory): the GPU may not
    // see the data yet. One flush covers every write so far.
    const auto &d = GpuRuntime::instance();
    ContextScope scope(setup_.ctx);
    const int rc = d.api().flush_gpu_direct_rdma_writes(kGdrFlushTargetCurrentCtx, kGdrFlushToOwner);
    if (rc != 0) return d.failure("cuFlushGPUDirectRDMAWrites", rc);
    ++flushes_;
    return Status::ok();
}

Status DeviceRailWork::launched(int rc, const char *call)
{
    if (rc != 0) return GpuRuntime::instance().failure(call, rc);
    return fence_->record();
}

Status DeviceRailWork::copy(void *dst, const void *src, size_t bytes)
{
    const Status seen = visible(src, bytes);
    if (!seen.is_ok()) return seen;
    const auto &d = GpuRuntime::instance();
    ContextScope scope(setup_.ctx);
    // Unified addressing: a landing slot (page-locked host memory) or GPU memory alike.
    return launched(d.api().memcpy_async(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes,
                                         stream_->get()),
                    "cuMemcpyAsync");
}

Status DeviceRailWork::reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                              size_t count)
{
    const size_t bytes = count * reduce::dtype_size(dtype);
    for (const void *src : {a, b}) {
        const Status seen = visible(src, bytes);
        if (!seen.is_ok()) return seen;
    }
    const void *in[2] = {device_view(a), device_view(b)};
    const Status st = setup_.kernels->reduce(op, dtype, dst, in, 2, count, stream_->get());
    return st.is_ok() ? fence_->record() : st;
}

Status DeviceRailWork::send_source(const void *src, size_t bytes, const void **from)
{
    if (setup_.direct_sends) {
        *from = src;
        return visible(src, bytes);  // a forwarded arrival the NIC reads again
    }
    *from = nullptr;
    PinnedBuffer &buffer = *buffers_[next_buffer_ % buffers_.size()];
    if (bytes > buffer.size())
        return Status::error(GPURDMA_ERR_TRANSPORT, "a send of " + std::to_string(bytes) +
                                                        " bytes exceeds the send buffers (" +
                                                        std::to_string(buffer.size()) + " bytes)");
    // The buffers go round in turn: the next one is free once no send reads it.
    if (setup_.transport->source_busy(buffer.data(), buffer.size())) return Status::ok();
    const Status seen = visible(src, bytes);  // a forwarded arrival
    if (!seen.is_ok()) return seen;
    const auto &d = GpuRuntime::instance();
    ContextScope scope(setup_.ctx);
    const auto source = reinterpret_cast<CUdeviceptr>(src);
    // The error names the copy that was used (a driver without cuMemcpyDtoHAsync has cuMemcpyAsync).
    const bool dtoh = d.api().memcpy_dtoh_async != nullptr;
    const int rc =
        dtoh ? d.api().memcpy_dtoh_async(buffer.data(), source, bytes, stream_->get())
             : d.api().memcpy_async(reinterpret_cast<CUdeviceptr>(buffer.data()), source, bytes, stream_->get());
    const Status st = launched(rc, dtoh ? "cuMemcpyDtoHAsync" : "cuMemcpyAsync");
    if (!st.is_ok()) return st;
    ++next_buffer_;
    *from = buffer.data();
    return Status::ok();
}

Status DeviceRailWork::finished(bool *done)
{
    return fence_->reached(done);
}

std::vector<exec::SourceRange> DeviceRailWork::send_buffers() const
{
    std::vector<exec::SourceRange> out;
    for (const auto &b : buffers_) out.push_back({b->data(), b->size()});
    return out;
}

}  // namespace gpurdma::gpu
