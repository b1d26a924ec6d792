#include "algo/node_ipc.h"

namespace gpurdma::algo {

namespace {

const char *source_of(const Call &call)
{
    return static_cast<const char *>(call.in_place() ? call.recvbuf : call.sendbuf);
}

}  // namespace

void post_buffers(gpu::DeviceTeam &team, int rank, uint64_t seq, const Call &call, const gpu::PointerInfo &src,
                  const gpu::PointerInfo &dst, bool local_ok, BufferSides shared)
{
    gpu::ControlSlot &me = team.slot(rank);
    uint32_t vote = local_ok;
    me.src_shared = shared.src;
    me.dst_shared = shared.dst;
    if (vote) {
        const auto &api = gpu::GpuRuntime::instance().api();
        gpu::ContextScope scope(team.context());
        if (shared.src) {
            vote = api.ipc_get_mem_handle(&me.src_handle, src.base) == 0;
            me.src_id = src.buffer_id;
            me.src_offset = reinterpret_cast<uintptr_t>(source_of(call)) - src.base;
        }
        if (shared.dst && vote) {
            vote = api.ipc_get_mem_handle(&me.dst_handle, dst.base) == 0;
            me.dst_id = dst.buffer_id;
            me.dst_offset = reinterpret_cast<uintptr_t>(call.recvbuf) - dst.base;
        }
    }
    me.vote = vote;
    me.posted.store(seq, std::memory_order_release);
}

int refusing_member(const gpu::DeviceTeam &team, const std::vector<int> &members)
{
    for (int r : members)
        if (!team.slot(r).vote) return r;
    return -1;
}

Status map_member_buffers(gpu::DeviceTeam &team, const std::vector<int> &members, int rank, const Call &call,
                          std::vector<const char *> *srcs, std::vector<char *> *dsts)
{
    gpu::IpcCache &ipc = team.ipc();
    ipc.begin_call();
    srcs->assign(members.size(), nullptr);
    dsts->assign(members.size(), nullptr);
    for (size_t i = 0; i < members.size(); ++i) {
        const int r = members[i];
        if (r == rank) {
            (*srcs)[i] = source_of(call);
            (*dsts)[i] = static_cast<char *>(call.recvbuf);
            continue;
        }
        const gpu::ControlSlot &p = team.slot(r);
        uintptr_t sbase = 0, dbase = 0;
        Status mapped = Status::ok();
        if (p.src_shared) mapped = ipc.map(r, p.src_id, p.src_handle, &sbase);
        if (mapped.is_ok() && p.dst_shared) mapped = ipc.map(r, p.dst_id, p.dst_handle, &dbase);
        if (!mapped.is_ok())
            return Status::error(mapped.code(), "mapping the buffers of " + team.describe(r) + ": " + mapped.message());
        if (p.src_shared) (*srcs)[i] = reinterpret_cast<const char *>(sbase + p.src_offset);
        if (p.dst_shared) (*dsts)[i] = reinterpret_cast<char *>(dbase + p.dst_offset);
    }
    return Status::ok();
}

}  // namespace gpurdma::algo
