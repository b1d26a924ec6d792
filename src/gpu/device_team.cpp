#include "gpu/device_team.h"

#include <algorithm>
#include <exception>

#include "gpu/device_memory.h"
#include "gpu/gdr_check.h"
#include "reduce/reduce_device.h"
#include "setup/agreement.h"
#include "setup/wire.h"
#include "topo/gpu_nic.h"
#include "transport/shm_segment.h"
#include "transport/ucx_context.h"
#include "transport/ucx_memory_api.h"

namespace gpurdma::gpu {

namespace {

constexpr size_t kIpcCacheEntries = 64;  // per communicator; a call needs 2 per peer

Status bootstrap_failed(const DeviceSetup &setup)
{
    return Status::error(GPURDMA_ERR_TRANSPORT, setup.name + ": device set-up: bootstrap allgather failed");
}

bool logs(const DeviceSetup &setup, int level)
{
    return setup.log && setup.log->enabled(level);
}

// The PCI bus id of the context's GPU, "" if the driver cannot tell.
std::string bus_id_of(CUcontext ctx)
{
    const auto &d = GpuRuntime::instance();
    char bus[32] = {0};
    CUdevice dev = 0;
    ContextScope scope(ctx);
    if (!d.available() || !d.api().ctx_get_device || d.api().ctx_get_device(&dev) != 0 ||
        !d.api().device_get_pci_bus_id || d.api().device_get_pci_bus_id(bus, sizeof bus, dev) != 0)
        return "";
    return bus;
}

}  // namespace

Status DeviceTeam::create(const DeviceSetup &setup, const PointerInfo &buffer, std::unique_ptr<DeviceTeam> *team)
{
    std::unique_ptr<DeviceTeam> t(new DeviceTeam(setup, buffer.context));
    Status mine = t->open_local();

    // The rounds, over the bootstrap (every rank of the communicator). Among a node's
    // ranks only, the same rounds run as steps of a call: algo/device_team_setup.h.
    setup::Agreement agreement(setup.bootstrap, setup.rank, setup.size);
    auto exchange = [&](const std::string &record, std::vector<std::string> *all) {
        return agreement.exchange(record, all);
    };
    auto vote = [&](const Status &status) { return agreement.vote(status, t->hosts_); };
    auto failed = [&](const Status &) { return bootstrap_failed(setup); };

    // Round 1: where every rank is (host, node), and its GPU.
    wire::Writer w;
    w.str(setup.host);
    w.str(setup.node.empty() ? setup.host : setup.node);
    w.str(t->bus_id_);
    std::vector<std::string> records;
    Status st = exchange(w.take(), &records);
    if (st.is_ok()) st = t->read_records(records, false);
    if (!st.is_ok()) return failed(st);
    // The node's lowest rank creates the node's control block; every rank learns its name.
    if (mine.is_ok()) mine = t->create_control_block();
    std::vector<std::string> names;
    st = exchange(t->segment_ ? t->segment_->name() : std::string(), &names);
    if (!st.is_ok()) return failed(st);
    const std::string segment_name = names[static_cast<size_t>(t->members_[0])];
    Status verdict = vote(mine);
    if (!verdict.is_ok() && !verdict.is_unsupported()) return failed(verdict);

    // Every rank holds the same records, so every rank reaches the same verdict.
    const bool one_node = !t->spans_nodes();
    if (verdict.is_ok() && !one_node && !setup.node_scope) verdict = Status::unsupported("ranks on several nodes");
    if (verdict.is_ok() && t->largest_node_ > size_t(reduce::device::kMaxSources))
        verdict =
            Status::unsupported(std::to_string(t->largest_node_) + " ranks on a node (device path handles up to " +
                                std::to_string(reduce::device::kMaxSources) + ")");

    // Round 2 (only where round 1 agreed): attach, check peer access within the node.
    if (verdict.is_ok() && setup.size > 1) {
        verdict = vote(t->attach_and_check_peers(segment_name));
        if (t->segment_) t->segment_->unlink();  // every peer has it mapped (or gave up)
        if (!verdict.is_ok() && !verdict.is_unsupported()) return failed(verdict);
    }

    if (verdict.is_ok()) {
        if (one_node) t->log_ready();
        *team = std::move(t);
        return Status::ok();
    }
    if (!one_node) t->log_inter_node_verdict();
    else if (setup.rank == 0 && logs(setup, 1))
        setup.log->log(1, "%s: device buffers: staged through host memory (%s)", setup.name.c_str(),
                       verdict.message().c_str());
    return verdict;
}

DeviceTeam::DeviceTeam(DeviceSetup setup, CUcontext ctx) : setup_(std::move(setup)), ctx_(ctx) {}

DeviceTeam::~DeviceTeam()
{
    ipc_.reset();  // close peers' mappings before the module and stream go
    kernels_.reset();
    if (stream_) {
        ContextScope scope(ctx_);
        GpuRuntime::instance().api().stream_destroy(stream_);
    }
    segment_.reset();
}

ControlSlot &DeviceTeam::slot(int rank) const
{
    return reinterpret_cast<ControlSlot *>(segment_->base())[local_index_[static_cast<size_t>(rank)]];
}

Status DeviceTeam::stream_done(bool *done) const
{
    const auto &d = GpuRuntime::instance();
    ContextScope scope(ctx_);
    const int rc = d.api().stream_query(stream_);
    *done = rc == 0;
    if (rc == 0 || rc == kErrorNotReady) return Status::ok();
    return d.failure("cuStreamQuery", rc);
}

// Driver, kernels and stream on the context of the first device buffer; the GPU's
// bus id; rank 0 creates the control block.
Status DeviceTeam::open_local()
{
    const auto &d = GpuRuntime::instance();
    if (!d.available()) return Status::unsupported(d.why_unavailable());
    if (!ctx_) return Status::unsupported("the GPU buffer has no CUDA context");
    const Status loaded = ReduceKernels::load(ctx_, &kernels_);
    if (!loaded.is_ok()) return loaded;
    {
        // A non-blocking stream of our own: never ordered behind the application's work
        // on the legacy stream, never a device-wide synchronise.
        ContextScope scope(ctx_);
        const int rc = d.api().stream_create ? d.api().stream_create(&stream_, kStreamNonBlocking) : -1;
        if (rc != 0) {
            stream_ = nullptr;
            return Status::unsupported(d.error_text("cuStreamCreate", rc));
        }
    }
    if (!d.api().ipc_get_mem_handle || !d.api().ipc_open_mem_handle || !d.api().memcpy_dtod_async ||
        !d.api().stream_query)
        return Status::unsupported("CUDA driver lacks IPC or async copy entry points");
    ipc_ = std::make_unique<IpcCache>(kIpcCacheEntries, IpcCache::cuda_ops(ctx_));
    if (setup_.size > 1) {
        bus_id_ = bus_id_of(ctx_);
        if (bus_id_.empty()) return Status::unsupported("cannot read the GPU's PCI bus id");
    }
    return Status::ok();
}

// By the node's lowest rank, for a node of several ranks.
Status DeviceTeam::create_control_block()
{
    if (members_.size() < 2 || members_[0] != setup_.rank) return Status::ok();
    const Status st = transport::ShmSegment::create(sizeof(ControlSlot) * members_.size(), &segment_);
    if (!st.is_ok()) return Status::unsupported("device control block: " + st.message());
    return Status::ok();
}

// Each record: host, node, GPU bus id. Nodes are ordered by their lowest rank.
Status DeviceTeam::read_records(const std::vector<std::string> &records, bool node_only)
{
    spans_ = setup_.node_scope;  // a team of each node's ranks: the communicator spans nodes
    const size_t n = records.size();
    hosts_.assign(n, "");
    nodes_.assign(n, "");
    bus_ids_.assign(n, "");
    for (size_t r = 0; r < n; ++r) {
        if (node_only && records[r].empty()) continue;  // not on this node
        wire::Reader rd(records[r]);
        if (!rd.str(&hosts_[r]) || !rd.str(&nodes_[r]) || !rd.str(&bus_ids_[r]))
            return Status::error(GPURDMA_ERR_TRANSPORT, "unreadable device set-up record");
    }
    const std::string &mine = nodes_[static_cast<size_t>(setup_.rank)];
    members_.clear();
    local_index_.assign(n, -1);
    std::vector<std::string> seen;
    std::vector<size_t> sizes;
    for (size_t r = 0; r < n; ++r) {
        if (node_only && nodes_[r].empty()) continue;
        const auto it = std::find(seen.begin(), seen.end(), nodes_[r]);
        if (it == seen.end()) {
            seen.push_back(nodes_[r]);
            sizes.push_back(1);
        } else {
            ++sizes[static_cast<size_t>(it - seen.begin())];
        }
        if (nodes_[r] != mine) continue;
        local_index_[r] = static_cast<int>(members_.size());
        members_.push_back(static_cast<int>(r));
    }
    spans_ = spans_ || seen.size() > 1;
    largest_node_ = *std::max_element(sizes.begin(), sizes.end());
    return Status::ok();
}

Status DeviceTeam::attach_and_check_peers(const std::string &segment_name)
{
    if (members_.size() > 1 && members_[0] != setup_.rank) {
        const Status st = transport::ShmSegment::attach(segment_name, sizeof(ControlSlot) * members_.size(), &segment_);
        if (!st.is_ok()) return Status::unsupported(st.message());
    }
    const auto &a = GpuRuntime::instance().api();
    ContextScope scope(ctx_);
    CUdevice me = 0;
    a.ctx_get_device(&me);
    for (int r : members_) {
        const std::string &bus = bus_ids_[static_cast<size_t>(r)];
        if (r == setup_.rank || bus == bus_id_) continue;  // a shared GPU needs no peer access
        CUdevice other = -1;
        int can = 0;
        if (!a.device_get_by_pci_bus_id || a.device_get_by_pci_bus_id(&other, bus.c_str()) != 0)
            return Status::unsupported("GPU " + bus + " of " + describe(r) + " is not visible to this process");
        if (!a.device_can_access_peer || a.device_can_access_peer(&can, me, other) != 0 || !can)
            return Status::unsupported("no peer access from GPU " + bus_id_ + " to GPU " + bus);
    }
    return Status::ok();
}

void DeviceTeam::log_ready() const
{
    if (setup_.rank != 0 || !logs(setup_, 1)) return;
    std::string gpus;
    for (const auto &b : bus_ids_) gpus += (gpus.empty() ? "" : ",") + b;
    setup_.log->log(1,
                    "%s: device buffers: node stage on the GPU (%s: kernels reduce straight out of the "
                    "peers' buffers, lower rank first; copy-engine copies), %d ranks on GPU(s) %s, %d SMs",
                    setup_.name.c_str(), GpuRuntime::instance().ipc_name(), setup_.size, gpus.c_str(),
                    kernels_->multiprocessors());
}

// Several nodes: GPUDirect RDMA needs UCX with CUDA memory support, the NIC within
// coll_gpurdma_gdr_level of the GPU, and UCX accepting a device range (probed with a
// small allocation of the team's context).
GdrDecision DeviceTeam::gdr_decision() const
{
    GdrInputs in;
    const char *configured = setup_.config && setup_.config->gdr_level ? setup_.config->gdr_level : "PXB";
    topo::parse_path_level(configured, &in.allowed);
    in.nic = setup_.rail_device;
    if (!in.nic.empty()) {
        in.gpu = bus_id_of(ctx_);  // the GPU of the buffers, not whatever is current
        const Status known = topo::gpu_nic_level(in.gpu, in.nic, &in.path);
        in.path_known = known.is_ok();
        in.path_why = known.message();
    }
    std::string ucx_why = "UCX not offered";
    auto *ucx = setup_.ucx ? setup_.ucx(&ucx_why) : nullptr;
    transport::UcpMemoryApi memory(ucx ? ucx->context() : nullptr);
    const CUcontext ctx = ctx_;
    auto with_range = [ctx](size_t length, const std::function<Status(void *)> &use) {
        std::unique_ptr<DeviceMemory> range;
        const Status allocated = DeviceMemory::create(ctx, length, &range);
        if (!allocated.is_ok()) return allocated;
        return use(range->data());  // whatever `use` registered is gone before the memory
    };
    return check_gdr(ucx ? &memory : nullptr, ucx_why, in, with_range);
}

void DeviceTeam::log_inter_node_verdict() const
{
    if (!logs(setup_, 1)) return;
    const GdrDecision gdr = gdr_decision();
    setup_.log->log(1,
                    "%s: rank %d device buffers across nodes: staged through host memory, then the host algorithm "
                    "(GPUDirect RDMA %s: %s)",
                    setup_.name.c_str(), setup_.rank, gdr.eligible ? "eligible, unused" : "not eligible",
                    gdr.reason.c_str());
}

}  // namespace gpurdma::gpu
