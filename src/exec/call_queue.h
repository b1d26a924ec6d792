// A communicator's started calls, run one at a time in start order: every rank starts
// collectives on a communicator in the same order, so the queues agree without any
// message. Whoever drives the queue (the process's progress, a test, a later call on
// the communicator) holds its engine lock and steps the front call under that call's
// progress loop; the call's idle clock counts only the time spent polling it.
//
// The owner (the communicator) says which loop runs a call and what a call's end
// means (its counters, its callback, whether the communicator broke).
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>

#include "base/status.h"
#include "exec/engine_lock.h"
#include "exec/progress.h"
#include "exec/progress_engine.h"
#include "exec/task.h"

namespace gpurdma::exec {

class CallQueue : public Driven {
public:
    class Owner {
    public:
        virtual const ProgressLoop &loop_of(Task &call) = 0;
        // The call ended (Done, Declined or Failed with result): its bookkeeping and callback.
        virtual void ended(Task &call, State state, const Status &result) = 0;
        // After ended(): whether the communicator broke; what was queued behind then
        // cannot run (the peers' calls stopped too) and is aborted.
        virtual bool broken() const = 0;
        virtual void abort(Task &call) = 0;

    protected:
        ~Owner() = default;
    };

    explicit CallQueue(Owner &owner) : owner_(owner) {}

    // Engine held: queues a started call (its idle clock starts again).
    void push(Task &call) { queue_.push_back(Queued{&call, IdleClock()}); }
    // Engine held: advances the front calls; concludes the ones that ended, or, without
    // reporting (the progress thread, not an MPI thread), keeps them for the next drive
    // that reports, and stops after one that did not succeed. Returns the calls ended.
    int drive(bool reporting = true);
    // Engine held: concludes the calls that ended on the progress thread, in order.
    void conclude_ended();
    // Engine held: takes a call out (its wait given up), wherever it is.
    void remove(Task &call);

    // Driven: drives the queue unless another thread does (its engine is busy).
    int poll(bool report, bool *idle, bool *yield) override;

    bool empty() const { return queue_.empty(); }
    size_t size() const { return queue_.size(); }
    Task &front() const { return *queue_.front().call; }
    // The last drive left the front call still, past its spin budget.
    bool yield_wanted() const { return yield_wanted_; }
    EngineLock &engine() { return engine_; }
    // Set while a thread starts a call on the communicator (StartGuard).
    std::atomic<bool> &starting() { return starting_; }

private:
    struct Queued {
        Task *call;
        IdleClock clock;
    };
    struct Ended {
        Task *call;
        State state;
        Status result;
    };

    Owner &owner_;
    EngineLock engine_;
    std::atomic<bool> starting_{false};
    std::deque<Queued> queue_;  // started calls, in start order; the front runs
    std::deque<Ended> ended_;  // ended on the progress thread, not yet concluded
    bool yield_wanted_ = false;
};

}  // namespace gpurdma::exec
