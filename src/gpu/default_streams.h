// The application's work on its GPU buffers, settled before a call reads them.
//
// MPI orders a call after everything its caller did before it. On a GPU, what the
// application enqueued on the default streams is not done when the host moves on:
// a kernel launched on stream 0 runs on, and a copy from pageable host memory into the
// GPU (cudaMemcpy H2D) returns once its source is staged, before its DMA lands (CUDA's
// "API synchronization behavior"). gpurdma's streams are non-blocking (never ordered
// behind the legacy stream) and a peer reads the buffer through CUDA IPC from a process
// of its own, so neither waits for that work: the call waits for it on the host, before
// the buffers are announced or read. Work on the application's own non-blocking streams
// is its to finish before the call, as with every CUDA-aware MPI.
#pragma once

#include "gpu/cuda_driver.h"

namespace gpurdma::gpu {

// Waits for the legacy default stream and the calling thread's per-thread default
// stream of each distinct context (null: none) among the buffers' (a failure names
// the call and the CUDA error: a fault of the application's own kernels shows here).
Status settle_default_streams(CUcontext send_context, CUcontext recv_context);

}  // namespace gpurdma::gpu
