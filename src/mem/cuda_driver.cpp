#include "mem/cuda_driver.h"

#include <dlfcn.h>

#include <atomic>

namespace gpurdma::mem {

namespace {

// Stable driver ABI values (cuda.h), so no CUDA header is needed to build.
constexpr int kAttrContext = 1;
constexpr int kAttrMemoryType = 2;
constexpr int kAttrBufferId = 7;
constexpr int kAttrIsManaged = 8;
constexpr int kMemoryTypeDevice = 2;
constexpr int kMemoryTypeUnified = 4;

std::atomic<bool> g_disabled{false};

}  // namespace

void CudaDriver::disable() { g_disabled = true; }

CudaDriver &CudaDriver::instance()
{
    static CudaDriver driver;
    return driver;
}

CudaDriver::CudaDriver()
{
    if (g_disabled) {
        why_ = "disabled by coll_gpurdma_cuda=0";
        return;
    }
    lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
        why_ = "no CUDA driver (libcuda.so.1 not found)";
        return;
    }
    auto sym = [this](const char *name) { return dlsym(lib_, name); };
    auto init = reinterpret_cast<int (*)(unsigned)>(sym("cuInit"));
    pointer_get_attributes_ = reinterpret_cast<decltype(pointer_get_attributes_)>(sym("cuPointerGetAttributes"));
    memcpy_ = reinterpret_cast<decltype(memcpy_)>(sym("cuMemcpy"));
    ctx_push_ = reinterpret_cast<decltype(ctx_push_)>(sym("cuCtxPushCurrent_v2"));
    ctx_pop_ = reinterpret_cast<decltype(ctx_pop_)>(sym("cuCtxPopCurrent_v2"));
    error_string_ = reinterpret_cast<decltype(error_string_)>(sym("cuGetErrorString"));
    if (!init || !pointer_get_attributes_ || !memcpy_ || !ctx_push_ || !ctx_pop_) {
        why_ = "CUDA driver lacks the entry points gpurdma needs";
        return;
    }
    const int rc = init(0);
    if (rc != 0) {
        why_ = "cuInit failed (error " + std::to_string(rc) + "): no usable GPU";
        return;
    }
    ok_ = true;
}

PointerInfo CudaDriver::query(const void *ptr) const
{
    PointerInfo info;
    if (!ok_ || !ptr) return info;
    int type = 0;
    unsigned long long id = 0;
    unsigned managed = 0;
    void *ctx = nullptr;
    int attrs[] = {kAttrMemoryType, kAttrBufferId, kAttrIsManaged, kAttrContext};
    void *data[] = {&type, &id, &managed, &ctx};
    if (pointer_get_attributes_(4, attrs, data, reinterpret_cast<unsigned long long>(ptr)) != 0) return info;
    if (managed) info.kind = MemoryKind::Managed;
    else if (type == kMemoryTypeDevice || type == kMemoryTypeUnified) info.kind = MemoryKind::Device;
    info.buffer_id = id;
    info.context = ctx;
    return info;
}

bool CudaDriver::copy(void *dst, const void *src, size_t bytes, void *context, std::string *error) const
{
    if (!ok_) {
        *error = why_;
        return false;
    }
    const bool pushed = context && ctx_push_(context) == 0;
    const int rc = memcpy_(reinterpret_cast<unsigned long long>(dst), reinterpret_cast<unsigned long long>(src), bytes);
    if (pushed) {
        void *popped = nullptr;
        ctx_pop_(&popped);
    }
    if (rc != 0) {
        const char *text = nullptr;
        if (error_string_) error_string_(rc, &text);
        *error = std::string("cuMemcpy of ") + std::to_string(bytes) + " bytes failed: " + (text ? text : "?");
        return false;
    }
    return true;
}

}  // namespace gpurdma::mem
