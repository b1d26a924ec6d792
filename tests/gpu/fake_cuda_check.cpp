// Checks the stand-in driver's own semantics (tests/gpu/fake_cuda.cpp), so that what the
// device path's tests prove with it holds: streams run in order, events complete and time
// what they should, a stream waits for another's event, a copy reads its source when it
// runs, page-locked memory is tracked with CUDA's errors, the leak report at exit, the
// copy bandwidth knobs (per direction too), the jitter knob and the legacy null stream.
// Each check prints PASS or FAIL; the program exits 1 on any failure.
// Usage: fake_cuda_check PATH/libcuda.so.1   (runs itself again for the at-exit checks)
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gpurdma/gpurdma.h"
#include "reduce/reduce_device.h"

namespace {

using Clock = std::chrono::steady_clock;
using Ptr = unsigned long long;
constexpr int kNotReady = 600;
constexpr int kAlreadyRegistered = 712;
constexpr int kNotRegistered = 713;

struct Api {
    int (*ctx_synchronize)();
    int (*mem_alloc)(Ptr *, size_t);
    int (*mem_free)(Ptr);
    int (*pointer_get_attributes)(unsigned, int *, void **, Ptr);
    int (*host_alloc)(void **, size_t, unsigned);
    int (*free_host)(void *);
    int (*host_register)(void *, size_t, unsigned);
    int (*host_unregister)(void *);
    int (*host_get_device_pointer)(Ptr *, void *, unsigned);
    int (*memcpy_sync)(Ptr, Ptr, size_t);
    int (*memcpy_async)(Ptr, Ptr, size_t, void *);
    int (*memcpy_htod_async)(Ptr, const void *, size_t, void *);
    int (*memcpy_dtoh_async)(void *, Ptr, size_t, void *);
    int (*memcpy_dtod_async)(Ptr, Ptr, size_t, void *);
    int (*stream_create)(void **, unsigned);
    int (*stream_destroy)(void *);
    int (*stream_synchronize)(void *);
    int (*stream_query)(void *);
    int (*stream_wait_event)(void *, void *, unsigned);
    int (*launch_host_func)(void *, void (*)(void *), void *);
    int (*event_create)(void **, unsigned);
    int (*event_destroy)(void *);
    int (*event_record)(void *, void *);
    int (*event_query)(void *);
    int (*event_synchronize)(void *);
    int (*event_elapsed_time)(float *, void *, void *);
    int (*module_load_data)(void **, const void *);
    int (*module_get_function)(void **, void *, const char *);
    int (*launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                         void **);
    int (*device_memory_is_host)();  // not CUDA's: the stand-in's own
    int (*kernel_image)(const void **, size_t *);  // likewise
    int (*device_get_attribute)(int *, int, int);
    int (*flush_gdr_writes)(int, int);
};
Api api;

bool load(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        std::printf("FAIL load %s: %s\n", path, dlerror());
        return false;
    }
    bool ok = true;
    auto sym = [&](auto &fn, const char *name) {
        void *p = dlsym(lib, name);
        if (!p) {
            std::printf("FAIL symbol %s missing\n", name);
            ok = false;
        }
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    sym(api.ctx_synchronize, "cuCtxSynchronize");
    sym(api.mem_alloc, "cuMemAlloc_v2");
    sym(api.mem_free, "cuMemFree_v2");
    sym(api.pointer_get_attributes, "cuPointerGetAttributes");
    sym(api.host_alloc, "cuMemHostAlloc");
    sym(api.free_host, "cuMemFreeHost");
    sym(api.host_register, "cuMemHostRegister_v2");
    sym(api.host_unregister, "cuMemHostUnregister");
    sym(api.host_get_device_pointer, "cuMemHostGetDevicePointer_v2");
    sym(api.memcpy_sync, "cuMemcpy");
    sym(api.memcpy_async, "cuMemcpyAsync");
    sym(api.memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
    sym(api.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
    sym(api.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
    sym(api.stream_create, "cuStreamCreate");
    sym(api.stream_destroy, "cuStreamDestroy_v2");
    sym(api.stream_synchronize, "cuStreamSynchronize");
    sym(api.stream_query, "cuStreamQuery");
    sym(api.stream_wait_event, "cuStreamWaitEvent");
    sym(api.launch_host_func, "cuLaunchHostFunc");
    sym(api.event_create, "cuEventCreate");
    sym(api.event_destroy, "cuEventDestroy_v2");
    sym(api.event_record, "cuEventRecord");
    sym(api.event_query, "cuEventQuery");
    sym(api.event_synchronize, "cuEventSynchronize");
    sym(api.event_elapsed_time, "cuEventElapsedTime");
    sym(api.module_load_data, "cuModuleLoadData");
    sym(api.module_get_function, "cuModuleGetFunction");
    sym(api.launch_kernel, "cuLaunchKernel");
    sym(api.device_memory_is_host, "gpurdmaStandInDeviceMemoryIsHost");
    sym(api.kernel_image, "gpurdmaStandInKernelImage");
    sym(api.device_get_attribute, "cuDeviceGetAttribute");
    sym(api.flush_gdr_writes, "cuFlushGPUDirectRDMAWrites");
    return ok;
}

int failures = 0;

// One named check: every condition must hold; the first that does not is reported.
class Check {
public:
    explicit Check(const char *name) : name_(name) {}
    ~Check()
    {
        if (why_.empty()) {
            std::printf("PASS %s\n", name_);
        } else {
            std::printf("FAIL %s: %s\n", name_, why_.c_str());
            ++failures;
        }
        std::fflush(stdout);
    }
    bool expect(bool cond, const std::string &what)
    {
        if (!cond && why_.empty()) why_ = what;
        return cond;
    }
    bool rc(int got, int want, const char *call)
    {
        return expect(got == want,
                      std::string(call) + " returned " + std::to_string(got) + ", expected " + std::to_string(want));
    }

private:
    const char *name_;
    std::string why_;
};

// The int32 SUM kernel's arguments doubling `src` into `dst` (both sources the same).
gpurdma::reduce::device::ReduceArgs doubling(Ptr src, Ptr dst, size_t count)
{
    gpurdma::reduce::device::ReduceArgs args{};
    args.src[0] = args.src[1] = reinterpret_cast<void *>(src);
    args.dst = reinterpret_cast<void *>(dst);
    args.count = count;
    args.nsrc = 2;
    return args;
}

// Holds a stream at a point of its queue (cuLaunchHostFunc) until opened; bounded.
struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    void release()
    {
        std::lock_guard<std::mutex> lock(mu);
        open = true;
        cv.notify_all();
    }
    bool open_now()
    {
        std::lock_guard<std::mutex> lock(mu);
        return open;
    }
    static void wait(void *p)
    {
        auto *g = static_cast<Gate *>(p);
        std::unique_lock<std::mutex> lock(g->mu);
        g->cv.wait_for(lock, std::chrono::seconds(30), [g] { return g->open; });
    }
};

Ptr as_ptr(const void *p)
{
    return reinterpret_cast<Ptr>(p);
}

// The int32 sum kernel from a minimal image: the fatbin magic and the kernel's name.
void *sum_int32_kernel()
{
    static char name[32];
    gpurdma::reduce::device::kernel_name(GPURDMA_SUM, GPURDMA_INT32, name);
    static std::vector<unsigned char> image(16);
    const uint32_t magic = 0xBA55ED50u;
    const uint16_t header = 16;
    const uint64_t body = std::strlen(name) + 1;
    std::memcpy(image.data(), &magic, 4);
    std::memcpy(image.data() + 6, &header, 2);
    std::memcpy(image.data() + 8, &body, 8);
    image.resize(16);
    image.insert(image.end(), name, name + body);
    void *module = nullptr, *fn = nullptr;
    if (api.module_load_data(&module, image.data()) || api.module_get_function(&fn, module, name)) return nullptr;
    return fn;
}

// A stream's work runs in enqueue order, kernels included: a chain of copies, each
// reading what the one before wrote, then a kernel doubling the result, all enqueued
// behind a closed gate so nothing runs before the whole chain is queued.
void stream_fifo()
{
    Check c("stream FIFO order (copies and a kernel behind a gate)");
    constexpr int kLinks = 32;
    constexpr size_t kCount = 1024;
    const size_t bytes = kCount * sizeof(int32_t);
    void *fn = sum_int32_kernel();
    if (!c.expect(fn != nullptr, "cuModuleLoadData or cuModuleGetFunction failed")) return;
    std::vector<Ptr> dev(kLinks + 1);
    for (auto &d : dev) c.rc(api.mem_alloc(&d, bytes), 0, "cuMemAlloc_v2");
    int32_t *host = nullptr;
    c.rc(api.host_alloc(reinterpret_cast<void **>(&host), 2 * bytes, 0), 0, "cuMemHostAlloc");
    for (size_t i = 0; i < kCount; ++i) host[i] = int32_t(i * 7 + 1);
    void *s = nullptr;
    c.rc(api.stream_create(&s, 1), 0, "cuStreamCreate");
    Gate gate;
    c.rc(api.launch_host_func(s, Gate::wait, &gate), 0, "cuLaunchHostFunc");
    c.rc(api.memcpy_htod_async(dev[0], host, bytes, s), 0, "cuMemcpyHtoDAsync_v2");
    for (int i = 0; i < kLinks - 1; ++i) c.rc(api.memcpy_dtod_async(dev[i + 1], dev[i], bytes, s), 0, "cuMemcpyDtoD");
    gpurdma::reduce::device::ReduceArgs args = doubling(dev[kLinks - 1], dev[kLinks], kCount);
    void *params[] = {&args};
    c.rc(api.launch_kernel(fn, 1, 1, 1, 128, 1, 1, 0, s, params, nullptr), 0, "cuLaunchKernel");
    args = {};  // the launch copied its parameters, as CUDA does
    int32_t *out = host + kCount;
    c.rc(api.memcpy_dtoh_async(out, dev[kLinks], bytes, s), 0, "cuMemcpyDtoHAsync_v2");
    c.rc(api.stream_query(s), kNotReady, "cuStreamQuery behind the gate");
    c.expect(out[5] == 0, "the stream ran before the gate opened");
    gate.release();
    c.rc(api.stream_synchronize(s), 0, "cuStreamSynchronize");
    c.rc(api.stream_query(s), 0, "cuStreamQuery after cuStreamSynchronize");
    for (size_t i = 0; i < kCount; ++i)
        if (!c.expect(out[i] == 2 * host[i], "element " + std::to_string(i) + " is " + std::to_string(out[i]) +
                                                 ", expected " + std::to_string(2 * host[i])))
            break;
    c.rc(api.stream_destroy(s), 0, "cuStreamDestroy_v2");
    c.rc(api.free_host(host), 0, "cuMemFreeHost");
    for (auto d : dev) c.rc(api.mem_free(d), 0, "cuMemFree_v2");
}

// A kernel addresses device memory and page-locked host memory (registered or
// allocated), nothing else: pageable host memory is refused with 700 (illegal address),
// as a span running past a registration's end. And the host-memory flag says what its
// environment says.
void kernel_addresses()
{
    Check c("kernel arguments: device or page-locked memory only; GPURDMA_FAKE_CUDA_HOST_MEMORY");
    constexpr int kIllegalAddress = 700;
    constexpr size_t kCount = 1024;
    const size_t bytes = kCount * sizeof(int32_t);
    void *fn = sum_int32_kernel();
    if (!c.expect(fn != nullptr, "cuModuleLoadData or cuModuleGetFunction failed")) return;
    Ptr dev = 0;
    c.rc(api.mem_alloc(&dev, bytes), 0, "cuMemAlloc_v2");
    std::vector<int32_t> pageable(2 * kCount, 3);
    void *s = nullptr;
    c.rc(api.stream_create(&s, 1), 0, "cuStreamCreate");
    auto launch = [&](Ptr src, Ptr dst, size_t count) {
        gpurdma::reduce::device::ReduceArgs args = doubling(src, dst, count);
        void *params[] = {&args};
        return api.launch_kernel(fn, 1, 1, 1, 128, 1, 1, 0, s, params, nullptr);
    };
    c.rc(launch(as_ptr(pageable.data()), dev, kCount), kIllegalAddress, "cuLaunchKernel reading pageable memory");
    c.rc(launch(dev, as_ptr(pageable.data()), kCount), kIllegalAddress, "cuLaunchKernel writing pageable memory");
    c.rc(api.host_register(pageable.data(), bytes, 2), 0, "cuMemHostRegister_v2");
    c.rc(launch(as_ptr(pageable.data()), dev, kCount), 0, "cuLaunchKernel reading registered memory");
    c.rc(launch(as_ptr(pageable.data()), dev, kCount + 1), kIllegalAddress,
         "cuLaunchKernel reading one element past the registration");
    c.rc(api.stream_synchronize(s), 0, "cuStreamSynchronize");
    int32_t out[4] = {};
    c.rc(api.memcpy_sync(as_ptr(out), dev, sizeof out), 0, "cuMemcpy");
    c.expect(out[0] == 6 && out[3] == 6, "the kernel reading registered memory computed " + std::to_string(out[0]));
    c.rc(api.host_unregister(pageable.data()), 0, "cuMemHostUnregister");
    c.rc(api.stream_destroy(s), 0, "cuStreamDestroy_v2");
    c.rc(api.mem_free(dev), 0, "cuMemFree_v2");
    const char *flag = std::getenv("GPURDMA_FAKE_CUDA_HOST_MEMORY");
    c.rc(api.device_memory_is_host(), flag && std::string(flag) == "1" ? 1 : 0, "gpurdmaStandInDeviceMemoryIsHost");
}

// A launch's shape is checked as a GPU checks it, before anything is queued: zero or
// oversized grids and blocks, more than 1024 threads a block, `extra`: invalid value
// (1); more threads than the kernels' __launch_bounds__: out of resources (701). A
// legal shape the component never uses (a 3-D block, several blocks) still computes
// every element once.
void launch_limits()
{
    Check c("launch shape: what a GPU refuses, and a legal 3-D shape");
    constexpr int kInvalid = 1, kOutOfResources = 701;
    constexpr size_t kCount = 1000;
    void *fn = sum_int32_kernel();
    if (!c.expect(fn != nullptr, "cuModuleLoadData or cuModuleGetFunction failed")) return;
    Ptr dev = 0, out = 0;
    c.rc(api.mem_alloc(&dev, kCount * 4), 0, "cuMemAlloc_v2");
    c.rc(api.mem_alloc(&out, kCount * 4), 0, "cuMemAlloc_v2");
    std::vector<int32_t> in(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = int32_t(i) - 300;
    c.rc(api.memcpy_sync(dev, as_ptr(in.data()), kCount * 4), 0, "cuMemcpy");
    // From pageable memory the copy lands later, on the null stream: a non-blocking
    // stream's kernel reads it only after that stream is waited for.
    c.rc(api.stream_synchronize(nullptr), 0, "cuStreamSynchronize (null stream)");
    void *s = nullptr;
    c.rc(api.stream_create(&s, 1), 0, "cuStreamCreate");
    gpurdma::reduce::device::ReduceArgs args = doubling(dev, out, kCount);
    void *params[] = {&args};
    void *extra[] = {nullptr};
    auto launch = [&](unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
        return api.launch_kernel(fn, gx, gy, gz, bx, by, bz, 0, s, params, nullptr);
    };
    c.rc(launch(0, 1, 1, 64, 1, 1), kInvalid, "cuLaunchKernel with no blocks");
    c.rc(launch(1, 65536, 1, 64, 1, 1), kInvalid, "cuLaunchKernel with 65536 blocks in y");
    c.rc(launch(1, 1, 1, 0, 1, 1), kInvalid, "cuLaunchKernel with an empty block");
    c.rc(launch(1, 1, 1, 1025, 1, 1), kInvalid, "cuLaunchKernel with 1025 threads a block");
    c.rc(launch(1, 1, 1, 32, 32, 2), kInvalid, "cuLaunchKernel with a 32 x 32 x 2 block");
    c.rc(launch(1, 1, 1, 1, 1, 65), kInvalid, "cuLaunchKernel with 65 threads in z");
    c.rc(launch(1, 1, 1, gpurdma::reduce::device::kThreadsPerBlock + 1, 1, 1), kOutOfResources,
         "cuLaunchKernel over the kernels' launch bound");
    c.rc(api.launch_kernel(fn, 1, 1, 1, 64, 1, 1, 0, s, params, extra), kInvalid, "cuLaunchKernel with extra");
    c.rc(api.launch_kernel(fn, 1, 1, 1, 64, 1, 1, 0, s, nullptr, nullptr), kInvalid, "cuLaunchKernel without params");
    c.rc(launch(3, 2, 1, 8, 4, 2), 0, "cuLaunchKernel on a 3 x 2 grid of 8 x 4 x 2 blocks");
    c.rc(api.stream_synchronize(s), 0, "cuStreamSynchronize");
    std::vector<int32_t> got(kCount);
    c.rc(api.memcpy_sync(as_ptr(got.data()), out, kCount * 4), 0, "cuMemcpy");
    for (size_t i = 0; i < kCount; ++i)
        if (!c.expect(got[i] == 2 * in[i], "element " + std::to_string(i) + " is " + std::to_string(got[i]))) break;
    c.rc(api.stream_destroy(s), 0, "cuStreamDestroy_v2");
    c.rc(api.mem_free(dev), 0, "cuMemFree_v2");
    c.rc(api.mem_free(out), 0, "cuMemFree_v2");
}

// The image a build without nvcc loads: a fatbin header, then every kernel's name, each
// resolving to the host-compiled entry; a name outside it is not found.
void stand_in_image()
{
    Check c("the stand-in's kernel image names every kernel the device supports");
    const void *data = nullptr;
    size_t size = 0;
    c.rc(api.kernel_image(&data, &size), 0, "gpurdmaStandInKernelImage");
    if (!c.expect(data && size > 16, "an empty image")) return;
    void *module = nullptr;
    c.rc(api.module_load_data(&module, data), 0, "cuModuleLoadData(stand-in image)");
    int found = 0;
    for (int o = 0; o < GPURDMA_OP_COUNT; ++o)
        for (int d = 0; d < GPURDMA_DTYPE_COUNT; ++d) {
            if (!gpurdma::reduce::device::device_supported(gpurdma_op_t(o), gpurdma_dtype_t(d))) continue;
            char name[32];
            gpurdma::reduce::device::kernel_name(gpurdma_op_t(o), gpurdma_dtype_t(d), name);
            void *fn = nullptr;
            found += api.module_get_function(&fn, module, name) == 0 && fn;
        }
    c.expect(found == 112, std::to_string(found) + " of the 112 device kernels found");
    void *fn = nullptr;
    c.rc(api.module_get_function(&fn, module, "gpurdma_rs_99_99"), 500, "cuModuleGetFunction(gpurdma_rs_99_99)");
}

// GPUDirect RDMA writes: the device needs them flushed (ordering 0, or the environment's),
// and cuFlushGPUDirectRDMAWrites takes only the current context and a real scope.
void gdr_flush()
{
    Check c("GPUDirect RDMA writes: ordering and flush");
    int v = -1;
    c.rc(api.device_get_attribute(&v, 117, 0), 0, "cuDeviceGetAttribute(flush options)");
    c.expect(v == 1, "flush options " + std::to_string(v) + ", want 1 (cuFlushGPUDirectRDMAWrites)");
    c.rc(api.device_get_attribute(&v, 118, 0), 0, "cuDeviceGetAttribute(writes ordering)");
    const char *ordering = std::getenv("GPURDMA_FAKE_CUDA_GDR_ORDERING");
    c.expect(v == (ordering ? std::atoi(ordering) : 0), "writes ordering " + std::to_string(v));
    c.rc(api.flush_gdr_writes(0, 100), 0, "cuFlushGPUDirectRDMAWrites(current context, owner)");
    c.rc(api.flush_gdr_writes(0, 200), 0, "cuFlushGPUDirectRDMAWrites(current context, all devices)");
    c.rc(api.flush_gdr_writes(1, 100), 1, "cuFlushGPUDirectRDMAWrites(no such target)");
    c.rc(api.flush_gdr_writes(0, 7), 1, "cuFlushGPUDirectRDMAWrites(no such scope)");
}

// An event completes when the work before it on its stream has; elapsed time is between
// completions, on a real clock.
void events()
{
    Check c("event record, query, synchronize, elapsed time");
    void *s = nullptr, *e0 = nullptr, *e1 = nullptr, *untimed = nullptr;
    c.rc(api.stream_create(&s, 1), 0, "cuStreamCreate");
    c.rc(api.event_create(&e0, 0), 0, "cuEventCreate");
    c.rc(api.event_create(&e1, 0), 0, "cuEventCreate");
    c.rc(api.event_create(&untimed, 2), 0, "cuEventCreate(disable timing)");
    c.rc(api.event_query(e1), 0, "cuEventQuery on an event never recorded");
    float ms = -1;
    c.rc(api.event_elapsed_time(&ms, e0, e1), 400, "cuEventElapsedTime of events never recorded");
    Gate gate;
    c.rc(api.event_record(e0, s), 0, "cuEventRecord");
    c.rc(api.launch_host_func(s, Gate::wait, &gate), 0, "cuLaunchHostFunc");
    c.rc(api.event_record(e1, s), 0, "cuEventRecord");
    c.rc(api.event_record(untimed, s), 0, "cuEventRecord");
    c.rc(api.event_query(e1), kNotReady, "cuEventQuery before the work before it ran");
    c.rc(api.event_elapsed_time(&ms, e0, e1), kNotReady, "cuEventElapsedTime before completion");
    c.rc(api.event_synchronize(e0), 0, "cuEventSynchronize on the record before the hold");
    std::this_thread::sleep_for(std::chrono::milliseconds(40));  // e0 completed before this began
    c.rc(api.event_query(e1), kNotReady, "cuEventQuery while the stream is held");
    gate.release();
    c.rc(api.event_synchronize(e1), 0, "cuEventSynchronize");
    c.rc(api.event_query(e1), 0, "cuEventQuery after cuEventSynchronize");
    c.rc(api.event_elapsed_time(&ms, e0, e1), 0, "cuEventElapsedTime");
    c.expect(ms >= 40.0f && ms < 30000.0f, "elapsed " + std::to_string(ms) + " ms across a 40 ms hold");
    c.rc(api.event_elapsed_time(&ms, e0, untimed), 400, "cuEventElapsedTime on a disable-timing event");
    c.rc(api.stream_synchronize(s), 0, "cuStreamSynchronize");
    c.rc(api.event_destroy(e0), 0, "cuEventDestroy_v2");
    c.rc(api.event_destroy(e1), 0, "cuEventDestroy_v2");
    c.rc(api.event_destroy(untimed), 0, "cuEventDestroy_v2");
    c.rc(api.event_query(e0), 400, "cuEventQuery on a destroyed event");
    c.rc(api.stream_destroy(s), 0, "cuStreamDestroy_v2");
}

// Stream B's work after cuStreamWaitEvent waits for the event recorded on stream A.
void wait_event()
{
    Check c("cuStreamWaitEvent across two streams");
    void *a = nullptr, *b = nullptr, *ev = nullptr, *done = nullptr;
    c.rc(api.stream_create(&a, 1), 0, "cuStreamCreate");
    c.rc(api.stream_create(&b, 1), 0, "cuStreamCreate");
    c.rc(api.event_create(&ev, 2), 0, "cuEventCreate");
    c.rc(api.event_create(&done, 2), 0, "cuEventCreate");
    Ptr d = 0;
    c.rc(api.mem_alloc(&d, 4096), 0, "cuMemAlloc_v2");
    char *pinned = nullptr;
    c.rc(api.host_alloc(reinterpret_cast<void **>(&pinned), 8192, 1), 0, "cuMemHostAlloc");
    std::memset(pinned, 'a', 4096);
    std::memset(pinned + 4096, 0, 4096);
    Gate gate;
    c.rc(api.launch_host_func(a, Gate::wait, &gate), 0, "cuLaunchHostFunc");
    c.rc(api.memcpy_htod_async(d, pinned, 4096, a), 0, "cuMemcpyHtoDAsync_v2 on A");
    c.rc(api.event_record(ev, a), 0, "cuEventRecord on A");
    c.rc(api.stream_wait_event(b, ev, 0), 0, "cuStreamWaitEvent(B, A's event)");
    c.rc(api.memcpy_dtoh_async(pinned + 4096, d, 4096, b), 0, "cuMemcpyDtoHAsync_v2 on B");
    c.rc(api.event_record(done, b), 0, "cuEventRecord on B");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c.rc(api.event_query(done), kNotReady, "B's event while A is held");
    c.rc(api.stream_query(b), kNotReady, "cuStreamQuery(B) while A is held");
    c.expect(pinned[4096] == 0, "B's copy ran before A's event");
    gate.release();
    c.rc(api.stream_synchronize(b), 0, "cuStreamSynchronize(B)");
    c.expect(pinned[4096] == 'a' && pinned[8191] == 'a', "B copied before A's copy completed");
    c.rc(api.stream_wait_event(b, ev, 7), 1, "cuStreamWaitEvent with unknown flags");
    c.rc(api.stream_synchronize(a), 0, "cuStreamSynchronize(A)");
    c.rc(api.event_destroy(ev), 0, "cuEventDestroy_v2");
    c.rc(api.event_destroy(done), 0, "cuEventDestroy_v2");
    c.rc(api.stream_destroy(a), 0, "cuStreamDestroy_v2");
    c.rc(api.stream_destroy(b), 0, "cuStreamDestroy_v2");
    c.rc(api.free_host(pinned), 0, "cuMemFreeHost");
    c.rc(api.mem_free(d), 0, "cuMemFree_v2");
}

// Reusing a staging buffer before the copy's event completes gives the new data: the
// copy reads its source when the stream runs it, as a GPU's DMA does.
void copy_reads_at_execution()
{
    Check c("an async copy reads its source when it runs, not when enqueued");
    void *s = nullptr, *ev = nullptr;
    c.rc(api.stream_create(&s, 1), 0, "cuStreamCreate");
    c.rc(api.event_create(&ev, 2), 0, "cuEventCreate");
    Ptr d = 0;
    c.rc(api.mem_alloc(&d, 1024), 0, "cuMemAlloc_v2");
    unsigned char *staging = nullptr, *back = nullptr;
    c.rc(api.host_alloc(reinterpret_cast<void **>(&staging), 1024, 0), 0, "cuMemHostAlloc");
    c.rc(api.host_alloc(reinterpret_cast<void **>(&back), 1024, 0), 0, "cuMemHostAlloc");
    std::memset(staging, 1, 1024);
    Gate gate;
    c.rc(api.launch_host_func(s, Gate::wait, &gate), 0, "cuLaunchHostFunc");
    c.rc(api.memcpy_htod_async(d, staging, 1024, s), 0, "cuMemcpyHtoDAsync_v2");
    c.rc(api.event_record(ev, s), 0, "cuEventRecord");
    c.rc(api.event_query(ev), kNotReady, "cuEventQuery of the pending copy");
    std::memset(staging, 2, 1024);  // the hazard: reused before the event completed
    gate.release();
    c.rc(api.event_synchronize(ev), 0, "cuEventSynchronize");
    c.rc(api.memcpy_sync(as_ptr(back), d, 1024), 0, "cuMemcpy");
    c.expect(back[0] == 2 && back[1023] == 2,
             "the device holds " + std::to_string(back[0]) + ": the copy read its source at enqueue");
    c.rc(api.stream_destroy(s), 0, "cuStreamDestroy_v2");
    c.rc(api.event_destroy(ev), 0, "cuEventDestroy_v2");
    c.rc(api.free_host(staging), 0, "cuMemFreeHost");
    c.rc(api.free_host(back), 0, "cuMemFreeHost");
    c.rc(api.mem_free(d), 0, "cuMemFree_v2");
}

// cuMemHostAlloc/Register/Unregister with CUDA's answers, and pointer attributes.
void pinned_memory()
{
    Check c("page-locked memory: alloc, register, unregister, 712/713, attributes");
    void *p = nullptr;
    c.rc(api.host_alloc(&p, 1 << 16, 1 | 2), 0, "cuMemHostAlloc(portable | device map)");
    c.rc(api.host_alloc(&p, 0, 0), 1, "cuMemHostAlloc of 0 bytes");
    c.rc(api.host_alloc(&p, 64, 0x100), 1, "cuMemHostAlloc with unknown flags");
    void *alloc = p;
    std::vector<char> heap(3 << 16);
    char *h = heap.data();
    c.rc(api.host_register(h + 4096, 8192, 1), 0, "cuMemHostRegister_v2");
    c.rc(api.host_register(h + 4096, 8192, 1), kAlreadyRegistered, "cuMemHostRegister_v2 of the same range");
    c.rc(api.host_register(h, 4097, 0), kAlreadyRegistered, "cuMemHostRegister_v2 overlapping the start");
    c.rc(api.host_register(h + 8192, 65536, 0), kAlreadyRegistered, "cuMemHostRegister_v2 overlapping the end");
    c.rc(api.host_register(alloc, 4096, 0), kAlreadyRegistered, "cuMemHostRegister_v2 of cuMemHostAlloc memory");
    c.rc(api.host_register(h, 4096, 0), 0, "cuMemHostRegister_v2 of the adjacent range before");
    c.rc(api.host_unregister(h + 8192), kNotRegistered, "cuMemHostUnregister inside a registration");
    c.rc(api.host_unregister(h + 65536), kNotRegistered, "cuMemHostUnregister of unregistered memory");
    c.rc(api.host_unregister(alloc), kNotRegistered, "cuMemHostUnregister of cuMemHostAlloc memory");
    c.rc(api.free_host(h + 4096), 1, "cuMemFreeHost of registered (not allocated) memory");
    Ptr dp = 0;
    c.rc(api.host_get_device_pointer(&dp, h + 5000, 0), 0, "cuMemHostGetDevicePointer_v2");
    c.expect(dp == as_ptr(h + 5000), "the device pointer of page-locked memory is not its host address");
    c.rc(api.host_get_device_pointer(&dp, h + 65536, 0), 1, "cuMemHostGetDevicePointer_v2 of pageable memory");
    Ptr dev = 0;
    c.rc(api.mem_alloc(&dev, 256), 0, "cuMemAlloc_v2");
    auto type_of = [&](Ptr ptr, int *type, unsigned long long *id) {
        int attrs[] = {2, 7};
        void *data[] = {type, id};
        return api.pointer_get_attributes(2, attrs, data, ptr);
    };
    int type = -1;
    unsigned long long id = 0;
    c.rc(type_of(as_ptr(alloc) + 100, &type, &id), 0, "cuPointerGetAttributes(cuMemHostAlloc memory)");
    c.expect(type == 1 && id != 0, "cuMemHostAlloc memory: type " + std::to_string(type) + ", expected 1 (host)");
    c.rc(type_of(as_ptr(h + 4096), &type, &id), 0, "cuPointerGetAttributes(registered memory)");
    c.expect(type == 1 && id != 0, "registered memory: type " + std::to_string(type) + ", expected 1 (host)");
    c.rc(type_of(dev, &type, &id), 0, "cuPointerGetAttributes(device memory)");
    c.expect(type == 2, "device memory: type " + std::to_string(type) + ", expected 2");
    c.rc(type_of(as_ptr(h + 65536), &type, &id), 0, "cuPointerGetAttributes(pageable memory)");
    c.expect(type == 0 && id == 0, "pageable memory: type " + std::to_string(type) + ", expected 0 (unknown)");
    c.rc(api.host_unregister(h + 4096), 0, "cuMemHostUnregister");
    c.rc(api.host_unregister(h + 4096), kNotRegistered, "cuMemHostUnregister twice");
    c.rc(api.host_unregister(h), 0, "cuMemHostUnregister");
    c.rc(type_of(as_ptr(h + 4096), &type, &id), 0, "cuPointerGetAttributes(unregistered memory)");
    c.expect(type == 0, "unregistered memory still has type " + std::to_string(type));
    c.rc(api.free_host(alloc), 0, "cuMemFreeHost");
    c.rc(api.free_host(alloc), 1, "cuMemFreeHost twice");
    c.rc(api.mem_free(dev), 0, "cuMemFree_v2");
}

// The legacy null stream waits for blocking streams' earlier work, not for non-blocking
// streams'.
void null_stream()
{
    Check c("legacy null stream: waits for blocking streams only");
    void *blocking = nullptr, *nonblocking = nullptr;
    c.rc(api.stream_create(&blocking, 0), 0, "cuStreamCreate(0)");
    c.rc(api.stream_create(&nonblocking, 1), 0, "cuStreamCreate(non-blocking)");
    Ptr d = 0;
    c.rc(api.mem_alloc(&d, 64), 0, "cuMemAlloc_v2");
    char *pinned = nullptr;
    c.rc(api.host_alloc(reinterpret_cast<void **>(&pinned), 64, 0), 0, "cuMemHostAlloc");
    std::memset(pinned, 'x', 64);
    char page[64] = {};
    Gate held, later;
    c.rc(api.launch_host_func(nonblocking, Gate::wait, &held), 0, "cuLaunchHostFunc");
    c.rc(api.launch_host_func(blocking, Gate::wait, &later), 0, "cuLaunchHostFunc");
    c.rc(api.memcpy_htod_async(d, pinned, 64, blocking), 0, "cuMemcpyHtoDAsync_v2");
    const auto t0 = Clock::now();
    std::thread opener([&later] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        later.release();
    });
    c.rc(api.memcpy_sync(as_ptr(page), d, 64), 0, "cuMemcpy");  // waits for `blocking`, not `nonblocking`
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    opener.join();
    c.expect(page[0] == 'x' && page[63] == 'x', "cuMemcpy did not wait for the blocking stream's copy");
    c.expect(waited >= 0.030, "cuMemcpy returned before the blocking stream's work was done");
    c.rc(api.stream_query(nonblocking), kNotReady, "cuStreamQuery(non-blocking stream still held)");
    held.release();
    c.rc(api.stream_synchronize(nonblocking), 0, "cuStreamSynchronize");
    c.rc(api.stream_synchronize(nullptr), 0, "cuStreamSynchronize(null stream)");
    c.rc(api.stream_destroy(blocking), 0, "cuStreamDestroy_v2");
    c.rc(api.stream_destroy(nonblocking), 0, "cuStreamDestroy_v2");
    c.rc(api.free_host(pinned), 0, "cuMemFreeHost");
    c.rc(api.mem_free(d), 0, "cuMemFree_v2");
}

// As CUDA's, an async copy to or from pageable host memory returns only once it is done.
void pageable_copy()
{
    Check c("an async copy to pageable memory returns done");
    void *s = nullptr;
    c.rc(api.stream_create(&s, 1), 0, "cuStreamCreate");
    Ptr d = 0;
    c.rc(api.mem_alloc(&d, 256), 0, "cuMemAlloc_v2");
    std::vector<char> src(256, 'p'), dst(256, 0);
    c.rc(api.memcpy_sync(d, as_ptr(src.data()), 256), 0, "cuMemcpy");
    c.rc(api.stream_synchronize(nullptr), 0, "cuStreamSynchronize (null stream)");
    Gate gate;
    c.rc(api.launch_host_func(s, Gate::wait, &gate), 0, "cuLaunchHostFunc");
    const auto t0 = Clock::now();
    std::thread opener([&gate] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        gate.release();
    });
    c.rc(api.memcpy_dtoh_async(dst.data(), d, 256, s), 0, "cuMemcpyDtoHAsync_v2 to pageable memory");
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    opener.join();
    c.expect(dst[0] == 'p' && dst[255] == 'p', "the copy to pageable memory was not done when the call returned");
    c.expect(waited >= 0.020, "the copy to pageable memory did not wait for the stream's earlier work");
    c.rc(api.stream_destroy(s), 0, "cuStreamDestroy_v2");
    c.rc(api.mem_free(d), 0, "cuMemFree_v2");
}

// Synchronous copies into the GPU as CUDA's "API synchronization behavior" gives them:
// from pageable memory the source is taken at the call and the bytes land later, on the
// null stream; between GPU buffers the call returns without waiting (here while the
// null stream is held behind a closed gate); a wait for the null stream lands both.
void sync_copies_land_later()
{
    Check c("synchronous copies into the GPU land later, on the null stream");
    constexpr size_t kBytes = 4096;
    Ptr a = 0, b = 0;
    c.rc(api.mem_alloc(&a, kBytes), 0, "cuMemAlloc_v2");
    c.rc(api.mem_alloc(&b, kBytes), 0, "cuMemAlloc_v2");
    std::vector<char> src(kBytes, 'x'), got(kBytes, 0);
    c.rc(api.memcpy_sync(a, as_ptr(src.data()), kBytes), 0, "cuMemcpy from pageable memory");
    std::fill(src.begin(), src.end(), 'y');  // after the call: not what lands
    c.rc(api.stream_synchronize(reinterpret_cast<void *>(1)), 0, "cuStreamSynchronize (CU_STREAM_LEGACY)");
    c.rc(api.memcpy_sync(as_ptr(got.data()), a, kBytes), 0, "cuMemcpy back");
    c.expect(got[0] == 'x' && got[kBytes - 1] == 'x', "the pageable source was not taken at the call");
    Gate gate;
    c.rc(api.launch_host_func(nullptr, Gate::wait, &gate), 0, "cuLaunchHostFunc on the null stream");
    std::atomic<bool> returned{false};
    std::thread opener([&] {
        for (int i = 0; i < 2000 && !returned.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        gate.release();  // whether or not the copy returned: no hang either way
    });
    c.rc(api.memcpy_sync(b, a, kBytes), 0, "cuMemcpy between GPU buffers");
    const bool held = !gate.open_now();
    returned = true;
    c.expect(held, "cuMemcpy between GPU buffers waited for the null stream");
    opener.join();
    c.rc(api.stream_synchronize(nullptr), 0, "cuStreamSynchronize (null stream)");
    std::fill(got.begin(), got.end(), 0);
    c.rc(api.memcpy_sync(as_ptr(got.data()), b, kBytes), 0, "cuMemcpy back");
    c.expect(got[0] == 'x' && got[kBytes - 1] == 'x', "the copy between GPU buffers did not land");
    c.rc(api.mem_free(a), 0, "cuMemFree_v2");
    c.rc(api.mem_free(b), 0, "cuMemFree_v2");
}

// cuStreamDestroy_v2 drains the stream first; cuStreamQuery is 0 only when it is empty.
void destroy_drains()
{
    Check c("cuStreamDestroy_v2 drains; cuStreamQuery ready only when empty");
    void *s = nullptr;
    c.rc(api.stream_create(&s, 1), 0, "cuStreamCreate");
    Ptr d = 0;
    c.rc(api.mem_alloc(&d, 64), 0, "cuMemAlloc_v2");
    char *pinned = nullptr;
    c.rc(api.host_alloc(reinterpret_cast<void **>(&pinned), 128, 0), 0, "cuMemHostAlloc");
    std::memset(pinned, 'q', 64);
    std::memset(pinned + 64, 0, 64);
    Gate gate;
    c.rc(api.launch_host_func(s, Gate::wait, &gate), 0, "cuLaunchHostFunc");
    c.rc(api.memcpy_htod_async(d, pinned, 64, s), 0, "cuMemcpyHtoDAsync_v2");
    c.rc(api.memcpy_dtoh_async(pinned + 64, d, 64, s), 0, "cuMemcpyDtoHAsync_v2");
    c.rc(api.stream_query(s), kNotReady, "cuStreamQuery with work queued");
    c.rc(api.stream_query(s), kNotReady, "cuStreamQuery again while held");
    std::thread opener([&gate] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        gate.release();
    });
    c.rc(api.stream_destroy(s), 0, "cuStreamDestroy_v2");
    opener.join();
    c.expect(pinned[64] == 'q' && pinned[127] == 'q', "cuStreamDestroy_v2 returned before its work ran");
    c.rc(api.stream_query(s), 400, "cuStreamQuery on a destroyed stream");
    c.rc(api.free_host(pinned), 0, "cuMemFreeHost");
    c.rc(api.mem_free(d), 0, "cuMemFree_v2");
}

// Several threads with a stream each, and shared tables.
void threads()
{
    Check c("four threads, each with its own stream, events and pinned memory");
    std::atomic<int> bad{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t) {
        pool.emplace_back([&bad, t] {
            void *s = nullptr, *e = nullptr;
            Ptr d = 0;
            unsigned char *h = nullptr;
            if (api.stream_create(&s, 1) || api.event_create(&e, 0) || api.mem_alloc(&d, 4096) ||
                api.host_alloc(reinterpret_cast<void **>(&h), 8192, 0)) {
                ++bad;
                return;
            }
            for (int i = 0; i < 200; ++i) {
                std::memset(h, t * 16 + i % 16, 4096);
                if (api.memcpy_htod_async(d, h, 4096, s) || api.memcpy_dtoh_async(h + 4096, d, 4096, s) ||
                    api.event_record(e, s) || api.event_synchronize(e) || h[4096 + 4095] != t * 16 + i % 16)
                    ++bad;
            }
            if (api.stream_destroy(s) || api.event_destroy(e) || api.mem_free(d) || api.free_host(h)) ++bad;
        });
    }
    for (auto &th : pool) th.join();
    c.expect(bad == 0, std::to_string(bad.load()) + " failed calls or wrong results");
}

// Runs this program again with one child mode and environment variables; gives its exit
// status (-1: did not end in 60 s) and what it wrote to stderr.
int run_child(const char *self, const char *lib, const char *mode, const std::vector<const char *> &env,
              std::string *err)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        for (const char *e : env) putenv(const_cast<char *>(e));
        execl(self, self, lib, mode, static_cast<char *>(nullptr));
        _exit(127);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    int status = 0;
    bool ended = false;
    char buf[512];
    while (!ended) {
        ssize_t n;
        while ((n = read(fds[0], buf, sizeof buf)) > 0) err->append(buf, size_t(n));
        if (waitpid(pid, &status, WNOHANG) == pid) ended = true;
        else if (Clock::now() > deadline) break;
        else std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) err->append(buf, size_t(n));
    close(fds[0]);
    if (!ended) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void leak_report(const char *self, const char *lib)
{
    Check c("GPURDMA_FAKE_CUDA_LEAKS=1 reports at exit and fails the process on a leak");
    std::string err;
    int rc = run_child(self, lib, "--child-leak", {"GPURDMA_FAKE_CUDA_LEAKS=1"}, &err);
    c.expect(rc > 0, "a leaking child exited with " + std::to_string(rc) + ", expected nonzero");
    c.expect(err.find("fake-cuda: 1 leaked pinned allocations, 1 registrations, 1 device allocations, 1 events, "
                      "1 streams\n") != std::string::npos,
             "leaking child's stderr: [" + err + "]");
    err.clear();
    rc = run_child(self, lib, "--child-clean", {"GPURDMA_FAKE_CUDA_LEAKS=1"}, &err);
    c.expect(rc == 0, "a clean child exited with " + std::to_string(rc) + ": [" + err + "]");
    c.expect(err.find("fake-cuda: 0 leaked pinned allocations, 0 registrations, 0 device allocations, 0 events, "
                      "0 streams\n") != std::string::npos,
             "clean child's stderr: [" + err + "]");
    err.clear();
    rc = run_child(self, lib, "--child-leak", {}, &err);
    c.expect(rc == 0 && err.empty(),
             "without the variable a leaking child exited with " + std::to_string(rc) + " and wrote [" + err + "]");
}

// Children: what they allocate and (do not) release.
int child_allocations(bool release)
{
    void *p = nullptr, *s = nullptr, *e = nullptr;
    Ptr d = 0;
    static char registered[4096];
    if (api.host_alloc(&p, 4096, 0) || api.host_register(registered, sizeof registered, 0) || api.mem_alloc(&d, 64) ||
        api.event_create(&e, 0) || api.stream_create(&s, 1))
        return 3;
    if (api.memcpy_htod_async(d, p, 64, s) || api.event_record(e, s)) return 3;
    if (release && (api.stream_destroy(s) || api.event_destroy(e) || api.mem_free(d) ||
                    api.host_unregister(registered) || api.free_host(p)))
        return 3;
    return 0;
}

// 64 MiB host to device at 1 GB/s is 67 ms, on the worker (events) and for the caller.
int child_bandwidth()
{
    const size_t bytes = size_t(64) << 20;
    void *p = nullptr, *s = nullptr, *e0 = nullptr, *e1 = nullptr;
    Ptr d = 0;
    if (api.host_alloc(&p, bytes, 0) || api.mem_alloc(&d, bytes) || api.stream_create(&s, 1) ||
        api.event_create(&e0, 0) || api.event_create(&e1, 0))
        return 3;
    const auto t0 = Clock::now();
    if (api.event_record(e0, s) || api.memcpy_htod_async(d, p, bytes, s) || api.event_record(e1, s) ||
        api.stream_synchronize(s))
        return 3;
    const double total = std::chrono::duration<double>(Clock::now() - t0).count();
    float ms = 0;
    if (api.event_elapsed_time(&ms, e0, e1)) return 3;
    std::fprintf(stderr, "copy %.3f s, events %.1f ms\n", total, double(ms));
    if (api.event_destroy(e0) || api.event_destroy(e1) || api.stream_destroy(s) || api.mem_free(d) || api.free_host(p))
        return 3;
    return total >= 0.050 && ms >= 50.0f ? 0 : 4;
}

// 1 MiB at 0.01 GB/s is 105 ms, against well under 1 ms of memmove: shows the knob acts
// even where a 64 MiB copy alone might take 50 ms on a loaded machine.
int child_slow_copy(bool to_device)
{
    const size_t bytes = size_t(1) << 20;
    void *p = nullptr, *s = nullptr;
    Ptr d = 0;
    if (api.host_alloc(&p, bytes, 0) || api.mem_alloc(&d, bytes) || api.stream_create(&s, 1)) return 3;
    const auto t0 = Clock::now();
    const int rc = to_device ? api.memcpy_htod_async(d, p, bytes, s) : api.memcpy_dtoh_async(p, d, bytes, s);
    if (rc || api.stream_synchronize(s)) return 3;
    const double total = std::chrono::duration<double>(Clock::now() - t0).count();
    std::fprintf(stderr, "copy %.3f s\n", total);
    if (api.stream_destroy(s) || api.mem_free(d) || api.free_host(p)) return 3;
    return total >= 0.090 ? 0 : 4;
}

// A 2-source int32 kernel of 256 KiB moves 768 KiB: 79 ms at 0.01 GB/s.
int child_slow_kernel()
{
    const size_t count = 65536, bytes = count * 4;
    void *fn = sum_int32_kernel(), *s = nullptr;
    Ptr a = 0, b = 0;
    if (!fn || api.mem_alloc(&a, bytes) || api.mem_alloc(&b, bytes) || api.stream_create(&s, 1)) return 3;
    gpurdma::reduce::device::ReduceArgs args = doubling(a, b, count);
    void *params[] = {&args};
    const auto t0 = Clock::now();
    if (api.launch_kernel(fn, 1, 1, 1, 128, 1, 1, 0, s, params, nullptr) || api.stream_synchronize(s)) return 3;
    const double total = std::chrono::duration<double>(Clock::now() - t0).count();
    std::fprintf(stderr, "kernel %.3f s\n", total);
    if (api.stream_destroy(s) || api.mem_free(a) || api.mem_free(b)) return 3;
    return total >= 0.070 ? 0 : 4;
}

// With GPURDMA_FAKE_CUDA_JITTER_US: a stream still runs in order (a chain of copies, each
// reading what the one before wrote, and a kernel), a stream waiting for another's event
// still sees that stream's copy done, and the delays add up: the 34 draws of 0..10 ms
// under GPURDMA_FAKE_CUDA_SEED=1 sum to 212 ms, checked as >= 50 ms (a lower bound:
// sleeps never end early), against under 1 ms without the knob.
int child_jitter()
{
    constexpr int kLinks = 32, kRounds = 16;
    constexpr size_t kCount = 1024, kBytes = kCount * sizeof(int32_t);
    void *fn = sum_int32_kernel();
    void *a = nullptr, *b = nullptr, *e0 = nullptr, *e1 = nullptr, *ev = nullptr;
    std::vector<Ptr> dev(kLinks + 1);
    Ptr cells = 0;
    int32_t *host = nullptr;
    if (!fn || api.stream_create(&a, 1) || api.stream_create(&b, 1) || api.event_create(&e0, 0) ||
        api.event_create(&e1, 0) || api.event_create(&ev, 2) || api.mem_alloc(&cells, kRounds * kBytes) ||
        api.host_alloc(reinterpret_cast<void **>(&host), (2 + 2 * kRounds) * kBytes, 0))
        return 3;
    for (auto &d : dev)
        if (api.mem_alloc(&d, kBytes)) return 3;
    for (size_t i = 0; i < (2 + kRounds) * kCount; ++i) host[i] = int32_t(i * 7 + 1);
    int32_t *out = host + kCount, *sent = host + 2 * kCount, *got = sent + kRounds * kCount;
    std::memset(out, 0, kBytes);
    std::memset(got, 0, kRounds * kBytes);
    // One stream: the chain, the kernel doubling its end, the copy back.
    gpurdma::reduce::device::ReduceArgs args = doubling(dev[kLinks - 1], dev[kLinks], kCount);
    void *params[] = {&args};
    if (api.event_record(e0, a) || api.memcpy_htod_async(dev[0], host, kBytes, a)) return 3;
    for (int i = 0; i < kLinks - 1; ++i)
        if (api.memcpy_dtod_async(dev[i + 1], dev[i], kBytes, a)) return 3;
    if (api.launch_kernel(fn, 1, 1, 1, 128, 1, 1, 0, a, params, nullptr) ||
        api.memcpy_dtoh_async(out, dev[kLinks], kBytes, a) || api.event_record(e1, a))
        return 3;
    // Two streams: B copies back each cell after A's event for the copy that fills it.
    for (int r = 0; r < kRounds; ++r) {
        const Ptr cell = cells + Ptr(r) * kBytes;
        if (api.memcpy_htod_async(cell, sent + r * kCount, kBytes, a) || api.event_record(ev, a) ||
            api.stream_wait_event(b, ev, 0) || api.memcpy_dtoh_async(got + r * kCount, cell, kBytes, b))
            return 3;
    }
    if (api.event_synchronize(e1) || api.stream_synchronize(b) || api.stream_synchronize(a)) return 3;
    int bad = 0;
    for (size_t i = 0; i < kCount; ++i) bad += out[i] != 2 * host[i];
    if (bad) std::fprintf(stderr, "one stream: %d of %zu elements out of order\n", bad, kCount);
    int early = 0;
    for (size_t i = 0; i < kRounds * kCount; ++i) early += got[i] != sent[i];
    if (early) std::fprintf(stderr, "two streams: %d elements copied back before the event's copy\n", early);
    float ms = 0;
    if (api.event_elapsed_time(&ms, e0, e1)) return 3;
    std::fprintf(stderr, "34 jittered operations: %.1f ms\n", double(ms));
    if (api.stream_destroy(a) || api.stream_destroy(b) || api.event_destroy(e0) || api.event_destroy(e1) ||
        api.event_destroy(ev) || api.mem_free(cells) || api.free_host(host))
        return 3;
    for (auto d : dev)
        if (api.mem_free(d)) return 3;
    return bad || early ? 4 : ms >= 50.0f ? 0 : 5;
}

void jitter_knob(const char *self, const char *lib)
{
    Check c("GPURDMA_FAKE_CUDA_JITTER_US=10000: order on a stream and across an event kept, work delayed");
    std::string err;
    const int rc =
        run_child(self, lib, "--child-jitter", {"GPURDMA_FAKE_CUDA_JITTER_US=10000", "GPURDMA_FAKE_CUDA_SEED=1"}, &err);
    c.expect(rc == 0, "child exited with " + std::to_string(rc) + ": " + err);
}

void bandwidth_knobs(const char *self, const char *lib)
{
    {
        Check c("GPURDMA_FAKE_CUDA_COPY_GBPS=1: a 64 MiB host-to-device copy takes >= 50 ms");
        std::string err;
        const int rc = run_child(self, lib, "--child-bandwidth", {"GPURDMA_FAKE_CUDA_COPY_GBPS=1"}, &err);
        c.expect(rc == 0, "child exited with " + std::to_string(rc) + ": " + err);
    }
    {
        Check c("GPURDMA_FAKE_CUDA_COPY_GBPS=0.01: a 1 MiB device-to-host copy takes >= 90 ms");
        std::string err;
        const int rc = run_child(self, lib, "--child-slow-copy", {"GPURDMA_FAKE_CUDA_COPY_GBPS=0.01"}, &err);
        c.expect(rc == 0, "child exited with " + std::to_string(rc) + ": " + err);
    }
    // Each direction's knob overrides a fast COPY_GBPS (1 MiB at 1000 GB/s: 1 us).
    {
        Check c("GPURDMA_FAKE_CUDA_D2H_GBPS=0.01 over COPY_GBPS=1000: a 1 MiB device-to-host copy takes >= 90 ms");
        std::string err;
        const int rc = run_child(self, lib, "--child-slow-copy",
                                 {"GPURDMA_FAKE_CUDA_COPY_GBPS=1000", "GPURDMA_FAKE_CUDA_D2H_GBPS=0.01"}, &err);
        c.expect(rc == 0, "child exited with " + std::to_string(rc) + ": " + err);
    }
    {
        Check c("GPURDMA_FAKE_CUDA_H2D_GBPS=0.01 over COPY_GBPS=1000: a 1 MiB host-to-device copy takes >= 90 ms");
        std::string err;
        const int rc = run_child(self, lib, "--child-slow-h2d",
                                 {"GPURDMA_FAKE_CUDA_COPY_GBPS=1000", "GPURDMA_FAKE_CUDA_H2D_GBPS=0.01"}, &err);
        c.expect(rc == 0, "child exited with " + std::to_string(rc) + ": " + err);
    }
    {
        Check c("GPURDMA_FAKE_CUDA_KERNEL_GBPS=0.01: a 2-source 256 KiB kernel takes >= 70 ms");
        std::string err;
        const int rc = run_child(self, lib, "--child-slow-kernel", {"GPURDMA_FAKE_CUDA_KERNEL_GBPS=0.01"}, &err);
        c.expect(rc == 0, "child exited with " + std::to_string(rc) + ": " + err);
    }
}

}  // namespace

int main(int argc, char **argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s PATH/libcuda.so.1\n", argv[0]);
        return 2;
    }
    alarm(240);  // a hang in the stand-in ends the run (SIGALRM: failure)
    if (!load(argv[1])) return 1;
    if (argc > 2) {
        const std::string mode = argv[2];
        if (mode == "--child-leak") return child_allocations(false);
        if (mode == "--child-clean") return child_allocations(true);
        if (mode == "--child-bandwidth") return child_bandwidth();
        if (mode == "--child-slow-copy") return child_slow_copy(false);
        if (mode == "--child-slow-h2d") return child_slow_copy(true);
        if (mode == "--child-jitter") return child_jitter();
        if (mode == "--child-slow-kernel") return child_slow_kernel();
        return 2;
    }
    std::string self(4096, '\0');
    const ssize_t n = readlink("/proc/self/exe", &self[0], self.size() - 1);
    if (n <= 0) return 1;
    self.resize(size_t(n));
    stream_fifo();
    kernel_addresses();
    launch_limits();
    stand_in_image();
    gdr_flush();
    events();
    wait_event();
    copy_reads_at_execution();
    pinned_memory();
    null_stream();
    pageable_copy();
    sync_copies_land_later();
    destroy_drains();
    threads();
    leak_report(self.c_str(), argv[1]);
    bandwidth_knobs(self.c_str(), argv[1]);
    jitter_knob(self.c_str(), argv[1]);
    std::printf("fake_cuda_check: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
