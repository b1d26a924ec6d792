// The CUDA driver (libcuda.so.1) fills the entry table as it is: the table has its shape.
#include <dlfcn.h>

#include <type_traits>

#include "gpu/vendor_api.h"

namespace gpurdma::gpu {

bool load_cuda_api(DriverApi *api, void **lib_out, std::string *why, bool already_loaded)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | (already_loaded ? RTLD_NOLOAD : 0));
    if (!lib) {
        *why = "no CUDA driver (libcuda.so.1 not found)";
        return false;
    }
    // Versioned names first (cuda.h maps the plain name to them), plain name second.
    auto load = [lib](auto &fn, const char *name, const char *alt = nullptr) {
        void *p = dlsym(lib, name);
        if (!p && alt) p = dlsym(lib, alt);
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        return p != nullptr;
    };
    auto init = static_cast<CUresult (*)(unsigned)>(nullptr);
    DriverApi a;
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
        *why = "CUDA driver lacks the entry points gpurdma needs";
        dlclose(lib);
        return false;
    }
    const int rc = init(0);
    if (rc != 0) {
        *why = "cuInit failed (error " + std::to_string(rc) + "): no usable NVIDIA GPU";
        dlclose(lib);
        return false;
    }
    *api = a;
    *lib_out = lib;
    return true;
}

}  // namespace gpurdma::gpu
