#include "gpu/ipc_cache.h"

namespace gpurdma::gpu {

IpcCache::Ops IpcCache::cuda_ops(CUcontext ctx)
{
    Ops ops;
    ops.open = [ctx](const CUipcMemHandle &h, uintptr_t *base) {
        const auto &d = GpuRuntime::instance();
        if (!d.api().ipc_open_mem_handle)
            return Status::error(GPURDMA_ERR_TRANSPORT, "CUDA driver lacks cuIpcOpenMemHandle");
        ContextScope scope(ctx);
        CUdeviceptr p = 0;
        const int rc = d.api().ipc_open_mem_handle(&p, h, kIpcLazyEnablePeerAccess);
        if (rc != 0) return d.failure("cuIpcOpenMemHandle", rc);
        *base = static_cast<uintptr_t>(p);
        return Status::ok();
    };
    ops.close = [ctx](uintptr_t base) {
        ContextScope scope(ctx);
        GpuRuntime::instance().api().ipc_close_mem_handle(static_cast<CUdeviceptr>(base));
    };
    return ops;
}

Status IpcCache::map(int peer, uint64_t buffer_id, const CUipcMemHandle &handle, uintptr_t *base)
{
    const auto key = std::make_pair(peer, buffer_id);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        it->second.epoch = epoch_;
        *base = it->second.base;
        return Status::ok();
    }
    evict_if_full();
    uintptr_t mapped = 0;
    const Status opened = ops_.open(handle, &mapped);
    if (!opened.is_ok()) return opened;
    ++opens_;
    lru_.push_front(key);
    entries_.emplace(key, Entry{mapped, epoch_, lru_.begin()});
    *base = mapped;
    return Status::ok();
}

void IpcCache::evict_if_full()
{
    // Oldest first; mappings of the current call stay (the cache may then run over
    // its bound by what one call needs: two buffers per peer).
    auto it = lru_.end();
    while (entries_.size() >= capacity_ && it != lru_.begin()) {
        --it;
        auto e = entries_.find(*it);
        if (e->second.epoch == epoch_) continue;
        ops_.close(e->second.base);
        entries_.erase(e);
        it = lru_.erase(it);
    }
}

void IpcCache::clear()
{
    for (auto &kv : entries_) ops_.close(kv.second.base);
    entries_.clear();
    lru_.clear();
}

}  // namespace gpurdma::gpu
