#include "exec/progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

#include "obs/dump_service.h"
#include "obs/flight_recorder.h"

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
        next_note_ = kFirstNote;
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

bool ProgressLoop::note_wait(const Task &task, double idle_s)
{
    obs::FlightRecorder *recorder = task.recorder();
    if (!recorder || !recorder->call_open()) return false;
    recorder->note_wait(task.describe_wait(), idle_s);
    return true;
}

Status ProgressLoop::timed_out(const Task &task) const
{
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.0f", policy_.timeout_s);
    // A call's timeout (not a teardown's, whose communicator is no longer recorded)
    // writes the dump first (coll_gpurdma_dump_on_timeout), so that the error can name it.
    const bool call = note_wait(task, policy_.timeout_s);
    const std::string dump = call ? obs::DumpService::instance().write_on_timeout() : std::string();
    return Status::error(GPURDMA_ERR_TIMEOUT, site_.name + ": " + task.collective() + " timed out after " + secs +
                                                  " s in " + task.describe_wait() + " (this is rank " +
                                                  std::to_string(site_.rank) + " on host " + site_.host + ")" +
                                                  (dump.empty() ? "" : "; dump: " + dump));
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
    if (clock.note_due(idle_s)) note_wait(task, idle_s);
    return State::Running;
}

bool ProgressLoop::should_yield(const IdleClock &clock) const
{
    return clock.still() &&
           (policy_.yield_when_idle || (policy_.spin_us >= 0 && clock.idle() > policy_.spin_us * 1e-6));
}

}  // namespace gpurdma::exec
