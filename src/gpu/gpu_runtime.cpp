#include "gpu/gpu_runtime.h"

#include "gpu/vendor_api.h"

#include <link.h>

#include <atomic>
#include <cstddef>

namespace gpurdma::gpu {

namespace {

// Stable driver ABI values (cuda.h), so no CUDA header is needed to build.
constexpr int kAttrContext = 1;
constexpr int kAttrMemoryType = 2;
constexpr int kAttrBufferId = 7;
constexpr int kAttrIsManaged = 8;
constexpr int kAttrDeviceOrdinal = 9;
constexpr int kMemoryTypeDevice = 2;
constexpr int kMemoryTypeUnified = 4;

std::atomic<bool> g_cuda_disabled{false};
std::atomic<bool> g_hip_disabled{false};

// How many objects the dynamic linker has added to the process so far (glibc's
// dlpi_adds; about 15 ns): a new library since the last look is the only way the other
// vendor's runtime can have appeared.
unsigned long long objects_added()
{
    unsigned long long adds = 0;
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t size, void *data) {
            if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
                *static_cast<unsigned long long *>(data) = info->dlpi_adds;
            return 1;  // the first object carries the count
        },
        &adds);
    return adds;
}

const char *name_of(Vendor vendor, const char *none)
{
    switch (vendor) {
        case Vendor::Cuda: return "CUDA";
        case Vendor::Hip: return "HIP";
        default: return none;
    }
}

// "cuFoo failed: <runtime's text> (error N)"; the callers name the driver API's call, and
// HIP's counterpart has the same name after its prefix.
std::string call_failed(const DriverApi &api, Vendor vendor, const std::string &call, CUresult rc)
{
    const char *text = nullptr;
    if (api.get_error_string) api.get_error_string(rc, &text);
    std::string name = call;
    if (vendor == Vendor::Hip && name.compare(0, 2, "cu") == 0) name = "hip" + name.substr(2);
    return name + " failed: " + (text ? text : "unknown error") + " (error " + std::to_string(rc) + ")";
}

// cuMemcpy with unified addressing, returning once the bytes are in place: cuMemcpy
// returns before its bytes land in GPU memory when they come from pageable host memory
// or another GPU buffer, and the legacy stream it ran on tells when they have.
Status synchronous_copy(const DriverApi &api, Vendor vendor, void *dst, const void *src, size_t bytes)
{
    const int rc = api.memcpy_sync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes);
    if (rc != 0)
        return Status::error(GPURDMA_ERR_TRANSPORT,
                             call_failed(api, vendor, "cuMemcpy of " + std::to_string(bytes) + " bytes", rc));
    if (api.stream_synchronize) {
        const int synced = api.stream_synchronize(reinterpret_cast<CUstream>(0x1));  // CU_STREAM_LEGACY
        if (synced != 0)
            return Status::error(GPURDMA_ERR_TRANSPORT,
                                 call_failed(api, vendor, "cuStreamSynchronize after cuMemcpy", synced));
    }
    return Status::ok();
}

}  // namespace

void GpuRuntime::disable(Vendor vendor)
{
    if (vendor == Vendor::Cuda) g_cuda_disabled = true;
    if (vendor == Vendor::Hip) g_hip_disabled = true;
}

GpuRuntime &GpuRuntime::instance()
{
    static GpuRuntime runtime;
    return runtime;
}

// CUDA first, then HIP: a process uses one vendor's runtime (a node with both kinds of
// GPU would see the other's buffers as host memory; no such node is supported).
GpuRuntime::GpuRuntime()
{
    std::string why_cuda = "CUDA disabled by coll_gpurdma_cuda=0";
    std::string why_hip = "HIP disabled by coll_gpurdma_rocm=0";
    if (!g_cuda_disabled && load_cuda_api(&api_, &lib_, &why_cuda)) {
        vendor_ = Vendor::Cuda;
        ok_ = true;
    } else if (!g_hip_disabled && load_hip_api(&api_, &lib_, &why_hip)) {
        vendor_ = Vendor::Hip;
        ok_ = true;
    } else {
        why_ = why_cuda + "; " + why_hip;
        return;
    }
    find_other_vendor();
}

void GpuRuntime::find_other_vendor() const
{
    if (!ok_ || other_.load(std::memory_order_acquire)) return;
    objects_added_.store(objects_added(), std::memory_order_relaxed);
    const Vendor other = vendor_ == Vendor::Cuda ? Vendor::Hip : Vendor::Cuda;
    if (other == Vendor::Cuda ? g_cuda_disabled.load() : g_hip_disabled.load()) return;
    std::lock_guard<std::mutex> hold(other_mutex_);
    if (other_api_) return;
    auto api = std::make_unique<DriverApi>();
    void *lib = nullptr;
    std::string why;
    const bool found =
        other == Vendor::Cuda ? load_cuda_api(api.get(), &lib, &why, true) : load_hip_api(api.get(), &lib, &why, true);
    if (!found) return;  // not loaded by the application (or no device of its own): nothing to tell apart
    other_vendor_ = other;
    other_api_ = std::move(api);
    other_.store(other_api_.get(), std::memory_order_release);
}

Vendor GpuRuntime::other_vendor() const
{
    return other_.load(std::memory_order_acquire) ? other_vendor_ : Vendor::None;
}

const char *GpuRuntime::other_vendor_name() const
{
    return name_of(other_vendor(), "no other GPU runtime");
}

Status GpuRuntime::copy_other_vendor(void *dst, const void *src, size_t bytes) const
{
    const DriverApi *other = other_.load(std::memory_order_acquire);
    if (!other) return Status::error(GPURDMA_ERR_TRANSPORT, "no other GPU runtime loaded");
    const Status copied = synchronous_copy(*other, other_vendor_, dst, src, bytes);
    return copied.is_ok() ? copied : copied.prefixed(std::string("copying a ") + other_vendor_name() + " buffer: ");
}

const char *GpuRuntime::vendor_name() const
{
    return name_of(vendor_, "no GPU runtime");
}

std::string GpuRuntime::error_text(const char *call, CUresult rc) const
{
    return call_failed(api_, vendor_, call, rc);
}

Status GpuRuntime::failure(const char *call, CUresult rc) const
{
    return Status::error(GPURDMA_ERR_TRANSPORT, error_text(call, rc));
}

PointerInfo GpuRuntime::query(const void *ptr) const
{
    PointerInfo info;
    if (!ok_ || !ptr) return info;
    int type = 0;
    unsigned long long id = 0;
    unsigned managed = 0;
    void *ctx = nullptr;
    int ordinal = -1;
    int attrs[] = {kAttrMemoryType, kAttrBufferId, kAttrIsManaged, kAttrContext, kAttrDeviceOrdinal};
    void *data[] = {&type, &id, &managed, &ctx, &ordinal};
    const auto addr = reinterpret_cast<CUdeviceptr>(ptr);
    if (api_.pointer_get_attributes(5, attrs, data, addr) == 0) {
        if (managed) info.kind = MemoryKind::Managed;
        else if (type == kMemoryTypeDevice || type == kMemoryTypeUnified) info.kind = MemoryKind::Device;
        info.buffer_id = id;
        info.context = ctx;
        info.device = ordinal;
    }
    if (info.kind == MemoryKind::Host) {
        // Not ours: the other vendor's device memory, where the application loaded its runtime.
        const DriverApi *other = other_.load(std::memory_order_acquire);
        if (!other && objects_added() != objects_added_.load(std::memory_order_relaxed)) {
            find_other_vendor();
            other = other_.load(std::memory_order_acquire);
        }
        if (other) {
            int other_type = 0;
            int type_attr[] = {kAttrMemoryType};
            void *type_data[] = {&other_type};
            if (other->pointer_get_attributes(1, type_attr, type_data, addr) == 0 &&
                (other_type == kMemoryTypeDevice || other_type == kMemoryTypeUnified))
                info = PointerInfo{MemoryKind::OtherVendor};
        }
    }
    if (info.kind == MemoryKind::Device && api_.mem_get_address_range) {
        // The allocation's base is what a CUDA IPC handle names; a peer adds our offset.
        CUdeviceptr base = 0;
        size_t range = 0;
        ContextScope scope(ctx);
        if (api_.mem_get_address_range(&base, &range, addr) == 0) {
            info.base = static_cast<uintptr_t>(base);
            info.range = range;
        }
    }
    return info;
}

Status GpuRuntime::copy(void *dst, const void *src, size_t bytes, void *context) const
{
    if (!ok_) return Status::error(GPURDMA_ERR_TRANSPORT, why_);
    ContextScope scope(context);
    return synchronous_copy(api_, vendor_, dst, src, bytes);
}

ContextScope::ContextScope(CUcontext ctx)
{
    const auto &d = GpuRuntime::instance();
    pushed_ = ctx && d.available() && d.api().ctx_push(ctx) == 0;
}

ContextScope::~ContextScope()
{
    if (!pushed_) return;
    CUcontext popped = nullptr;
    GpuRuntime::instance().api().ctx_pop(&popped);
}

}  // namespace gpurdma::gpu
