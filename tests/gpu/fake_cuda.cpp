// A stand-in libcuda.so.1 for machines without a GPU, so the device path's protocol
// (set-up votes, IPC handle exchange and cache, slices, barriers, in place, staging,
// stream and event ordering) runs in the test suite, with the real kernels' source run
// on the CPU. It proves the protocol and what the kernels compute for each geometry,
// not CUDA's compiler, memory model or timings.
//  - "Device memory" is memfd-backed host memory; an IPC handle names the exporter's pid
//    and fd, opened through /proc, and its IPC namespace: a process in another one (a
//    host of contrib/cluster.sh) cannot open it, as no GPU's memory opens on another
//    machine.
//  - Streams are real: each one (the null stream too) is a FIFO of operations run in
//    order by a worker thread of its own: copies, kernel launches, host functions, event
//    records and waits. A copy reads its source when the worker runs it, not when it is
//    enqueued, so reusing a staging buffer before its event completes gives wrong data,
//    as on a GPU. A kernel launch runs the kernel (below) when the worker gets to it
//    (its parameters are copied at launch, like CUDA's).
//    The null stream has the legacy semantics: it waits for the blocking streams' earlier
//    work and they wait for its. Asynchronous copies to or from pageable (not page-locked)
//    host memory return only once done, as CUDA's may. Synchronous ones do what CUDA's
//    "API synchronization behavior" says: from pageable host memory into the GPU, the
//    source is staged at the call and the call returns before the bytes land (they land
//    on the null stream, GPURDMA_FAKE_CUDA_LANDS_LATER_US later); between GPU buffers,
//    the call returns at once; the others return once done. So a caller that reads or
//    announces a GPU buffer without waiting for the null stream sees stale bytes, as on
//    a GPU. cuStreamQuery also says "not ready" at least
//    once after each enqueue, so the callers' polling runs even when the work is quick.
//  - Page-locked host memory (cuMemHostAlloc, cuMemHostRegister) is tracked: overlapping
//    registrations fail with 712, unregistering what is not registered with 713, and
//    cuPointerGetAttributes says "host" (1) for it and gives null attributes for pageable
//    memory, as CUDA does. Freeing memory waits for all streams, as CUDA does.
//  - The kernels are the real ones: src/reduce/reduce_cuda.cu compiled as host C++
//    (tests/gpu/host_kernels.cpp, through tests/gpu/host_cuda/) is part of this library.
//    cuModuleLoadData checks the image is a fatbin and cuModuleGetFunction that the
//    kernel's name is in it, then resolves that name to the host-compiled entry. A
//    build without nvcc embeds no fatbin: gpurdmaStandInKernelImage() (not CUDA's; the
//    core asks for it by name) gives an image that names every entry, so the device
//    path runs in every build, and only against this library. cuLaunchKernel takes its
//    parameters as the driver does (kernelParams, copied at launch), refuses what a GPU
//    refuses (a zero or oversized grid or block, more than 1024 threads a block: 1,
//    invalid value; more than the kernels' __launch_bounds__: 701, out of resources;
//    `extra`: 1), and on the stream runs every thread of every block of the grid, one at
//    a time, in an order shuffled anew for each launch (seeded as the jitter below), so
//    a kernel that depends on its threads' order or covers the wrong elements for its
//    geometry shows. cuLaunchKernel also refuses (700, illegal address) a kernel
//    whose sources or destination are neither device memory (own or IPC-mapped) nor
//    page-locked host memory, which a GPU cannot address: a kernel reading pageable host
//    memory works here, on host memory, and faults on a GPU (CUDA reports it later, at
//    the stream's next synchronisation; here the launch fails at once).
// Environment:
//   GPURDMA_FAKE_CUDA_COPY_GBPS=G    host<->device copies take bytes / G GB/s (sleep on the
//                                    worker, before the copy); default: no delay
//   GPURDMA_FAKE_CUDA_D2H_GBPS=G     the same for device-to-host copies only, and H2D_GBPS
//   GPURDMA_FAKE_CUDA_H2D_GBPS=G     for host-to-device ones: each overrides COPY_GBPS in
//                                    its direction (so one direction can be the slow one)
//   GPURDMA_FAKE_CUDA_LANDS_LATER_US=N  a synchronous copy into the GPU from pageable host
//                                    memory or another GPU buffer lands N us after it
//                                    returns (default 200; 0: as soon as the null stream
//                                    gets to it)
//   GPURDMA_FAKE_CUDA_SMS=N          the multiprocessors cuDeviceGetAttribute reports (default
//                                    4): the component sizes its grids from them
//   GPURDMA_FAKE_CUDA_KERNEL_GBPS=G  kernels take (sources + 1) * bytes / G GB/s
//   GPURDMA_FAKE_CUDA_JITTER_US=N    every copy and kernel first sleeps a random 0..N us on
//                                    its worker (besides the knobs above): work ends at
//                                    uneven times, across streams and processes out of the
//                                    order a fixed speed gives, so an ordering that no
//                                    event or stream keeps shows. A stream's own order is
//                                    kept. The delays are drawn at enqueue, one sequence
//                                    per process, seeded with
//   GPURDMA_FAKE_CUDA_SEED=S         S (every process draws the same sequence; a run's
//                                    draws repeat); default: the pid, printed nowhere
//   GPURDMA_FAKE_CUDA_HOST_MEMORY=1  gpurdmaStandInDeviceMemoryIsHost() (not CUDA's; the core
//                                    asks for it by name) says 1: this "device memory" is host
//                                    memory that UCX may read as such, so gpurdma sends
//                                    straight from it as it would with GPUDirect RDMA
//   GPURDMA_FAKE_CUDA_GDR_ORDERING=N cuDeviceGetAttribute's GPUDirect RDMA writes ordering
//                                    (default 0: writes need cuFlushGPUDirectRDMAWrites, which
//                                    the flush options attribute says the device has)
//   GPURDMA_FAKE_CUDA_LEAKS=1        at exit (library destructor, after the atexit handlers;
//                                    not on _exit) print "fake-cuda: N leaked pinned
//                                    allocations, M registrations, K device allocations,
//                                    E events, S streams" to stderr (device: own
//                                    cuMemAlloc, not IPC mappings), and exit with status
//                                    1 if any count is not zero; before it, "fake-cuda: F
//                                    GPUDirect RDMA flushes" if there were any
// A forked child starts workers of its own at its first enqueue (its parent's queued work
// is not run there: CUDA does not let a child use its parent's context either).
// Built by make (Makefile.am: tests/gpu/fake/libcuda.so.1) from this file and
// tests/gpu/host_kernels.cpp, -Wl,-z,nodelete (detached workers run its code until exit).
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpurdma/gpurdma.h"
#include "host_cuda/host_cuda.h"
#include "reduce/reduce_device.h"

namespace {

// CUresult values (cuda.h).
constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kOutOfMemory = 2;
constexpr int kInvalidHandle = 400;
constexpr int kNotFound = 500;
constexpr int kNotReady = 600;
constexpr int kHostMemoryAlreadyRegistered = 712;
constexpr int kHostMemoryNotRegistered = 713;
constexpr int kIllegalAddress = 700;
constexpr int kLaunchOutOfResources = 701;

constexpr unsigned kStreamNonBlocking = 1;
constexpr unsigned kEventDisableTiming = 2;
constexpr unsigned kEventFlags = 1 | 2 | 4;  // blocking sync, disable timing, interprocess
constexpr unsigned kHostAllocFlags = 1 | 2 | 4;  // portable, device map, write combined
constexpr unsigned kHostRegisterFlags = 1 | 2 | 4 | 8;  // portable, device map, I/O memory, read only

using Clock = std::chrono::steady_clock;

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
    unsigned long long ipc_namespace;
};
using ReduceArgs = gpurdma::reduce::device::ReduceArgs;
using KernelEntry = void (*)(ReduceArgs);
struct Function {
    gpurdma_dtype_t dtype;
    KernelEntry entry;  // the host-compiled kernel (host_kernels.cpp)
};
// A launch's shape.
struct Geometry {
    dim3 grid, block;
};
// Page-locked host memory: from cuMemHostAlloc (allocated) or cuMemHostRegister.
struct Pinned {
    uintptr_t base;
    size_t size;
    unsigned long long id;
    bool allocated;
};

// When an operation on a stream finished (an event record's completion is its time).
struct Completion {
    bool done = false;
    Clock::time_point when;
};
using CompletionPtr = std::shared_ptr<Completion>;

struct Op {
    std::function<int()> work;  // empty: a marker (event record, wait)
    std::vector<CompletionPtr> after;  // what must complete before this runs
    CompletionPtr done;
};

struct Stream {
    unsigned flags = 0;
    std::deque<Op> queue;
    CompletionPtr tail;  // the last enqueued operation's
    bool worker = false;  // a worker thread serves the queue
    bool stop = false;
    bool reported_busy = true;  // cuStreamQuery said "not ready" since the last enqueue
    int error = 0;  // sticky: the first failure of an operation on it
};

struct Event {
    unsigned flags = 0;
    CompletionPtr last;  // the latest cuEventRecord's; null: never recorded
};

// Never destroyed: detached workers may still wait on them while the process exits.
std::mutex &g_mu = *new std::mutex;
std::condition_variable &g_cv = *new std::condition_variable;
std::vector<Alloc> &g_allocs = *new std::vector<Alloc>;
std::vector<Pinned> &g_pinned = *new std::vector<Pinned>;
std::set<Stream *> &g_streams = *new std::set<Stream *>;
std::set<Event *> &g_events = *new std::set<Event *>;
Stream *g_null_stream = nullptr;
unsigned long long g_next_id = 1;
size_t g_gdr_flushes = 0;  // cuFlushGPUDirectRDMAWrites calls
std::map<std::string, Function> &g_functions = *new std::map<std::string, Function>;
const unsigned char *g_image = nullptr;
size_t g_image_size = 0;
void *const kContext = reinterpret_cast<void *>(0xc0de);

double env_gbps(const char *name)
{
    const char *v = std::getenv(name);
    const double g = v ? std::atof(v) : 0.0;
    return g > 0 ? g : 0.0;
}
const double g_copy_gbps = env_gbps("GPURDMA_FAKE_CUDA_COPY_GBPS");
double direction_gbps(const char *name)
{
    return std::getenv(name) ? env_gbps(name) : g_copy_gbps;
}
const double g_d2h_gbps = direction_gbps("GPURDMA_FAKE_CUDA_D2H_GBPS");
const double g_h2d_gbps = direction_gbps("GPURDMA_FAKE_CUDA_H2D_GBPS");
const double g_kernel_gbps = env_gbps("GPURDMA_FAKE_CUDA_KERNEL_GBPS");

// How long after a synchronous copy returns its bytes land in the GPU (above).
const unsigned long g_lands_later_us = [] {
    const char *v = std::getenv("GPURDMA_FAKE_CUDA_LANDS_LATER_US");
    return v ? std::strtoul(v, nullptr, 10) : 200ul;
}();
const unsigned long g_jitter_us = [] {
    const char *v = std::getenv("GPURDMA_FAKE_CUDA_JITTER_US");
    return v ? std::strtoul(v, nullptr, 10) : 0ul;
}();
// The seed: GPURDMA_FAKE_CUDA_SEED, else this process's pid (a forked child reseeds).
unsigned long long jitter_seed()
{
    const char *v = std::getenv("GPURDMA_FAKE_CUDA_SEED");
    return v ? std::strtoull(v, nullptr, 10) : static_cast<unsigned long long>(getpid());
}
std::mt19937_64 &g_rng = *new std::mt19937_64(jitter_seed());
// The threads' order in each launch: a sequence of its own, so the jitter's stays as it was.
std::mt19937_64 &g_order_rng = *new std::mt19937_64(jitter_seed() ^ 0x5eed0fd3u);

// The inode of this process's IPC namespace (0 if unknown). The namespace cluster's
// hosts share the pid namespace, so /proc would open another host's memory without it.
unsigned long long ipc_namespace()
{
    struct stat st;
    return stat("/proc/self/ns/ipc", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

// On the worker, before a copy or kernel: its jitter, then its time at the knob's speed.
void take_time(double bytes, double gbps, unsigned long jitter_us)
{
    if (jitter_us) std::this_thread::sleep_for(std::chrono::microseconds(jitter_us));
    if (gbps > 0) std::this_thread::sleep_for(std::chrono::duration<double>(bytes / (gbps * 1e9)));
}

// The rest of these helpers run with g_mu held.

// A copy's or kernel's random delay, drawn at enqueue (under g_mu: one sequence per process).
unsigned long draw_jitter()
{
    return g_jitter_us ? static_cast<unsigned long>(g_rng() % (g_jitter_us + 1)) : 0;
}

Alloc *find(uintptr_t p)
{
    for (auto &a : g_allocs)
        if (p >= a.base && p < a.base + a.size) return &a;
    return nullptr;
}

Pinned *find_pinned(uintptr_t p)
{
    for (auto &m : g_pinned)
        if (p >= m.base && p < m.base + m.size) return &m;
    return nullptr;
}

// What a kernel may touch: device memory (own or IPC-mapped) or page-locked host memory,
// the whole span inside one allocation or registration.
bool addressable(const void *ptr, size_t bytes)
{
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    if (const Alloc *a = find(p)) return p + bytes <= a->base + a->size;
    if (const Pinned *m = find_pinned(p)) return p + bytes <= m->base + m->size;
    return bytes == 0;
}

void run_stream(Stream *s)
{
    std::unique_lock<std::mutex> lock(g_mu);
    for (;;) {
        g_cv.wait(lock, [s] { return s->stop || !s->queue.empty(); });
        if (s->queue.empty()) break;
        Op op = std::move(s->queue.front());
        s->queue.pop_front();
        g_cv.wait(lock, [&op] {
            return std::all_of(op.after.begin(), op.after.end(), [](const CompletionPtr &c) { return c->done; });
        });
        int rc = kSuccess;
        if (op.work) {
            lock.unlock();
            rc = op.work();
            lock.lock();
        }
        op.done->when = Clock::now();
        op.done->done = true;
        if (rc != kSuccess && s->error == kSuccess) s->error = rc;
        g_cv.notify_all();
    }
    s->worker = false;
    g_cv.notify_all();
}

// 0 (null), CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2, approximated) are the
// null stream; anything else must be a live stream.
Stream *stream_of(void *handle)
{
    if (reinterpret_cast<uintptr_t>(handle) <= 2) {
        if (!g_null_stream) g_null_stream = new Stream;
        return g_null_stream;
    }
    auto *s = static_cast<Stream *>(handle);
    return g_streams.count(s) ? s : nullptr;
}

CompletionPtr enqueue(Stream *s, std::function<int()> work, std::vector<CompletionPtr> after = {})
{
    // Legacy null stream: it waits for the blocking streams' earlier work, and they for its.
    if (s == g_null_stream) {
        for (Stream *other : g_streams)
            if (!(other->flags & kStreamNonBlocking) && other->tail) after.push_back(other->tail);
    } else if (!(s->flags & kStreamNonBlocking) && g_null_stream && g_null_stream->tail) {
        after.push_back(g_null_stream->tail);
    }
    Op op{std::move(work), std::move(after), std::make_shared<Completion>()};
    s->tail = op.done;
    s->reported_busy = false;
    s->queue.push_back(std::move(op));
    if (!s->worker) {
        s->worker = true;
        std::thread(run_stream, s).detach();
    }
    g_cv.notify_all();
    return s->tail;
}

// By value: the work enqueued after the call is not waited for.
void wait_for(std::unique_lock<std::mutex> &lock, CompletionPtr c)
{
    if (c) g_cv.wait(lock, [&c] { return c->done; });
}

// What cuCtxSynchronize waits for: every stream's work so far.
void drain_all(std::unique_lock<std::mutex> &lock)
{
    std::vector<CompletionPtr> tails;
    for (Stream *s : g_streams) tails.push_back(s->tail);
    if (g_null_stream) tails.push_back(g_null_stream->tail);
    for (const auto &t : tails) wait_for(lock, t);
}

// A copy on a stream; a synchronous one, or one to or from pageable host memory, returns
// once done, as CUDA's.
int copy_on(void *stream, uintptr_t dst, uintptr_t src, size_t n, bool sync = false)
{
    std::unique_lock<std::mutex> lock(g_mu);
    Stream *s = stream_of(stream);
    if (!s) return kInvalidHandle;
    const bool dst_device = find(dst) != nullptr, src_device = find(src) != nullptr;
    const bool src_pageable = !src_device && !find_pinned(src);
    const bool pageable = (!dst_device && !find_pinned(dst)) || src_pageable;
    const double gbps = dst_device == src_device ? 0.0 : dst_device ? g_h2d_gbps : g_d2h_gbps;
    // A synchronous copy from pageable host memory into the GPU returns once its source
    // is staged (taken now), its DMA landing later on the stream; one between GPU buffers
    // returns at once (CUDA's "API synchronization behavior").
    const bool lands_later = sync && dst_device && (src_pageable || src_device);
    std::shared_ptr<std::vector<unsigned char>> staged;
    if (lands_later && src_pageable && n) {
        const auto *from = reinterpret_cast<const unsigned char *>(src);
        staged = std::make_shared<std::vector<unsigned char>>(from, from + n);
    }
    const unsigned long later_us = lands_later ? g_lands_later_us : 0;
    const CompletionPtr done = enqueue(s, [dst, src, n, gbps, staged, later_us, jitter = draw_jitter()] {
        take_time(double(n), gbps, jitter + later_us);
        const void *from = staged ? static_cast<const void *>(staged->data()) : reinterpret_cast<const void *>(src);
        if (n) std::memmove(reinterpret_cast<void *>(dst), from, n);
        return kSuccess;
    });
    if ((sync || pageable) && !lands_later) wait_for(lock, done);
    return kSuccess;
}

// A synchronous copy: on the null stream, back when done.
int copy_sync(uintptr_t dst, uintptr_t src, size_t n)
{
    return copy_on(nullptr, dst, src, n, true);
}

int report_leaks()
{
    size_t pinned = 0, registered = 0, device = 0;
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto &m : g_pinned) ++(m.allocated ? pinned : registered);
    for (const auto &a : g_allocs) device += a.imported ? 0 : 1;
    if (g_gdr_flushes) std::fprintf(stderr, "fake-cuda: %zu GPUDirect RDMA flushes\n", g_gdr_flushes);
    std::fprintf(stderr,
                 "fake-cuda: %zu leaked pinned allocations, %zu registrations, %zu device allocations, "
                 "%zu events, %zu streams\n",
                 pinned, registered, device, g_events.size(), g_streams.size());
    return pinned + registered + device + g_events.size() + g_streams.size() == 0 ? 0 : 1;
}

// The library's destructor runs after the program's atexit handlers, so the program has
// released what it will; _exit is the one way to change the exit status from here.
__attribute__((destructor)) void check_leaks_at_exit()
{
    const char *v = std::getenv("GPURDMA_FAKE_CUDA_LEAKS");
    if (!v || std::strcmp(v, "1") != 0) return;
    if (report_leaks() != 0) {
        std::fflush(nullptr);
        _exit(1);
    }
}

// A forked child has no worker threads: they start again at its first enqueue.
void before_fork()
{
    g_mu.lock();
}
void after_fork_parent()
{
    g_mu.unlock();
}
void after_fork_child()
{
    if (!std::getenv("GPURDMA_FAKE_CUDA_SEED")) {
        g_rng.seed(jitter_seed());
        g_order_rng.seed(jitter_seed() ^ 0x5eed0fd3u);
    }
    for (Stream *s : g_streams) s->worker = false;
    if (g_null_stream) g_null_stream->worker = false;
    g_mu.unlock();
}
__attribute__((constructor)) void install_fork_handlers()
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

// This library, to look its kernels up by name (the core loads it RTLD_LOCAL).
void *self_handle()
{
    static void *const self = [] {
        Dl_info info{};
        if (!dladdr(reinterpret_cast<void *>(&self_handle), &info) || !info.dli_fname)
            return static_cast<void *>(nullptr);
        return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    }();
    return self;
}

// One launch on its stream's worker: every thread of every block, one after another, in
// an order drawn from `seed`, each seeing its coordinates as a GPU's would.
void run_grid(KernelEntry entry, const ReduceArgs &args, const Geometry &shape, uint64_t seed)
{
    const uint64_t per_block = 1ull * shape.block.x * shape.block.y * shape.block.z;
    const uint64_t blocks = 1ull * shape.grid.x * shape.grid.y * shape.grid.z;
    std::vector<uint64_t> order(blocks * per_block);
    for (uint64_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
    gridDim = shape.grid;
    blockDim = shape.block;
    for (const uint64_t i : order) {
        const uint64_t b = i / per_block, t = i % per_block;
        blockIdx = dim3{unsigned(b % shape.grid.x), unsigned(b / shape.grid.x % shape.grid.y),
                        unsigned(b / (1ull * shape.grid.x * shape.grid.y))};
        threadIdx = dim3{unsigned(t % shape.block.x), unsigned(t / shape.block.x % shape.block.y),
                         unsigned(t / (1ull * shape.block.x * shape.block.y))};
        entry(args);
    }
}

}  // namespace

extern "C" {

int cuInit(unsigned)
{
    return 0;
}
// Not CUDA's: gpurdma asks the driver by this name whether its device memory is host memory.
int gpurdmaStandInDeviceMemoryIsHost(void)
{
    const char *v = std::getenv("GPURDMA_FAKE_CUDA_HOST_MEMORY");
    return v && std::strcmp(v, "1") == 0 ? 1 : 0;
}
int cuDriverGetVersion(int *v)
{
    *v = 13000;
    return 0;
}
int cuGetErrorString(int rc, const char **s)
{
    switch (rc) {
        case kNotReady: *s = "fake driver: not ready"; break;
        case kHostMemoryAlreadyRegistered: *s = "fake driver: host memory already registered"; break;
        case kHostMemoryNotRegistered: *s = "fake driver: host memory not registered"; break;
        case kInvalidHandle: *s = "fake driver: invalid handle"; break;
        case kIllegalAddress:
            *s = "fake driver: a kernel argument is neither device memory nor page-locked host memory (illegal "
                 "address on a GPU)";
            break;
        default: *s = "fake driver error";
    }
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
int cuCtxSynchronize()
{
    std::unique_lock<std::mutex> lock(g_mu);
    drain_all(lock);
    return 0;
}
int cuDeviceGetAttribute(int *v, int attr, int)
{
    // 16: multiprocessors; 117: GPUDirect RDMA flush options (1: cuFlushGPUDirectRDMAWrites);
    // 118: GPUDirect RDMA writes ordering (0: none, flush needed; 100: ordered for the owner).
    const char *ordering = std::getenv("GPURDMA_FAKE_CUDA_GDR_ORDERING");
    static const int sms = [] {
        const char *n = std::getenv("GPURDMA_FAKE_CUDA_SMS");
        return n && std::atoi(n) > 0 ? std::atoi(n) : 4;
    }();
    *v = attr == 16 ? sms : attr == 117 ? 1 : attr == 118 ? (ordering ? std::atoi(ordering) : 0) : 0;
    return 0;
}
int cuFlushGPUDirectRDMAWrites(int target, int scope)
{
    if (target != 0 || (scope != 100 && scope != 200)) return 1;  // CUDA_ERROR_INVALID_VALUE
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_gdr_flushes;
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
    if (fd < 0 || ftruncate(fd, off_t(size ? size : 1)) != 0) {
        if (fd >= 0) close(fd);
        return kOutOfMemory;
    }
    void *m = mmap(nullptr, size ? size : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        return kOutOfMemory;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    g_allocs.push_back({reinterpret_cast<uintptr_t>(m), size ? size : 1, g_next_id++, fd, false});
    *p = reinterpret_cast<uintptr_t>(m);
    return 0;
}

int cuMemFree_v2(unsigned long long p)
{
    std::unique_lock<std::mutex> lock(g_mu);
    drain_all(lock);
    for (auto it = g_allocs.begin(); it != g_allocs.end(); ++it) {
        if (it->base == p && !it->imported) {
            munmap(reinterpret_cast<void *>(it->base), it->size);
            close(it->fd);
            g_allocs.erase(it);
            return 0;
        }
    }
    return kInvalidValue;
}

// Device memory: type 2 (device); page-locked host memory: type 1 (host); both with a
// buffer id, managed 0, the context and device 0. Anything else: null attributes and
// success, as CUDA's cuPointerGetAttributes gives for memory it does not know.
int cuPointerGetAttributes(unsigned n, int *attrs, void **data, unsigned long long ptr)
{
    std::lock_guard<std::mutex> lock(g_mu);
    const Alloc *a = find(ptr);
    const Pinned *h = a ? nullptr : find_pinned(ptr);
    const bool known = a || h;
    for (unsigned i = 0; i < n; ++i) {
        switch (attrs[i]) {
            case 1: *static_cast<void **>(data[i]) = known ? kContext : nullptr; break;
            case 2: *static_cast<unsigned *>(data[i]) = a ? 2 : h ? 1 : 0; break;
            case 7: *static_cast<unsigned long long *>(data[i]) = a ? a->id : h ? h->id : 0; break;
            case 8: *static_cast<unsigned *>(data[i]) = 0; break;
            case 9: *static_cast<int *>(data[i]) = known ? 0 : -1; break;
            default: return kInvalidValue;
        }
    }
    return 0;
}

int cuMemGetAddressRange_v2(unsigned long long *base, size_t *size, unsigned long long p)
{
    std::lock_guard<std::mutex> lock(g_mu);
    const Alloc *a = find(p);
    if (!a) return kInvalidValue;
    *base = a->base;
    *size = a->size;
    return 0;
}

// ---- page-locked host memory

int cuMemHostAlloc(void **pp, size_t size, unsigned flags)
{
    if (!pp || size == 0 || (flags & ~kHostAllocFlags)) return kInvalidValue;
    void *m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return kOutOfMemory;
    std::lock_guard<std::mutex> lock(g_mu);
    g_pinned.push_back({reinterpret_cast<uintptr_t>(m), size, g_next_id++, true});
    *pp = m;
    return 0;
}
int cuMemAllocHost_v2(void **pp, size_t size)
{
    return cuMemHostAlloc(pp, size, 0);
}

int cuMemFreeHost(void *p)
{
    std::unique_lock<std::mutex> lock(g_mu);
    drain_all(lock);
    for (auto it = g_pinned.begin(); it != g_pinned.end(); ++it) {
        if (it->base == reinterpret_cast<uintptr_t>(p) && it->allocated) {
            munmap(p, it->size);
            g_pinned.erase(it);
            return 0;
        }
    }
    return kInvalidValue;
}

int cuMemHostRegister_v2(void *p, size_t size, unsigned flags)
{
    if (!p || size == 0 || (flags & ~kHostRegisterFlags)) return kInvalidValue;
    const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + size;
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto &m : g_pinned)
        if (lo < m.base + m.size && m.base < hi) return kHostMemoryAlreadyRegistered;
    g_pinned.push_back({lo, size, g_next_id++, false});
    return 0;
}
int cuMemHostRegister(void *p, size_t size, unsigned flags)
{
    return cuMemHostRegister_v2(p, size, flags);
}

// Only the address a registration began at, as CUDA.
int cuMemHostUnregister(void *p)
{
    std::unique_lock<std::mutex> lock(g_mu);
    drain_all(lock);
    for (auto it = g_pinned.begin(); it != g_pinned.end(); ++it) {
        if (it->base == reinterpret_cast<uintptr_t>(p) && !it->allocated) {
            g_pinned.erase(it);
            return 0;
        }
    }
    return kHostMemoryNotRegistered;
}

// Unified addressing: the device sees page-locked memory at its host address.
int cuMemHostGetDevicePointer_v2(unsigned long long *d, void *p, unsigned flags)
{
    if (!d || flags != 0) return kInvalidValue;
    std::lock_guard<std::mutex> lock(g_mu);
    if (!find_pinned(reinterpret_cast<uintptr_t>(p))) return kInvalidValue;
    *d = reinterpret_cast<uintptr_t>(p);
    return 0;
}
int cuMemHostGetDevicePointer(unsigned long long *d, void *p, unsigned flags)
{
    return cuMemHostGetDevicePointer_v2(d, p, flags);
}

// ---- copies

int cuMemcpy(unsigned long long d, unsigned long long s, size_t n)
{
    return copy_sync(d, s, n);
}
int cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n)
{
    return copy_sync(d, reinterpret_cast<uintptr_t>(s), n);
}
int cuMemcpyDtoH_v2(void *d, unsigned long long s, size_t n)
{
    return copy_sync(reinterpret_cast<uintptr_t>(d), s, n);
}
int cuMemcpyAsync(unsigned long long d, unsigned long long s, size_t n, void *stream)
{
    return copy_on(stream, d, s, n);
}
int cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *stream)
{
    return copy_on(stream, d, s, n);
}
int cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *stream)
{
    return copy_on(stream, d, reinterpret_cast<uintptr_t>(s), n);
}
int cuMemcpyDtoHAsync_v2(void *d, unsigned long long s, size_t n, void *stream)
{
    return copy_on(stream, reinterpret_cast<uintptr_t>(d), s, n);
}

// ---- streams

int cuStreamCreate(void **s, unsigned flags)
{
    if (!s || (flags & ~kStreamNonBlocking)) return kInvalidValue;
    auto *stream = new Stream;
    stream->flags = flags;
    std::lock_guard<std::mutex> lock(g_mu);
    g_streams.insert(stream);
    *s = stream;
    return 0;
}

// Drains the stream, then its worker ends.
int cuStreamDestroy_v2(void *handle)
{
    std::unique_lock<std::mutex> lock(g_mu);
    auto *s = static_cast<Stream *>(handle);
    if (!g_streams.count(s)) return kInvalidHandle;
    wait_for(lock, s->tail);
    g_streams.erase(s);
    s->stop = true;
    g_cv.notify_all();
    g_cv.wait(lock, [s] { return !s->worker; });
    delete s;
    return 0;
}
int cuStreamDestroy(void *handle)
{
    return cuStreamDestroy_v2(handle);
}

int cuStreamSynchronize(void *handle)
{
    std::unique_lock<std::mutex> lock(g_mu);
    Stream *s = stream_of(handle);
    if (!s) return kInvalidHandle;
    wait_for(lock, s->tail);
    s->reported_busy = true;
    return s->error;
}

// 600 (CUDA_ERROR_NOT_READY) while work is pending, and once after each enqueue.
int cuStreamQuery(void *handle)
{
    std::lock_guard<std::mutex> lock(g_mu);
    Stream *s = stream_of(handle);
    if (!s) return kInvalidHandle;
    if (s->error != kSuccess) return s->error;
    if ((s->tail && !s->tail->done) || !s->reported_busy) {
        s->reported_busy = true;
        return kNotReady;
    }
    return 0;
}

// Runs fn(user) on the stream's worker, in order with its other work.
int cuLaunchHostFunc(void *handle, void (*fn)(void *), void *user)
{
    if (!fn) return kInvalidValue;
    std::lock_guard<std::mutex> lock(g_mu);
    Stream *s = stream_of(handle);
    if (!s) return kInvalidHandle;
    enqueue(s, [fn, user] {
        fn(user);
        return kSuccess;
    });
    return 0;
}

// ---- events

int cuEventCreate(void **e, unsigned flags)
{
    if (!e || (flags & ~kEventFlags)) return kInvalidValue;
    auto *event = new Event;
    event->flags = flags;
    std::lock_guard<std::mutex> lock(g_mu);
    g_events.insert(event);
    *e = event;
    return 0;
}

// A pending record still completes: its stream holds the completion, not the event.
int cuEventDestroy_v2(void *handle)
{
    std::lock_guard<std::mutex> lock(g_mu);
    auto *e = static_cast<Event *>(handle);
    if (!g_events.erase(e)) return kInvalidHandle;
    delete e;
    return 0;
}
int cuEventDestroy(void *handle)
{
    return cuEventDestroy_v2(handle);
}

// Completes when everything enqueued on the stream before it has.
int cuEventRecord(void *handle, void *stream)
{
    std::lock_guard<std::mutex> lock(g_mu);
    auto *e = static_cast<Event *>(handle);
    Stream *s = stream_of(stream);
    if (!g_events.count(e) || !s) return kInvalidHandle;
    e->last = enqueue(s, nullptr);
    return 0;
}

// Like CUDA, an event never recorded counts as complete.
int cuEventQuery(void *handle)
{
    std::lock_guard<std::mutex> lock(g_mu);
    auto *e = static_cast<Event *>(handle);
    if (!g_events.count(e)) return kInvalidHandle;
    return !e->last || e->last->done ? 0 : kNotReady;
}

int cuEventSynchronize(void *handle)
{
    std::unique_lock<std::mutex> lock(g_mu);
    auto *e = static_cast<Event *>(handle);
    if (!g_events.count(e)) return kInvalidHandle;
    const CompletionPtr last = e->last;
    wait_for(lock, last);
    return 0;
}

// Milliseconds between two completed records (steady clock).
int cuEventElapsedTime(float *ms, void *start, void *end)
{
    std::lock_guard<std::mutex> lock(g_mu);
    auto *a = static_cast<Event *>(start);
    auto *b = static_cast<Event *>(end);
    if (!ms || !g_events.count(a) || !g_events.count(b)) return kInvalidHandle;
    if ((a->flags | b->flags) & kEventDisableTiming || !a->last || !b->last) return kInvalidHandle;
    if (!a->last->done || !b->last->done) return kNotReady;
    *ms = std::chrono::duration<float, std::milli>(b->last->when - a->last->when).count();
    return 0;
}
int cuEventElapsedTime_v2(float *ms, void *start, void *end)
{
    return cuEventElapsedTime(ms, start, end);
}

// The stream's later work waits for the event's latest record (none: no wait).
int cuStreamWaitEvent(void *stream, void *event, unsigned flags)
{
    if (flags != 0) return kInvalidValue;
    std::lock_guard<std::mutex> lock(g_mu);
    auto *e = static_cast<Event *>(event);
    Stream *s = stream_of(stream);
    if (!g_events.count(e) || !s) return kInvalidHandle;
    if (e->last) enqueue(s, nullptr, {e->last});
    return 0;
}

// ---- IPC

int cuIpcGetMemHandle(void *h, unsigned long long p)
{
    std::lock_guard<std::mutex> lock(g_mu);
    const Alloc *a = find(p);
    if (!a || a->base != p || a->imported) return kInvalidValue;  // like CUDA: the base of an own allocation
    Handle x{getpid(), a->fd, a->id, a->size, ipc_namespace()};
    std::memset(h, 0, 64);
    std::memcpy(h, &x, sizeof x);
    return 0;
}

int cuIpcOpenMemHandle_v2(unsigned long long *p, Handle h, unsigned)
{
    if (h.pid == getpid()) return 208;  // CUDA refuses to import its own memory
    if (h.ipc_namespace != ipc_namespace()) return kInvalidValue;  // another host's
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", h.pid, h.fd);
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return kInvalidValue;
    void *m = mmap(nullptr, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return kOutOfMemory;
    std::lock_guard<std::mutex> lock(g_mu);
    g_allocs.push_back({reinterpret_cast<uintptr_t>(m), h.size, g_next_id++, -1, true});
    *p = reinterpret_cast<uintptr_t>(m);
    return 0;
}
static_assert(sizeof(Handle) <= 64, "fits a CUipcMemHandle");

int cuIpcCloseMemHandle(unsigned long long p)
{
    std::unique_lock<std::mutex> lock(g_mu);
    drain_all(lock);
    for (auto it = g_allocs.begin(); it != g_allocs.end(); ++it) {
        if (it->base == p && it->imported) {
            munmap(reinterpret_cast<void *>(it->base), it->size);
            g_allocs.erase(it);
            return 0;
        }
    }
    return kInvalidValue;
}

// ---- modules and kernels

int cuModuleLoadData(void **m, const void *image)
{
    uint32_t magic;
    uint16_t header;
    uint64_t body;
    std::memcpy(&magic, image, 4);
    std::memcpy(&header, static_cast<const char *>(image) + 6, 2);
    std::memcpy(&body, static_cast<const char *>(image) + 8, 8);
    if (magic != 0xBA55ED50u) return 200;  // CUDA_ERROR_INVALID_IMAGE
    std::lock_guard<std::mutex> lock(g_mu);
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
    if (std::sscanf(name, "gpurdma_rs_%d_%d", &op, &dtype) != 2) return kNotFound;
    const std::string needle = std::string(name) + '\0';
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_image || !memmem(g_image, g_image_size, needle.data(), needle.size())) return kNotFound;
    const auto entry = reinterpret_cast<KernelEntry>(dlsym(self_handle(), name));
    if (!entry) return kNotFound;
    // One record per kernel, kept for the process (a handle stays valid, as CUDA's do
    // until the module is unloaded; reachable, so no leak checker reports it).
    *f = &g_functions.emplace(name, Function{gpurdma_dtype_t(dtype), entry}).first->second;
    return 0;
}

// Not CUDA's: for a build without nvcc (no fatbin embedded), an image that names every
// host-compiled kernel, laid out as a fatbin (magic, header size, body size) so that
// cuModuleLoadData takes it. Only this library has it: a real driver leaves the core
// without kernels, as before.
int gpurdmaStandInKernelImage(const void **data, size_t *size)
{
    static const std::vector<unsigned char> image = [] {
        std::string names;
        for (int o = 0; o < GPURDMA_OP_COUNT; ++o)
            for (int d = 0; d < GPURDMA_DTYPE_COUNT; ++d) {
                char name[32];
                gpurdma::reduce::device::kernel_name(gpurdma_op_t(o), gpurdma_dtype_t(d), name);
                if (dlsym(self_handle(), name)) names += std::string(name) + '\0';
            }
        std::vector<unsigned char> out(16 + names.size());
        const uint32_t magic = 0xBA55ED50u;
        const uint16_t version = 1, header = 16;
        const uint64_t body = names.size();
        std::memcpy(out.data(), &magic, 4);
        std::memcpy(out.data() + 4, &version, 2);
        std::memcpy(out.data() + 6, &header, 2);
        std::memcpy(out.data() + 8, &body, 8);
        std::memcpy(out.data() + 16, names.data(), names.size());
        return out;
    }();
    *data = image.data();
    *size = image.size();
    return 0;
}

// The parameters are copied now, the sources read when the stream gets to it.
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared_bytes, void *stream, void **params, void **extra)
{
    if (!f || !params || extra) return kInvalidValue;  // this library takes kernelParams only
    // A GPU's limits: grid up to 2^31-1 x 65535 x 65535 blocks, a block up to 1024 x
    // 1024 x 64 and 1024 threads in all, 48 KiB of dynamic shared memory by default.
    if (!gx || !gy || !gz || gx > 0x7fffffffu || gy > 65535 || gz > 65535) return kInvalidValue;
    if (!bx || !by || !bz || bx > 1024 || by > 1024 || bz > 64) return kInvalidValue;
    const unsigned long long threads = 1ull * bx * by * bz;
    if (threads > 1024 || shared_bytes > 48 * 1024) return kInvalidValue;
    if (threads > gpurdma::reduce::device::kThreadsPerBlock) return kLaunchOutOfResources;
    const Function fn = *static_cast<const Function *>(f);
    const ReduceArgs args = *static_cast<const ReduceArgs *>(params[0]);
    if (args.nsrc < 1 || args.nsrc > gpurdma::reduce::device::kMaxSources) return kInvalidValue;
    std::lock_guard<std::mutex> lock(g_mu);
    Stream *s = stream_of(stream);
    if (!s) return kInvalidHandle;
    const size_t bytes = args.count * gpurdma_dtype_size(fn.dtype);
    if (!addressable(args.dst, bytes)) return kIllegalAddress;
    for (int i = 0; i < args.nsrc; ++i)
        if (!addressable(args.src[i], bytes)) return kIllegalAddress;
    const Geometry shape{dim3{gx, gy, gz}, dim3{bx, by, bz}};
    enqueue(s, [fn, args, bytes, shape, order = g_order_rng(), jitter = draw_jitter()] {
        take_time(double(bytes) * (args.nsrc + 1), g_kernel_gbps, jitter);
        run_grid(fn.entry, args, shape, order);
        return kSuccess;
    });
    return 0;
}

}  // extern "C"
