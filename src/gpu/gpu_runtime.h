// The GPU runtime room's entry: the CUDA driver (libcuda.so.1) or, where there is none
// (or no NVIDIA GPU), the HIP runtime (libamdhip64), each loaded at run time only where
// it exists. The entry table below has the shape of CUDA's driver API; HIP fills it
// through adapters (hip_api.cpp), so its callers carry no vendor. The component loads
// and works on hosts without either, and recognises device pointers (which an Open MPI
// that is not GPU-aware hands over as raw addresses) where one is present. Nothing here
// needs a GPU toolkit to build: the few driver types and constants used are spelled out
// below (stable driver ABI, cuda.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/noncopyable.h"
#include "base/status.h"

namespace gpurdma::gpu {

// OtherVendor: device memory of the other vendor's runtime, which the application loaded
// beside the one gpurdma uses (a CUDA buffer in a HIP process, or the reverse). No path
// of ours reads it from a GPU: it stages through host memory by that runtime's copies.
enum class MemoryKind { Host, Device, Managed, OtherVendor };

// Whose runtime fills the table: one per process (CUDA first).
enum class Vendor { None, Cuda, Hip };

struct PointerInfo {
    MemoryKind kind = MemoryKind::Host;
    uint64_t buffer_id = 0;  // unique per allocation: a freed and reused address gets a new one
    void *context = nullptr;  // CUcontext the memory belongs to
    uintptr_t base = 0;  // start of the allocation holding the pointer (cuMemGetAddressRange)
    size_t range = 0;  // size of that allocation in bytes
    int device = -1;  // device ordinal
};

// Driver ABI (cuda.h) without cuda.h.
using CUresult = int;
using CUdeviceptr = unsigned long long;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUevent = void *;
struct CUipcMemHandle {
    unsigned char data[64];
};
constexpr CUresult kErrorNotReady = 600;  // CUDA_ERROR_NOT_READY: cuStreamQuery on a busy stream
constexpr int kDevAttrMultiprocessorCount = 16;
constexpr unsigned kStreamNonBlocking = 1;
constexpr unsigned kEventDisableTiming = 2;
constexpr unsigned kIpcLazyEnablePeerAccess = 1;
constexpr unsigned kHostAllocPortable = 1;
constexpr unsigned kHostRegisterPortable = 1;
// GPUDirect RDMA writes into GPU memory: whether the GPU sees them in order, else
// whether (and how) they can be flushed before a kernel reads them.
constexpr int kDevAttrGdrFlushWritesOptions = 117;  // bitmask: 1 = cuFlushGPUDirectRDMAWrites
constexpr int kDevAttrGdrWritesOrdering = 118;  // 0 none, 100 owner, 200 all devices
constexpr int kGdrFlushOptionHost = 1;
constexpr int kGdrWritesOrderingOwner = 100;
constexpr int kGdrFlushTargetCurrentCtx = 0;
constexpr int kGdrFlushToOwner = 100;

// The entry points gpurdma calls, resolved by name. Optional ones may be null.
struct DriverApi {
    CUresult (*pointer_get_attributes)(unsigned, int *, void **, CUdeviceptr) = nullptr;
    CUresult (*mem_get_address_range)(CUdeviceptr *, size_t *, CUdeviceptr) = nullptr;
    CUresult (*memcpy_sync)(CUdeviceptr, CUdeviceptr, size_t) = nullptr;
    CUresult (*memcpy_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
    CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
    // The staged inter-node path's copies (optional: cuMemcpyAsync with unified addressing otherwise).
    CUresult (*memcpy_dtoh_async)(void *, CUdeviceptr, size_t, CUstream) = nullptr;
    CUresult (*memcpy_htod_async)(CUdeviceptr, const void *, size_t, CUstream) = nullptr;
    CUresult (*ctx_push)(CUcontext) = nullptr;
    CUresult (*ctx_pop)(CUcontext *) = nullptr;
    CUresult (*ctx_get_device)(CUdevice *) = nullptr;
    CUresult (*device_get_attribute)(int *, int, CUdevice) = nullptr;
    CUresult (*device_get_pci_bus_id)(char *, int, CUdevice) = nullptr;
    CUresult (*device_can_access_peer)(int *, CUdevice, CUdevice) = nullptr;
    CUresult (*device_get_by_pci_bus_id)(CUdevice *, const char *) = nullptr;
    CUresult (*module_load_data)(CUmodule *, const void *) = nullptr;
    CUresult (*module_unload)(CUmodule) = nullptr;
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *) = nullptr;
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **) = nullptr;
    CUresult (*stream_create)(CUstream *, unsigned) = nullptr;
    CUresult (*stream_destroy)(CUstream) = nullptr;
    CUresult (*stream_synchronize)(CUstream) = nullptr;
    CUresult (*stream_query)(CUstream) = nullptr;  // 0: all work done, kErrorNotReady: still busy
    CUresult (*event_create)(CUevent *, unsigned) = nullptr;
    CUresult (*event_destroy)(CUevent) = nullptr;
    CUresult (*event_record)(CUevent, CUstream) = nullptr;
    CUresult (*event_synchronize)(CUevent) = nullptr;
    CUresult (*event_query)(CUevent) = nullptr;  // 0: reached, kErrorNotReady: not yet
    CUresult (*stream_wait_event)(CUstream, CUevent, unsigned) = nullptr;
    CUresult (*event_elapsed_time)(float *, CUevent, CUevent) = nullptr;
    CUresult (*ipc_get_mem_handle)(CUipcMemHandle *, CUdeviceptr) = nullptr;
    CUresult (*ipc_open_mem_handle)(CUdeviceptr *, CUipcMemHandle, unsigned) = nullptr;
    CUresult (*ipc_close_mem_handle)(CUdeviceptr) = nullptr;
    CUresult (*mem_host_alloc)(void **, size_t, unsigned) = nullptr;
    CUresult (*mem_free_host)(void *) = nullptr;
    CUresult (*mem_host_get_device_pointer)(CUdeviceptr *, void *, unsigned) = nullptr;
    CUresult (*mem_host_register)(void *, size_t, unsigned) = nullptr;
    CUresult (*mem_host_unregister)(void *) = nullptr;
    CUresult (*driver_get_version)(int *) = nullptr;
    // Used by the test launcher to allocate and fill device buffers.
    CUresult (*device_get)(CUdevice *, int) = nullptr;
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice) = nullptr;
    CUresult (*primary_ctx_release)(CUdevice) = nullptr;
    CUresult (*ctx_set_current)(CUcontext) = nullptr;
    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = nullptr;
    CUresult (*mem_free)(CUdeviceptr) = nullptr;
    CUresult (*get_error_string)(CUresult, const char **) = nullptr;
    // Before a kernel reads what GPUDirect RDMA wrote into GPU memory (optional).
    CUresult (*flush_gpu_direct_rdma_writes)(int target, int scope) = nullptr;
    // Not CUDA's: only the test suite's stand-in driver (tests/gpu/fake_cuda.cpp) has it,
    // and says 1 when told to (its "device memory" is host memory, which UCX reads
    // like any other), so that sends straight from GPU memory run without GPUDirect RDMA.
    int (*stand_in_device_memory_is_host)() = nullptr;
    // Likewise only the stand-in's: where this build embeds no fatbin (no nvcc), the image
    // naming the kernels it runs from their host-compiled source, so that the device path
    // is tested in every build. A real driver has no such entry: no kernels, no device path.
    int (*stand_in_kernel_image)(const void **data, size_t *size) = nullptr;
};

class GpuRuntime {
public:
    // The process-wide driver; loads it on first use unless disabled.
    static GpuRuntime &instance();

    // Disables loading one vendor's runtime (coll_gpurdma_cuda=0, coll_gpurdma_rocm=0);
    // must come before the first query.
    static void disable(Vendor vendor);

    bool available() const { return ok_; }
    const std::string &why_unavailable() const { return why_; }
    Vendor vendor() const { return vendor_; }
    // "CUDA" or "HIP" (or "no GPU runtime"), for messages.
    const char *vendor_name() const;
    // "CUDA IPC" or "HIP IPC": how a node's GPUs map each other's buffers, for messages.
    const char *ipc_name() const { return vendor_ == Vendor::Hip ? "HIP IPC" : "CUDA IPC"; }

    // Host for anything the driver does not know (or when it is not available);
    // OtherVendor for the other vendor's device memory, once other_vendor() found it.
    PointerInfo query(const void *ptr) const;

    // The other vendor's runtime, where the application has loaded it (never loaded here):
    // CUDA's in a HIP process, HIP's in a CUDA one (Vendor::None: none found yet).
    Vendor other_vendor() const;
    const char *other_vendor_name() const;
    // A synchronous copy with the other vendor's runtime (unified addressing: either
    // direction between its device memory and host memory).
    Status copy_other_vendor(void *dst, const void *src, size_t bytes) const;

    // cuMemcpy with unified addressing, in the context of the device buffer involved;
    // returns once the bytes are in place (cuMemcpy alone does not, into GPU memory).
    Status copy(void *dst, const void *src, size_t bytes, void *context) const;

    // Whether the network (UCX) reads this driver's device memory as host memory: the
    // stand-in driver's, when told so; never a real GPU's.
    bool device_memory_is_host() const
    {
        return ok_ && api_.stand_in_device_memory_is_host && api_.stand_in_device_memory_is_host() == 1;
    }

    // The resolved entry points (only meaningful when available()).
    const DriverApi &api() const { return api_; }

    // "cuFoo failed: <driver text> (error N)"; under HIP the call is named hipFoo.
    std::string error_text(const char *call, CUresult rc) const;
    // The same as a failed Status (GPURDMA_ERR_TRANSPORT).
    Status failure(const char *call, CUresult rc) const;

private:
    GpuRuntime();
    // Looks for the other vendor's runtime: at start, then whenever a query answers
    // "host" after the process has loaded another library (an application may load a
    // runtime at any time, after MPI_Init and its communicators too).
    void find_other_vendor() const;
    bool ok_ = false;
    Vendor vendor_ = Vendor::None;
    std::string why_;
    void *lib_ = nullptr;
    DriverApi api_;
    // The other vendor's entries, found by a const query (hence mutable): written once
    // under other_mutex_, then read without it.
    mutable std::mutex other_mutex_;
    mutable std::unique_ptr<DriverApi> other_api_;
    mutable std::atomic<const DriverApi *> other_{nullptr};
    mutable Vendor other_vendor_ = Vendor::None;  // set before other_ is published
    mutable std::atomic<unsigned long long> objects_added_{0};  // dl_iterate_phdr's count at the last look
};

// Makes a context current for a scope and restores the previous one (RAII), so the
// caller's current context is never changed behind its back.
class ContextScope : private NonCopyable {
public:
    explicit ContextScope(CUcontext ctx);
    ~ContextScope();

private:
    bool pushed_ = false;
};

}  // namespace gpurdma::gpu
