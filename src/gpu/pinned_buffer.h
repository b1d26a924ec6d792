// Page-locked host memory for the staged inter-node path (RAII): cuMemHostAlloc
// (portable, so any context may copy from it) where the driver has it, released with
// cuMemFreeHost in the destructor. Where the driver lacks the entry points or the
// allocation fails, plain 64-byte aligned host memory instead: the copies still work,
// from pageable memory (slower on a real GPU, never wrong); pinned() says which.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/noncopyable.h"
#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

class PinnedBuffer : private NonCopyable {
public:
    // bytes > 0. *why (if given) says why the memory is not page-locked, "" if it is.
    PinnedBuffer(size_t bytes, CUcontext ctx, std::string *why = nullptr);
    ~PinnedBuffer();

    char *data() const { return data_; }
    size_t size() const { return bytes_; }
    bool pinned() const { return pinned_; }

private:
    char *data_ = nullptr;
    size_t bytes_ = 0;
    bool pinned_ = false;
    CUcontext ctx_ = nullptr;
};

}  // namespace gpurdma::gpu
