// One allreduce call of a communicator, as the task the progress loop drives: a
// blocking call runs it at once; a nonblocking or persistent call queues it on its
// communicator, which runs its calls one at a time in start order (every rank starts
// collectives in the same order, so the queues agree). Persistent requests live on
// between starts; the others end with their call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "algo/algorithm.h"
#include "exec/progress.h"
#include "exec/task.h"
#include "gpu/default_streams.h"
#include "gpurdma/gpurdma.h"

struct gpurdma_comm;

struct gpurdma_request : gpurdma::exec::Task {
    enum class Kind { Blocking, Nonblocking, Persistent };
    // Where the call is: not started (or done), started but not begun, waiting to learn
    // which buffers its node peers pass (GPU buffers only), then the path it takes.
    enum class Phase { Idle, Started, Agreeing, Host, Device, Staged };

    gpurdma_request(gpurdma_comm *comm, Kind kind, const gpurdma::algo::Call &call, bool device,
                    gpurdma_complete_fn_t complete = nullptr, void *arg = nullptr)
        : comm(comm), kind(kind), call(call), device(device), complete(complete), arg(arg)
    {}

    // Task: the communicator begins the call (its path chosen then) and advances it.
    gpurdma::exec::State advance() override;
    uint64_t position() const override { return moves + (algorithm ? algorithm->position() : 0); }
    std::string describe_wait() const override
    {
        if (algorithm) return algorithm->describe_wait();
        if (phase == Phase::Agreeing) return awaited_peer;
        return settling ? std::string(
                              "the start of the call, waiting for the application's GPU work on its "
                              "default streams (enqueued before the call)")
                        : std::string("the start of the call");
    }
    std::string describe_failure() const override { return failure; }
    const char *collective() const override { return gpurdma::algo::call_name(call); }
    gpurdma::obs::FlightRecorder *recorder() const override;

    gpurdma_comm *comm;  // null once the communicator is gone (an orphaned persistent request)
    const Kind kind;
    const gpurdma::algo::Call call;
    const bool device;  // a buffer is GPU memory
    bool other_vendor = false;  // one is the other GPU vendor's (set at creation, then kept)
    const gpurdma_complete_fn_t complete;
    void *const arg;

    // The call in flight; under the communicator's engine lock.
    Phase phase = Phase::Idle;
    gpurdma::algo::Algorithm *algorithm = nullptr;  // the path's algorithm
    uint64_t moves = 0;  // phase changes, which count as movement for the idle clock
    uint64_t number = 0;  // the communicator's call number, once begun
    size_t peer_index = 0;  // Agreeing: the next node peer whose buffer kind is awaited
    std::string awaited_peer;  // Agreeing: who that is, for the timeout message
    std::string failure;
    // GPU buffers: the application's default-stream work enqueued before the start,
    // which the call waits for as it begins (gpurdma_comm::arm_settle).
    gpurdma::gpu::DefaultStreamFence *settle = nullptr;  // own_settle's, or the communicator's for blocking calls
    std::unique_ptr<gpurdma::gpu::DefaultStreamFence> own_settle;
    bool settling = false;
    bool detached = false;  // freed while in flight: the communicator deletes it at completion
    gpurdma_status_t result = GPURDMA_OK;  // Blocking: how it ended
    std::atomic<bool> active{false};  // started and its completion not yet reported
};
