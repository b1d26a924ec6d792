#include "gpu/cuda_driver.h"

#include <dlfcn.h>

#include <atomic>
#include <type_traits>

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

std::atomic<bool> g_disabled{false};

}  // namespace

void CudaDriver::disable()
{
    g_disabled = true;
}

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
    // Versioned names first (cuda.h maps the plain name to them), plain name second.
    auto load = [this](auto &fn, const char *name, const char *alt = nullptr) {
        void *p = dlsym(lib_, name);
        if (!p && alt) p = dlsym(lib_, alt);
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        return p != nullptr;
    };
    auto init = static_cast<CUresult (*)(unsigned)>(nullptr);
    DriverApi &a = api_;
    bool need = load(init, "cuInit");
    need &= load(a.pointer_get_attributes, "cuPointerGetAttributes");
    need &= load(a.memcpy_sync, "cuMemcpy");
    need &= load(a.ctx_push, "cuCtxPushCurrent_v2");
    need &= load(a.ctx_pop, "cuCtxPopCurrent_v2");
    load(a.mem_get_address_range, "cuMemGetAddressRange_v2");
    load(a.memcpy_async, "cuMemcpyAsync");
    load(a.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
    load(a.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync");
    load(a.memcpy_htod_async, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync");
    load(a.ctx_get_device, "cuCtxGetDevice");
    load(a.device_get_attribute, "cuDeviceGetAttribute");
    load(a.device_get_pci_bus_id, "cuDeviceGetPCIBusId");
    load(a.device_can_access_peer, "cuDeviceCanAccessPeer");
    load(a.device_get_by_pci_bus_id, "cuDeviceGetByPCIBusId");
    load(a.module_load_data, "cuModuleLoadData");
    load(a.module_unload, "cuModuleUnload");
    load(a.module_get_function, "cuModuleGetFunction");
    load(a.launch_kernel, "cuLaunchKernel");
    load(a.stream_create, "cuStreamCreate");
    load(a.stream_destroy, "cuStreamDestroy_v2", "cuStreamDestroy");
    load(a.stream_synchronize, "cuStreamSynchronize");
    load(a.stream_query, "cuStreamQuery");
    load(a.event_create, "cuEventCreate");
    load(a.event_destroy, "cuEventDestroy_v2", "cuEventDestroy");
    load(a.event_record, "cuEventRecord");
    load(a.event_synchronize, "cuEventSynchronize");
    load(a.event_query, "cuEventQuery");
    load(a.stream_wait_event, "cuStreamWaitEvent");
    load(a.event_elapsed_time, "cuEventElapsedTime_v2", "cuEventElapsedTime");
    load(a.ipc_get_mem_handle, "cuIpcGetMemHandle");
    load(a.ipc_open_mem_handle, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle");
    load(a.ipc_close_mem_handle, "cuIpcCloseMemHandle");
    load(a.mem_host_alloc, "cuMemHostAlloc");
    load(a.mem_free_host, "cuMemFreeHost");
    load(a.mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer");
    load(a.mem_host_register, "cuMemHostRegister_v2", "cuMemHostRegister");
    load(a.mem_host_unregister, "cuMemHostUnregister");
    load(a.driver_get_version, "cuDriverGetVersion");
    load(a.device_get, "cuDeviceGet");
    load(a.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    load(a.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
    load(a.ctx_set_current, "cuCtxSetCurrent");
    load(a.mem_alloc, "cuMemAlloc_v2");
    load(a.mem_free, "cuMemFree_v2");
    load(a.get_error_string, "cuGetErrorString");
    load(a.flush_gpu_direct_rdma_writes, "cuFlushGPUDirectRDMAWrites");
    load(a.stand_in_device_memory_is_host, "gpurdmaStandInDeviceMemoryIsHost");
    load(a.stand_in_kernel_image, "gpurdmaStandInKernelImage");
    if (!need) {
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

std::string CudaDriver::error_text(const char *call, CUresult rc) const
{
    const char *text = nullptr;
    if (api_.get_error_string) api_.get_error_string(rc, &text);
    return std::string(call) + " failed: " + (text ? text : "unknown error") + " (error " + std::to_string(rc) + ")";
}

Status CudaDriver::failure(const char *call, CUresult rc) const
{
    return Status::error(GPURDMA_ERR_TRANSPORT, error_text(call, rc));
}

PointerInfo CudaDriver::query(const void *ptr) const
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
    if (api_.pointer_get_attributes(5, attrs, data, addr) != 0) return info;
    if (managed) info.kind = MemoryKind::Managed;
    else if (type == kMemoryTypeDevice || type == kMemoryTypeUnified) info.kind = MemoryKind::Device;
    info.buffer_id = id;
    info.context = ctx;
    info.device = ordinal;
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

Status CudaDriver::copy(void *dst, const void *src, size_t bytes, void *context) const
{
    if (!ok_) return Status::error(GPURDMA_ERR_TRANSPORT, why_);
    ContextScope scope(context);
    const int rc = api_.memcpy_sync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes);
    if (rc != 0) return failure(("cuMemcpy of " + std::to_string(bytes) + " bytes").c_str(), rc);
    // cuMemcpy returns before its bytes land in GPU memory when they come from pageable
    // host memory or another GPU buffer: the legacy stream it ran on tells when they have.
    if (api_.stream_synchronize) {
        const int synced = api_.stream_synchronize(reinterpret_cast<CUstream>(0x1));  // CU_STREAM_LEGACY
        if (synced != 0) return failure("cuStreamSynchronize after cuMemcpy", synced);
    }
    return Status::ok();
}

ContextScope::ContextScope(CUcontext ctx)
{
    const auto &d = CudaDriver::instance();
    pushed_ = ctx && d.available() && d.api().ctx_push(ctx) == 0;
}

ContextScope::~ContextScope()
{
    if (!pushed_) return;
    CUcontext popped = nullptr;
    CudaDriver::instance().api().ctx_pop(&popped);
}

}  // namespace gpurdma::gpu
