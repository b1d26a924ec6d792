// GPU buffers through host memory, for calls the device path does not take (between
// nodes: the small messages that take the host latency path, and the calls the host
// path runs flat): copy the GPU data to host buffers, run the host allreduce on them,
// copy the result back. An algo::Algorithm that the progress loop drives like any
// other: the copies are asynchronous on the communicator's own stream and fenced by an
// event that advance() polls, never waits on, so a nonblocking or persistent call
// never holds the thread that drives progress in a copy, and a blocking call does not
// spin inside one either. Steps: staging in (device to host) -> the host algorithm on
// the host copies -> staging out (host to device) -> done. A buffer of the other GPU
// vendor's runtime (gpu::MemoryKind::OtherVendor) is copied synchronously by that runtime.
// The host copies are page-locked (gpu/pinned_buffer.h), so a copy is one DMA rather
// than the driver's own staging through a bounce buffer, and are kept between calls
// (grown by doubling), so repeated calls allocate nothing. The stream and event are
// created on the first staged call (again only if a later call's buffers are of another
// context) and released with the communicator. One call at a time (a communicator
// runs its calls in order).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "algo/algorithm.h"
#include "base/log.h"
#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/buffer_query.h"
#include "gpu/copy_fence.h"
#include "gpu/gpu_runtime.h"
#include "gpu/pinned_buffer.h"

namespace gpurdma::algo {

class HostStaging : public Algorithm, private NonCopyable {
public:
    // The host algorithm for a call on the host copies; null where the communicator is a
    // single rank (its data is the result).
    using Chooser = std::function<Algorithm *(const Call &host_call)>;

    // timeout_s bounds the wait in the destructor for a copy still running (a failed call's).
    // buffers: the communicator's record of what each call's buffers are.
    // size, rank: the communicator's (the collectives' buffer spans depend on them).
    HostStaging(std::string name, int size, int rank, double timeout_s, const Logger *log,
                const gpu::BufferQuery *buffers, Chooser choose);
    ~HostStaging() override;

    // Launches the copies of the call's GPU data to the host copies (staging in).
    Status start(const Call &call) override;
    // Polls the copy in, then runs the host algorithm, then launches and polls the copy
    // of its result back to the receive buffer (staging out).
    exec::State advance() override;
    uint64_t position() const override;
    std::string describe_wait() const override;
    std::string describe_failure() const override;
    void finish() override;
    // The host algorithm's counter; null for a single rank (no algorithm ran).
    uint64_t gpurdma_comm_stats_t::*counter() const override;
    const char *collective() const override { return plan::coll_name(call_.coll); }
    std::string describe_call() const override;

private:
    enum class Step { Idle, In, Host, Out, Done, Failed };

    // *buffer holds at least `bytes` (a new one at least twice the old size).
    void reserve(std::unique_ptr<gpu::PinnedBuffer> *buffer, size_t bytes, gpu::CUcontext ctx);
    // The stream and fence of ctx (created on first use or when the context changes).
    void use_context(gpu::CUcontext ctx);
    void release_stream();
    // Enqueues one copy on the stream (unified addressing: either direction).
    Status enqueue_copy(void *dst, const void *src, size_t bytes);
    // A GPU buffer to its host copy: enqueued, or the other vendor's memory copied at
    // once by its own runtime (ours has no stream for it).
    Status copy_in(void *dst, const void *src, size_t bytes, const gpu::PointerInfo &info);
    // Fences what was enqueued; poll_copies() clears copying_ once the fence is reached.
    Status fence();
    Status poll_copies();
    exec::State fail(const std::string &what);
    // Host algorithm done (or none): the result back to the caller's receive buffer.
    exec::State stage_out();
    // A copy still running at teardown (a failed call's): waits for it, bounded.
    bool copies_done();

    std::string name_;  // the communicator, for messages
    int size_;
    int rank_;
    double timeout_s_;
    const Logger *log_;
    const gpu::BufferQuery *buffers_;
    Chooser choose_;
    std::string why_;  // why the last host copy allocated is not page-locked ("" if it is)

    gpu::CUcontext ctx_ = nullptr;  // of the stream and fence
    gpu::CUstream stream_ = nullptr;  // null: the legacy stream (where no stream could be created)
    bool own_stream_ = false;
    std::unique_ptr<gpu::CopyFence> fence_;
    bool copying_ = false;  // copies enqueued whose fence has not been reached

    // The call in flight.
    Call call_;
    Call host_;  // the same call on the host copies
    size_t bytes_ = 0;  // the receive span (copied back)
    gpu::PointerInfo rinfo_;  // the call's receive buffer
    Algorithm *algorithm_ = nullptr;  // the host algorithm (null: a single rank)
    Step step_ = Step::Idle;
    uint64_t moves_ = 0;
    std::string failure_;
    std::unique_ptr<gpu::PinnedBuffer> send_;
    std::unique_ptr<gpu::PinnedBuffer> recv_;
};

}  // namespace gpurdma::algo
