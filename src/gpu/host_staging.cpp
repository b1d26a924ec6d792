#include "gpu/host_staging.h"

#include <cstring>

#include "gpu/cuda_driver.h"
#include "reduce/reduce.h"

namespace gpurdma::gpu {

Status HostStaging::stage_in(const algo::Call &call, algo::Call *staged)
{
    const auto &cuda = CudaDriver::instance();
    const bool in_place = call.sendbuf == nullptr || call.sendbuf == call.recvbuf;
    const PointerInfo &rinfo = rinfo_ = cuda.query(call.recvbuf);
    const PointerInfo sinfo = in_place ? rinfo : cuda.query(call.sendbuf);
    const size_t bytes = call.count * reduce::dtype_size(call.dtype);
    if (recv_.size() < bytes) recv_.resize(bytes);
    algo::Call &host = *staged = call;
    host.recvbuf = recv_.data();
    host.sendbuf = nullptr;
    if (in_place) {
        const Status copied = cuda.copy(recv_.data(), call.recvbuf, bytes, rinfo.context);
        if (!copied.is_ok()) return copied.prefixed(name_ + ": staging the GPU buffer to host: ");
    } else if (sinfo.kind == MemoryKind::Device) {
        if (send_.size() < bytes) send_.resize(bytes);
        const Status copied = cuda.copy(send_.data(), call.sendbuf, bytes, sinfo.context);
        if (!copied.is_ok()) return copied.prefixed(name_ + ": staging the GPU send buffer to host: ");
        host.sendbuf = send_.data();
    } else {
        host.sendbuf = call.sendbuf;
    }
    return Status::ok();
}

Status HostStaging::stage_out(const algo::Call &call)
{
    const size_t bytes = call.count * reduce::dtype_size(call.dtype);
    if (rinfo_.kind == MemoryKind::Device) {
        const Status copied = CudaDriver::instance().copy(call.recvbuf, recv_.data(), bytes, rinfo_.context);
        if (!copied.is_ok()) return copied.prefixed(name_ + ": copying the result to the GPU: ");
    } else {
        std::memcpy(call.recvbuf, recv_.data(), bytes);
    }
    return Status::ok();
}

}  // namespace gpurdma::gpu
