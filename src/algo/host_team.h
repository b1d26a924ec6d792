// A communicator's host path, set up once on its first host-memory call: who is
// where, how each host's ranks wait, the node's shared segment and the UCX channels
// between nodes, and the router over them. Every rank runs the same rounds through
// setup::Agreement and reaches the same verdict:
//   round 1: each rank's wire version, the agreed parameters, host, node,
//            rail NIC and placement; the topology and each host's wait policy;
//   round 2: the media set themselves up (the shared segment sized for the chosen
//            algorithm, UCX) and connect from everyone's records;
//   round 3: the vote (a refusing rank's reason reaches every rank), then the media
//            learn that everyone is connected; then, if asked, the calibration.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algo/call_kinds.h"
#include "algo/rail_admission.h"
#include "base/log.h"
#include "base/noncopyable.h"
#include "base/status.h"
#include "exec/progress.h"
#include "gpurdma/gpurdma.h"
#include "plan/planner.h"
#include "setup/agreement.h"
#include "setup/wire.h"
#include "topo/placement.h"
#include "topo/topology.h"
#include "transport/router.h"
#include "transport/shm_medium.h"
#include "transport/ucx_medium.h"

namespace gpurdma::algo {

// What the communicator hands its host team (all of it this process's view).
struct HostSetup {
    int rank = 0;
    int size = 1;
    std::string name;  // the communicator, for messages
    gpurdma_bootstrap_t bootstrap{};
    const Logger *log = nullptr;
    const gpurdma_config_t *config = nullptr;  // slots, chunk_size, spin_us, timeout_s, calibrate, ...
    plan::PlanParams plan;  // the context's (calibration may change its model)
    std::string host;  // this host
    std::string node;  // this process's node: the host or "host#k"
    std::string fabric_address;  // the switches above this host ("s0.s3"; "" unknown)
    std::string rail_device;  // this process's NIC ("" = UCX's choice)
    std::string cgroup;  // the cgroup that limits this process's CPUs
    int host_cpus = 0;  // CPUs that cgroup gives it
    transport::UcxStarter ucx;  // starts the process's UCX on demand
    transport::ShmArenas *arenas = nullptr;  // the process's node shared memory (null: a segment each)
    // The parameters every rank must share (core/params.h): appended to this rank's
    // record; compared with a peer's (false: unreadable; else *differing names them).
    std::function<void(wire::Writer &)> write_agreed;
    std::function<bool(wire::Reader &, std::string *differing)> compare_agreed;
};

class HostTeam : private NonCopyable {
public:
    // Runs the set-up. Not ok: every rank declines alike; the message says why.
    static Status create(HostSetup setup, std::unique_ptr<HostTeam> *out);
    // Lets peers return our landing slots and our requests finish (bounded), then
    // releases router, channels, segment.
    ~HostTeam();

    const HostSetup &setup() const { return setup_; }
    int rank() const { return setup_.rank; }
    int size() const { return setup_.size; }
    const topo::Topology &topology() const { return topo_; }
    const std::vector<int> &node_members() const;
    const std::vector<std::string> &hosts() const { return hosts_; }
    const std::vector<std::string> &rails() const { return rails_; }  // each rank's NIC ("" = UCX's)
    const plan::PlanParams &plan() const { return plan_; }
    double calibration_ms() const { return calibration_ms_; }  // -1: not calibrated
    // Landing slots of the inter-node (UCX) channels: the puts in flight to one rail peer
    // (coll_gpurdma_rail_slots; auto: params.cpp's rule).
    int rail_slots() const
    {
        return rail_slots_for(setup_.config->rail_slots, setup_.config->slots, setup_.config->chunk_size,
                              topo_.nodes());
    }

    // Endpoints (QPs) per inter-node peer (coll_gpurdma_rail_qps; auto: rail_lanes()'s rule).
    int rail_lanes() const;

    // Every host's wait decision and why, for the set-up line ("wait on a: spin: ...").
    std::string describe_waits() const;
    // How the nodes are numbered: "nodes in fabric order: 4 nodes under 2 leaf switches
    // (s1: 2, s2: 2)", or why they keep rank order; "" on one node.
    const std::string &describe_fabric() const { return fabric_; }
    // The wait loop for this communicator's calls: its host's policy, UCX progress if used.
    const exec::ProgressLoop &loop() const { return *loop_; }

    transport::PeerTransport &router() { return *router_; }
    // The node's shared memory of this communicator (null if its node has one rank).
    const transport::NodeMemory *node_memory() const { return shm_ ? shm_->memory() : nullptr; }
    bool uses_ucx() const { return ucx_ && ucx_->channels(); }
    // Where messages from other nodes land (the UCX channels' region); empty if none.
    transport::MemoryRange landing_from_other_nodes() const
    {
        return uses_ucx() ? ucx_->channels()->landing() : transport::MemoryRange{};
    }
    // The UCX channels to other nodes; null if none.
    transport::UcxChannels *net_channels() const { return uses_ucx() ? ucx_->channels() : nullptr; }
    // Which buffers each node peer passes to each call (null if the node has one rank).
    const CallKinds *call_kinds() const { return kinds_ ? &*kinds_ : nullptr; }
    uint64_t bytes_sent() const;  // payload bytes sent over both media so far

    // The schedules' peers of rank r on other nodes (symmetric, sorted): UCX's peers.
    std::vector<int> remote_peers(int r) const;

    // Calibration's outcome (algo/calibration.h): the same model on every rank.
    void set_calibrated(const plan::CostModel &model, double ms);

private:
    explicit HostTeam(HostSetup setup);
    Status agree_on_placement();  // round 1
    Status connect_media();  // rounds 2 and 3
    void decide_waits(const std::vector<topo::RankPlacement> &placements);
    // Renumbers the nodes by where they sit in the switch fabric (topo/fabric_order.h).
    void order_by_fabric(const std::vector<std::string> &address_of_rank);
    // Before the media go: peers return our landing slots and our UCX requests finish
    // (exec/channel_release.h), under the wait loop, bounded by min(5 s, the timeout).
    void release_channels();

    HostSetup setup_;
    setup::Agreement agreement_;
    plan::PlanParams plan_;
    double calibration_ms_ = -1;
    std::vector<std::string> hosts_;
    std::vector<std::string> nodes_;
    std::vector<std::string> rails_;
    std::string fabric_;  // describe_fabric()
    topo::Topology topo_;
    std::map<std::string, topo::WaitDecision> waits_;  // host -> how its ranks wait
    std::optional<exec::ProgressLoop> loop_;
    // The destructor releases the router first, then UCX, then shared memory.
    std::unique_ptr<transport::ShmMedium> shm_;
    std::unique_ptr<transport::UcxMedium> ucx_;
    std::unique_ptr<transport::Router> router_;
    std::optional<CallKinds> kinds_;  // in shm_'s segment
};

}  // namespace gpurdma::algo
