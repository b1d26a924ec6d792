#include "gpu/buffer_query.h"

namespace gpurdma::gpu {

namespace {

bool in_place(const algo::Call &call)
{
    return call.sendbuf == nullptr || call.sendbuf == call.recvbuf;
}

}  // namespace

bool BufferQuery::touches_device_memory(const algo::Call &call)
{
    const auto &cuda = CudaDriver::instance();
    if (!cuda.available()) return false;  // info() then never runs
    send_ = call.sendbuf;
    recv_ = call.recvbuf;
    rinfo_ = cuda.query(call.recvbuf);
    sinfo_ = in_place(call) ? rinfo_ : cuda.query(call.sendbuf);
    valid_ = rinfo_.kind == MemoryKind::Device || sinfo_.kind == MemoryKind::Device;
    return valid_;
}

void BufferQuery::info(const algo::Call &call, PointerInfo *sinfo, PointerInfo *rinfo) const
{
    if (valid_ && send_ == call.sendbuf && recv_ == call.recvbuf) {
        *sinfo = sinfo_;
        *rinfo = rinfo_;
        return;
    }
    buffer_info(nullptr, call, sinfo, rinfo);
}

void buffer_info(const BufferQuery *recorded, const algo::Call &call, PointerInfo *sinfo, PointerInfo *rinfo)
{
    if (recorded) {
        recorded->info(call, sinfo, rinfo);
        return;
    }
    const auto &cuda = CudaDriver::instance();
    *rinfo = cuda.query(call.recvbuf);
    *sinfo = in_place(call) ? *rinfo : cuda.query(call.sendbuf);
}

}  // namespace gpurdma::gpu
