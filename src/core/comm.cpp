#include "core/comm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "algo/host_team.h"
#include "algo/selector.h"
#include "core/counters.h"
#include "gpu/buffer_query.h"
#include "reduce/reduce.h"

using gpurdma::Status;
using gpurdma::exec::State;
using Kind = gpurdma_request::Kind;
using Phase = gpurdma_request::Phase;

void gpurdma_comm::Engine::lock()
{
    mutex_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

bool gpurdma_comm::Engine::try_lock()
{
    // Never try a mutex this thread holds (undefined for std::mutex): it is busy anyway.
    if (held_by_this_thread() || !mutex_.try_lock()) return false;
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
}

void gpurdma_comm::Engine::unlock()
{
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    mutex_.unlock();
}

// Calls that start a collective on one communicator must not overlap (MPI makes it
// erroneous); two that do would interleave their data. One atomic exchange tells.
// Not checked (always alone) where no other thread can call (checked: false).
class gpurdma_comm::Starting {
public:
    explicit Starting(std::atomic<bool> &flag, bool checked = true)
        : flag_(flag), checked_(checked), alone_(!checked || !flag.exchange(true, std::memory_order_acquire))
    {}
    ~Starting()
    {
        if (checked_ && alone_) flag_.store(false, std::memory_order_release);
    }
    bool alone() const { return alone_; }

private:
    std::atomic<bool> &flag_;
    const bool checked_;
    const bool alone_;
};

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
      staging_(name, ctx->config.timeout_s, &ctx->log, &buffers_,
               [this](const gpurdma::algo::Call &host_call) -> gpurdma::algo::Algorithm * {
                   return size > 1 ? &selector_->choose(host_call) : nullptr;
               })
{}

gpurdma_comm::~gpurdma_comm()
{
    {
        std::lock_guard<Engine> hold(engine_);
        // Calls still in flight (the caller freed the communicator, or their requests)
        // complete first: every rank does the same, bounded by the timeout.
        conclude_ended();
        while (!queue_.empty()) {
            gpurdma_request &front = *queue_.front();
            struct Drain : gpurdma::exec::Task {
                gpurdma_comm &comm;
                explicit Drain(gpurdma_comm &c) : comm(c) {}
                State advance() override
                {
                    return comm.drive_queue(), comm.queue_.empty() ? State::Done : State::Running;
                }
                uint64_t position() const override { return comm.stats.calls + comm.queue_.size(); }
                std::string describe_wait() const override { return comm.queue_.front()->describe_wait(); }
                std::string describe_failure() const override { return comm.last_error; }
            } drain(*this);
            (void)loop_for(front).run(drain);  // each call fails itself at its own timeout
        }
        context->deactivate(this);
        for (gpurdma_request *r : persistent_) r->comm = nullptr;  // the caller frees them later
        persistent_.clear();
    }
    // Per-communicator counters: set-up work happens once, never per call.
    if (stats.calls > 0 && context->log.enabled(rank == 0 ? 1 : 2))
        context->log.log(
            rank == 0 ? 1 : 2,
            "%s: rank %d freed after %llu calls (node %llu, ring %llu, recursive doubling %llu, "
            "hierarchical %llu, nonblocking %llu, persistent %llu); set-ups %llu, UCX registrations %llu, "
            "shared segments %llu, bytes sent %llu",
            name.c_str(), rank, static_cast<unsigned long long>(stats.calls),
            static_cast<unsigned long long>(stats.node_calls), static_cast<unsigned long long>(stats.ring_calls),
            static_cast<unsigned long long>(stats.rd_calls), static_cast<unsigned long long>(stats.hier_calls),
            static_cast<unsigned long long>(stats.nonblocking_calls),
            static_cast<unsigned long long>(stats.persistent_calls), static_cast<unsigned long long>(stats.setups),
            static_cast<unsigned long long>(stats.registrations), static_cast<unsigned long long>(stats.shm_segments),
            static_cast<unsigned long long>(stats.bytes_put));
    device_hier_.reset();
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
    if (const auto counter = r.algorithm->counter()) tally(counter);  // none: a staged call on a single rank
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
    if (state == State::Done) {
        tally(&gpurdma_comm_stats_t::calls);
        if (r.kind == Kind::Nonblocking) tally(&gpurdma_comm_stats_t::nonblocking_calls);
        if (r.kind == Kind::Persistent) tally(&gpurdma_comm_stats_t::persistent_calls);
        report(r, GPURDMA_OK);
        return;
    }
    if (state == State::Declined && r.kind == Kind::Blocking) {  // handed on, the communicator intact
        report(r, GPURDMA_ERR_UNSUPPORTED);
        return;
    }
    if (r.phase == Phase::Device) abandon_device();  // peers stop waiting for this rank
    const Status st = state == State::Declined
                          ? Status::error(GPURDMA_ERR_TRANSPORT, name +
                                                                     ": the GPU buffers of a queued call cannot "
                                                                     "be staged: the host path declined at set-up")
                          : result;
    report(r, fail(st.code(), st.message()));
}

void gpurdma_comm::conclude_ended()
{
    while (!ended_.empty()) {
        const Ended e = ended_.front();
        ended_.pop_front();
        conclude(*e.request, e.state, e.result);
    }
}

int gpurdma_comm::drive_queue(bool reporting)
{
    int events = 0;
    yield_wanted_ = false;
    if (reporting && !ended_.empty()) {
        events += static_cast<int>(ended_.size());
        conclude_ended();
    }
    while (!queue_.empty()) {
        if (!reporting && !ended_.empty() && ended_.back().state != State::Done) return events;
        gpurdma_request &front = *queue_.front();
        Status result;
        const gpurdma::exec::ProgressLoop &loop = loop_for(front);
        const State st = loop.step(front, front.clock, &result);
        if (st == State::Running) {
            yield_wanted_ = events == 0 && loop.should_yield(front.clock);
            return events;
        }
        queue_.pop_front();
        ++events;
        if (!reporting) {  // not an MPI thread: the next reporting drive concludes it
            ended_.push_back(Ended{&front, st, result});
            continue;
        }
        conclude(front, st, result);
        if (!broken_) continue;
        // What was queued behind a failure cannot run: the peers' calls stopped too.
        while (!queue_.empty()) {
            gpurdma_request &next = *queue_.front();
            queue_.pop_front();
            report(next, GPURDMA_ERR_BROKEN);
        }
    }
    return events;
}

void gpurdma_comm::enqueue(gpurdma_request &r)
{
    r.phase = Phase::Started;
    r.failure.clear();
    r.clock = gpurdma::exec::IdleClock();
    if (r.kind != Kind::Blocking) r.active.store(true, std::memory_order_release);
    queue_.push_back(&r);
    context->activate(this);
}

int gpurdma_comm::poll(bool report, bool *idle, bool *yield)
{
    if (!engine_.try_lock()) return 0;  // another thread drives it (and will again)
    const int events = drive_queue(report);
    *idle = queue_.empty() && ended_.empty();
    *yield = yield_wanted_;
    engine_.unlock();
    return events;
}

gpurdma_status_t gpurdma_comm::allreduce(const gpurdma::algo::Call &call)
{
    // The latency path: where no other thread can start or drive calls (context's
    // concurrent()), neither the concurrency check nor the engine lock is needed.
    const bool concurrent = context->concurrent();
    Starting starting(starting_, concurrent);
    if (!starting.alone()) return GPURDMA_ERR_CONCURRENT;
    struct Hold {
        Engine &engine;
        const bool locked;
        Hold(Engine &e, bool lock) : engine(e), locked(lock) { locked ? engine.lock() : engine.claim(); }
        ~Hold() { locked ? engine.unlock() : engine.unclaim(); }
    } hold(engine_, concurrent);
    if (broken_) return GPURDMA_ERR_BROKEN;  // last_error still names the first failure
    if (!gpurdma::reduce::supported(call.op, call.dtype)) return GPURDMA_ERR_UNSUPPORTED;
    if (call.count == 0) return GPURDMA_OK;
    // GPU buffers arrive as raw pointers from a non-CUDA-aware Open MPI: recognise them
    // before anything touches them from the CPU.
    const bool device_buffers = buffers_.touches_device_memory({call.sendbuf, call.recvbuf});
    conclude_ended();  // callbacks in start order, before this call's
    const Status ready = prepare(call, device_buffers, Kind::Blocking);
    if (ready.is_unsupported()) return GPURDMA_ERR_UNSUPPORTED;  // handed on, the communicator intact
    if (!ready.is_ok()) return fail(ready.code(), ready.message());
    gpurdma_request r(this, Kind::Blocking, call, device_buffers);
    if (queue_.empty()) {
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
            comm.drive_queue();
            return mine.phase == Phase::Idle ? State::Done : State::Running;
        }
        uint64_t position() const override { return comm.stats.calls + comm.queue_.size() + mine.position(); }
        std::string describe_wait() const override { return comm.queue_.front()->describe_wait(); }
        std::string describe_failure() const override { return comm.last_error; }
    } until_done(*this, r);
    const Status st = loop_for(r).run(until_done);
    if (!st.is_ok() && r.phase != Phase::Idle) {
        // The loop's own timeout (the calls' clocks normally fire first): everything queued fails.
        queue_.erase(std::find(queue_.begin(), queue_.end(), &r));
        conclude(r, State::Failed, st);
        drive_queue();
    }
    return r.result;
}

gpurdma_status_t gpurdma_comm::create(const gpurdma::algo::Call &call, Kind kind, gpurdma_complete_fn_t complete,
                                      void *arg, gpurdma_request **out)
{
    Starting starting(starting_);
    if (!starting.alone()) return GPURDMA_ERR_CONCURRENT;
    std::lock_guard<Engine> hold(engine_);
    if (broken_) return GPURDMA_ERR_BROKEN;
    if (!gpurdma::reduce::supported(call.op, call.dtype)) return GPURDMA_ERR_UNSUPPORTED;
    const bool device_buffers = call.count > 0 && buffers_.touches_device_memory({call.sendbuf, call.recvbuf});
    if (call.count > 0) {
        const Status ready = prepare(call, device_buffers, kind);
        if (ready.is_unsupported()) return GPURDMA_ERR_UNSUPPORTED;
        if (!ready.is_ok()) return fail(ready.code(), ready.message());
    }
    auto *r = new gpurdma_request(this, kind, call, device_buffers, complete, arg);
    *out = r;
    if (kind == Kind::Persistent) {
        persistent_.insert(r);  // inactive until started
        return GPURDMA_OK;
    }
    enqueue(*r);
    drive_queue();  // as far as it goes without waiting: the data starts moving now
    return GPURDMA_OK;
}

gpurdma_status_t gpurdma_comm::start(gpurdma_request &r)
{
    Starting starting(starting_);
    if (!starting.alone()) return GPURDMA_ERR_CONCURRENT;
    std::lock_guard<Engine> hold(engine_);
    if (r.kind != Kind::Persistent || r.active.load(std::memory_order_acquire)) return GPURDMA_ERR_INVALID;
    if (broken_) return GPURDMA_ERR_BROKEN;
    enqueue(r);
    drive_queue();
    return GPURDMA_OK;
}

int gpurdma_comm::test(gpurdma_request &r)
{
    if (!r.active.load(std::memory_order_acquire)) return 1;
    gpurdma_context::CallerPolling polling(*context);
    bool yield = false;
    if (engine_.try_lock()) {
        drive_queue();
        yield = yield_wanted_;
        engine_.unlock();
    }
    const int done = r.active.load(std::memory_order_acquire) ? 0 : 1;
    // MPI_Test in a loop: the peer we wait for may need this core.
    if (!done && yield) std::this_thread::yield();
    return done;
}

int gpurdma_comm::release(gpurdma_request *r)
{
    std::lock_guard<Engine> hold(engine_);
    if (r->active.load(std::memory_order_acquire)) {
        r->detached = true;
        return 1;
    }
    persistent_.erase(r);
    delete r;
    return 0;
}
