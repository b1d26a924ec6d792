#include "gpu/host_staging.h"

#include <algorithm>
#include <cstring>

#include "gpu/cuda_driver.h"
#include "reduce/reduce.h"

namespace gpurdma::gpu {

void HostStaging::reserve(std::unique_ptr<PinnedBuffer> *buffer, size_t bytes, CUcontext ctx)
{
    if (*buffer && (*buffer)->size() >= bytes) return;
    const size_t grown = *buffer ? 2 * (*buffer)->size() : 0;
    buffer->reset();  // the old one first: never both pinned at once
    *buffer = std::make_unique<PinnedBuffer>(std::max<size_t>({bytes, grown, 64}), ctx, &why_);
}

Status HostStaging::stage_in(const algo::Call &call, algo::Call *staged)
{
    const auto &cuda = CudaDriver::instance();
    const bool in_place = call.sendbuf == nullptr || call.sendbuf == call.recvbuf;
    const PointerInfo &rinfo = rinfo_ = cuda.query(call.recvbuf);
    const PointerInfo sinfo = in_place ? rinfo : cuda.query(call.sendbuf);
    const size_t bytes = call.count * reduce::dtype_size(call.dtype);
    reserve(&recv_, bytes, rinfo.kind == MemoryKind::Device ? rinfo.context : sinfo.context);
    algo::Call &host = *staged = call;
    host.recvbuf = recv_->data();
    host.sendbuf = nullptr;
    if (in_place) {
        const Status copied = cuda.copy(recv_->data(), call.recvbuf, bytes, rinfo.context);
        if (!copied.is_ok()) return copied.prefixed(name_ + ": staging the GPU buffer to host: ");
    } else if (sinfo.kind == MemoryKind::Device) {
        reserve(&send_, bytes, sinfo.context);
        const Status copied = cuda.copy(send_->data(), call.sendbuf, bytes, sinfo.context);
        if (!copied.is_ok()) return copied.prefixed(name_ + ": staging the GPU send buffer to host: ");
        host.sendbuf = send_->data();
    } else {
        host.sendbuf = call.sendbuf;
    }
    return Status::ok();
}

Status HostStaging::stage_out(const algo::Call &call)
{
    const size_t bytes = call.count * reduce::dtype_size(call.dtype);
    if (rinfo_.kind == MemoryKind::Device) {
        const Status copied = CudaDriver::instance().copy(call.recvbuf, recv_->data(), bytes, rinfo_.context);
        if (!copied.is_ok()) return copied.prefixed(name_ + ": copying the result to the GPU: ");
    } else {
        std::memcpy(call.recvbuf, recv_->data(), bytes);
    }
    return Status::ok();
}

}  // namespace gpurdma::gpu
