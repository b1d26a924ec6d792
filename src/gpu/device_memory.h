// GPU memory of our own (RAII): cuMemAlloc on a context, cuMemFree in the destructor.
// Whoever queues work on it waits for that work before it goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

class DeviceMemory : private NonCopyable {
public:
    // Fails (naming the call) where the driver lacks the entry points or the memory.
    static Status create(CUcontext ctx, size_t bytes, std::unique_ptr<DeviceMemory> *out);
    ~DeviceMemory();

    CUdeviceptr get() const { return ptr_; }
    void *data() const { return reinterpret_cast<void *>(static_cast<uintptr_t>(ptr_)); }

private:
    DeviceMemory(CUcontext ctx, CUdeviceptr ptr) : ctx_(ctx), ptr_(ptr) {}

    CUcontext ctx_;
    CUdeviceptr ptr_;
};

}  // namespace gpurdma::gpu
