// A stand-in libamdhip64.so.5 for machines without an AMD GPU: the CUDA stand-in
// (fake_cuda.cpp, included whole: its memory, streams, events, IPC, leak report, knobs
// and the kernels' own source run on the CPU) behind HIP's entry points, so that the GPU
// suites run through gpurdma's HIP adapters (src/gpu/hip_api.cpp) as they run through the
// CUDA driver's. What it adds is HIP's side of the contract, as HIP 5.7 defines it:
//  - a current device per thread (hipSetDevice, hipGetDevice) and no contexts; one device;
//  - the null stream is 0; CUDA's legacy handle (0x1) is no HIP stream: refused (400);
//  - hipPointerGetAttributes in HIP 5's numbering (host 0, device 1); memory it does not
//    know fails with hipErrorInvalidValue (1);
//  - a call that fails (with anything but hipErrorNotReady) leaves its error as the
//    calling thread's last error, which hipGetLastError returns and clears and
//    hipPeekAtLastError returns: the rule of HIP 6's runtime (clr's HIP_RETURN), the
//    stricter one for gpurdma (HIP 5 overwrote the last error with every call's result);
//  - hipIpcOpenMemHandle takes only hipIpcMemLazyEnablePeerAccess (0) as flags;
//  - hipDeviceGetAttribute answers the multiprocessor count (63 in HIP 5.7) only;
//  - hipModuleLoadData takes a clang offload bundle (hipcc --genco: the code objects the
//    build embeds) and finds the kernels' names in it, or, in a build without hipcc, the
//    image gpurdmaStandInKernelImage() gives; nothing else (an nvcc fatbin: 200).
// Built by make as tests/gpu/fake-hip/libamdhip64.so.5 (Makefile.am).
#include "fake_cuda.cpp"

namespace {

constexpr int kHipInvalidHandle = 400;
constexpr int kHipInvalidImage = 200;
constexpr int kHipAttrMultiprocessorCount = 63;
constexpr char kBundleMagic[] = "__CLANG_OFFLOAD_BUNDLE__";

thread_local int t_device = 0;
thread_local int t_last_error = 0;

// HIP's rule: a failed call's error stays the thread's last error ("not ready" is no failure).
int last(int rc)
{
    if (rc != kSuccess && rc != kNotReady) t_last_error = rc;
    return rc;
}

bool legacy_handle(void *stream)
{
    return reinterpret_cast<uintptr_t>(stream) == 1;
}

// hip_runtime_api.h's hipPointerAttribute_t.
struct HipPointerAttributes {
    int type;
    int device;
    void *device_pointer;
    void *host_pointer;
    int is_managed;
    unsigned allocation_flags;
};

struct HipIpcHandle {
    char reserved[64];
};

// A bundle's size: its entries' (offset, size) pairs after the magic and the count.
size_t bundle_size(const unsigned char *image)
{
    uint64_t entries = 0;
    std::memcpy(&entries, image + 24, 8);
    size_t end = 32, at = 32;
    for (uint64_t i = 0; i < entries && i < 64; ++i) {
        uint64_t offset = 0, size = 0, triple = 0;
        std::memcpy(&offset, image + at, 8);
        std::memcpy(&size, image + at + 8, 8);
        std::memcpy(&triple, image + at + 16, 8);
        at += 24 + triple;
        end = std::max<size_t>({end, at, offset + size});
    }
    return end;
}

}  // namespace

extern "C" {

int hipInit(unsigned flags)
{
    return last(flags ? kInvalidValue : cuInit(0));
}
int hipRuntimeGetVersion(int *v)
{
    *v = 50731921;  // HIP_VERSION of 5.7.31921, Debian 13's
    return kSuccess;
}
int hipDriverGetVersion(int *v)
{
    *v = 50731921;
    return kSuccess;
}
int hipGetDeviceCount(int *n)
{
    *n = 1;
    return kSuccess;
}
int hipGetDevice(int *d)
{
    *d = t_device;
    return kSuccess;
}
int hipSetDevice(int d)
{
    if (d != 0) return last(101);  // hipErrorInvalidDevice
    t_device = d;
    return kSuccess;
}
int hipGetLastError()
{
    const int rc = t_last_error;
    t_last_error = kSuccess;
    return rc;
}
int hipPeekAtLastError()
{
    return t_last_error;
}
const char *hipGetErrorString(int rc)
{
    const char *text = nullptr;
    cuGetErrorString(rc, &text);
    return text;
}
int hipDeviceGetAttribute(int *v, int attribute, int device)
{
    if (attribute != kHipAttrMultiprocessorCount || device != 0) return last(kInvalidValue);
    return last(cuDeviceGetAttribute(v, 16, device));
}
int hipDeviceGetPCIBusId(char *s, int n, int device)
{
    return last(cuDeviceGetPCIBusId(s, n, device));
}
int hipDeviceGetByPCIBusId(int *d, const char *id)
{
    return last(cuDeviceGetByPCIBusId(d, id));
}
int hipDeviceCanAccessPeer(int *can, int device, int peer)
{
    return last(cuDeviceCanAccessPeer(can, device, peer));
}

int hipPointerGetAttributes(HipPointerAttributes *out, const void *p)
{
    unsigned type = 0;
    int attrs[] = {2};
    void *data[] = {&type};
    cuPointerGetAttributes(1, attrs, data, reinterpret_cast<uintptr_t>(p));
    if (type == 0) return last(kInvalidValue);  // HIP 5: memory it does not know is an error
    *out = HipPointerAttributes{};
    out->type = type == 2 ? 1 : 0;  // hipMemoryTypeDevice : hipMemoryTypeHost
    out->device = 0;
    out->device_pointer = const_cast<void *>(p);
    out->host_pointer = type == 1 ? const_cast<void *>(p) : nullptr;
    return kSuccess;
}
int hipPointerGetAttribute(void *data, int attribute, void *p)
{
    if (attribute != 7) return last(kInvalidValue);  // HIP_POINTER_ATTRIBUTE_BUFFER_ID only
    unsigned long long id = 0;
    int attrs[] = {7};
    void *out[] = {&id};
    cuPointerGetAttributes(1, attrs, out, reinterpret_cast<uintptr_t>(p));
    if (id == 0) return last(kInvalidValue);
    *static_cast<unsigned long long *>(data) = id;
    return kSuccess;
}
int hipMemGetAddressRange(void **base, size_t *size, void *p)
{
    unsigned long long b = 0;
    const int rc = cuMemGetAddressRange_v2(&b, size, reinterpret_cast<uintptr_t>(p));
    if (rc == kSuccess) *base = reinterpret_cast<void *>(b);
    return last(rc);
}

int hipMalloc(void **p, size_t size)
{
    unsigned long long d = 0;
    const int rc = cuMemAlloc_v2(&d, size);
    if (rc == kSuccess) *p = reinterpret_cast<void *>(d);
    return last(rc);
}
int hipFree(void *p)
{
    return p ? last(cuMemFree_v2(reinterpret_cast<uintptr_t>(p))) : kSuccess;
}
int hipHostMalloc(void **p, size_t size, unsigned flags)
{
    return last(cuMemHostAlloc(p, size, flags));
}
int hipHostFree(void *p)
{
    return last(cuMemFreeHost(p));
}
int hipHostRegister(void *p, size_t size, unsigned flags)
{
    return last(cuMemHostRegister_v2(p, size, flags));
}
int hipHostUnregister(void *p)
{
    return last(cuMemHostUnregister(p));
}
int hipHostGetDevicePointer(void **d, void *p, unsigned flags)
{
    unsigned long long out = 0;
    const int rc = cuMemHostGetDevicePointer_v2(&out, p, flags);
    if (rc == kSuccess) *d = reinterpret_cast<void *>(out);
    return last(rc);
}

int hipMemcpy(void *dst, const void *src, size_t n, int kind)
{
    if (kind < 0 || kind > 4) return last(kInvalidValue);
    return last(cuMemcpy(reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), n));
}
int hipMemcpyHtoD(void *dst, void *src, size_t n)
{
    return last(cuMemcpyHtoD_v2(reinterpret_cast<uintptr_t>(dst), src, n));
}
int hipMemcpyDtoH(void *dst, void *src, size_t n)
{
    return last(cuMemcpyDtoH_v2(dst, reinterpret_cast<uintptr_t>(src), n));
}
int hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream)
{
    if (kind < 0 || kind > 4) return last(kInvalidValue);
    if (legacy_handle(stream)) return last(kHipInvalidHandle);
    return last(cuMemcpyAsync(reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), n, stream));
}
int hipMemcpyDtoDAsync(void *dst, void *src, size_t n, void *stream)
{
    if (legacy_handle(stream)) return last(kHipInvalidHandle);
    return last(cuMemcpyDtoDAsync_v2(reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), n, stream));
}
int hipMemcpyDtoHAsync(void *dst, void *src, size_t n, void *stream)
{
    if (legacy_handle(stream)) return last(kHipInvalidHandle);
    return last(cuMemcpyDtoHAsync_v2(dst, reinterpret_cast<uintptr_t>(src), n, stream));
}
int hipMemcpyHtoDAsync(void *dst, void *src, size_t n, void *stream)
{
    if (legacy_handle(stream)) return last(kHipInvalidHandle);
    return last(cuMemcpyHtoDAsync_v2(reinterpret_cast<uintptr_t>(dst), src, n, stream));
}

int hipStreamCreateWithFlags(void **s, unsigned flags)
{
    return last(cuStreamCreate(s, flags));
}
int hipStreamDestroy(void *s)
{
    return last(legacy_handle(s) ? kHipInvalidHandle : cuStreamDestroy_v2(s));
}
int hipStreamSynchronize(void *s)
{
    return last(legacy_handle(s) ? kHipInvalidHandle : cuStreamSynchronize(s));
}
int hipStreamQuery(void *s)
{
    return last(legacy_handle(s) ? kHipInvalidHandle : cuStreamQuery(s));
}
int hipStreamWaitEvent(void *s, void *e, unsigned flags)
{
    return last(legacy_handle(s) ? kHipInvalidHandle : cuStreamWaitEvent(s, e, flags));
}
int hipEventCreateWithFlags(void **e, unsigned flags)
{
    return last(cuEventCreate(e, flags));
}
int hipEventDestroy(void *e)
{
    return last(cuEventDestroy_v2(e));
}
int hipEventRecord(void *e, void *s)
{
    return last(legacy_handle(s) ? kHipInvalidHandle : cuEventRecord(e, s));
}
int hipEventQuery(void *e)
{
    return last(cuEventQuery(e));
}
int hipEventSynchronize(void *e)
{
    return last(cuEventSynchronize(e));
}
int hipEventElapsedTime(float *ms, void *start, void *end)
{
    return last(cuEventElapsedTime(ms, start, end));
}

int hipIpcGetMemHandle(HipIpcHandle *h, void *p)
{
    return last(cuIpcGetMemHandle(h, reinterpret_cast<uintptr_t>(p)));
}
int hipIpcOpenMemHandle(void **p, HipIpcHandle h, unsigned flags)
{
    if (flags != 0) return last(kInvalidValue);  // hipIpcMemLazyEnablePeerAccess is 0
    Handle handle;
    std::memcpy(&handle, h.reserved, sizeof handle);
    unsigned long long mapped = 0;
    const int rc = cuIpcOpenMemHandle_v2(&mapped, handle, 1);
    if (rc == kSuccess) *p = reinterpret_cast<void *>(mapped);
    return last(rc);
}
int hipIpcCloseMemHandle(void *p)
{
    return last(cuIpcCloseMemHandle(reinterpret_cast<uintptr_t>(p)));
}

int hipModuleLoadData(void **m, const void *image)
{
    const auto *bytes = static_cast<const unsigned char *>(image);
    const void *stand_in = nullptr;
    size_t stand_in_size = 0;
    gpurdmaStandInKernelImage(&stand_in, &stand_in_size);
    if (image == stand_in) return last(cuModuleLoadData(m, image));
    if (std::memcmp(bytes, kBundleMagic, sizeof kBundleMagic - 1) != 0) return last(kHipInvalidImage);
    std::lock_guard<std::mutex> lock(g_mu);
    g_image = bytes;
    g_image_size = bundle_size(bytes);
    *m = const_cast<void *>(image);
    return kSuccess;
}
int hipModuleUnload(void *m)
{
    return last(cuModuleUnload(m));
}
int hipModuleGetFunction(void **f, void *m, const char *name)
{
    return last(cuModuleGetFunction(f, m, name));
}
int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared_bytes, void *stream, void **params, void **extra)
{
    if (legacy_handle(stream)) return last(kHipInvalidHandle);
    return last(cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra));
}

}  // extern "C"
