// The one wait loop every algorithm runs under (host schedules, the node allreduce,
// the device allreduce): advance the task, drive the network, spin while the peer is
// likely running and yield when it is not, and fail with a message naming the stage,
// the peer and this rank's host once nothing has moved for the timeout.
#pragma once

#include <functional>
#include <string>

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

// Who is waiting, for messages: "<name>: allreduce timed out after 60 s in <stage and
// peer> (this is rank <rank> on host <host>)".
struct WaitSite {
    std::string name;  // the communicator, e.g. "MPI_COMM_WORLD (cid 0)"
    int rank = 0;
    std::string host;
};

// How long a call driven from outside (a nonblocking request, advanced one step at a
// time by whoever polls) has waited without moving. Only time spent polling counts: a
// caller that computes for minutes between two tests has not been waiting on its peers
// all that time, so each gap between clock reads adds at most kMaxGap. Reads the clock
// only every 16th still poll.
class IdleClock {
public:
    // Seconds of polling since `position` last changed.
    double idle_seconds(uint64_t position);
    // Whether the last idle_seconds() found the position unchanged.
    bool still() const { return started_ && still_polls_ > 0; }
    // The idle time as last read (idle_seconds reads the clock every 16th still poll).
    double idle() const { return idle_; }
    static constexpr double kMaxGap = 0.05;

private:
    uint64_t last_position_ = 0;
    unsigned still_polls_ = 0;
    bool started_ = false;
    double last_read_ = -1;  // steady clock, seconds; -1: not read since the last move
    double idle_ = 0;
};

class ProgressLoop {
public:
    // poll_network drives the network once and returns how many events it handled
    // (UCX progress); empty when the call uses no network.
    ProgressLoop(WaitPolicy policy, WaitSite site, std::function<unsigned()> poll_network = {});

    // Runs task until Done (ok), Declined (unsupported), Failed (GPURDMA_ERR_TRANSPORT,
    // "<name>: " + describe_failure()) or the timeout (GPURDMA_ERR_TIMEOUT).
    Status run(Task &task) const;

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

private:
    Status timed_out(const Task &task) const;
    Status outcome(State state, const Task &task) const;
    WaitPolicy policy_;
    WaitSite site_;
    std::function<unsigned()> poll_network_;
};

}  // namespace gpurdma::exec
