// The one wait loop every algorithm runs under (host schedules, the node allreduce,
// the device allreduce): advance the task, drive the network, spin while the peer is
// likely running and yield when it is not, and fail with a message naming the stage,
// the peer and this rank's host once nothing has moved for the timeout.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "base/status.h"
#include "exec/task.h"

namespace gpurdma::exec {

struct WaitPolicy {
    // This host's ranks cannot each keep a CPU (topo/placement.h): yield at once when idle.
    bool yield_when_idle = false;
    // An idle wait longer than this yields the core for the rest of it; negative: spin.
    double spin_us = 20.0;
    // Longest time without any movement before the call fails.
    double timeout_s = 60.0;
    // The caller's own progress (MPI's), run every kOutsideEvery idle polls: MPI's
    // progress rule says a rank blocked in any MPI call moves its other operations, and
    // a peer may be waiting on one of them (another module's nonblocking collective)
    // before it can join ours. Not in the first polls: a short wait never pays for it.
    void (*outside_progress)() = nullptr;
    static constexpr unsigned kOutsideEvery = 256;
};

// Who is waiting, for messages: "<name>: <collective> timed out after 60 s in <stage
// and peer> (this is rank <rank> on host <host>)".
struct WaitSite {
    std::string name;  // the communicator, e.g. "MPI_COMM_WORLD (cid 0)"
    int rank = 0;
    std::string host;
};

// Idle time, one rule for every wait (a blocking call's loop and a request driven one
// step at a time by whoever polls): only time spent polling counts. The clock is read
// now and then; each gap between two reads adds at most kMaxGap, so a caller that
// computes for minutes between two tests, or a process the OS did not run for a while,
// has not been waiting on its peers all that time.
class IdleTime {
public:
    static constexpr double kMaxGap = 0.05;
    // Nothing moved since the last read: adds the gap (capped) and returns the total.
    double add_read(std::chrono::steady_clock::time_point now)
    {
        const double t = std::chrono::duration<double>(now.time_since_epoch()).count();
        if (last_read_ >= 0) idle_ += std::min(t - last_read_, kMaxGap);
        last_read_ = t;
        return idle_;
    }
    void reset()
    {
        idle_ = 0;
        last_read_ = -1;
    }
    double seconds() const { return idle_; }

private:
    double idle_ = 0;
    double last_read_ = -1;  // steady clock, seconds; -1: not read since the last move
};

// How long a call driven from outside (a nonblocking request, advanced one step at a
// time by whoever polls) has waited without moving (IdleTime's rule). Reads the clock
// only every 16th still poll.
class IdleClock {
public:
    // Seconds of polling since `position` last changed.
    double idle_seconds(uint64_t position);
    // Whether the last idle_seconds() found the position unchanged.
    bool still() const { return started_ && still_polls_ > 0; }
    // The idle time as last read (idle_seconds reads the clock every 16th still poll).
    double idle() const { return time_.seconds(); }
    // Whether a wait this long should be noted in the flight recorder now (the first
    // time past kFirstNote, then every kNoteEvery).
    bool note_due(double idle_s)
    {
        if (idle_s < next_note_) return false;
        next_note_ = idle_s + kNoteEvery;
        return true;
    }
    static constexpr double kFirstNote = 0.01;
    static constexpr double kNoteEvery = 0.5;
    static constexpr double kMaxGap = IdleTime::kMaxGap;

private:
    uint64_t last_position_ = 0;
    unsigned still_polls_ = 0;
    bool started_ = false;
    double next_note_ = kFirstNote;
    IdleTime time_;
};

class ProgressLoop {
public:
    // poll_network drives the network once and returns how many events it handled
    // (UCX progress); empty when the call uses no network.
    ProgressLoop(WaitPolicy policy, WaitSite site, std::function<unsigned()> poll_network = {});

    // Runs task until Done (ok), Declined (unsupported), Failed (GPURDMA_ERR_TRANSPORT,
    // "<name>: " + describe_failure()) or the timeout (GPURDMA_ERR_TIMEOUT).
    Status run(Task &task) const { return run_as(task); }
    // The same loop over a task of a concrete type: where T is final its advance() and
    // position() are called directly, and inline where they can be (the latency path,
    // whose wait is a few polls of one cache line).
    template <class T> Status run_as(T &task) const;

    // One step of run() that never waits, for a call driven from outside: advances the
    // task once (polling the network if it did not move) and fails it once `clock` says
    // nothing moved for the timeout. Returns Running, Done, Declined or Failed; *result
    // holds what run() would have returned (set for every state but Running).
    State step(Task &task, IdleClock &clock, Status *result) const;
    // After a step that left the task Running: whether its caller should give the core
    // away, as run() does (at once where this host's ranks cannot each keep one, else
    // once the wait outlasts the spin budget). The caller yields once it holds no lock:
    // a yield under a lock that other threads wait for starves them.
    bool should_yield(const IdleClock &clock) const;

    const WaitPolicy &policy() const { return policy_; }
    // The same loop with another bound on an idle wait (MPI_Barrier's).
    ProgressLoop with_timeout(double timeout_s) const
    {
        ProgressLoop loop(*this);
        loop.policy_.timeout_s = timeout_s;
        return loop;
    }
    // What run() returns for a task that ended in `state` (not Running).
    Status outcome(State state, const Task &task) const;

private:
    static constexpr unsigned kFastPolls = 64;
    static void cpu_relax()
    {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    Status timed_out(const Task &task) const;
    // A long wait, noted in the call's flight recorder: where it waits (describe_wait()).
    // False: the task is no recorded call's.
    static bool note_wait(const Task &task, double idle_s);
    WaitPolicy policy_;
    WaitSite site_;
    std::function<unsigned()> poll_network_;
};

template <class T> Status ProgressLoop::run_as(T &task) const
{
    // The clock is read only once nothing has moved for a while: a small message
    // completes without ever reading it.
    IdleTime idle_time;
    double next_note_s = IdleClock::kFirstNote;
    uint64_t last_pos = task.position();
    unsigned idle = 0;
    bool yielding = policy_.yield_when_idle;
    const double spin_s = policy_.spin_us * 1e-6;
    for (;;) {
        const State st = task.advance();
        if (st != State::Running) return outcome(st, task);
        if (task.position() != last_pos) {
            last_pos = task.position();
            idle_time.reset();
            idle = 0;
            yielding = policy_.yield_when_idle;
            next_note_s = IdleClock::kFirstNote;
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
        // The first polls at full speed and without the clock (a read costs as much as
        // a few polls): the peer is usually close. Yielding, every poll counts.
        if (yielding) std::this_thread::yield();
        else if (idle > kFastPolls) cpu_relax();
        else continue;
        if (idle % 16 != 1) continue;
        const double idle_s = idle_time.add_read(std::chrono::steady_clock::now());
        if (!yielding && spin_s >= 0 && idle_s > spin_s) yielding = true;
        if (idle_s > policy_.timeout_s) return timed_out(task);
        if (idle_s > next_note_s) {
            note_wait(task, idle_s);
            next_note_s = idle_s + IdleClock::kNoteEvery;
        }
    }
}

}  // namespace gpurdma::exec
