#include "gpu/buffer_query.h"

namespace gpurdma::gpu {

namespace {

bool in_place(CallBuffers call)
{
    return call.send == nullptr || call.send == call.recv;
}

}  // namespace

bool BufferQuery::touches_device_memory(CallBuffers call)
{
    const auto &cuda = GpuRuntime::instance();
    if (!cuda.available()) return false;  // info() then never runs
    send_ = call.send;
    recv_ = call.recv;
    rinfo_ = cuda.query(call.recv);
    sinfo_ = in_place(call) ? rinfo_ : cuda.query(call.send);
    const auto gpu = [](const PointerInfo &i) {
        return i.kind == MemoryKind::Device || i.kind == MemoryKind::OtherVendor;
    };
    valid_ = gpu(rinfo_) || gpu(sinfo_);
    return valid_;
}

void BufferQuery::info(CallBuffers call, PointerInfo *sinfo, PointerInfo *rinfo) const
{
    if (valid_ && send_ == call.send && recv_ == call.recv) {
        *sinfo = sinfo_;
        *rinfo = rinfo_;
        return;
    }
    buffer_info(nullptr, call, sinfo, rinfo);
}

void buffer_info(const BufferQuery *recorded, CallBuffers call, PointerInfo *sinfo, PointerInfo *rinfo)
{
    if (recorded) {
        recorded->info(call, sinfo, rinfo);
        return;
    }
    const auto &cuda = GpuRuntime::instance();
    *rinfo = cuda.query(call.recv);
    *sinfo = in_place(call) ? *rinfo : cuda.query(call.send);
}

}  // namespace gpurdma::gpu
