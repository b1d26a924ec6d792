#include "exec/progress_engine.h"

#include <algorithm>
#include <utility>

namespace gpurdma::exec {

ProgressEngine::ProgressEngine(ProgressPacing pacing, std::function<int()> poll_network)
    : pacing_(pacing), poll_network_(std::move(poll_network))
{}

void ProgressEngine::stop_thread()
{
    if (!thread_.joinable()) return;
    {
        std::lock_guard<std::mutex> hold(wake_lock_);
        stopping_ = true;
        stopping_requested_.store(true);
    }
    wake_.notify_one();
    thread_.join();
}

int ProgressEngine::progress_calls(bool report)
{
    int events = 0;
    bool yield = false;
    {
        // Another thread is going through the active calls: it drives ours too. Waiting
        // for it would starve this thread, a blocking call's wait polling from inside its
        // communicator's engine, behind a holder that takes the lock again at once.
        std::unique_lock<std::mutex> hold(active_lock_, std::try_to_lock);
        if (!hold.owns_lock()) return 0;
        {
            std::lock_guard<std::mutex> arriving(arrivals_lock_);
            for (Driven *d : arrivals_) {
                if (std::find(active_.begin(), active_.end(), d) == active_.end()) active_.push_back(d);
                else active_count_.fetch_sub(1, std::memory_order_release);
            }
            arrivals_.clear();
        }
        for (size_t i = 0; i < active_.size();) {
            bool idle = false;
            bool still = false;
            events += active_[i]->poll(report, &idle, &still);
            yield = yield || still;
            if (idle) {
                active_[i] = active_.back();
                active_.pop_back();
                active_count_.fetch_sub(1, std::memory_order_release);
            } else {
                ++i;
            }
        }
    }
    // An MPI thread in MPI_Wait's progress loop: the peer a still call waits for may
    // need this core. The progress thread pauses on its own.
    if (report && events == 0 && yield) std::this_thread::yield();
    return events;
}

void ProgressEngine::thread_main()
{
    const auto ns = [](double us) { return static_cast<int64_t>(us * 1e3); };
    const auto idle_pause = std::chrono::nanoseconds(ns(pacing_.pause_us));
    const int64_t caller_grace_ns = ns(pacing_.grace_us);
    const int64_t linger_ns = ns(pacing_.linger_us);
    // The timer's period while lingering: the grace, so that a caller that returns sees
    // the thread within it (never a zero sleep: a busy loop).
    const auto linger_step = std::chrono::nanoseconds(std::max<int64_t>(caller_grace_ns, 1000));
    int64_t quiet_since = steady_ns();
    for (;;) {
        if (active_count_.load(std::memory_order_acquire) == 0) {
            if (steady_ns() - quiet_since < linger_ns) {
                std::this_thread::sleep_for(linger_step);
                if (!stopping_requested_.load(std::memory_order_relaxed)) continue;
            }
            std::unique_lock<std::mutex> hold(wake_lock_);
            waiting_.store(true);  // seq_cst, then the count: activate() stores the count, then reads this
            wake_.wait(hold, [this] { return stopping_ || active_count_.load() > 0; });
            waiting_.store(false);
            if (stopping_) return;
        }
        if (stopping_requested_.load(std::memory_order_relaxed)) return;
        quiet_since = steady_ns();
        const int64_t since_caller = callers_polling_.load(std::memory_order_relaxed) > 0
                                         ? 0
                                         : quiet_since - caller_poll_ns_.load(std::memory_order_relaxed);
        if (since_caller < caller_grace_ns) {
            std::this_thread::sleep_for(std::chrono::nanoseconds(caller_grace_ns - since_caller));
            continue;
        }
        int events = poll_network_ ? poll_network_() : 0;
        events += progress_calls(false);
        if (events == 0 && idle_pause.count() > 0) std::this_thread::sleep_for(idle_pause);
    }
}

void ProgressEngine::activate(Driven *queue)
{
    {
        std::lock_guard<std::mutex> hold(arrivals_lock_);
        arrivals_.push_back(queue);  // the next progress round takes it into active_
        active_count_.fetch_add(1);  // seq_cst: before reading waiting_
        if (pacing_.thread && !thread_.joinable()) {
            thread_started_.store(true, std::memory_order_relaxed);
            thread_ = std::thread([this] { thread_main(); });
        }
    }
    // Only a thread asleep on wake_ needs waking (a lingering one sees the count); the
    // flag is set under wake_lock_ before it waits, so a set flag is never missed.
    if (pacing_.thread && waiting_.load()) {
        std::lock_guard<std::mutex> hold(wake_lock_);  // the thread checks the count under it
        wake_.notify_one();
    }
}

void ProgressEngine::deactivate(Driven *queue)
{
    std::lock_guard<std::mutex> hold(active_lock_);
    std::lock_guard<std::mutex> arriving(arrivals_lock_);
    size_t gone = 0;
    for (auto *list : {&active_, &arrivals_}) {
        const auto end = std::remove(list->begin(), list->end(), queue);
        gone += static_cast<size_t>(list->end() - end);
        list->erase(end, list->end());
    }
    active_count_.fetch_sub(gone, std::memory_order_release);
}

}  // namespace gpurdma::exec
