// One thread at a time drives a communicator's calls. The lock remembers its owner so
// that progress re-entered from inside a wait (a set-up's bootstrap runs MPI's
// progress, which runs ours) skips the communicator that thread already holds,
// instead of locking a mutex it holds.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

namespace gpurdma::exec {

class EngineLock {
public:
    void lock()
    {
        mutex_.lock();
        owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    }
    bool try_lock()
    {
        // Never try a mutex this thread holds (undefined for std::mutex): it is busy anyway.
        if (held_by_this_thread() || !mutex_.try_lock()) return false;
        owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
        return true;
    }
    void unlock()
    {
        owner_.store(std::thread::id(), std::memory_order_relaxed);
        mutex_.unlock();
    }
    // Where no other thread can drive the communicator: only marked as this thread's,
    // so that progress re-entered from inside a wait skips it.
    void claim() { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
    void unclaim() { owner_.store(std::thread::id(), std::memory_order_relaxed); }
    bool held_by_this_thread() const { return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }

private:
    std::mutex mutex_;
    std::atomic<std::thread::id> owner_{};
};

// Locked where other threads may drive the communicator, only claimed where none can
// (the latency path: no lock, no atomic read-modify-write).
class EngineHold {
public:
    EngineHold(EngineLock &lock, bool locked) : lock_(lock), locked_(locked) { locked_ ? lock_.lock() : lock_.claim(); }
    ~EngineHold() { locked_ ? lock_.unlock() : lock_.unclaim(); }
    EngineHold(const EngineHold &) = delete;
    EngineHold &operator=(const EngineHold &) = delete;

private:
    EngineLock &lock_;
    const bool locked_;
};

// Calls that start a collective on one communicator must not overlap (MPI makes it
// erroneous); two that do would interleave their data. One atomic exchange tells.
// Not checked (always alone) where no other thread can call (checked: false).
class StartGuard {
public:
    explicit StartGuard(std::atomic<bool> &flag, bool checked = true)
        : flag_(flag), checked_(checked), alone_(!checked || !flag.exchange(true, std::memory_order_acquire))
    {}
    ~StartGuard()
    {
        if (checked_ && alone_) flag_.store(false, std::memory_order_release);
    }
    StartGuard(const StartGuard &) = delete;
    StartGuard &operator=(const StartGuard &) = delete;
    bool alone() const { return alone_; }

private:
    std::atomic<bool> &flag_;
    const bool checked_;
    const bool alone_;
};

}  // namespace gpurdma::exec
