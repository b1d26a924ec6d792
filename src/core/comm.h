// The state behind gpurdma_comm_t: the communicator's dispatch and its queue of calls.
// A call is checked, its memory kind found, and whatever needs every rank (the host
// team's set-up on first use, the device team's) is done by the thread that starts it;
// then the call runs: at once under the progress loop (a blocking call with nothing
// queued), or queued behind the calls started before it and advanced by whoever
// drives the communicator (the context's progress, a test, a later blocking call).
// Each call begins its path when it reaches the front: the device allreduce (one
// node) or the hierarchical device path (several nodes), host staging where that
// declines, or the selector's host algorithm. Nothing here knows an
// algorithm's insides.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "algo/algorithm.h"
#include "algo/device_allreduce.h"
#include "algo/device_hierarchical.h"
#include "algo/host_staging.h"
#include "algo/route.h"
#include "base/status.h"
#include "core/context.h"
#include "core/request.h"
#include "exec/progress.h"
#include "gpurdma/gpurdma.h"

namespace gpurdma::algo {
class HostTeam;
class Selector;
}  // namespace gpurdma::algo

struct gpurdma_comm {
    gpurdma_comm(gpurdma_context *context, const gpurdma_comm_params_t &params);
    // Completes the calls still in flight (bounded by the timeout), orphans the
    // persistent requests the caller still holds, then releases everything.
    ~gpurdma_comm();

    // The C API's calls (core/api.cpp has the argument checks).
    gpurdma_status_t allreduce(const gpurdma::algo::Call &call);
    // A nonblocking call (queued and started now) or a persistent one (planned, inactive).
    gpurdma_status_t create(const gpurdma::algo::Call &call, gpurdma_request::Kind kind, gpurdma_complete_fn_t complete,
                            void *arg, gpurdma_request **out);
    gpurdma_status_t start(gpurdma_request &request);
    int test(gpurdma_request &request);
    int release(gpurdma_request *request);
    // The context's progress: advances the queue unless another thread is driving this
    // communicator. report: also conclude the calls that ended (their callbacks; an MPI
    // thread); otherwise they wait for the next reporting drive. Returns events (calls
    // moved or ended); *idle: nothing queued or waiting to be reported; *yield: the
    // front call is still and its wait policy would give the core away (the caller
    // yields once it holds no lock).
    int poll(bool report, bool *idle, bool *yield);

    // Begins the request's call when it reaches the front, then advances it (engine held).
    gpurdma::exec::State advance_call(gpurdma_request &request);

    gpurdma_context *context;
    int rank;
    int size;
    gpurdma_bootstrap_t bootstrap;
    std::string name;
    std::string last_error;
    gpurdma_comm_stats_t stats{};

private:
    // The engine: one thread at a time drives this communicator's calls. owner_ lets the
    // context's progress skip a communicator whose own thread re-enters it (a set-up's
    // bootstrap runs MPI's progress) instead of locking a mutex it already holds.
    class Engine {
    public:
        void lock();
        bool try_lock();
        void unlock();
        // Where no other thread can drive this communicator: only marked as this thread's,
        // so that progress re-entered from inside a wait (MPI's) skips it.
        void claim() { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
        void unclaim() { owner_.store(std::thread::id(), std::memory_order_relaxed); }
        bool held_by_this_thread() const
        {
            return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
        }

    private:
        std::mutex mutex_;
        std::atomic<std::thread::id> owner_{};
    };
    // Marks a starting call; a second one at the same time (from another thread) is erroneous.
    class Starting;

    // The checks and collective set-ups a call needs before it can run or be queued:
    // Unsupported (the same on every rank) hands it on. plan_ahead: the persistent
    // call's algorithm and schedule too.
    gpurdma::Status prepare(const gpurdma::algo::Call &call, bool device, gpurdma_request::Kind kind);
    // The host team on first use; unsupported (now and for every later call) if it declined.
    gpurdma::Status ensure_host_team();
    gpurdma::algo::DeviceAllreduce &device();
    // GPU buffers on a communicator spanning nodes whose host path is set up: the
    // hierarchical device path (or staging, call by call, where it declines).
    bool device_across_nodes() const;
    gpurdma::algo::DeviceHierarchical &device_hierarchical();
    gpurdma::gpu::DeviceSetup device_setup() const;
    // Tells the device path that took the request's call to mark its stage words failed.
    void abandon_device();
    // Begins the call at the front: its path and the algorithm's start.
    gpurdma::exec::State begin(gpurdma_request &request);
    // GPU buffers: waits (without blocking) for the node peers' buffer kinds of this call
    // (algo/call_kinds.h), then the device path, or staging if a peer passes host memory.
    gpurdma::exec::State agree(gpurdma_request &request);
    // What every rank knows alike about a GPU-buffer call, for algo::route.
    gpurdma::algo::RouteFacts route_facts(const gpurdma_request &request, bool node_all_device);
    // The call's path by algo::route (node_all_device: the node's agreed buffer kinds).
    gpurdma::exec::State begin_routed(gpurdma_request &request, bool node_all_device);
    gpurdma::exec::State begin_device(gpurdma_request &request, gpurdma::algo::Algorithm &path);
    // Staged (algo::route, or the device path declined): the call through host memory
    // (the staging algorithm: asynchronous copies in, the host algorithm, copies out).
    gpurdma::exec::State begin_staged(gpurdma_request &request);
    // The device path declined the call (or its set-up the communicator): staged, or
    // handed on without a host path.
    gpurdma::exec::State stage_declined(gpurdma_request &request);
    gpurdma::exec::State begin_host(gpurdma_request &request);
    gpurdma::exec::State failed(gpurdma_request &request, const gpurdma::Status &status);
    // After the path's algorithm is Done: its bookkeeping and the counters.
    void finished(gpurdma_request &request);
    // A blocking call with nothing queued before it, to its end.
    gpurdma::Status run_now(gpurdma_request &request);
    // The loop that drives this call: the host team's (its placement's wait policy, UCX
    // progress), or, without a team, the device path's.
    const gpurdma::exec::ProgressLoop &loop_for(const gpurdma_request &request);
    const gpurdma::exec::ProgressLoop &device_loop();

    // Queue (engine held): advances the front calls; concludes the ones that ended, or,
    // without report (the progress thread), keeps them in ended_ for the next drive
    // that reports, and stops after one that did not succeed.
    int drive_queue(bool reporting = true);
    void conclude_ended();
    void enqueue(gpurdma_request &request);
    // The call ended (result ok or the failure); the counters, the callback, a detached request's deletion.
    void conclude(gpurdma_request &request, gpurdma::exec::State state, const gpurdma::Status &result);
    void report(gpurdma_request &request, gpurdma_status_t status);
    // The communicator breaks: every later call answers GPURDMA_ERR_BROKEN.
    gpurdma_status_t fail(gpurdma_status_t status, const std::string &message);
    // Adds n to a counter of this communicator and to the process totals.
    void tally(uint64_t gpurdma_comm_stats_t::*field, uint64_t n = 1);

    Engine engine_;
    std::atomic<bool> starting_{false};
    std::deque<gpurdma_request *> queue_;  // started calls, in start order; the front runs
    struct Ended {
        gpurdma_request *request;
        gpurdma::exec::State state;
        gpurdma::Status result;
    };
    std::deque<Ended> ended_;  // ended on the progress thread, not yet concluded
    bool yield_wanted_ = false;  // the last drive left the front call still, past its spin budget (engine held)
    std::set<gpurdma_request *> persistent_;  // the caller's persistent requests, orphaned at the end
    bool declined_ = false;
    bool broken_ = false;
    uint64_t calls_begun_ = 0;  // the communicator's call numbers (engine held), alike on every rank
    std::unique_ptr<gpurdma::algo::HostTeam> team_;
    std::unique_ptr<gpurdma::algo::Selector> selector_;  // released before the team it uses
    std::optional<gpurdma::exec::ProgressLoop> device_loop_;
    // What each call's buffers are (asked once per call), read by the paths below.
    gpurdma::gpu::BufferQuery buffers_;
    // Host copies of GPU buffers (kept between calls), their stream and event; uses selector_.
    gpurdma::algo::HostStaging staging_;
    std::unique_ptr<gpurdma::algo::DeviceAllreduce> device_;  // last: released first
    std::unique_ptr<gpurdma::algo::DeviceHierarchical> device_hier_;  // uses team_: released before it

    friend struct gpurdma_context;
};
