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
      name(params.name ? params.name : "communicator"),
      staging_(name)
{}

gpurdma_comm::~gpurdma_comm()
{
    // Per-communicator counters: set-up work happens once, never per call.
    if (stats.calls > 0 && context->log.enabled(rank == 0 ? 1 : 2))
        context->log.log(
            rank == 0 ? 1 : 2,
            "%s: rank %d freed after %llu calls (node %llu, ring %llu, recursive doubling %llu, "
            "hierarchical %llu); set-ups %llu, UCX registrations %llu, shared segments %llu, bytes sent %llu",
            name.c_str(), rank, static_cast<unsigned long long>(stats.calls),
            static_cast<unsigned long long>(stats.node_calls), static_cast<unsigned long long>(stats.ring_calls),
            static_cast<unsigned long long>(stats.rd_calls), static_cast<unsigned long long>(stats.hier_calls),
            static_cast<unsigned long long>(stats.setups), static_cast<unsigned long long>(stats.registrations),
            static_cast<unsigned long long>(stats.shm_segments), static_cast<unsigned long long>(stats.bytes_put));
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

const gpurdma::exec::ProgressLoop &gpurdma_comm::device_loop()
{
    // The host's policy (placement-based spin or yield) once its team has decided it;
    // until then the placement is unknown, so yield when idle, as device waits always did.
    const bool from_team = team_ != nullptr;
    if (!device_loop_ || device_loop_from_team_ != from_team) {
        gpurdma::exec::WaitPolicy policy{true, context->config.spin_us, context->config.timeout_s};
        if (team_) policy = team_->loop().policy();
        device_loop_.emplace(policy, gpurdma::exec::WaitSite{name, rank, context->host});
        device_loop_from_team_ = from_team;
    }
    return *device_loop_;
}

// GPU buffers: the device allreduce under the same progress loop as every other
// algorithm, or, where it is unsupported or declined (the same on every rank),
// staging through host memory and the host path.
gpurdma_status_t gpurdma_comm::device_allreduce(const gpurdma::algo::Call &call)
{
    if (!device_) {
        gpurdma::gpu::DeviceSetup setup;
        setup.rank = rank;
        setup.size = size;
        setup.name = name;
        setup.host = context->host;
        setup.bootstrap = bootstrap;
        setup.log = &context->log;
        setup.config = &context->config;
        setup.rail_device = context->rail_device;
        setup.ucx = [ctx = context](std::string *why) { return ctx->transport(why); };
        device_ = std::make_unique<gpurdma::gpu::DeviceAllreduce>(std::move(setup));
    }
    Status st = device_->start(call);
    if (st.is_ok()) {
        st = device_loop().run(*device_);
        if (st.is_ok()) {
            device_->finish();
            tally(&gpurdma_comm_stats_t::calls);
            tally(device_->counter());
            return GPURDMA_OK;
        }
        if (!st.is_unsupported()) device_->abandon();  // peers stop waiting for this rank
    }
    if (!st.is_unsupported()) return fail(st.code(), st.message());
    gpurdma_status_t host_status = GPURDMA_OK;  // the host path records its own failures
    st = staging_.run(call, [&](const gpurdma::algo::Call &host) {
        host_status = allreduce(host.sendbuf, host.recvbuf, host.count, host.dtype, host.op);
        return host_status == GPURDMA_OK ? Status::ok() : Status::error(host_status, last_error);
    });
    if (st.is_ok()) return GPURDMA_OK;
    return host_status != GPURDMA_OK ? host_status : fail(st.code(), st.message());
}

gpurdma_status_t gpurdma_comm::allreduce(const void *sendbuf, void *recvbuf, size_t count, gpurdma_dtype_t dtype,
                                         gpurdma_op_t op)
{
    if (broken_) return GPURDMA_ERR_BROKEN;  // last_error still names the first failure
    if (!gpurdma::reduce::supported(op, dtype)) return GPURDMA_ERR_UNSUPPORTED;
    const bool in_place = sendbuf == nullptr || sendbuf == recvbuf;
    if (count == 0) return GPURDMA_OK;
    // GPU buffers arrive as raw pointers from a non-CUDA-aware Open MPI: recognise them
    // before anything touches them from the CPU.
    const gpurdma::algo::Call call{in_place ? nullptr : sendbuf, recvbuf, count, dtype, op};
    if (gpurdma::gpu::touches_device_memory(call)) return device_allreduce(call);
    if (size == 1) {
        if (!in_place) std::memcpy(recvbuf, sendbuf, count * gpurdma::reduce::dtype_size(dtype));
        tally(&gpurdma_comm_stats_t::calls);
        return GPURDMA_OK;
    }
    const Status st = host_allreduce(call);
    if (st.is_ok()) return GPURDMA_OK;
    // A set-up that declined hands the call on, the communicator intact.
    if (st.is_unsupported()) return GPURDMA_ERR_UNSUPPORTED;
    return fail(st.code(), st.message());
}
