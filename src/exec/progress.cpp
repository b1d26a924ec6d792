#include "exec/progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

namespace gpurdma::exec {

ProgressLoop::ProgressLoop(WaitPolicy policy, WaitSite site, std::function<unsigned()> poll_network)
    : policy_(policy), site_(std::move(site)), poll_network_(std::move(poll_network))
{}

double IdleClock::idle_seconds(uint64_t position)
{
    if (!started_ || position != last_position_) {
        started_ = true;
        last_position_ = position;
        still_polls_ = 0;
        time_.reset();
        return 0;
    }
    if (++still_polls_ % 16 != 1) return time_.seconds();
    return time_.add_read(std::chrono::steady_clock::now());
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
    return Status::error(GPURDMA_ERR_TIMEOUT, site_.name + ": " + task.collective() + " timed out after " + secs +
                                                  " s in " + task.describe_wait() + " (this is rank " +
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

}  // namespace gpurdma::exec
