#include "core/comm.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "algo/host_team.h"
#include "algo/selector.h"
#include "reduce/reduce.h"

using gpurdma::Status;

gpurdma_comm::gpurdma_comm(gpurdma_context *ctx, const gpurdma_comm_params_t &params)
    : context(ctx),
      rank(params.rank),
      size(params.size),
      bootstrap(params.bootstrap),
      name(params.name ? params.name : "communicator")
{
}

gpurdma_comm::~gpurdma_comm()
{
    // Per-communicator counters: set-up work happens once, never per call.
    if (stats.calls > 0 && context->log.enabled(rank == 0 ? 1 : 2))
        context->log.log(rank == 0 ? 1 : 2,
                         "%s: rank %d freed after %llu calls (node %llu, ring %llu, recursive doubling %llu, "
                         "hierarchical %llu); set-ups %llu, UCX registrations %llu, shared segments %llu, bytes sent %llu",
                         name.c_str(), rank, static_cast<unsigned long long>(stats.calls),
                         static_cast<unsigned long long>(stats.node_calls),
                         static_cast<unsigned long long>(stats.ring_calls),
                         static_cast<unsigned long long>(stats.rd_calls),
                         static_cast<unsigned long long>(stats.hier_calls),
                         static_cast<unsigned long long>(stats.setups),
                         static_cast<unsigned long long>(stats.registrations),
                         static_cast<unsigned long long>(stats.shm_segments),
                         static_cast<unsigned long long>(stats.bytes_put));
    selector_.reset();
    team_.reset();
}

void gpurdma_comm::tally(uint64_t gpurdma_comm_stats_t::*field, uint64_t n)
{
    stats.*field += n;
    context->totals.*field += n;
}

gpurdma_status_t gpurdma_comm::fail(gpurdma_status_t status, const std::string &message)
{
    last_error = message;
    broken_ = true;
    context->log.log(0, "%s", message.c_str());
    return status;
}

Status gpurdma_comm::ensure_host_team()
{
    if (team_) return Status::ok();
    if (declined_) return Status::unsupported(name + ": declined at set-up");
    const auto t0 = std::chrono::steady_clock::now();
    gpurdma::algo::HostSetup s = context->host_setup();
    s.rank = rank;
    s.size = size;
    s.name = name;
    s.bootstrap = bootstrap;
    const Status st = gpurdma::algo::HostTeam::create(std::move(s), &team_);
    if (!st.is_ok()) {
        declined_ = true;
        context->log.log(1, "%s: declined, using the previous allreduce: %s", name.c_str(), st.message().c_str());
        return Status::unsupported(st.message());
    }
    selector_ = std::make_unique<gpurdma::algo::Selector>(*team_);
    tally(&gpurdma_comm_stats_t::setups);
    if (team_->uses_ucx()) tally(&gpurdma_comm_stats_t::registrations);
    if (team_->segment()) tally(&gpurdma_comm_stats_t::shm_segments);
    if (rank == 0 && context->log.enabled(1))
        selector_->log_summary(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return Status::ok();
}

Status gpurdma_comm::host_allreduce(const gpurdma::algo::Call &call)
{
    Status st = ensure_host_team();
    if (!st.is_ok()) return st;
    gpurdma::algo::Algorithm &algorithm = selector_->choose(call);
    st = algorithm.start(call);
    if (!st.is_ok()) return st;
    if (context->log.enabled(2))
        context->log.log(2, "%s: allreduce %zu x %s %s: %s (call %llu; registrations so far %llu)", name.c_str(),
                         call.count, gpurdma_dtype_name(call.dtype), gpurdma_op_name(call.op),
                         algorithm.describe_call().c_str(), static_cast<unsigned long long>(stats.calls + 1),
                         static_cast<unsigned long long>(stats.registrations));
    st = team_->loop().run(algorithm);
    if (!st.is_ok()) return st;
    algorithm.finish();
    tally(&gpurdma_comm_stats_t::calls);
    tally(algorithm.counter());
    tally(&gpurdma_comm_stats_t::bytes_put, team_->bytes_sent() - stats.bytes_put);
    return Status::ok();
}

// GPU buffers through host memory: copy in, the host path, copy out. The staging
// buffers are kept, so repeated calls allocate nothing.
gpurdma_status_t gpurdma_comm::staged_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                                gpurdma_dtype_t dtype, gpurdma_op_t op,
                                                const gpurdma::mem::PointerInfo &sinfo,
                                                const gpurdma::mem::PointerInfo &rinfo)
{
    using gpurdma::mem::MemoryKind;
    const auto &cuda = gpurdma::mem::CudaDriver::instance();
    const size_t bytes = count * gpurdma::reduce::dtype_size(dtype);
    const bool in_place = sendbuf == nullptr || sendbuf == recvbuf;
    if (stage_recv_.size() < bytes) stage_recv_.resize(bytes);
    std::string error;
    const void *host_send = nullptr;
    if (in_place) {
        if (!cuda.copy(stage_recv_.data(), recvbuf, bytes, rinfo.context, &error))
            return fail(GPURDMA_ERR_TRANSPORT, name + ": staging the GPU buffer to host: " + error);
    } else if (sinfo.kind == MemoryKind::Device) {
        if (stage_send_.size() < bytes) stage_send_.resize(bytes);
        if (!cuda.copy(stage_send_.data(), sendbuf, bytes, sinfo.context, &error))
            return fail(GPURDMA_ERR_TRANSPORT, name + ": staging the GPU send buffer to host: " + error);
        host_send = stage_send_.data();
    } else {
        host_send = sendbuf;
    }
    const gpurdma_status_t st = allreduce(in_place ? nullptr : host_send, stage_recv_.data(), count, dtype, op);
    if (st != GPURDMA_OK) return st;
    if (rinfo.kind == MemoryKind::Device) {
        if (!cuda.copy(recvbuf, stage_recv_.data(), bytes, rinfo.context, &error))
            return fail(GPURDMA_ERR_TRANSPORT, name + ": copying the result to the GPU: " + error);
    } else {
        std::memcpy(recvbuf, stage_recv_.data(), bytes);
    }
    return GPURDMA_OK;
}

gpurdma_status_t gpurdma_comm::allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                         gpurdma_dtype_t dtype, gpurdma_op_t op)
{
    if (broken_) return GPURDMA_ERR_BROKEN;  // last_error still names the first failure
    if (!gpurdma::reduce::supported(op, dtype)) return GPURDMA_ERR_UNSUPPORTED;
    const bool in_place = sendbuf == nullptr || sendbuf == recvbuf;
    if (count == 0) return GPURDMA_OK;
    // GPU buffers arrive as raw pointers from a non-CUDA-aware Open MPI: recognise them
    // before anything touches them from the CPU.
    const auto &cuda = gpurdma::mem::CudaDriver::instance();
    if (cuda.available()) {
        const auto rinfo = cuda.query(recvbuf);
        const auto sinfo = in_place ? rinfo : cuda.query(sendbuf);
        if (rinfo.kind == gpurdma::mem::MemoryKind::Device || sinfo.kind == gpurdma::mem::MemoryKind::Device)
            return device_allreduce(sendbuf, recvbuf, count, dtype, op, sinfo, rinfo);
    }
    if (size == 1) {
        if (!in_place) std::memcpy(recvbuf, sendbuf, count * gpurdma::reduce::dtype_size(dtype));
        tally(&gpurdma_comm_stats_t::calls);
        return GPURDMA_OK;
    }
    gpurdma::algo::Call call;
    call.sendbuf = in_place ? nullptr : sendbuf;
    call.recvbuf = recvbuf;
    call.count = count;
    call.dtype = dtype;
    call.op = op;
    const Status st = host_allreduce(call);
    if (st.is_ok()) return GPURDMA_OK;
    // A set-up that declined hands the call on, the communicator intact.
    if (st.is_unsupported()) return GPURDMA_ERR_UNSUPPORTED;
    return fail(st.code(), st.message());
}
