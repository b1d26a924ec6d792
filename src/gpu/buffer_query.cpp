#include "gpu/buffer_query.h"

namespace gpurdma::gpu {

namespace {

struct BufferQuery {
    const void *send = nullptr;
    const void *recv = nullptr;
    PointerInfo sinfo, rinfo;
    bool valid = false;
};
thread_local BufferQuery t_last_query;

bool in_place(const algo::Call &call)
{
    return call.sendbuf == nullptr || call.sendbuf == call.recvbuf;
}

}  // namespace

bool touches_device_memory(const algo::Call &call)
{
    const auto &cuda = CudaDriver::instance();
    if (!cuda.available()) return false;  // buffer_info then never runs: no thread-local to touch
    BufferQuery &q = t_last_query;
    q.send = call.sendbuf;
    q.recv = call.recvbuf;
    q.rinfo = cuda.query(call.recvbuf);
    q.sinfo = in_place(call) ? q.rinfo : cuda.query(call.sendbuf);
    q.valid = q.rinfo.kind == MemoryKind::Device || q.sinfo.kind == MemoryKind::Device;
    return q.valid;
}

void buffer_info(const algo::Call &call, PointerInfo *sinfo, PointerInfo *rinfo)
{
    const BufferQuery &q = t_last_query;
    if (q.valid && q.send == call.sendbuf && q.recv == call.recvbuf) {
        *sinfo = q.sinfo;
        *rinfo = q.rinfo;
        return;
    }
    const auto &cuda = CudaDriver::instance();
    *rinfo = cuda.query(call.recvbuf);
    *sinfo = in_place(call) ? *rinfo : cuda.query(call.sendbuf);
}

}  // namespace gpurdma::gpu
