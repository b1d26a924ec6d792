// The state behind gpurdma_comm_t: lazy set-up on first use, cached schedules, and
// the wait loop that drives a schedule with progress, yielding and a timeout.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/context.h"
#include "gpurdma/gpurdma.h"
#include "gpu/device_allreduce.h"
#include "gpu/host_staging.h"
#include "plan/schedule.h"
#include "topo/placement.h"
#include "topo/topology.h"
#include "transport/node_arena.h"
#include "transport/router.h"
#include "transport/shm_channels.h"
#include "transport/shm_segment.h"
#include "transport/ucx_channels.h"

struct gpurdma_comm {
    gpurdma_comm(gpurdma_context *context, const gpurdma_comm_params_t &params);
    ~gpurdma_comm();

    gpurdma_status_t allreduce(const void *sendbuf, void *recvbuf, size_t count,
                               gpurdma_dtype_t dtype, gpurdma_op_t op);

    gpurdma_context *context;
    int rank;
    int size;
    gpurdma_bootstrap_t bootstrap;
    std::string name;
    std::string last_error;
    gpurdma_comm_stats_t stats{};

private:
    enum class SetupState { NotYet, Ready, Declined };

    gpurdma_status_t ensure_setup();
    // Measures the cost model's links by ping-pong (rank 0 with a rank on another node
    // and one on its own) and gives every rank rank 0's numbers. Returns "" or why not.
    std::string calibrate();
    // Round trips of `bytes` between this rank and peer (both call it; leader times).
    bool ping_pong(int peer, bool leader, size_t bytes, int reps, double *min_rtt_us);
    bool setup_local(const std::vector<std::string> &nodes, std::string *why);
    std::string setup_connect(const std::vector<std::string> &blobs);
    void release_transports();
    std::vector<int> remote_peers(int r) const;
    void log_summary(std::chrono::steady_clock::time_point t0) const;
    // Each host's spin-or-yield from all ranks' placements; sets oversubscribed_.
    void decide_waits(const std::vector<gpurdma::topo::RankPlacement> &placements);
    std::string wait_policies() const;  // every host's decision and why, for the set-up line
    bool exchange(const std::string &mine, std::vector<std::string> *all);
    const gpurdma::plan::Schedule &schedule_for(size_t count, size_t elem_size, bool in_place);
    gpurdma_status_t run(const gpurdma::plan::Schedule &schedule, const void *sendbuf, void *recvbuf,
                         gpurdma_dtype_t dtype, gpurdma_op_t op);
    gpurdma_status_t run_node(const void *sendbuf, void *recvbuf, size_t count, gpurdma_dtype_t dtype,
                              gpurdma_op_t op);
    // The wait loop shared by both paths: advance until done, with progress,
    // spinning then yielding, and a timeout whose message `waiting()` describes.
    template <typename Advance, typename Position, typename Waiting>
    gpurdma_status_t drive(Advance advance, Position position, Waiting waiting, const char *stage);
    size_t channel_bytes() const;
    gpurdma::transport::NodeArenaLayout arena_layout() const;
    gpurdma_status_t fail(gpurdma_status_t status, const std::string &message);
    // Adds n to a counter of this communicator and to the process totals.
    void tally(uint64_t gpurdma_comm_stats_t::*field, uint64_t n = 1);
    std::string describe_peer(int peer) const;

    SetupState setup_ = SetupState::NotYet;
    bool broken_ = false;
    gpurdma::topo::Topology topo_;
    gpurdma::plan::PlanParams plan_;  // the context's, with the cost model calibrated if asked
    double calibration_ms_ = -1;      // how long calibration took (-1: not done)
    std::vector<std::string> hosts_;
    std::vector<std::string> devices_;  // each rank's rail NIC ("" = UCX's choice)
    std::map<std::string, gpurdma::topo::WaitDecision> waits_;  // host -> how its ranks wait
    // Declared in release order: router, then channels, then the segment they use.
    std::unique_ptr<gpurdma::transport::ShmSegment> segment_;
    std::unique_ptr<gpurdma::transport::ShmChannels> shm_;
    std::unique_ptr<gpurdma::transport::UcxChannels> ucx_;
    std::unique_ptr<gpurdma::transport::Router> router_;
    std::map<std::tuple<size_t, size_t, bool>, gpurdma::plan::Schedule> schedules_;
    // The one-node path: all ranks on one node, the node arena in the segment.
    bool node_path_ = false;
    std::optional<gpurdma::transport::NodeArena> node_arena_;
    int node_index_ = 0;       // my index among the node's ranks
    size_t node_direct_max_ = 0;  // largest message for the direct form (set up once)
    uint64_t next_block_ = 0;  // sequence number of the next arena block
    std::vector<uint64_t> consumed_seen_;  // node ranks' Consumed counters as last read
    bool oversubscribed_ = false; // this host's ranks cannot each keep a CPU: yield when idle
    // GPU buffers: the device path, or staging through host memory when it declines.
    gpurdma_status_t device_allreduce(const gpurdma::algo::Call &call);
    gpurdma::gpu::HostStaging staging_;
    std::unique_ptr<gpurdma::gpu::DeviceAllreduce> device_;  // last: released first
};
