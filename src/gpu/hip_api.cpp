// HIP (libamdhip64) fills the entry table through adapters that give its calls the CUDA
// driver API's meaning, so nothing above the runtime room knows which vendor it runs on:
//  - Contexts: HIP has a current device per thread, not contexts. A context here is the
//    device ordinal + 1 (never null); pushing one saves the thread's current device on a
//    per-thread stack and makes the context's current, popping restores the saved one.
//  - Streams: CUDA's legacy default stream handle (0x1) is HIP's null stream (which has
//    the legacy semantics); the per-thread handle (0x2) is hipStreamPerThread's own value.
//  - Pointer attributes: hipPointerGetAttributes answered in CUDA's attribute terms. Its
//    memory-type numbers changed in HIP 6, so the runtime's version picks the table. HIP 5
//    fails the query of memory it does not know and leaves that as the thread's last
//    error: cleared again (when there was none before), so that the application's own
//    hipGetLastError does not see gpurdma's queries of its host buffers.
//  - Device attributes: the multiprocessor count maps (HIP 5.7's number, 63). CUDA's
//    GPUDirect RDMA write-ordering and flush attributes have no HIP counterpart: those
//    queries fail, which the GPUDirect RDMA decision reads as "writes not ordered, no
//    flush", so the rail's arrivals land in page-locked host memory (staged).
#include <dlfcn.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "gpu/vendor_api.h"

namespace gpurdma::gpu {

namespace {

using HipError = int;
constexpr HipError kHipSuccess = 0;
constexpr HipError kHipInvalidValue = 1;
constexpr HipError kHipInvalidContext = 201;
constexpr HipError kHipNotSupported = 801;
constexpr int kHipMemcpyDefault = 4;  // direction from the addresses (unified addressing)
constexpr int kHipAttrMultiprocessorCount = 63;  // hipDeviceAttributeMultiprocessorCount (HIP 5.7)
constexpr int kHipPointerAttrBufferId = 7;  // HIP_POINTER_ATTRIBUTE_BUFFER_ID
constexpr unsigned kHipIpcLazyEnablePeerAccess = 0;  // HIP's value; CUDA's is 1
// CUDA driver values the adapters answer in (cuda.h), as gpu_runtime.cpp reads them.
constexpr int kCuAttrContext = 1, kCuAttrMemoryType = 2, kCuAttrBufferId = 7, kCuAttrIsManaged = 8,
              kCuAttrDeviceOrdinal = 9;
constexpr int kCuMemoryTypeHost = 1, kCuMemoryTypeDevice = 2;

// hip_runtime_api.h's hipPointerAttribute_t: the same layout in HIP 5 and 6.
struct HipPointerAttributes {
    int type;
    int device;
    void *device_pointer;
    void *host_pointer;
    int is_managed;
    unsigned allocation_flags;
};

// libamdhip64's entry points (hip_runtime_api.h signatures; handles as void *).
struct Hip {
    HipError (*init)(unsigned) = nullptr;
    HipError (*runtime_get_version)(int *) = nullptr;
    HipError (*get_device_count)(int *) = nullptr;
    HipError (*get_device)(int *) = nullptr;
    HipError (*set_device)(int) = nullptr;
    HipError (*device_get_attribute)(int *, int, int) = nullptr;
    HipError (*pointer_get_attributes)(HipPointerAttributes *, const void *) = nullptr;
    HipError (*pointer_get_attribute)(void *, int, void *) = nullptr;
    HipError (*peek_at_last_error)() = nullptr;
    HipError (*get_last_error)() = nullptr;
    const char *(*get_error_string)(HipError) = nullptr;
    HipError (*mem_get_address_range)(void **, size_t *, void *) = nullptr;
    HipError (*memcpy)(void *, const void *, size_t, int) = nullptr;
    HipError (*memcpy_async)(void *, const void *, size_t, int, void *) = nullptr;
    HipError (*memcpy_dtod_async)(void *, void *, size_t, void *) = nullptr;
    HipError (*memcpy_dtoh_async)(void *, void *, size_t, void *) = nullptr;
    HipError (*memcpy_htod_async)(void *, const void *, size_t, void *) = nullptr;
    HipError (*module_launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     void *, void **, void **) = nullptr;
    HipError (*stream_create_with_flags)(void **, unsigned) = nullptr;
    HipError (*stream_destroy)(void *) = nullptr;
    HipError (*stream_synchronize)(void *) = nullptr;
    HipError (*stream_query)(void *) = nullptr;
    HipError (*stream_wait_event)(void *, void *, unsigned) = nullptr;
    HipError (*event_create_with_flags)(void **, unsigned) = nullptr;
    HipError (*event_record)(void *, void *) = nullptr;
    HipError (*ipc_get_mem_handle)(CUipcMemHandle *, void *) = nullptr;
    HipError (*ipc_open_mem_handle)(void **, CUipcMemHandle, unsigned) = nullptr;
    HipError (*ipc_close_mem_handle)(void *) = nullptr;
    HipError (*host_get_device_pointer)(void **, void *, unsigned) = nullptr;
    HipError (*malloc)(void **, size_t) = nullptr;
    HipError (*free)(void *) = nullptr;
};

Hip g_hip;
bool g_hip6 = false;  // hipMemoryType numbering: HIP 6 added "unregistered" (0) and renumbered
thread_local std::vector<int> t_saved_devices;

CUstream stream_of(CUstream s)
{
    return s == reinterpret_cast<CUstream>(0x1) ? nullptr : s;  // CU_STREAM_LEGACY: HIP's null stream
}
int device_of(CUcontext c)
{
    return static_cast<int>(reinterpret_cast<intptr_t>(c)) - 1;
}
CUcontext context_of(int device)
{
    return reinterpret_cast<CUcontext>(static_cast<intptr_t>(device) + 1);
}
void *address(CUdeviceptr p)
{
    return reinterpret_cast<void *>(static_cast<uintptr_t>(p));
}
CUdeviceptr device_pointer(void *p)
{
    return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// ---- contexts as devices

CUresult ctx_push(CUcontext c)
{
    int current = 0;
    HipError rc = g_hip.get_device(&current);
    if (rc != kHipSuccess) return rc;
    if (current != device_of(c) && (rc = g_hip.set_device(device_of(c))) != kHipSuccess) return rc;
    t_saved_devices.push_back(current);
    return kHipSuccess;
}
CUresult ctx_pop(CUcontext *c)
{
    if (t_saved_devices.empty()) return kHipInvalidContext;
    int current = 0;
    g_hip.get_device(&current);
    if (c) *c = context_of(current);
    const int saved = t_saved_devices.back();
    t_saved_devices.pop_back();
    return saved == current ? kHipSuccess : g_hip.set_device(saved);
}
CUresult ctx_get_device(CUdevice *d)
{
    return g_hip.get_device(d);
}
CUresult ctx_set_current(CUcontext c)
{
    return c ? g_hip.set_device(device_of(c)) : kHipSuccess;
}
CUresult device_get(CUdevice *d, int ordinal)
{
    int count = 0;
    const HipError rc = g_hip.get_device_count(&count);
    if (rc != kHipSuccess) return rc;
    if (ordinal < 0 || ordinal >= count) return kHipInvalidValue;
    *d = ordinal;
    return kHipSuccess;
}
CUresult primary_ctx_retain(CUcontext *c, CUdevice d)
{
    int unused = 0;
    const CUresult rc = device_get(&unused, d);
    if (rc == kHipSuccess) *c = context_of(d);
    return rc;
}
CUresult primary_ctx_release(CUdevice)
{
    return kHipSuccess;
}

// ---- queries

CUresult device_get_attribute(int *value, int attribute, CUdevice d)
{
    if (attribute != kDevAttrMultiprocessorCount) return kHipNotSupported;
    return g_hip.device_get_attribute(value, kHipAttrMultiprocessorCount, d);
}

CUresult pointer_get_attributes(unsigned n, int *attributes, void **data, CUdeviceptr p)
{
    HipPointerAttributes pa{};
    const HipError before = g_hip.peek_at_last_error();
    const HipError rc = g_hip.pointer_get_attributes(&pa, address(p));
    if (rc != kHipSuccess) {
        if (before == kHipSuccess) g_hip.get_last_error();
        return rc;  // read as host memory, as CUDA's null attributes are
    }
    const bool device = pa.type == (g_hip6 ? 2 : 1);
    const bool managed = pa.is_managed || pa.type == (g_hip6 ? 3 : 4);
    const bool host = pa.type == (g_hip6 ? 1 : 0);
    for (unsigned i = 0; i < n; ++i) {
        switch (attributes[i]) {
            case kCuAttrContext:
                *static_cast<CUcontext *>(data[i]) = device || managed ? context_of(pa.device) : nullptr;
                break;
            case kCuAttrMemoryType:
                *static_cast<int *>(data[i]) = device ? kCuMemoryTypeDevice : host ? kCuMemoryTypeHost : 0;
                break;
            case kCuAttrBufferId: {
                unsigned long long id = 0;
                if ((device || managed) && g_hip.pointer_get_attribute &&
                    g_hip.pointer_get_attribute(&id, kHipPointerAttrBufferId, address(p)) != kHipSuccess)
                    id = 0;
                *static_cast<unsigned long long *>(data[i]) = id;
                break;
            }
            case kCuAttrIsManaged: *static_cast<unsigned *>(data[i]) = managed ? 1 : 0; break;
            case kCuAttrDeviceOrdinal: *static_cast<int *>(data[i]) = pa.device; break;
            default: return kHipInvalidValue;
        }
    }
    return kHipSuccess;
}

CUresult mem_get_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    void *b = nullptr;
    size_t s = 0;
    const HipError rc = g_hip.mem_get_address_range(&b, &s, address(p));
    if (rc != kHipSuccess) return rc;
    if (base) *base = device_pointer(b);
    if (size) *size = s;
    return kHipSuccess;
}

CUresult get_error_string(CUresult rc, const char **text)
{
    *text = g_hip.get_error_string(rc);
    return kHipSuccess;
}

// ---- copies, kernels, streams and events

CUresult memcpy_sync(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return g_hip.memcpy(address(dst), address(src), n, kHipMemcpyDefault);
}
CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return g_hip.memcpy_async(address(dst), address(src), n, kHipMemcpyDefault, stream_of(s));
}
CUresult memcpy_dtod_async(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return g_hip.memcpy_dtod_async(address(dst), address(src), n, stream_of(s));
}
CUresult memcpy_dtoh_async(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return g_hip.memcpy_dtoh_async(dst, address(src), n, stream_of(s));
}
CUresult memcpy_htod_async(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    return g_hip.memcpy_htod_async(address(dst), src, n, stream_of(s));
}
CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shared_bytes, CUstream s, void **params, void **extra)
{
    return g_hip.module_launch_kernel(f, gx, gy, gz, bx, by, bz, shared_bytes, stream_of(s), params, extra);
}
CUresult stream_create(CUstream *s, unsigned flags)
{
    return g_hip.stream_create_with_flags(s, flags);  // hipStreamNonBlocking is CUDA's 1
}
CUresult stream_destroy(CUstream s)
{
    return g_hip.stream_destroy(stream_of(s));
}
CUresult stream_synchronize(CUstream s)
{
    return g_hip.stream_synchronize(stream_of(s));
}
CUresult stream_query(CUstream s)
{
    return g_hip.stream_query(stream_of(s));  // hipErrorNotReady is CUDA's 600
}
CUresult stream_wait_event(CUstream s, CUevent e, unsigned flags)
{
    return g_hip.stream_wait_event(stream_of(s), e, flags);
}
CUresult event_create(CUevent *e, unsigned flags)
{
    return g_hip.event_create_with_flags(e, flags);  // hipEventDisableTiming is CUDA's 2
}
CUresult event_record(CUevent e, CUstream s)
{
    return g_hip.event_record(e, stream_of(s));
}

// ---- IPC and memory

CUresult ipc_get_mem_handle(CUipcMemHandle *h, CUdeviceptr p)
{
    return g_hip.ipc_get_mem_handle(h, address(p));  // hipIpcMemHandle_t: 64 bytes too
}
CUresult ipc_open_mem_handle(CUdeviceptr *p, CUipcMemHandle h, unsigned)
{
    void *mapped = nullptr;
    const HipError rc = g_hip.ipc_open_mem_handle(&mapped, h, kHipIpcLazyEnablePeerAccess);
    if (rc == kHipSuccess) *p = device_pointer(mapped);
    return rc;
}
CUresult ipc_close_mem_handle(CUdeviceptr p)
{
    return g_hip.ipc_close_mem_handle(address(p));
}
CUresult mem_host_get_device_pointer(CUdeviceptr *d, void *p, unsigned flags)
{
    void *mapped = nullptr;
    const HipError rc = g_hip.host_get_device_pointer(&mapped, p, flags);
    if (rc == kHipSuccess) *d = device_pointer(mapped);
    return rc;
}
CUresult mem_alloc(CUdeviceptr *p, size_t size)
{
    void *out = nullptr;
    const HipError rc = g_hip.malloc(&out, size);
    if (rc == kHipSuccess) *p = device_pointer(out);
    return rc;
}
CUresult mem_free(CUdeviceptr p)
{
    return g_hip.free(address(p));
}

}  // namespace

bool load_hip_api(DriverApi *api, void **lib_out, std::string *why, bool already_loaded)
{
    void *lib = nullptr;
    for (const char *name : {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"})
        if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | (already_loaded ? RTLD_NOLOAD : 0))) != nullptr) break;
    if (!lib) {
        *why = "no HIP runtime (libamdhip64.so not found)";
        return false;
    }
    auto load = [lib](auto &fn, const char *name) {
        void *p = dlsym(lib, name);
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        return p != nullptr;
    };
    Hip h;
    DriverApi a;
    bool need = load(h.init, "hipInit");
    need &= load(h.get_device_count, "hipGetDeviceCount");
    need &= load(h.get_device, "hipGetDevice");
    need &= load(h.set_device, "hipSetDevice");
    need &= load(h.pointer_get_attributes, "hipPointerGetAttributes");
    need &= load(h.peek_at_last_error, "hipPeekAtLastError");
    need &= load(h.get_last_error, "hipGetLastError");
    need &= load(h.memcpy, "hipMemcpy");
    need &= load(h.get_error_string, "hipGetErrorString");
    // The buffer ID (HIP 5.0 on) keys the IPC mapping cache: a freed and reused address
    // must not find the old mapping.
    need &= load(h.pointer_get_attribute, "hipPointerGetAttribute");
    load(h.runtime_get_version, "hipRuntimeGetVersion");
    load(h.device_get_attribute, "hipDeviceGetAttribute");
    load(h.mem_get_address_range, "hipMemGetAddressRange");
    load(h.memcpy_async, "hipMemcpyAsync");
    load(h.memcpy_dtod_async, "hipMemcpyDtoDAsync");
    load(h.memcpy_dtoh_async, "hipMemcpyDtoHAsync");
    load(h.memcpy_htod_async, "hipMemcpyHtoDAsync");
    load(h.module_launch_kernel, "hipModuleLaunchKernel");
    load(h.stream_create_with_flags, "hipStreamCreateWithFlags");
    load(h.stream_destroy, "hipStreamDestroy");
    load(h.stream_synchronize, "hipStreamSynchronize");
    load(h.stream_query, "hipStreamQuery");
    load(h.stream_wait_event, "hipStreamWaitEvent");
    load(h.event_create_with_flags, "hipEventCreateWithFlags");
    load(h.event_record, "hipEventRecord");
    load(h.ipc_get_mem_handle, "hipIpcGetMemHandle");
    load(h.ipc_open_mem_handle, "hipIpcOpenMemHandle");
    load(h.ipc_close_mem_handle, "hipIpcCloseMemHandle");
    load(h.host_get_device_pointer, "hipHostGetDevicePointer");
    load(h.malloc, "hipMalloc");
    load(h.free, "hipFree");
    // Same signatures as the driver API's: taken as they are.
    load(a.device_get_pci_bus_id, "hipDeviceGetPCIBusId");
    load(a.device_get_by_pci_bus_id, "hipDeviceGetByPCIBusId");
    load(a.device_can_access_peer, "hipDeviceCanAccessPeer");
    load(a.module_load_data, "hipModuleLoadData");
    load(a.module_unload, "hipModuleUnload");
    load(a.module_get_function, "hipModuleGetFunction");
    load(a.event_destroy, "hipEventDestroy");
    load(a.event_synchronize, "hipEventSynchronize");
    load(a.event_query, "hipEventQuery");
    load(a.event_elapsed_time, "hipEventElapsedTime");
    load(a.mem_host_alloc, "hipHostMalloc");  // hipHostMallocPortable/Mapped are CUDA's 1/2
    load(a.mem_free_host, "hipHostFree");
    load(a.mem_host_register, "hipHostRegister");  // hipHostRegisterPortable/Mapped likewise
    load(a.mem_host_unregister, "hipHostUnregister");
    load(a.driver_get_version, "hipDriverGetVersion");
    load(a.stand_in_device_memory_is_host, "gpurdmaStandInDeviceMemoryIsHost");
    load(a.stand_in_kernel_image, "gpurdmaStandInKernelImage");
    if (!need) {
        *why = "HIP runtime lacks the entry points gpurdma needs (HIP 5.0 or later)";
        dlclose(lib);
        return false;
    }
    int devices = 0;
    HipError rc = h.init(0);
    if (rc == kHipSuccess) rc = h.get_device_count(&devices);
    if (rc != kHipSuccess || devices < 1) {
        *why = "hipInit/hipGetDeviceCount failed (error " + std::to_string(rc) + "): no usable AMD GPU";
        // Left loaded: the HIP runtime may have started threads that unloading would strand.
        return false;
    }
    int version = 0;
    g_hip6 = h.runtime_get_version && h.runtime_get_version(&version) == kHipSuccess && version >= 60000000;
    g_hip = h;
    // The adapters above for what differs from the driver API, entries present or not.
    auto adapt = [](auto entry, auto adapter, auto &slot) {
        if (entry) slot = adapter;
    };
    a.pointer_get_attributes = pointer_get_attributes;
    a.memcpy_sync = memcpy_sync;
    a.ctx_push = ctx_push;
    a.ctx_pop = ctx_pop;
    a.ctx_get_device = ctx_get_device;
    a.ctx_set_current = ctx_set_current;
    a.device_get = device_get;
    a.primary_ctx_retain = primary_ctx_retain;
    a.primary_ctx_release = primary_ctx_release;
    a.get_error_string = get_error_string;
    adapt(h.device_get_attribute, device_get_attribute, a.device_get_attribute);
    adapt(h.mem_get_address_range, mem_get_address_range, a.mem_get_address_range);
    adapt(h.memcpy_async, memcpy_async, a.memcpy_async);
    adapt(h.memcpy_dtod_async, memcpy_dtod_async, a.memcpy_dtod_async);
    adapt(h.memcpy_dtoh_async, memcpy_dtoh_async, a.memcpy_dtoh_async);
    adapt(h.memcpy_htod_async, memcpy_htod_async, a.memcpy_htod_async);
    adapt(h.module_launch_kernel, launch_kernel, a.launch_kernel);
    adapt(h.stream_create_with_flags, stream_create, a.stream_create);
    adapt(h.stream_destroy, stream_destroy, a.stream_destroy);
    adapt(h.stream_synchronize, stream_synchronize, a.stream_synchronize);
    adapt(h.stream_query, stream_query, a.stream_query);
    adapt(h.stream_wait_event, stream_wait_event, a.stream_wait_event);
    adapt(h.event_create_with_flags, event_create, a.event_create);
    adapt(h.event_record, event_record, a.event_record);
    adapt(h.ipc_get_mem_handle, ipc_get_mem_handle, a.ipc_get_mem_handle);
    adapt(h.ipc_open_mem_handle, ipc_open_mem_handle, a.ipc_open_mem_handle);
    adapt(h.ipc_close_mem_handle, ipc_close_mem_handle, a.ipc_close_mem_handle);
    adapt(h.host_get_device_pointer, mem_host_get_device_pointer, a.mem_host_get_device_pointer);
    adapt(h.malloc, mem_alloc, a.mem_alloc);
    adapt(h.free, mem_free, a.mem_free);
    *api = a;
    *lib_out = lib;
    return true;
}

}  // namespace gpurdma::gpu
