#include "algo/host_staging.h"

#include <algorithm>
#include <cstring>

#include "algo/call_spans.h"
#include "base/text.h"
#include "exec/progress.h"
#include "gpu/buffer_query.h"
#include "reduce/reduce.h"

namespace gpurdma::algo {

HostStaging::HostStaging(std::string name, int size, int rank, double timeout_s, const Logger *log,
                         const gpu::BufferQuery *buffers, Chooser choose)
    : name_(std::move(name)),
      size_(size),
      rank_(rank),
      timeout_s_(timeout_s),
      log_(log),
      buffers_(buffers),
      choose_(std::move(choose))
{}

HostStaging::~HostStaging()
{
    if (copying_ && !copies_done()) {
        // Freeing page-locked memory that a copy still reads or writes is undefined:
        // a stuck GPU keeps it (logged) rather than have it reused under the copy.
        if (log_)
            log_->log(0, "%s: a staging copy was still running after %.0f s at release: its host copies are kept",
                      name_.c_str(), timeout_s_);
        (void)send_.release();
        (void)recv_.release();
    }
    release_stream();
}

void HostStaging::reserve(std::unique_ptr<gpu::PinnedBuffer> *buffer, size_t bytes, gpu::CUcontext ctx)
{
    if (*buffer && (*buffer)->size() >= bytes) return;
    const size_t grown = *buffer ? 2 * (*buffer)->size() : 0;
    buffer->reset();  // the old one first: never both pinned at once
    *buffer = std::make_unique<gpu::PinnedBuffer>(std::max<size_t>({bytes, grown, 64}), ctx, &why_);
}

void HostStaging::use_context(gpu::CUcontext ctx)
{
    if (fence_ && ctx == ctx_) return;
    release_stream();
    ctx_ = ctx;
    const auto &api = gpu::GpuRuntime::instance().api();
    if (api.stream_create) {
        gpu::ContextScope scope(ctx_);
        own_stream_ = api.stream_create(&stream_, gpu::kStreamNonBlocking) == 0;
    }
    if (!own_stream_) stream_ = nullptr;  // the legacy stream: still asynchronous to the host
    fence_ = std::make_unique<gpu::CopyFence>(ctx_, stream_);
}

void HostStaging::release_stream()
{
    fence_.reset();
    if (own_stream_) {
        gpu::ContextScope scope(ctx_);
        gpu::GpuRuntime::instance().api().stream_destroy(stream_);
    }
    stream_ = nullptr;
    own_stream_ = false;
}

Status HostStaging::enqueue_copy(void *dst, const void *src, size_t bytes)
{
    const auto &d = gpu::GpuRuntime::instance();
    // A driver without cuMemcpyAsync (older than any that loads the kernels) copies synchronously.
    if (!d.api().memcpy_async) return d.copy(dst, src, bytes, ctx_);
    gpu::ContextScope scope(ctx_);
    const int rc = d.api().memcpy_async(reinterpret_cast<gpu::CUdeviceptr>(dst),
                                        reinterpret_cast<gpu::CUdeviceptr>(src), bytes, stream_);
    if (rc != 0) return d.failure("cuMemcpyAsync", rc);
    copying_ = true;
    return Status::ok();
}

Status HostStaging::copy_in(void *dst, const void *src, size_t bytes, const gpu::PointerInfo &info)
{
    if (info.kind == gpu::MemoryKind::OtherVendor)
        return gpu::GpuRuntime::instance().copy_other_vendor(dst, src, bytes);
    return enqueue_copy(dst, src, bytes);
}

Status HostStaging::fence()
{
    return copying_ ? fence_->record() : Status::ok();
}

Status HostStaging::poll_copies()
{
    bool done = false;
    const Status polled = fence_->reached(&done);
    if (done) copying_ = false;
    return polled;
}

Status HostStaging::start(const Call &call)
{
    const bool in_place = call.sendbuf == nullptr || call.sendbuf == call.recvbuf;
    const size_t send_span = send_bytes(call, size_, rank_);
    call_ = call;
    failure_.clear();
    algorithm_ = nullptr;
    gpu::PointerInfo sinfo;
    gpu::buffer_info(buffers_, {call.sendbuf, call.recvbuf}, &sinfo, &rinfo_);
    bytes_ = recv_bytes(call, size_, rank_);
    const gpu::CUcontext ctx = rinfo_.kind == gpu::MemoryKind::Device ? rinfo_.context : sinfo.context;
    use_context(ctx);
    reserve(&recv_, bytes_, ctx);
    host_ = call;
    host_.recvbuf = recv_->data();
    host_.sendbuf = nullptr;
    if (in_place) {
        const Status copied = bytes_ ? copy_in(recv_->data(), call.recvbuf, bytes_, rinfo_) : Status::ok();
        if (!copied.is_ok()) return copied.prefixed(name_ + ": staging in the GPU buffer: ");
    } else if (sinfo.kind == gpu::MemoryKind::Device || sinfo.kind == gpu::MemoryKind::OtherVendor) {
        reserve(&send_, send_span, sinfo.context);
        const Status copied = copy_in(send_->data(), call.sendbuf, send_span, sinfo);
        if (!copied.is_ok()) return copied.prefixed(name_ + ": staging in the GPU send buffer: ");
        host_.sendbuf = send_->data();
    } else {
        host_.sendbuf = call.sendbuf;
    }
    const Status fenced = fence();
    if (!fenced.is_ok()) return fenced.prefixed(name_ + ": staging in: ");
    step_ = Step::In;
    ++moves_;
    return Status::ok();
}

exec::State HostStaging::fail(const std::string &what)
{
    failure_ = what;
    step_ = Step::Failed;
    return exec::State::Failed;
}

exec::State HostStaging::stage_out()
{
    ++moves_;
    if (rinfo_.kind == gpu::MemoryKind::OtherVendor && bytes_) {  // by its runtime's own (synchronous) copy
        const Status copied = gpu::GpuRuntime::instance().copy_other_vendor(call_.recvbuf, recv_->data(), bytes_);
        if (!copied.is_ok()) return fail("staging out, copying the result to the GPU: " + copied.message());
        step_ = Step::Done;
        return exec::State::Done;
    }
    if (rinfo_.kind != gpu::MemoryKind::Device || bytes_ == 0) {  // a host receive buffer beside a GPU send buffer
        if (bytes_) std::memcpy(call_.recvbuf, recv_->data(), bytes_);
        step_ = Step::Done;
        return exec::State::Done;
    }
    Status copied = enqueue_copy(call_.recvbuf, recv_->data(), bytes_);
    if (copied.is_ok()) copied = fence();
    if (!copied.is_ok()) return fail("staging out, copying the result to the GPU: " + copied.message());
    step_ = Step::Out;
    return advance();
}

exec::State HostStaging::advance()
{
    switch (step_) {
        case Step::In: {
            if (copying_) {
                const Status polled = poll_copies();
                if (!polled.is_ok()) return fail("staging in: " + polled.message());
                if (copying_) return exec::State::Running;
            }
            ++moves_;
            algorithm_ = choose_(host_);
            if (algorithm_) algorithm_->record_to(recorder_);
            if (!algorithm_) {  // a single rank: its data is the result
                single_rank(host_);
                return stage_out();
            }
            const Status started = algorithm_->start(host_);
            if (!started.is_ok()) return fail(started.message());
            step_ = Step::Host;
            return advance();
        }
        case Step::Host: {
            const exec::State st = algorithm_->advance();
            if (st == exec::State::Running) return st;
            if (st != exec::State::Done) return fail(algorithm_->describe_failure());
            algorithm_->finish();
            moves_ += algorithm_->position();
            return stage_out();
        }
        case Step::Out: {
            const Status polled = poll_copies();
            if (!polled.is_ok()) return fail("staging out: " + polled.message());
            if (copying_) return exec::State::Running;
            ++moves_;
            step_ = Step::Done;
            return exec::State::Done;
        }
        case Step::Done: return exec::State::Done;
        case Step::Failed: return exec::State::Failed;
        case Step::Idle: break;
    }
    return fail("GPU staging: advanced without a started call");
}

// A failed call's copy may still run at release: waited for under the one wait loop (its
// timeout, yielding), as the hierarchical path waits for its chunks.
bool HostStaging::copies_done()
{
    struct CopyDone : exec::Task {
        gpu::CopyFence &fence;
        explicit CopyDone(gpu::CopyFence &f) : fence(f) {}
        exec::State advance() override
        {
            bool done = false;
            // A failing query means the stream's work will never run (a sticky error): nothing left to wait for.
            return !fence.reached(&done).is_ok() || done ? exec::State::Done : exec::State::Running;
        }
        uint64_t position() const override { return 0; }
        std::string describe_wait() const override { return "host staging teardown, waiting for a copy on the stream"; }
        std::string describe_failure() const override { return describe_wait(); }
    } copy(*fence_);
    exec::WaitPolicy policy;
    policy.yield_when_idle = true;
    policy.timeout_s = timeout_s_;
    return exec::ProgressLoop(policy, exec::WaitSite{name_, 0, ""}).run(copy).is_ok();
}

uint64_t HostStaging::position() const
{
    return moves_ + (step_ == Step::Host ? algorithm_->position() : 0);
}

std::string HostStaging::describe_wait() const
{
    const std::string copy = format_bytes(bytes_) + " on this rank's stream";
    switch (step_) {
        case Step::In: return "GPU staging in, waiting for the copy of the GPU data to host memory (" + copy + ")";
        case Step::Host: return algorithm_->describe_wait();
        case Step::Out: return "GPU staging out, waiting for the copy of the result back to the GPU (" + copy + ")";
        default: return "GPU staging";
    }
}

std::string HostStaging::describe_failure() const
{
    return failure_;
}

void HostStaging::finish()
{
    step_ = Step::Idle;
}

uint64_t gpurdma_comm_stats_t::*HostStaging::counter() const
{
    return algorithm_ ? algorithm_->counter() : nullptr;
}

std::string HostStaging::describe_call() const
{
    const std::string memory = why_.empty() ? "page-locked host memory" : "pageable host memory (" + why_ + ")";
    return "staged through " + memory + ", copies on the communicator's stream, then the host path";
}

}  // namespace gpurdma::algo
