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
#include "algo/device_hierarchical.h"
#include "algo/device_node_rail.h"
#include "algo/device_one_node.h"
#include "algo/host_staging.h"
#include "algo/route.h"
#include "base/status.h"
#include "core/context.h"
#include "core/request.h"
#include "exec/call_queue.h"
#include "exec/progress.h"
#include "gpurdma/gpurdma.h"
#include "obs/flight_recorder.h"

namespace gpurdma::algo {
class HostTeam;
class Selector;
}  // namespace gpurdma::algo

struct gpurdma_comm final : private gpurdma::exec::CallQueue::Owner {
    gpurdma_comm(gpurdma_context *context, const gpurdma_comm_params_t &params);
    // Completes the calls still in flight (bounded by the timeout), orphans the
    // persistent requests the caller still holds, then releases everything.
    ~gpurdma_comm();

    // The C API's calls (core/api.cpp has the argument checks): any collective, blocking.
    gpurdma_status_t run(const gpurdma::algo::Call &call);
    // A nonblocking call (queued and started now) or a persistent one (planned, inactive).
    gpurdma_status_t create(const gpurdma::algo::Call &call, gpurdma_request::Kind kind, gpurdma_complete_fn_t complete,
                            void *arg, gpurdma_request **out);
    gpurdma_status_t start(gpurdma_request &request);
    int test(gpurdma_request &request);
    int release(gpurdma_request *request);
    // Begins the request's call when it reaches the front, then advances it (engine held).
    gpurdma::exec::State advance_call(gpurdma_request &request);

    gpurdma_context *context;
    int rank;
    int size;
    gpurdma_bootstrap_t bootstrap;
    std::string name;
    std::string last_error;
    gpurdma_comm_stats_t stats{};
    // What a barrier's one-byte allreduce writes (core/barrier.cpp): the communicator runs
    // one call at a time, and every one writes the same zero.
    uint8_t barrier_result = 0;
    // Its last calls, for the live dump (obs/dump_service.h).
    gpurdma::obs::FlightRecorder &recorder() { return recorder_; }
    // The host team's set-up has run (a blocking call; either verdict), or none is needed.
    bool set_up() const { return size == 1 || set_up_.load(std::memory_order_acquire); }

private:
    // The checks and collective set-ups a call needs before it can run or be queued:
    // Unsupported (the same on every rank) hands it on. plan_ahead: the persistent
    // call's algorithm and schedule too.
    gpurdma::Status prepare(const gpurdma::algo::Call &call, bool device, gpurdma_request::Kind kind);
    // Whether this communicator takes the call at all (before any buffer is touched): the
    // op and type (reductions), the collective switched on; the same answer on every rank.
    bool takes(const gpurdma::algo::Call &call) const;
    // The counter a completed call adds to besides the algorithm's: calls (allreduce) or
    // its collective's.
    static uint64_t gpurdma_comm_stats_t::*call_counter(const gpurdma::algo::Call &call);
    // The host team on first use; unsupported (now and for every later call) if it declined.
    gpurdma::Status ensure_host_team();
    // A call on GPU buffers waits for what the application enqueued on its default
    // streams before it (gpu/default_streams.h): events recorded as it starts, which
    // begin() polls.
    gpurdma::Status arm_settle(gpurdma_request &r);
    gpurdma::algo::DeviceOneNode &device();
    // GPU buffers on a communicator spanning nodes whose host path is set up: the
    // hierarchical device path (or staging, call by call, where it declines).
    bool device_across_nodes() const;
    gpurdma::algo::DeviceHierarchical &device_hierarchical();
    // The same for the other collectives: node stage on the GPUs, rail from page-locked copies.
    gpurdma::algo::DeviceNodeRail &device_node_rail();
    gpurdma::gpu::DeviceSetup device_setup() const;
    // Tells the device path that took the request's call to mark its stage words failed.
    void abandon_device(const gpurdma_request &request);
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

    // Queues a started call and makes it known to the process's progress (engine held).
    void enqueue(gpurdma_request &request);
    // CallQueue::Owner (engine held): the loop of a queued call, its end, and the
    // communicator's state after it.
    // communicator's state after it. Every queued call is a gpurdma_request.
    const gpurdma::exec::ProgressLoop &loop_of(gpurdma::exec::Task &call) override
    {
        return loop_for(static_cast<gpurdma_request &>(call));
    }
    void ended(gpurdma::exec::Task &call, gpurdma::exec::State state, const gpurdma::Status &result) override
    {
        conclude(static_cast<gpurdma_request &>(call), state, result);
    }
    bool broken() const override { return broken_; }
    void abort(gpurdma::exec::Task &call) override { report(static_cast<gpurdma_request &>(call), GPURDMA_ERR_BROKEN); }
    // The call ended (result ok or the failure); the counters, the callback, a detached request's deletion.
    void conclude(gpurdma_request &request, gpurdma::exec::State state, const gpurdma::Status &result);
    void report(gpurdma_request &request, gpurdma_status_t status);
    // The communicator breaks: every later call answers GPURDMA_ERR_BROKEN.
    gpurdma_status_t fail(gpurdma_status_t status, const std::string &message);
    // Adds n to a counter of this communicator and to the process totals.
    void tally(uint64_t gpurdma_comm_stats_t::*field, uint64_t n = 1);
    // The flight record of a call (obs::FlightRecorder::Fill; source: its request).
    static void fill_record(const void *source, gpurdma::obs::CallRecord *record);
    // After the host team's set-up: the record's hosts, and the trace's clock (every rank).
    void set_up_record();
    // At the free: the record as a trace, where one is asked for.
    void trace_record();
    // A finished call's stages (its flight record) to the per-stage counters.
    void tally_stages(const gpurdma::obs::CallRecord &record);

    gpurdma::obs::FlightRecorder recorder_;  // before calls_: outlives every call
    gpurdma::exec::CallQueue calls_{*this};  // started calls, in start order; the front runs
    std::set<gpurdma_request *> persistent_;  // the caller's persistent requests, orphaned at the end
    bool declined_ = false;
    std::atomic<bool> set_up_{false};  // team_ made or declined_: read by any thread (set_up())
    bool broken_ = false;
    uint64_t calls_begun_ = 0;  // the communicator's call numbers (engine held), alike on every rank
    std::unique_ptr<gpurdma::algo::HostTeam> team_;
    std::unique_ptr<gpurdma::algo::Selector> selector_;  // released before the team it uses
    std::optional<gpurdma::exec::ProgressLoop> device_loop_;
    std::optional<gpurdma::exec::ProgressLoop> barrier_loop_;  // the host team's, bounded by barrier_timeout_s
    // What each call's buffers are (asked once per call), read by the paths below.
    gpurdma::gpu::BufferQuery buffers_;
    std::unique_ptr<gpurdma::gpu::DefaultStreamFence> blocking_settle_;  // arm_settle's, for blocking calls
    // Host copies of GPU buffers (kept between calls), their stream and event; uses selector_.
    gpurdma::algo::HostStaging staging_;
    std::unique_ptr<gpurdma::algo::DeviceOneNode> device_;  // last: released first
    std::unique_ptr<gpurdma::algo::DeviceHierarchical> device_hier_;  // uses team_: released before it
    std::unique_ptr<gpurdma::algo::DeviceNodeRail> device_node_rail_;  // the same
};
