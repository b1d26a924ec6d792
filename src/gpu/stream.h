// A non-blocking CUDA stream of our own on one context (RAII): its work is ordered
// with itself only, not with the caller's streams nor the legacy stream. Destroyed in
// the destructor (CUDA lets queued work finish; whoever owns the memory that work
// uses waits for done() first).
#pragma once

#include <memory>

#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

class Stream : private NonCopyable {
public:
    static Status create(CUcontext ctx, std::unique_ptr<Stream> *out);
    ~Stream();

    CUstream get() const { return stream_; }
    // Whether everything enqueued so far has finished (cuStreamQuery), without waiting.
    Status done(bool *finished) const;

private:
    Stream(CUcontext ctx, CUstream stream) : ctx_(ctx), stream_(stream) {}

    CUcontext ctx_;
    CUstream stream_;
};

}  // namespace gpurdma::gpu
