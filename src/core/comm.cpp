#include "core/comm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "algo/call_spans.h"
#include "algo/host_team.h"
#include "algo/selector.h"
#include "core/counters.h"
#include "gpu/buffer_query.h"
#include "gpu/default_streams.h"
#include "obs/dump_service.h"
#include "plan/collective.h"
#include "reduce/reduce.h"

using gpurdma::Status;
using gpurdma::exec::State;
using Kind = gpurdma_request::Kind;
using Phase = gpurdma_request::Phase;

gpurdma::exec::State gpurdma_request::advance()
{
    return comm->advance_call(*this);
}

gpurdma_comm::gpurdma_comm(gpurdma_context *ctx, const gpurdma_comm_params_t &params)
    : context(ctx),
      rank(params.rank),
      size(params.size),
      bootstrap(params.bootstrap),
      name(params.name ? params.name : "communicator"),
      // A trace needs a history: 64 calls where none was asked for.
      recorder_(name, rank, size,
                ctx->config.recorder_size > 0 ? static_cast<size_t>(ctx->config.recorder_size)
                : ctx->trace_dir.empty()      ? 0
                                              : 64),
      staging_(name, size, rank, ctx->config.timeout_s, &ctx->log, &buffers_,
               [this](const gpurdma::algo::Call &host_call) -> gpurdma::algo::Algorithm * {
                   return size > 1 ? &selector_->choose(host_call) : nullptr;
               })
{
    gpurdma::obs::DumpService::instance().add(&recorder_);
    recorder_.set_stamp_all(!ctx->trace_dir.empty());
}

gpurdma::obs::FlightRecorder *gpurdma_request::recorder() const
{
    return comm ? &comm->recorder() : nullptr;
}

gpurdma_comm::~gpurdma_comm()
{
    gpurdma::obs::DumpService::instance().remove(&recorder_);
    {
        std::lock_guard<gpurdma::exec::EngineLock> hold(calls_.engine());
        // Calls still in flight (the caller freed the communicator, or their requests)
        // complete first: every rank does the same, bounded by the timeout.
        calls_.conclude_ended();
        while (!calls_.empty()) {
            gpurdma_request &front = static_cast<gpurdma_request &>(calls_.front());
            struct Drain : gpurdma::exec::Task {
                gpurdma_comm &comm;
                explicit Drain(gpurdma_comm &c) : comm(c) {}
                State advance() override
                {
                    return comm.calls_.drive(), comm.calls_.empty() ? State::Done : State::Running;
                }
                uint64_t position() const override { return comm.stats.calls + comm.calls_.size(); }
                std::string describe_wait() const override { return comm.calls_.front().describe_wait(); }
                const char *collective() const override { return comm.calls_.front().collective(); }
                std::string describe_failure() const override { return comm.last_error; }
                gpurdma::obs::FlightRecorder *recorder() const override { return &comm.recorder_; }
            } drain(*this);
            (void)loop_for(front).run(drain);  // each call fails itself at its own timeout
        }
        context->engine.deactivate(&calls_);
        for (gpurdma_request *r : persistent_) r->comm = nullptr;  // the caller frees them later
        persistent_.clear();
    }
    trace_record();
    // Per-communicator counters: set-up work happens once, never per call.
    const uint64_t others = stats.reduce_scatter_calls + stats.allgather_calls + stats.bcast_calls +
                            stats.reduce_calls + stats.barrier_calls;
    if (stats.calls + others > 0 && context->log.enabled(rank == 0 ? 1 : 2))
        context->log.log(
            rank == 0 ? 1 : 2,
            "%s: rank %d freed after %llu allreduce calls (node %llu, ring %llu, recursive doubling %llu, "
            "hierarchical %llu, nonblocking %llu, persistent %llu), reduce-scatter %llu, allgather %llu, bcast %llu, "
            "reduce %llu, barrier %llu; set-ups %llu, UCX registrations %llu, shared segments %llu, bytes sent %llu",
            name.c_str(), rank, static_cast<unsigned long long>(stats.calls),
            static_cast<unsigned long long>(stats.node_calls), static_cast<unsigned long long>(stats.ring_calls),
            static_cast<unsigned long long>(stats.rd_calls), static_cast<unsigned long long>(stats.hier_calls),
            static_cast<unsigned long long>(stats.nonblocking_calls),
            static_cast<unsigned long long>(stats.persistent_calls),
            static_cast<unsigned long long>(stats.reduce_scatter_calls),
            static_cast<unsigned long long>(stats.allgather_calls), static_cast<unsigned long long>(stats.bcast_calls),
            static_cast<unsigned long long>(stats.reduce_calls), static_cast<unsigned long long>(stats.barrier_calls),
            static_cast<unsigned long long>(stats.setups), static_cast<unsigned long long>(stats.registrations),
            static_cast<unsigned long long>(stats.shm_segments), static_cast<unsigned long long>(stats.bytes_put));
    device_hier_.reset();
    device_node_rail_.reset();
    selector_.reset();
    team_.reset();
}

void gpurdma_comm::tally(uint64_t gpurdma_comm_stats_t::*field, uint64_t n)
{
    gpurdma::counters::add_alone(stats, field, n);  // the engine's holder only; read from any thread
    context->add_total(field, n);
}

gpurdma_status_t gpurdma_comm::fail(gpurdma_status_t status, const std::string &message)
{
    last_error = message;
    broken_ = true;
    recorder_.set_broken(message);
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
    set_up_.store(true, std::memory_order_release);
    if (!st.is_ok()) {
        declined_ = true;
        context->log.log(1, "%s: declined, using the previous allreduce: %s", name.c_str(), st.message().c_str());
        return Status::unsupported(st.message());
    }
    selector_ = std::make_unique<gpurdma::algo::Selector>(*team_);
    set_up_record();
    tally(&gpurdma_comm_stats_t::setups);
    if (team_->uses_ucx()) tally(&gpurdma_comm_stats_t::registrations);
    if (team_->node_memory()) tally(&gpurdma_comm_stats_t::shm_segments);
    if (rank == 0 && context->log.enabled(1))
        selector_->log_summary(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return Status::ok();
}

State gpurdma_comm::advance_call(gpurdma_request &r)
{
    if (r.phase == Phase::Started) return begin(r);
    if (r.phase == Phase::Agreeing) return agree(r);
    if (!r.algorithm) return State::Done;
    const State st = r.algorithm->advance();
    if (st == State::Running) return st;
    if (st == State::Failed) {
        r.failure = r.algorithm->describe_failure();
        return st;
    }
    if (st == State::Declined) {  // the device path: some rank cannot share its buffers
        r.algorithm = nullptr;
        return stage_declined(r);
    }
    finished(r);
    return State::Done;
}

void gpurdma_comm::finished(gpurdma_request &r)
{
    r.algorithm->finish();
    // The algorithms' counters are allreduce's (none: a staged call on a single rank; not
    // a barrier's), but for device_calls, which counts every collective's calls on the GPU.
    if (const auto counter = r.algorithm->counter();
        counter && !r.call.barrier &&
        (r.call.coll == gpurdma::plan::Coll::Allreduce || counter == &gpurdma_comm_stats_t::device_calls))
        tally(counter);
    if (team_ && r.phase != Phase::Device)
        tally(&gpurdma_comm_stats_t::bytes_put, team_->bytes_sent() - stats.bytes_put);
    r.algorithm = nullptr;
}

Status gpurdma_comm::run_now(gpurdma_request &r)
{
    const gpurdma::exec::ProgressLoop &loop = loop_for(r);
    if (r.device) return loop.run(r);  // the agreement and the device paths: the request's phases
    // Host buffers: begun here, then the algorithm runs under the loop itself, with no
    // request in between (the latency path: a poll is the algorithm's own advance()).
    const State begun = begin(r);
    if (begun != State::Running) return loop.outcome(begun, r);
    const Status st = r.algorithm->run(loop);
    if (st.is_ok()) finished(r);
    return st;
}

void gpurdma_comm::report(gpurdma_request &r, gpurdma_status_t status)
{
    r.phase = Phase::Idle;
    r.algorithm = nullptr;
    r.result = status;
    if (r.kind == Kind::Blocking) return;
    if (r.complete) r.complete(r.arg, status);
    // Inactive only once the callback has returned: a test that says "complete" lets the
    // caller free what the callback writes to.
    r.active.store(false, std::memory_order_release);
    if (r.detached) {
        persistent_.erase(&r);
        delete &r;
    }
}

void gpurdma_comm::conclude(gpurdma_request &r, State state, const Status &result)
{
    using gpurdma::obs::CallState;
    const gpurdma::obs::CallRecord *record = recorder_.close(r.number, state == State::Done       ? CallState::Done
                                                                       : state == State::Declined ? CallState::Declined
                                                                                                  : CallState::Failed);
    if (record && record->stages) tally_stages(*record);
    if (state == State::Done) {
        tally(call_counter(r.call));
        const bool allreduce = r.call.coll == gpurdma::plan::Coll::Allreduce && !r.call.barrier;
        if (allreduce && r.kind == Kind::Nonblocking) tally(&gpurdma_comm_stats_t::nonblocking_calls);
        if (allreduce && r.kind == Kind::Persistent) tally(&gpurdma_comm_stats_t::persistent_calls);
        report(r, GPURDMA_OK);
        return;
    }
    if (state == State::Declined && r.kind == Kind::Blocking) {  // handed on, the communicator intact
        report(r, GPURDMA_ERR_UNSUPPORTED);
        return;
    }
    if (r.phase == Phase::Device) abandon_device(r);  // peers stop waiting for this rank
    const Status st = state == State::Declined
                          ? Status::error(GPURDMA_ERR_TRANSPORT, name +
                                                                     ": the GPU buffers of a queued call cannot "
                                                                     "be staged: the host path declined at set-up")
                          : result;
    report(r, fail(st.code(), st.message()));
}

void gpurdma_comm::enqueue(gpurdma_request &r)
{
    r.phase = Phase::Started;
    r.failure.clear();
    if (r.kind != Kind::Blocking) r.active.store(true, std::memory_order_release);
    calls_.push(r);
    context->engine.activate(&calls_);
}

uint64_t gpurdma_comm_stats_t::*gpurdma_comm::call_counter(const gpurdma::algo::Call &call)
{
    using gpurdma::plan::Coll;
    if (call.barrier) return &gpurdma_comm_stats_t::barrier_calls;
    switch (call.coll) {
        case Coll::ReduceScatter: return &gpurdma_comm_stats_t::reduce_scatter_calls;
        case Coll::Allgather: return &gpurdma_comm_stats_t::allgather_calls;
        case Coll::Bcast: return &gpurdma_comm_stats_t::bcast_calls;
        case Coll::Reduce: return &gpurdma_comm_stats_t::reduce_calls;
        case Coll::Allreduce: break;
    }
    return &gpurdma_comm_stats_t::calls;
}

bool gpurdma_comm::takes(const gpurdma::algo::Call &call) const
{
    using gpurdma::plan::Coll;
    const gpurdma_config_t &cfg = context->config;
    if (call.barrier) return cfg.barrier_enable != 0;
    switch (call.coll) {
        case Coll::ReduceScatter:
            if (!cfg.reduce_scatter_enable) return false;
            break;
        case Coll::Allgather: return cfg.allgather_enable != 0;
        case Coll::Bcast: return cfg.bcast_enable != 0;
        case Coll::Reduce:
            if (!cfg.reduce_enable) return false;
            break;
        case Coll::Allreduce: break;
    }
    return gpurdma::reduce::supported(call.op, call.dtype);
}

// On the caller's thread, as its call starts (its per-thread default stream is its own):
// events that begin() polls, so that the wait is bounded by the call's timeout and never
// holds a nonblocking caller. One fence for the blocking calls (one at a time), one per
// nonblocking or persistent request.
Status gpurdma_comm::arm_settle(gpurdma_request &r)
{
    gpurdma::gpu::PointerInfo sinfo, rinfo;
    buffers_.info({r.call.sendbuf, r.call.recvbuf}, &sinfo, &rinfo);
    const auto device_context = [](const gpurdma::gpu::PointerInfo &i) {
        return i.kind == gpurdma::gpu::MemoryKind::Device ? i.context : nullptr;
    };
    if (r.kind == Kind::Blocking) {
        if (!blocking_settle_) blocking_settle_ = std::make_unique<gpurdma::gpu::DefaultStreamFence>();
        r.settle = blocking_settle_.get();
    } else {
        if (!r.own_settle) r.own_settle = std::make_unique<gpurdma::gpu::DefaultStreamFence>();
        r.settle = r.own_settle.get();
    }
    const Status recorded = r.settle->record(device_context(sinfo), device_context(rinfo));
    if (!recorded.is_ok())
        return Status::error(recorded.code(), name + ": " + gpurdma::algo::call_name(r.call) +
                                                  " on GPU buffers: marking the application's GPU work before "
                                                  "the call: " +
                                                  recorded.message());
    r.settling = true;
    return Status::ok();
}

gpurdma_status_t gpurdma_comm::run(const gpurdma::algo::Call &call)
{
    // The latency path: where no other thread can start or drive calls (context's
    // concurrent()), neither the concurrency check nor the engine lock is needed.
    const bool concurrent = context->concurrent();
    gpurdma::exec::StartGuard starting(calls_.starting(), concurrent);
    if (!starting.alone()) return GPURDMA_ERR_CONCURRENT;
    gpurdma::exec::EngineHold hold(calls_.engine(), concurrent);
    if (broken_) return GPURDMA_ERR_BROKEN;  // last_error still names the first failure
    if (!takes(call)) return GPURDMA_ERR_UNSUPPORTED;
    if (gpurdma::algo::nothing_to_do(call, size)) return GPURDMA_OK;
    // GPU buffers arrive as raw pointers from a non-CUDA-aware Open MPI: recognise them
    // before anything touches them from the CPU (a barrier's bytes are our own).
    const bool device_buffers = !call.barrier && buffers_.touches_device_memory({call.sendbuf, call.recvbuf});
    calls_.conclude_ended();  // callbacks in start order, before this call's
    const Status ready = prepare(call, device_buffers, Kind::Blocking);
    if (ready.is_unsupported()) return GPURDMA_ERR_UNSUPPORTED;  // handed on, the communicator intact
    if (!ready.is_ok()) return fail(ready.code(), ready.message());
    gpurdma_request r(this, Kind::Blocking, call, device_buffers);
    r.other_vendor = device_buffers && buffers_.other_vendor();
    if (device_buffers) {
        const Status armed = arm_settle(r);
        if (!armed.is_ok()) return fail(armed.code(), armed.message());
    }
    if (calls_.empty()) {
        // Nothing in flight: the call runs at once under its loop.
        r.phase = Phase::Started;
        const Status st = run_now(r);
        conclude(r, st.is_ok() ? State::Done : st.is_unsupported() ? State::Declined : State::Failed, st);
        return r.result;
    }
    // Behind nonblocking calls: the queue runs until this one has ended.
    enqueue(r);
    struct UntilDone : gpurdma::exec::Task {
        gpurdma_comm &comm;
        gpurdma_request &mine;
        UntilDone(gpurdma_comm &c, gpurdma_request &m) : comm(c), mine(m) {}
        State advance() override
        {
            comm.calls_.drive();
            return mine.phase == Phase::Idle ? State::Done : State::Running;
        }
        uint64_t position() const override { return comm.stats.calls + comm.calls_.size() + mine.position(); }
        std::string describe_wait() const override { return comm.calls_.front().describe_wait(); }
        const char *collective() const override { return comm.calls_.front().collective(); }
        std::string describe_failure() const override { return comm.last_error; }
        gpurdma::obs::FlightRecorder *recorder() const override { return &comm.recorder_; }
    } until_done(*this, r);
    const Status st = loop_for(r).run(until_done);
    if (!st.is_ok() && r.phase != Phase::Idle) {
        // The loop's own timeout (the calls' clocks normally fire first): everything queued fails.
        calls_.remove(r);
        conclude(r, State::Failed, st);
        calls_.drive();
    }
    return r.result;
}

gpurdma_status_t gpurdma_comm::create(const gpurdma::algo::Call &call, Kind kind, gpurdma_complete_fn_t complete,
                                      void *arg, gpurdma_request **out)
{
    gpurdma::exec::StartGuard starting(calls_.starting());
    if (!starting.alone()) return GPURDMA_ERR_CONCURRENT;
    std::lock_guard<gpurdma::exec::EngineLock> hold(calls_.engine());
    if (broken_) return GPURDMA_ERR_BROKEN;
    if (!takes(call)) return GPURDMA_ERR_UNSUPPORTED;
    const bool moves = !gpurdma::algo::nothing_to_do(call, size);
    const bool device_buffers = moves && buffers_.touches_device_memory({call.sendbuf, call.recvbuf});
    if (moves) {
        const Status ready = prepare(call, device_buffers, kind);
        if (ready.is_unsupported()) return GPURDMA_ERR_UNSUPPORTED;
        if (!ready.is_ok()) return fail(ready.code(), ready.message());
    }
    auto *r = new gpurdma_request(this, kind, call, device_buffers, complete, arg);
    r->other_vendor = device_buffers && buffers_.other_vendor();
    if (device_buffers && kind == Kind::Nonblocking) {  // a persistent call at each start
        const Status armed = arm_settle(*r);
        if (!armed.is_ok()) {
            delete r;
            return fail(armed.code(), armed.message());
        }
    }
    *out = r;
    if (kind == Kind::Persistent) {
        persistent_.insert(r);  // inactive until started
        return GPURDMA_OK;
    }
    enqueue(*r);
    calls_.drive();  // as far as it goes without waiting: the data starts moving now
    return GPURDMA_OK;
}

gpurdma_status_t gpurdma_comm::start(gpurdma_request &r)
{
    gpurdma::exec::StartGuard starting(calls_.starting());
    if (!starting.alone()) return GPURDMA_ERR_CONCURRENT;
    std::lock_guard<gpurdma::exec::EngineLock> hold(calls_.engine());
    if (r.kind != Kind::Persistent || r.active.load(std::memory_order_acquire)) return GPURDMA_ERR_INVALID;
    if (broken_) return GPURDMA_ERR_BROKEN;
    if (r.device && !gpurdma::algo::nothing_to_do(r.call, size)) {
        const Status armed = arm_settle(r);
        if (!armed.is_ok()) return fail(armed.code(), armed.message());
    }
    enqueue(r);
    calls_.drive();
    return GPURDMA_OK;
}

int gpurdma_comm::test(gpurdma_request &r)
{
    if (!r.active.load(std::memory_order_acquire)) return 1;
    gpurdma::exec::ProgressEngine::CallerPolling polling(context->engine);
    bool yield = false;
    if (calls_.engine().try_lock()) {
        calls_.drive();
        yield = calls_.yield_wanted();
        calls_.engine().unlock();
    }
    const int done = r.active.load(std::memory_order_acquire) ? 0 : 1;
    // MPI_Test in a loop: the peer we wait for may need this core.
    if (!done && yield) std::this_thread::yield();
    return done;
}

int gpurdma_comm::release(gpurdma_request *r)
{
    std::lock_guard<gpurdma::exec::EngineLock> hold(calls_.engine());
    if (r->active.load(std::memory_order_acquire)) {
        r->detached = true;
        return 1;
    }
    persistent_.erase(r);
    delete r;
    return 0;
}
