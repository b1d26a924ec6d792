// A communicator's device set-up, done once by every rank together on its first call
// with GPU buffers: the driver, the kernels and a stream of our own on the context of
// that buffer, the node-shared control block, the peer access checks, and the
// verdict, agreed by every rank.
//
// The team is node-scoped: the control block has one slot per rank of this rank's
// node (created by the node's lowest rank), peer access is checked among the node's
// ranks only, and slot(r) takes a communicator rank of this node. On a communicator
// whose ranks are all on one node (the one-node device allreduce) the node is the
// whole communicator, so local index == rank and nothing changes from the one-node
// design. A communicator spanning nodes gets a team only when its user asks for one
// (DeviceSetup::node_scope: the hierarchical device path, algo/device_hierarchical.h,
// which does the node stages with it and the inter-node stage over the host team);
// otherwise the verdict is "ranks on several nodes" as before and the data stages.
// Every resource is released in the destructor.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/noncopyable.h"
#include "base/status.h"
#include "base/text.h"
#include "gpu/buffer_query.h"
#include "gpu/gdr_decision.h"
#include "gpu/gpu_runtime.h"
#include "gpu/ipc_cache.h"
#include "gpu/kernel_module.h"
#include "gpurdma/gpurdma.h"

namespace gpurdma::transport {
class ShmSegment;
class UcxContext;
}  // namespace gpurdma::transport

namespace gpurdma::algo {
class DeviceTeamSetUp;  // runs the node team's set-up rounds (algo/device_team_setup.h)
}  // namespace gpurdma::algo

namespace gpurdma::gpu {

// What the device path needs from its communicator and context.
struct DeviceSetup {
    int rank = 0, size = 1;
    std::string name;  // the communicator, for messages
    std::string host;  // this host (topo::this_host())
    std::string node;  // this process's node: the host, or "host#k" under coll_gpurdma_logical_nodes ("" = host)
    bool node_scope = false;  // a communicator spanning nodes gets a team of each node's ranks
    gpurdma_bootstrap_t bootstrap{};
    const Logger *log = nullptr;
    const gpurdma_config_t *config = nullptr;  // gdr_level, ...
    std::string rail_device;  // this process's NIC ("" = UCX's choice)
    std::function<transport::UcxContext *(std::string *why)> ucx;  // starts UCX on demand (inter-node verdict)
    const BufferQuery *buffers = nullptr;  // the communicator's record of each call's buffers
};

// One per rank of the node in the node-shared control block. Stage words only grow (call
// numbers), so nothing is ever reset; the data fields of call k stay untouched until
// every peer has passed call k's last stage. A failed rank or-s kFail into the words
// it will not reach, so that its peers stop too.
struct ControlSlot {
    static constexpr uint64_t kFail = uint64_t(1) << 63;
    alignas(64) std::atomic<uint64_t> posted;  // call whose fields below are valid
    alignas(64) std::atomic<uint64_t> reduced;  // call whose slice this rank has reduced
    alignas(64) std::atomic<uint64_t> gathered;  // call this rank has finished (buffers free)
    alignas(64) uint32_t vote;  // 1: this rank can take the device path
    uint32_t src_shared, dst_shared;  // 1: the handle and offset below are posted
    uint64_t src_id, dst_id;  // buffer IDs (cache keys)
    uint64_t src_offset, dst_offset;  // pointer minus allocation base
    CUipcMemHandle src_handle, dst_handle;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "stage words are shared between processes");

class DeviceTeam : private NonCopyable {
public:
    // Collective: every rank calls it, with the first device buffer it was given.
    // Ok: *team is ready for the device path. Unsupported (every rank alike, the same
    // message, "rank R on host H: why" when one rank refused): this communicator
    // stages through host memory. Another error: the bootstrap failed.
    static Status create(const DeviceSetup &setup, const PointerInfo &buffer, std::unique_ptr<DeviceTeam> *team);
    ~DeviceTeam();

    const DeviceSetup &setup() const { return setup_; }
    CUcontext context() const { return ctx_; }
    CUstream stream() const { return stream_; }
    ReduceKernels &kernels() const { return *kernels_; }
    IpcCache &ipc() const { return *ipc_; }
    // The slot of a rank of this node (communicator rank). A node of one rank has no control block.
    ControlSlot &slot(int rank) const;
    // This node's ranks, ascending (the whole communicator on one node).
    const std::vector<int> &members() const { return members_; }
    bool spans_nodes() const { return spans_; }
    // "rank 3 on host b" (the logical node's name under coll_gpurdma_logical_nodes).
    std::string describe(int rank) const { return describe_rank(rank, nodes_); }
    // Between nodes: whether GPUDirect RDMA can be used (gpu/gdr_check.h; where UCX
    // supports CUDA memory and the path is near enough, UCX registers a probe range of
    // this context). Runs the probe: call it once.
    GdrDecision gdr_decision() const;

    // Whether everything enqueued on the stream has finished (cuStreamQuery), without waiting.
    Status stream_done(bool *done) const;

private:
    friend class algo::DeviceTeamSetUp;  // the same rounds among the node's ranks, as resumable steps
    DeviceTeam(DeviceSetup setup, CUcontext ctx);
    Status open_local();
    Status read_records(const std::vector<std::string> &records, bool node_only);
    Status create_control_block();
    Status attach_and_check_peers(const std::string &segment_name);
    void log_ready() const;
    void log_inter_node_verdict() const;

    DeviceSetup setup_;
    CUcontext ctx_;
    std::string bus_id_;  // this rank's GPU
    std::vector<std::string> hosts_;  // every rank's host
    std::vector<std::string> nodes_;  // every rank's node (host or logical node)
    std::vector<int> members_;  // this node's ranks, ascending
    std::vector<int> local_index_;  // rank -> index in members_, -1 elsewhere
    bool spans_ = false;  // several nodes (always, for a team set up by node)
    size_t largest_node_ = 1;
    std::vector<std::string> bus_ids_;  // every rank's GPU
    // Release order (the destructor): mappings, kernels, stream, then the segment.
    std::unique_ptr<transport::ShmSegment> segment_;
    CUstream stream_ = nullptr;
    std::unique_ptr<ReduceKernels> kernels_;
    std::unique_ptr<IpcCache> ipc_;
};

}  // namespace gpurdma::gpu
