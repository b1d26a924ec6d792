// The process's progress over every communicator that has calls queued: MPI's
// progress (opal_progress, MPI_Test, MPI_Wait) drives them through progress_calls(),
// and so does the optional progress thread, which polls while calls are queued and
// sleeps otherwise.
//
// Threads: progress only try_locks the list and each communicator's engine, so it
// never waits for a busy one; a thread that finds another walking the list leaves the
// walk to it (a blocking lock there starved a blocking call's wait behind an MPI_Wait
// thread). activate() takes only the arrivals' own short lock, so starting a call
// never waits behind a walk. Lock order: a communicator's engine, the list, arrivals.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpurdma::exec {

// What the engine drives: a communicator's queue of calls.
class Driven {
public:
    // Advances the queue unless another thread is driving it. report: also conclude
    // the calls that ended (their callbacks; an MPI thread); otherwise they wait for the
    // next reporting drive. Returns events (calls moved or ended); *idle: nothing queued
    // or waiting to be reported; *yield: the front call is still and its wait policy
    // would give the core away (the caller yields once it holds no lock).
    virtual int poll(bool report, bool *idle, bool *yield) = 0;

protected:
    ~Driven() = default;
};

// The progress thread's pacing (coll_gpurdma_progress_thread*, the parameter table).
struct ProgressPacing {
    bool thread = false;  // started by the first queued call
    double pause_us = 0;  // after a round that moved nothing
    double grace_us = 0;  // kept off while an MPI thread polls, and this long after
    double linger_us = 0;  // polling on a timer this long after the last call, then asleep
};

class ProgressEngine {
public:
    // poll_network: the network once (UCX progress), for the thread's own rounds.
    ProgressEngine(ProgressPacing pacing, std::function<int()> poll_network);
    ~ProgressEngine() { stop_thread(); }
    // Stops the progress thread, if it runs (once nothing may be queued any more).
    void stop_thread();
    ProgressEngine(const ProgressEngine &) = delete;
    ProgressEngine &operator=(const ProgressEngine &) = delete;

    // Advances the communicators with calls queued; report: also the callbacks of the
    // calls that ended (any thread that may call back into the caller: an MPI thread).
    int progress_calls(bool report);
    bool nothing_queued() const { return active_count_.load(std::memory_order_acquire) == 0; }

    // A communicator with calls queued, until progress finds its queue empty (its engine held).
    void activate(Driven *queue);
    // A communicator going away (its engine held): progress never sees it again.
    void deactivate(Driven *queue);

    bool thread_started() const { return thread_started_.load(std::memory_order_relaxed); }
    // Whether this is the progress thread (which never reports nor logs: not an MPI thread).
    bool on_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

    // An MPI thread polling our calls itself (MPI_Wait, MPI_Test, opal_progress) holds
    // one of these for the poll: the progress thread keeps out of its way while any is
    // held and for the grace after (it would take a core from a rank and the engine
    // from the thread that waits). Free when there is no progress thread.
    class CallerPolling {
    public:
        explicit CallerPolling(ProgressEngine &e) : e_(e.thread_started() ? &e : nullptr)
        {
            if (e_) e_->callers_polling_.fetch_add(1, std::memory_order_relaxed);
        }
        ~CallerPolling()
        {
            if (!e_) return;
            e_->caller_poll_ns_.store(steady_ns(), std::memory_order_relaxed);
            e_->callers_polling_.fetch_sub(1, std::memory_order_relaxed);
        }
        CallerPolling(const CallerPolling &) = delete;
        CallerPolling &operator=(const CallerPolling &) = delete;

    private:
        ProgressEngine *e_;
    };

private:
    static int64_t steady_ns()
    {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }
    void thread_main();

    const ProgressPacing pacing_;
    const std::function<int()> poll_network_;
    std::mutex active_lock_;
    std::vector<Driven *> active_;
    std::mutex arrivals_lock_;
    std::vector<Driven *> arrivals_;  // activated since the last progress round
    std::atomic<size_t> active_count_{0};  // entries of active_ and arrivals_

    std::thread thread_;
    std::atomic<bool> thread_started_{false};  // set by the thread that starts it
    std::atomic<int> callers_polling_{0};  // MPI threads inside a poll now (CallerPolling)
    std::atomic<int64_t> caller_poll_ns_{0};  // when the last one ended (steady clock)
    std::mutex wake_lock_;
    std::condition_variable wake_;
    bool stopping_ = false;  // under wake_lock_
    std::atomic<bool> stopping_requested_{false};  // the same, for the thread while it lingers
    std::atomic<bool> waiting_{false};  // the thread sleeps on wake_ (seq_cst with active_count_)
};

}  // namespace gpurdma::exec
