#include "core/device_allreduce.h"

#include <ucp/api/ucp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/comm.h"
#include "core/context.h"
#include "mem/cuda_module.h"
#include "mem/gdr.h"
#include "mem/ipc_cache.h"
#include "reduce/reduce.h"
#include "reduce/reduce_device.h"
#include "topo/topology.h"
#include "transport/shm_segment.h"

namespace gpurdma::core {

using mem::CudaDriver;
using mem::MemoryKind;

namespace {

constexpr uint64_t kFail = uint64_t(1) << 63;  // or-ed into a stage word: this rank failed that call
constexpr size_t kIpcCacheEntries = 64;        // per communicator; a call needs 2 per peer

// Fixed-size set-up record (the bootstrap allgathers equal sizes).
struct SetupBlob {
    char host[64];
    char bus_id[32];
    char segment[96];
    char why[160];
    uint32_t ok;
};

template <size_t N>
void put(char (&dst)[N], const std::string &s)
{
    std::strncpy(dst, s.c_str(), N - 1);
    dst[N - 1] = '\0';
}

}  // namespace

// One per rank in the node-shared control block. Stage words only grow (call
// numbers), so nothing is ever reset; the data fields of call k stay untouched
// until every peer has passed call k's last barrier.
struct DeviceAllreduce::Slot {
    alignas(64) std::atomic<uint64_t> posted;  // call whose fields below are valid
    alignas(64) std::atomic<uint64_t> reduced; // call whose slice this rank has reduced
    alignas(64) std::atomic<uint64_t> gathered; // call this rank has finished (buffers free)
    alignas(64) uint32_t vote;                 // 1: this rank can take the device path
    uint64_t src_id, dst_id;                   // buffer IDs (cache keys)
    uint64_t src_offset, dst_offset;           // pointer minus allocation base
    mem::CUipcMemHandle src_handle, dst_handle;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "stage words are shared between processes");

// A non-blocking stream of our own: never ordered behind the application's work on
// the legacy stream, never a device-wide synchronise.
class DeviceAllreduce::Stream {
public:
    Stream(mem::CUcontext ctx, std::string *why) : ctx_(ctx)
    {
        const auto &d = CudaDriver::instance();
        mem::ContextScope scope(ctx_);
        const int rc = d.api().stream_create ? d.api().stream_create(&s_, mem::kStreamNonBlocking) : -1;
        if (rc != 0) {
            s_ = nullptr;
            *why = d.error_text("cuStreamCreate", rc);
        }
    }
    ~Stream()
    {
        if (!s_) return;
        mem::ContextScope scope(ctx_);
        CudaDriver::instance().api().stream_destroy(s_);
    }
    mem::CUstream get() const { return s_; }

private:
    mem::CUcontext ctx_;
    mem::CUstream s_ = nullptr;
};

DeviceAllreduce::DeviceAllreduce(gpurdma_context *ctx, int rank, int size, gpurdma_bootstrap_t bootstrap,
                                 std::string name)
    : ctx_(ctx), rank_(rank), size_(size), bootstrap_(bootstrap), name_(std::move(name))
{
}

DeviceAllreduce::~DeviceAllreduce()
{
    ipc_.reset();  // close peers' mappings before the module and stream go
    kernels_.reset();
    stream_.reset();
    segment_.reset();
}

DeviceAllreduce::Slot &DeviceAllreduce::slot(int r) const
{
    return reinterpret_cast<Slot *>(segment_->base())[r];
}

std::string DeviceAllreduce::describe(int peer) const
{
    std::string s = "rank " + std::to_string(peer);
    if (static_cast<size_t>(peer) < hosts_.size()) s += " on host " + hosts_[static_cast<size_t>(peer)];
    return s;
}

// Driver, kernels and stream on the context of the first device buffer.
std::string DeviceAllreduce::setup_local(const mem::PointerInfo &info)
{
    const auto &d = CudaDriver::instance();
    if (!d.available()) return d.why_unavailable();
    if (!info.context) return "the GPU buffer has no CUDA context";
    cu_ctx_ = info.context;
    std::string why;
    kernels_ = mem::ReduceKernels::load(cu_ctx_, &why);
    if (!kernels_) return why;
    stream_ = std::make_unique<Stream>(cu_ctx_, &why);
    if (!stream_->get()) return why;
    if (!d.api().ipc_get_mem_handle || !d.api().ipc_open_mem_handle || !d.api().memcpy_dtod_async ||
        !d.api().stream_synchronize)
        return "CUDA driver lacks IPC or async copy entry points";
    ipc_ = std::make_unique<mem::IpcCache>(kIpcCacheEntries, mem::IpcCache::cuda_ops(cu_ctx_));
    return "";
}

bool DeviceAllreduce::setup(const mem::PointerInfo &info, std::string *error)
{
    const auto &d = CudaDriver::instance();
    SetupBlob mine{};
    put(mine.host, gpurdma::topo::this_host());
    std::string why = setup_local(info);
    if (why.empty() && size_ > 1) {
        char bus[32] = {0};
        mem::CUdevice dev = 0;
        mem::ContextScope scope(cu_ctx_);
        if (!d.api().ctx_get_device || d.api().ctx_get_device(&dev) != 0 || !d.api().device_get_pci_bus_id ||
            d.api().device_get_pci_bus_id(bus, sizeof bus, dev) != 0)
            why = "cannot read the GPU's PCI bus id";
        put(mine.bus_id, bus);
    }
    if (why.empty() && size_ > 1 && rank_ == 0) {
        try {
            segment_ = transport::ShmSegment::create(sizeof(Slot) * static_cast<size_t>(size_));
            put(mine.segment, segment_->name());
        } catch (const std::exception &e) {
            why = std::string("device control block: ") + e.what();
        }
    }
    mine.ok = why.empty();
    put(mine.why, why);
    std::vector<SetupBlob> all(static_cast<size_t>(size_));
    if (bootstrap_.allgather(&mine, all.data(), sizeof mine, bootstrap_.arg) != 0) {
        *error = name_ + ": device set-up: bootstrap allgather failed";
        return false;
    }
    hosts_.clear();
    for (const auto &b : all) hosts_.emplace_back(b.host);

    // Every rank sees the same records, so every rank reaches the same verdict.
    std::string verdict;
    for (int r = 0; r < size_ && verdict.empty(); ++r)
        if (!all[static_cast<size_t>(r)].ok) verdict = describe(r) + ": " + all[static_cast<size_t>(r)].why;
    bool one_node = true;
    for (const auto &h : hosts_) one_node &= h == hosts_[0];
    if (verdict.empty() && !one_node) verdict = "ranks on several nodes";
    if (verdict.empty() && size_ > reduce::device::kMaxSources)
        verdict = std::to_string(size_) + " ranks on the node (device path handles up to " +
                  std::to_string(reduce::device::kMaxSources) + ")";

    // Round 2 (only where round 1 agreed on a single node): attach, check peer access.
    if (verdict.empty() && size_ > 1) {
        uint32_t ok = 1;
        std::string mine_why;
        try {
            if (rank_ != 0) segment_ = transport::ShmSegment::attach(all[0].segment, sizeof(Slot) * size_t(size_));
        } catch (const std::exception &e) {
            ok = 0;
            mine_why = e.what();
        }
        mem::ContextScope scope(cu_ctx_);
        mem::CUdevice me = 0;
        d.api().ctx_get_device(&me);
        for (int r = 0; r < size_ && ok; ++r) {
            const std::string bus = all[static_cast<size_t>(r)].bus_id;
            if (r == rank_ || bus == mine.bus_id) continue;  // a shared GPU needs no peer access
            mem::CUdevice other = -1;
            int can = 0;
            if (!d.api().device_get_by_pci_bus_id || d.api().device_get_by_pci_bus_id(&other, bus.c_str()) != 0) {
                ok = 0;
                mine_why = "GPU " + bus + " of " + describe(r) + " is not visible to this process";
            } else if (!d.api().device_can_access_peer || d.api().device_can_access_peer(&can, me, other) != 0 ||
                       !can) {
                ok = 0;
                mine_why = "no peer access from GPU " + std::string(mine.bus_id) + " to GPU " + bus;
            }
        }
        std::vector<uint32_t> oks(static_cast<size_t>(size_));
        std::vector<SetupBlob> whys(static_cast<size_t>(size_));
        SetupBlob w{};
        put(w.why, mine_why);
        w.ok = ok;
        if (bootstrap_.allgather(&w, whys.data(), sizeof w, bootstrap_.arg) != 0) {
            *error = name_ + ": device set-up: bootstrap allgather failed";
            return false;
        }
        for (int r = 0; r < size_ && verdict.empty(); ++r)
            if (!whys[static_cast<size_t>(r)].ok) verdict = describe(r) + ": " + whys[static_cast<size_t>(r)].why;
        if (segment_) segment_->unlink();  // every peer has it mapped (or gave up)
    }

    auto &log = ctx_->log;
    if (verdict.empty()) {
        state_ = State::Ready;
        if (rank_ == 0 && log.enabled(1)) {
            std::string gpus;
            for (const auto &b : all) gpus += std::string(gpus.empty() ? "" : ",") + b.bus_id;
            log.log(1,
                    "%s: device buffers: node stage on the GPU (CUDA IPC, zero-copy reduce-scatter kernel lower "
                    "rank first, copy-engine allgather), %d ranks on GPU(s) %s, %d SMs",
                    name_.c_str(), size_, gpus.c_str(), kernels_->multiprocessors());
        }
        return true;
    }
    state_ = State::Staged;
    staged_why_ = verdict;
    ipc_.reset();
    kernels_.reset();
    stream_.reset();
    segment_.reset();
    if (!one_node) {
        decide_inter_node();
    } else if (rank_ == 0 && log.enabled(1)) {
        log.log(1, "%s: device buffers: staged through host memory (%s)", name_.c_str(), verdict.c_str());
    }
    return true;
}

// Several nodes: GPUDirect RDMA would need UCX built with CUDA memory support and
// the NIC within coll_gpurdma_gdr_level of the GPU. RMA from GPU memory is not
// implemented yet, so the verdict is computed and printed, and the data stages.
void DeviceAllreduce::decide_inter_node()
{
    auto &log = ctx_->log;
    if (!log.enabled(1)) return;
    std::string ucx_why, ucx_cuda = "unknown";
    if (auto *ucx = ctx_->transport(&ucx_why)) {
        ucp_context_attr_t attr{};
        attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
        if (ucp_context_query(ucx->context(), &attr) == UCS_OK)
            ucx_cuda = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) ? "yes" : "no";
    } else {
        ucx_cuda = "no (" + ucx_why + ")";
    }
    mem::PathLevel allowed = mem::PathLevel::PXB;
    const char *configured = ctx_->config.gdr_level ? ctx_->config.gdr_level : "PXB";
    mem::parse_path_level(configured, &allowed);
    std::string distance = "no RDMA NIC chosen";
    bool near = false;
    if (!ctx_->rail_device.empty()) {
        char bus[32] = {0};
        const auto &d = CudaDriver::instance();
        mem::CUdevice dev = 0;
        mem::ContextScope scope(cu_ctx_);  // the GPU of the buffers, not whatever is current
        if (d.available() && d.api().ctx_get_device && d.api().ctx_get_device(&dev) == 0 &&
            d.api().device_get_pci_bus_id)
            d.api().device_get_pci_bus_id(bus, sizeof bus, dev);
        std::string why;
        const mem::PathLevel level = mem::gpu_nic_level(bus, ctx_->rail_device, &why);
        near = level <= allowed;
        distance = std::string("GPU ") + bus + " to NIC " + ctx_->rail_device + ": " + mem::path_level_name(level) +
                   (why.empty() ? "" : " (" + why + ")");
    }
    log.log(1,
            "%s: rank %d device buffers across nodes: staged through host memory, then the host algorithm. "
            "GPUDirect RDMA check: UCX CUDA memory support %s; %s; coll_gpurdma_gdr_level %s -> %s; "
            "RMA straight from GPU memory is not implemented yet",
            name_.c_str(), rank_, ucx_cuda.c_str(), distance.c_str(), mem::path_level_name(allowed),
            near && ucx_cuda == "yes" ? "would be eligible" : "not eligible");
}

bool DeviceAllreduce::wait_for(int what, uint64_t seq, const char *stage, std::string *error)
{
    const double timeout = ctx_->config.timeout_s;
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        Slot &s = slot(r);
        std::atomic<uint64_t> &word = what == 0 ? s.posted : what == 1 ? s.reduced : s.gathered;
        for (unsigned spin = 0;; ++spin) {
            const uint64_t v = word.load(std::memory_order_acquire);
            if (v == (seq | kFail)) {
                *error = name_ + ": device allreduce: " + describe(r) + " failed in " + stage;
                return false;
            }
            if ((v & ~kFail) >= seq) break;
            if (spin < 64) continue;
            std::this_thread::yield();  // ranks may outnumber cores
            if (spin % 256 == 0 &&
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout) {
                *error = name_ + ": device allreduce timed out in " + stage + " waiting for " + describe(r) +
                         " (this is rank " + std::to_string(rank_) + " on host " + gpurdma::topo::this_host() + ")";
                return false;
            }
        }
    }
    return true;
}

gpurdma_status_t DeviceAllreduce::allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                            gpurdma_dtype_t dtype, gpurdma_op_t op, const mem::PointerInfo &sinfo,
                                            const mem::PointerInfo &rinfo, std::string *error)
{
    auto &log = ctx_->log;
    if (!reduce::device::device_supported(op, dtype)) {
        if (log.enabled(2))
            log.log(2, "%s: %s %s on GPU buffers: no device kernel (long double), staged through host memory",
                    name_.c_str(), gpurdma_op_name(op), gpurdma_dtype_name(dtype));
        return GPURDMA_ERR_UNSUPPORTED;
    }
    const bool in_place = sendbuf == nullptr || sendbuf == recvbuf;
    if (state_ == State::NotYet && !setup(rinfo.kind == MemoryKind::Device ? rinfo : sinfo, error))
        return GPURDMA_ERR_TRANSPORT;
    if (state_ == State::Staged) return GPURDMA_ERR_UNSUPPORTED;

    const auto &api = CudaDriver::instance().api();
    const size_t elem = reduce::dtype_size(dtype);
    const void *src = in_place ? recvbuf : sendbuf;
    const mem::PointerInfo &srcinfo = in_place ? rinfo : sinfo;
    auto usable = [this](const mem::PointerInfo &i) {
        return i.kind == MemoryKind::Device && i.context == cu_ctx_ && i.base != 0;
    };
    const bool local_ok = usable(rinfo) && usable(srcinfo);

    if (size_ == 1) {  // a single rank: one copy on the GPU, none in place
        if (!local_ok) return GPURDMA_ERR_UNSUPPORTED;
        mem::ContextScope scope(cu_ctx_);
        if (!in_place) {
            const int rc = api.memcpy_dtod_async(reinterpret_cast<mem::CUdeviceptr>(recvbuf),
                                                 reinterpret_cast<mem::CUdeviceptr>(src), count * elem, stream_->get());
            const int rs = rc == 0 ? api.stream_synchronize(stream_->get()) : rc;
            if (rs != 0) {
                *error = name_ + ": device copy: " + CudaDriver::instance().error_text("cuMemcpyDtoDAsync", rs);
                return GPURDMA_ERR_TRANSPORT;
            }
        }
        ++device_calls_;
        return GPURDMA_OK;
    }

    // 1. Post: this call's buffers as IPC handles, and whether this rank can go on.
    const uint64_t seq = ++seq_;
    Slot &me = slot(rank_);
    uint32_t vote = local_ok;
    if (vote) {
        mem::ContextScope scope(cu_ctx_);
        vote = api.ipc_get_mem_handle(&me.src_handle, srcinfo.base) == 0 &&
               api.ipc_get_mem_handle(&me.dst_handle, rinfo.base) == 0;
        me.src_id = srcinfo.buffer_id;
        me.dst_id = rinfo.buffer_id;
        me.src_offset = reinterpret_cast<uintptr_t>(src) - srcinfo.base;
        me.dst_offset = reinterpret_cast<uintptr_t>(recvbuf) - rinfo.base;
    }
    me.vote = vote;
    me.posted.store(seq, std::memory_order_release);
    if (!wait_for(0, seq, "device post", error)) return GPURDMA_ERR_TRANSPORT;
    for (int r = 0; r < size_; ++r) {
        if (!slot(r).vote) {
            // Every rank sees the same votes: all stage this call together.
            if (log.enabled(2))
                log.log(2, "%s: call %llu: %s cannot take the device path (managed/host memory, another context, "
                           "or no IPC handle), staged through host memory",
                        name_.c_str(), static_cast<unsigned long long>(seq), describe(r).c_str());
            return GPURDMA_ERR_UNSUPPORTED;
        }
    }

    // From here a failure is announced in the stage words, so peers stop too.
    auto fail = [&](const std::string &what) {
        me.reduced.store(seq | kFail, std::memory_order_release);
        me.gathered.store(seq | kFail, std::memory_order_release);
        *error = name_ + ": device allreduce: " + what;
        return GPURDMA_ERR_TRANSPORT;
    };
    ipc_->begin_call();
    std::vector<const char *> srcs(static_cast<size_t>(size_));
    std::vector<char *> dsts(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
        if (r == rank_) {
            srcs[size_t(r)] = static_cast<const char *>(src);
            dsts[size_t(r)] = static_cast<char *>(recvbuf);
            continue;
        }
        const Slot &p = slot(r);
        uintptr_t sbase = 0, dbase = 0;
        std::string why;
        if (!ipc_->map(r, p.src_id, p.src_handle, &sbase, &why) || !ipc_->map(r, p.dst_id, p.dst_handle, &dbase, &why))
            return fail("mapping the buffers of " + describe(r) + ": " + why);
        srcs[size_t(r)] = reinterpret_cast<const char *>(sbase + p.src_offset);
        dsts[size_t(r)] = reinterpret_cast<char *>(dbase + p.dst_offset);
    }

    // Slices start on 64-byte multiples (every element size divides 64), so the
    // kernel's 16-byte vector loads apply wherever the buffers are aligned.
    const size_t align = 64 / elem;
    const size_t per = ((count + size_t(size_) - 1) / size_t(size_) + align - 1) / align * align;
    auto lo = [&](int r) { return std::min(count, per * size_t(r)); };
    auto hi = [&](int r) { return std::min(count, per * size_t(r) + per); };
    mem::ContextScope scope(cu_ctx_);
    mem::CUstream stream = stream_->get();

    // 2. Reduce-scatter: my slice, read straight out of every rank's buffer.
    if (hi(rank_) > lo(rank_)) {
        std::vector<const void *> in(static_cast<size_t>(size_));
        for (int r = 0; r < size_; ++r) in[size_t(r)] = srcs[size_t(r)] + lo(rank_) * elem;
        std::string why;
        if (!kernels_->reduce(op, dtype, static_cast<char *>(recvbuf) + lo(rank_) * elem, in.data(), size_,
                              hi(rank_) - lo(rank_), stream, &why))
            return fail("reduce-scatter kernel: " + why);
    }
    int rc = api.stream_synchronize(stream);
    if (rc != 0) return fail("reduce-scatter: " + CudaDriver::instance().error_text("cuStreamSynchronize", rc));
    me.reduced.store(seq, std::memory_order_release);
    if (!wait_for(1, seq, "device reduce-scatter", error)) {
        me.gathered.store(seq | kFail, std::memory_order_release);
        return GPURDMA_ERR_TRANSPORT;
    }

    // 3. Allgather: the other slices out of their owners' results, by copy engine.
    for (int r = 0; r < size_; ++r) {
        if (r == rank_ || hi(r) <= lo(r)) continue;
        rc = api.memcpy_dtod_async(reinterpret_cast<mem::CUdeviceptr>(static_cast<char *>(recvbuf) + lo(r) * elem),
                                   reinterpret_cast<mem::CUdeviceptr>(dsts[size_t(r)] + lo(r) * elem),
                                   (hi(r) - lo(r)) * elem, stream);
        if (rc != 0)
            return fail("allgather copy from " + describe(r) + ": " +
                        CudaDriver::instance().error_text("cuMemcpyDtoDAsync", rc));
    }
    rc = api.stream_synchronize(stream);
    if (rc != 0) return fail("allgather: " + CudaDriver::instance().error_text("cuStreamSynchronize", rc));
    // 4. No rank returns (and lets its caller reuse the buffers) while a peer still reads them.
    me.gathered.store(seq, std::memory_order_release);
    if (!wait_for(2, seq, "device allgather", error)) return GPURDMA_ERR_TRANSPORT;
    ++device_calls_;
    if (log.enabled(2))
        log.log(2, "%s: allreduce %zu x %s %s on the GPU (IPC reduce-scatter + copy-engine allgather), call %llu",
                name_.c_str(), count, gpurdma_dtype_name(dtype), gpurdma_op_name(op),
                static_cast<unsigned long long>(seq));
    return GPURDMA_OK;
}

}  // namespace gpurdma::core

// The communicator's entry for GPU buffers (declared in comm.h): the device path,
// or the host staging path on every rank alike when it declines.
gpurdma_status_t gpurdma_comm::device_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                                gpurdma_dtype_t dtype, gpurdma_op_t op,
                                                const gpurdma::mem::PointerInfo &sinfo,
                                                const gpurdma::mem::PointerInfo &rinfo)
{
    if (!device_) device_ = std::make_shared<gpurdma::core::DeviceAllreduce>(context, rank, size, bootstrap, name);
    std::string error;
    const gpurdma_status_t st = device_->allreduce(sendbuf, recvbuf, count, dtype, op, sinfo, rinfo, &error);
    if (st == GPURDMA_OK) {
        ++stats.calls;
        ++stats.device_calls;
        return GPURDMA_OK;
    }
    if (st != GPURDMA_ERR_UNSUPPORTED) return fail(st, error);
    return staged_allreduce(sendbuf, recvbuf, count, dtype, op, sinfo, rinfo);
}
