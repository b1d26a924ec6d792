#include "exec/progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

namespace gpurdma::exec {

namespace {

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

}  // namespace

ProgressLoop::ProgressLoop(WaitPolicy policy, WaitSite site, std::function<unsigned()> poll_network)
    : policy_(policy), site_(std::move(site)), poll_network_(std::move(poll_network))
{}

double IdleClock::idle_seconds(uint64_t position)
{
    if (!started_ || position != last_position_) {
        started_ = true;
        last_position_ = position;
        still_polls_ = 0;
        last_read_ = -1;
        idle_ = 0;
        return 0;
    }
    if (++still_polls_ % 16 != 1) return idle_;
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    if (last_read_ >= 0) idle_ += std::min(now - last_read_, kMaxGap);
    last_read_ = now;
    return idle_;
}

Status ProgressLoop::outcome(State state, const Task &task) const
{
    if (state == State::Done) return Status::ok();
    if (state == State::Declined) return Status::unsupported(site_.name + ": declined by every rank");
    return Status::error(GPURDMA_ERR_TRANSPORT, site_.name + ": " + task.describe_failure());
}

Status ProgressLoop::timed_out(const Task &task) const
{
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.0f", policy_.timeout_s);
    return Status::error(GPURDMA_ERR_TIMEOUT, site_.name + ": allreduce timed out after " + secs + " s in " +
                                                  task.describe_wait() + " (this is rank " +
                                                  std::to_string(site_.rank) + " on host " + site_.host + ")");
}

State ProgressLoop::step(Task &task, IdleClock &clock, Status *result) const
{
    State st = task.advance();
    if (st == State::Running && poll_network_ && poll_network_() != 0) st = task.advance();
    if (st != State::Running) {
        *result = outcome(st, task);
        return st;
    }
    const double idle_s = clock.idle_seconds(task.position());
    if (idle_s > policy_.timeout_s) {
        *result = timed_out(task);
        return State::Failed;
    }
    return State::Running;
}

bool ProgressLoop::should_yield(const IdleClock &clock) const
{
    return clock.still() &&
           (policy_.yield_when_idle || (policy_.spin_us >= 0 && clock.idle() > policy_.spin_us * 1e-6));
}

Status ProgressLoop::run(Task &task) const
{
    // The clock is read only once nothing has moved for a while: a small message
    // completes without ever reading it.
    std::chrono::steady_clock::time_point idle_since{};
    bool idle_clock = false;
    uint64_t last_pos = task.position();
    unsigned idle = 0;
    bool yielding = policy_.yield_when_idle;
    const double spin_s = policy_.spin_us * 1e-6;
    for (;;) {
        const State st = task.advance();
        if (st != State::Running) return outcome(st, task);
        if (task.position() != last_pos) {
            last_pos = task.position();
            idle_clock = false;
            idle = 0;
            yielding = policy_.yield_when_idle;
            continue;
        }
        if (poll_network_ && poll_network_() != 0) {
            idle = 0;
            continue;
        }
        // Nothing moved. While every local rank has a core of its own, spin: a yield
        // would hand the core to any other runnable process for a whole time slice
        // (milliseconds). With more local ranks than cores, yield at once so that the
        // peer we wait for gets to run. A wait longer than the spin budget means the
        // peer is not running either (other "nodes" or jobs share the cores): yield too.
        ++idle;
        if (policy_.outside_progress && idle % WaitPolicy::kOutsideEvery == 0) policy_.outside_progress();
        if (yielding) std::this_thread::yield();
        else if (idle > 64) cpu_relax();  // the first polls at full speed: the peer is usually close
        if (idle % 16 != 1) continue;
        const auto now = std::chrono::steady_clock::now();
        if (!idle_clock) {
            idle_since = now;
            idle_clock = true;
            continue;
        }
        const double idle_s = std::chrono::duration<double>(now - idle_since).count();
        if (!yielding && spin_s >= 0 && idle_s > spin_s) yielding = true;
        if (idle_s > policy_.timeout_s) return timed_out(task);
    }
}

}  // namespace gpurdma::exec
