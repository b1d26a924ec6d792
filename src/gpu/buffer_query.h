// What the driver says about a call's buffers, asked once per call on the latency
// path: the communicator asks touches_device_memory() as each call arrives, and the
// path that then takes the call (the one-node or hierarchical device path, or staging
// through host memory) reads the same answers with info() instead of asking again
// (cuPointerGetAttributes costs about a microsecond per buffer).
//
// One per communicator, used under its engine (calls arrive and start there), so the
// record is the communicator's, not a thread's (it was a thread_local: dynamic TLS in a
// dlopened component, a hidden state of every thread that ever called).
#pragma once

#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

// A call's two buffers; send null (MPI_IN_PLACE) or equal to recv: in place.
struct CallBuffers {
    const void *send = nullptr;
    const void *recv = nullptr;
};

class BufferQuery {
public:
    // True if the call's send or receive buffer is GPU device memory (the GPU runtime
    // loaded at run time), ours or the other vendor's. Records the answers for the next
    // info() and other_vendor() on this call.
    bool touches_device_memory(CallBuffers call);
    // Whether the last touches_device_memory() found the other vendor's memory among the
    // call's buffers (the call then stages through host memory, whatever its size).
    bool other_vendor() const
    {
        return valid_ && (sinfo_.kind == MemoryKind::OtherVendor || rinfo_.kind == MemoryKind::OtherVendor);
    }

    // The call's buffers: the answers recorded by the last touches_device_memory() when
    // that was about the same two addresses, else the driver's. Every call reaches
    // touches_device_memory() when it arrives, so a recorded answer is about this call
    // or an earlier one still pending on the same addresses (the same memory: a pending
    // or persistent call's buffers may not be freed); a later call on reused addresses
    // records again before anything reads its answers.
    void info(CallBuffers call, PointerInfo *sinfo, PointerInfo *rinfo) const;

private:
    const void *send_ = nullptr;
    const void *recv_ = nullptr;
    PointerInfo sinfo_, rinfo_;
    bool valid_ = false;
};

// The driver's answers without a record (no communicator at hand).
void buffer_info(const BufferQuery *recorded, CallBuffers call, PointerInfo *sinfo, PointerInfo *rinfo);

}  // namespace gpurdma::gpu
