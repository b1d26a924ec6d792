// The rail stage's local work on the GPU (an exec::LocalWork), for GPU buffers across
// nodes when this rank reduces arrivals on its GPU: the rail schedule then runs in
// place on the slice in the GPU receive buffer. On a stream of its own, each fenced
// by an event that finished() polls:
//  - an arrival is reduced into the slice by the reduction kernel (two sources, in
//    the schedule's order, so the bits are the host path's), straight out of its
//    landing slot: arrivals land in host memory (the host team's landing region),
//    page-locked and mapped for the GPU once, at set-up (gpu/host_registration.h),
//    or, where the rank offered GPU memory for them (gpu/gpu_landing.h), a large
//    arrival lands there, its GPUDirect RDMA writes flushed first where the GPU needs it;
//  - a copy (an arrival into the slice, or within it) goes by the copy engine;
//  - a send reads the slice in GPU memory itself where the network reads GPU memory
//    (GPUDirect RDMA: UCX with CUDA support), else a copy of it staged into one of
//    several page-locked send buffers, each reused only once no send reads it.
// The owner waits for the stream (stream_done) before releasing what its work uses.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/noncopyable.h"
#include "base/status.h"
#include "exec/executor.h"
#include "exec/local_work.h"
#include "gpu/copy_fence.h"
#include "gpu/host_registration.h"
#include "gpu/kernel_module.h"
#include "gpu/pinned_buffer.h"
#include "gpu/stream.h"
#include "transport/transport.h"

namespace gpurdma::gpu {

struct RailWorkSetup {
    CUcontext ctx = nullptr;
    ReduceKernels *kernels = nullptr;
    transport::PeerTransport *transport = nullptr;  // whose sends read the send buffers
    transport::MemoryRange landing;  // where arrivals land (host memory)
    bool direct_sends = false;  // the network reads GPU memory: no send buffers
    size_t send_buffer_bytes = 0;  // the largest message (a landing slot)
    int send_buffers = 0;  // how many sends may be in flight from staged copies
};

class DeviceRailWork : public exec::LocalWork, private NonCopyable {
public:
    // The stream, the fence, the landing region's registration and the send buffers;
    // fails (naming what) if one cannot be had: this rank then reduces on the host.
    static Status create(const RailWorkSetup &setup, std::unique_ptr<DeviceRailWork> *out);

    Status copy(void *dst, const void *src, size_t bytes) override;
    Status reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                  size_t count) override;
    Status send_source(const void *src, size_t bytes, const void **from) override;
    Status finished(bool *done) override;
    transport::Reader reader() const override { return transport::Reader::Gpu; }

    // Arrivals may also lie in this GPU memory (offered to the rail peers); flush:
    // cuFlushGPUDirectRDMAWrites before work reads one.
    void set_gpu_landing(transport::MemoryRange range, bool flush)
    {
        gpu_landing_ = range;
        flush_ = flush;
    }
    uint64_t flushes() const { return flushes_; }

    // Whether the stream has run everything enqueued (teardown: before the memory goes).
    Status stream_done(bool *done) const { return stream_->done(done); }
    // The send buffers, which a failed call's sends may still read.
    std::vector<exec::SourceRange> send_buffers() const;
    bool direct_sends() const { return setup_.direct_sends; }
    // "" when the send buffers are page-locked, else the driver's reason.
    const std::string &pageable_why() const { return pageable_why_; }

private:
    explicit DeviceRailWork(const RailWorkSetup &setup) : setup_(setup) {}
    // p as a kernel addresses it: a landing slot through the mapping, GPU memory as is.
    const void *device_view(const void *p) const;
    Status launched(int rc, const char *call);
    // Before work reads [p, p + bytes): GPUDirect RDMA writes there made visible.
    Status visible(const void *p, size_t bytes);

    RailWorkSetup setup_;
    // Release order (reverse): the fence and buffers, then the registration, the stream last.
    std::unique_ptr<Stream> stream_;
    std::unique_ptr<HostRegistration> landing_;
    std::vector<std::unique_ptr<PinnedBuffer>> buffers_;
    std::unique_ptr<CopyFence> fence_;
    size_t next_buffer_ = 0;
    transport::MemoryRange gpu_landing_;
    bool flush_ = false;
    uint64_t flushes_ = 0;
    std::string pageable_why_;
};

}  // namespace gpurdma::gpu
