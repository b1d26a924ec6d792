// The application's work on its GPU buffers, settled before a call reads them.
//
// MPI orders a call after everything its caller did before it. On a GPU, what the
// application enqueued on the default streams is not done when the host moves on:
// a kernel launched on stream 0 runs on, and a copy from pageable host memory into the
// GPU (cudaMemcpy H2D) returns once its source is staged, before its DMA lands (CUDA's
// "API synchronization behavior"). gpurdma's streams are non-blocking (never ordered
// behind the legacy stream) and a peer reads the buffer through CUDA IPC from a process
// of its own, so neither waits for that work: the call waits for it (below) before
// the buffers are announced or read. Work on the application's own non-blocking streams
// is its to finish before the call, as with every CUDA-aware MPI.
#pragma once

#include <vector>

#include "base/noncopyable.h"
#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

// The wait, without holding the caller: an event recorded on the legacy default stream
// and one on the calling thread's per-thread default stream, of each distinct context
// (null: none) among the call's buffers, as the call starts; polled as it begins, so
// the wait is the call's own, bounded by its timeout. A fence is reused from call to
// call (its events made once).
class DefaultStreamFence : private NonCopyable {
public:
    ~DefaultStreamFence();
    // On the caller's thread (its per-thread stream is its own). A driver without the
    // event entry points: waits for those streams here instead and records nothing.
    Status record(CUcontext send_context, CUcontext recv_context);
    // Whether everything recorded has been reached; never waits. A failure names the
    // stream and the CUDA error (a fault of the application's own kernels shows here).
    Status reached(bool *done);

private:
    struct Mark {
        CUcontext ctx;
        bool legacy;  // else the per-thread stream
        CUevent event;
        bool reached;
    };
    Status record_in(CUcontext ctx);
    std::vector<Mark> marks_;
};

}  // namespace gpurdma::gpu
