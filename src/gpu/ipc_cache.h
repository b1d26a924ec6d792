// Peers' device buffers mapped into this process with CUDA IPC, kept between calls.
// Keyed by (peer, buffer ID): CUDA gives every allocation a new buffer ID, so a
// buffer that a peer freed and reallocated at the same address is a miss and is
// mapped afresh, never served the stale mapping. Bounded: least recently used
// mappings are closed, but never one used by the call in progress.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>
#include <utility>

#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

class IpcCache : private NonCopyable {
public:
    // How a handle is opened and closed; the CUDA driver in production, fakes in tests.
    struct Ops {
        std::function<Status(const CUipcMemHandle &, uintptr_t *base)> open;
        std::function<void(uintptr_t base)> close;
    };
    static Ops cuda_ops(CUcontext ctx);

    IpcCache(size_t capacity, Ops ops) : capacity_(capacity), ops_(std::move(ops)) {}
    ~IpcCache() { clear(); }

    // Marks the start of a call: mappings used from now on are not evicted until the next one.
    void begin_call() { ++epoch_; }

    // The base address of the peer's allocation in this process (mapping it if needed).
    Status map(int peer, uint64_t buffer_id, const CUipcMemHandle &handle, uintptr_t *base);

    void clear();
    size_t size() const { return entries_.size(); }
    uint64_t opens() const { return opens_; }

private:
    struct Entry {
        uintptr_t base;
        uint64_t epoch;
        std::list<std::pair<int, uint64_t>>::iterator lru;
    };
    void evict_if_full();

    size_t capacity_;
    Ops ops_;
    uint64_t epoch_ = 0;
    uint64_t opens_ = 0;
    std::map<std::pair<int, uint64_t>, Entry> entries_;
    std::list<std::pair<int, uint64_t>> lru_;  // front = most recently used
};

}  // namespace gpurdma::gpu
