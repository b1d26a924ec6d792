// "Has the work enqueued so far on this stream finished?" for one point of the
// stream, without waiting: a CUDA event recorded there and polled with cuEventQuery.
// Where the driver lacks events (cuEventCreate/Record/Query), the whole stream polled
// with cuStreamQuery instead: later work delays the answer, never makes it wrong.
// The event is released in the destructor.
#pragma once

#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

class CopyFence : private NonCopyable {
public:
    CopyFence(CUcontext ctx, CUstream stream);
    ~CopyFence();

    // Marks the current end of the stream.
    Status record();
    // Whether the work before the last record() has finished (true if never recorded).
    Status reached(bool *done);
    bool uses_event() const { return event_ != nullptr; }

private:
    CUcontext ctx_;
    CUstream stream_;
    CUevent event_ = nullptr;
    bool pending_ = false;
};

}  // namespace gpurdma::gpu
