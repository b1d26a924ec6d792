// A stand-in libcuda.so.1 for machines without a GPU, so the device path's protocol
// (set-up votes, IPC handle exchange and cache, slices, barriers, in place, staging
// decisions) runs in the test suite. "Device memory" is memfd-backed host memory; an
// IPC handle names the exporter's pid and fd, opened through /proc; a kernel launch
// folds the sources with the host reduction in rank order, as the real kernel does;
// cuModuleLoadData checks the embedded image is a fatbin and cuModuleGetFunction that
// the kernel's name is in it; work on a stream is done at once, but cuStreamQuery says
// "not ready" once after each launch or copy, so the callers' polling runs too. It
// proves the protocol, not the CUDA kernels.
// Build: g++ -shared -fPIC -Wl,-Bsymbolic -I include -I src fake_cuda.cpp src/reduce/reduce_host.cpp
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "gpurdma/gpurdma.h"
#include "reduce/reduce_device.h"

namespace {

struct Alloc {
    uintptr_t base;
    size_t size;
    unsigned long long id;
    int fd;
    bool imported;
};
struct Handle {
    int pid;
    int fd;
    unsigned long long id;
    size_t size;
};
struct Function {
    gpurdma_op_t op;
    gpurdma_dtype_t dtype;
};

std::mutex g_mu;
std::vector<Alloc> g_allocs;
unsigned long long g_next_id = 1;
const unsigned char *g_image = nullptr;
size_t g_image_size = 0;
void *const kContext = reinterpret_cast<void *>(0xc0de);
std::atomic<bool> g_stream_busy{false};  // work enqueued since the last cuStreamQuery

Alloc *find(uintptr_t p)
{
    for (auto &a : g_allocs)
        if (p >= a.base && p < a.base + a.size) return &a;
    return nullptr;
}

}  // namespace

extern "C" {

int cuInit(unsigned)
{
    return 0;
}
int cuDriverGetVersion(int *v)
{
    *v = 13000;
    return 0;
}
int cuGetErrorString(int, const char **s)
{
    *s = "fake driver error";
    return 0;
}
int cuDeviceGet(int *d, int ordinal)
{
    *d = ordinal;
    return ordinal == 0 ? 0 : 101;
}
int cuDevicePrimaryCtxRetain(void **c, int)
{
    *c = kContext;
    return 0;
}
int cuDevicePrimaryCtxRelease_v2(int)
{
    return 0;
}
int cuCtxSetCurrent(void *)
{
    return 0;
}
int cuCtxPushCurrent_v2(void *)
{
    return 0;
}
int cuCtxPopCurrent_v2(void **c)
{
    if (c) *c = kContext;
    return 0;
}
int cuCtxGetDevice(int *d)
{
    *d = 0;
    return 0;
}
int cuDeviceGetAttribute(int *v, int attr, int)
{
    *v = attr == 16 ? 4 : 0;
    return 0;
}
int cuDeviceGetPCIBusId(char *s, int n, int)
{
    std::snprintf(s, size_t(n), "0000:00:00.0");
    return 0;
}
int cuDeviceGetByPCIBusId(int *d, const char *)
{
    *d = 0;
    return 0;
}
int cuDeviceCanAccessPeer(int *can, int, int)
{
    *can = 1;
    return 0;
}

int cuMemAlloc_v2(unsigned long long *p, size_t size)
{
    const int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, off_t(size ? size : 1)) != 0) return 2;
    void *m = mmap(nullptr, size ? size : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return 2;
    std::lock_guard<std::mutex> lock(g_mu);
    g_allocs.push_back({reinterpret_cast<uintptr_t>(m), size ? size : 1, g_next_id++, fd, false});
    *p = reinterpret_cast<uintptr_t>(m);
    return 0;
}

int cuMemFree_v2(unsigned long long p)
{
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto it = g_allocs.begin(); it != g_allocs.end(); ++it) {
        if (it->base == p && !it->imported) {
            munmap(reinterpret_cast<void *>(it->base), it->size);
            close(it->fd);
            g_allocs.erase(it);
            return 0;
        }
    }
    return 1;
}

// memory type 2 (device), buffer id, managed 0, context, device ordinal 0.
int cuPointerGetAttributes(unsigned n, int *attrs, void **data, unsigned long long ptr)
{
    std::lock_guard<std::mutex> lock(g_mu);
    const Alloc *a = find(ptr);
    for (unsigned i = 0; i < n; ++i) {
        switch (attrs[i]) {
            case 1: *static_cast<void **>(data[i]) = a ? kContext : nullptr; break;
            case 2: *static_cast<unsigned *>(data[i]) = a ? 2 : 0; break;
            case 7: *static_cast<unsigned long long *>(data[i]) = a ? a->id : 0; break;
            case 8: *static_cast<unsigned *>(data[i]) = 0; break;
            case 9: *static_cast<int *>(data[i]) = a ? 0 : -1; break;
            default: return 1;
        }
    }
    return 0;
}

int cuMemGetAddressRange_v2(unsigned long long *base, size_t *size, unsigned long long p)
{
    std::lock_guard<std::mutex> lock(g_mu);
    const Alloc *a = find(p);
    if (!a) return 1;
    *base = a->base;
    *size = a->size;
    return 0;
}

int cuMemcpy(unsigned long long d, unsigned long long s, size_t n)
{
    std::memmove(reinterpret_cast<void *>(d), reinterpret_cast<const void *>(s), n);
    return 0;
}
int cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *)
{
    g_stream_busy = true;
    return cuMemcpy(d, s, n);
}
int cuMemcpyAsync(unsigned long long d, unsigned long long s, size_t n, void *)
{
    g_stream_busy = true;
    return cuMemcpy(d, s, n);
}

int cuStreamCreate(void **s, unsigned)
{
    *s = reinterpret_cast<void *>(0x5);
    return 0;
}
int cuStreamDestroy_v2(void *)
{
    return 0;
}
int cuStreamSynchronize(void *)
{
    g_stream_busy = false;
    return 0;
}
int cuStreamQuery(void *)
{
    return g_stream_busy.exchange(false) ? 600 : 0;
}  // 600: CUDA_ERROR_NOT_READY

int cuIpcGetMemHandle(void *h, unsigned long long p)
{
    std::lock_guard<std::mutex> lock(g_mu);
    const Alloc *a = find(p);
    if (!a || a->base != p || a->imported) return 1;  // like CUDA: the base of an own allocation
    Handle x{getpid(), a->fd, a->id, a->size};
    std::memset(h, 0, 64);
    std::memcpy(h, &x, sizeof x);
    return 0;
}

int cuIpcOpenMemHandle_v2(unsigned long long *p, Handle h, unsigned)
{
    if (h.pid == getpid()) return 208;  // CUDA refuses to import its own memory
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", h.pid, h.fd);
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return 1;
    void *m = mmap(nullptr, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return 2;
    std::lock_guard<std::mutex> lock(g_mu);
    g_allocs.push_back({reinterpret_cast<uintptr_t>(m), h.size, g_next_id++, -1, true});
    *p = reinterpret_cast<uintptr_t>(m);
    return 0;
}
static_assert(sizeof(Handle) <= 64, "fits a CUipcMemHandle");

int cuIpcCloseMemHandle(unsigned long long p)
{
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto it = g_allocs.begin(); it != g_allocs.end(); ++it) {
        if (it->base == p && it->imported) {
            munmap(reinterpret_cast<void *>(it->base), it->size);
            g_allocs.erase(it);
            return 0;
        }
    }
    return 1;
}

int cuModuleLoadData(void **m, const void *image)
{
    uint32_t magic;
    uint16_t header;
    uint64_t body;
    std::memcpy(&magic, image, 4);
    std::memcpy(&header, static_cast<const char *>(image) + 6, 2);
    std::memcpy(&body, static_cast<const char *>(image) + 8, 8);
    if (magic != 0xBA55ED50u) return 200;  // CUDA_ERROR_INVALID_IMAGE
    g_image = static_cast<const unsigned char *>(image);
    g_image_size = header + body;
    *m = const_cast<void *>(image);
    return 0;
}
int cuModuleUnload(void *)
{
    return 0;
}

int cuModuleGetFunction(void **f, void *, const char *name)
{
    int op, dtype;
    if (std::sscanf(name, "gpurdma_rs_%d_%d", &op, &dtype) != 2) return 500;
    const std::string needle = std::string(name) + '\0';
    if (!memmem(g_image, g_image_size, needle.data(), needle.size())) return 500;  // CUDA_ERROR_NOT_FOUND
    *f = new Function{gpurdma_op_t(op), gpurdma_dtype_t(dtype)};
    return 0;
}

int cuLaunchKernel(void *f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **params,
                   void **)
{
    g_stream_busy = true;
    const auto *fn = static_cast<const Function *>(f);
    const auto &a = *static_cast<const gpurdma::reduce::device::ReduceArgs *>(params[0]);
    const size_t bytes = a.count * gpurdma_dtype_size(fn->dtype);
    std::vector<char> acc(static_cast<const char *>(a.src[0]), static_cast<const char *>(a.src[0]) + bytes);
    for (int s = 1; s < a.nsrc; ++s)
        if (gpurdma_reduce_local(fn->op, fn->dtype, acc.data(), acc.data(), a.src[s], a.count) != GPURDMA_OK) return 1;
    std::memcpy(a.dst, acc.data(), bytes);
    return 0;
}

}  // extern "C"
