// The hierarchical allreduce on GPU buffers for a communicator spanning nodes, an
// algo::Algorithm (one per communicator; its node-scoped DeviceTeam is set up on the
// first call, the host team already is):
//   node reduce-scatter on the GPUs: each rank reduces the slices it owns straight
//     out of its node peers' buffers (CUDA IPC, the one-node path's kernel, lower
//     rank first; a rank of a smaller node owns several slices and reduces each);
//   inter-node, per unit (one slice of one block), pipelined, one rail at a time in
//     unit order (plan/rail.h); each unit, node reduce and copies included, is one
//     schedule (plan/device_unit.h) run by exec::Executor over the host team's router
//     and the chunk's gpu::UnitWork; each rank
//     picks where its rail reduces (gpu/rail_mode.h; the wire is the same either way):
//     host: copy to a page-locked host chunk buffer (async, on the team's stream,
//       fenced by an event) -> the rail allreduce of that chunk in place, the CPU
//       reducing -> copy back into the receive buffer's slice. Several chunk buffers,
//       so the copies of unit k+1 and k-1 overlap the network on unit k;
//     device: the rail allreduce in place on the slice in the GPU receive buffer, its
//       local work on the GPU (gpu/device_rail_work.h: arrivals reduced by the kernel
//       straight out of their landing slots, sends straight from GPU memory or staged;
//       where GPUDirect RDMA allows, large arrivals land in GPU memory offered to the
//       rail peers, gpu/gdr_landing.h);
//       the node reduce-scatter of unit k+1 overlaps the rail of unit k;
//   node allgather on the GPUs: the other slices copied out of their owners' results
//     (copy engine), as the one-node path does.
// The units, owners and rail schedules are the host hierarchical schedule's
// (plan::hierarchical_units), and the path takes a call only when the host path would
// run the hierarchical schedule for it (algo::route): the rail messages are then the same
// whichever path a node's ranks take, so a node of host-buffer ranks, or a node that
// declined (a buffer it cannot share) and staged, interoperates with a node on this
// path. Calls the host path would run flat (ring or recursive doubling) are declined
// on every rank alike and stage whole through host memory.
// A call is a state machine that exec::ProgressLoop drives; it never waits itself.
// Stage words in the node's control block (posted, reduced = all of this rank's
// slices are back in its receive buffer, gathered) pace the node; a failed rank marks
// the words it will not reach, so its node peers stop too, and its rail peers stop at
// their timeout.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "algo/algorithm.h"
#include "algo/device_team_setup.h"
#include "algo/host_team.h"
#include "algo/route.h"
#include "base/noncopyable.h"
#include "base/status.h"
#include "exec/executor.h"
#include "gpu/copy_fence.h"
#include "gpu/copy_rate_probe.h"
#include "gpu/copy_rates.h"
#include "gpu/device_rail_work.h"
#include "gpu/device_team.h"
#include "gpu/gdr_decision.h"
#include "gpu/gdr_landing.h"
#include "gpu/gpu_landing.h"
#include "gpu/pinned_buffer.h"
#include "gpu/rail_cost.h"
#include "gpu/rail_mode.h"
#include "gpu/unit_work.h"
#include "plan/device_unit.h"
#include "plan/rail.h"

namespace gpurdma::algo {

class DeviceHierarchical : public Algorithm, private NonCopyable {
public:
    // The host team must be set up, span nodes, and outlive this object.
    DeviceHierarchical(gpu::DeviceSetup setup, HostTeam &host);
    ~DeviceHierarchical() override;

    // The node's set-up on first use (no MPI: it may run from progress); Unsupported
    // (every rank of the node alike) when this communicator or call stages through host memory.
    Status start(const Call &call) override;
    // The set-up's state, a fact of algo::route.
    DeviceSetUp set_up_state() const { return team_state_; }
    // May return exec::State::Declined: a rank of this node cannot share its buffers:
    // this node stages the call (the rail messages are the same, other nodes go on).
    exec::State advance() override;
    uint64_t position() const override
    {
        return position_ + (setting_up_ ? setting_up_->position() : 0) + (rates_probe_ ? rates_probe_->position() : 0);
    }
    std::string describe_wait() const override;
    std::string describe_failure() const override { return failure_; }
    void finish() override;
    uint64_t gpurdma_comm_stats_t::*counter() const override { return &gpurdma_comm_stats_t::device_calls; }
    std::string describe_call() const override;

    // After the progress loop gave up on a started call: marks the stage words this
    // rank will not reach as failed, so that node peers stop too.
    void abandon();

private:
    static constexpr size_t kChunkBuffers = 3;  // copy out k+1 and copy back k-1 while k is on the network
    static constexpr size_t kMaxCachedRails = 64;
    enum class Step { Idle, SettingUp, Posted, Pipeline, Reduced, Gathering, Gathered, Done, Failed, Declined };
    enum class Stage { NodeRs, D2H, InterNode, H2D, NodeAg, Count };
    // One unit in the pipeline: its schedule (plan/device_unit.h) run by an executor over
    // the chunk's local work, and, where the host reduces the rail, the page-locked
    // buffer it is staged in (none where the GPU does: the rail runs in place).
    struct Chunk {
        enum class State { Free, Out, Rail, Back } state = State::Free;
        std::unique_ptr<gpu::PinnedBuffer> buffer;
        std::unique_ptr<gpu::UnitWork> work;
        plan::Schedule schedule;
        plan::UnitSpan span;
        std::optional<exec::Executor> exec;
        size_t unit = 0;  // index into units_
        size_t mine = 0;  // index into mine_
        std::chrono::steady_clock::time_point since;
    };

    // At release: whether no copy or send uses the chunk buffers any more (waited for,
    // bounded by the timeout; *why says what was still running if not).
    bool chunks_unused(std::string *why);

    // After the node's team is set up, as steps: this GPU's copy rates where auto's
    // estimate needs them, then set_up_rail(); Ok with *done once that ran.
    Status set_up_rail_step(bool *done);
    // The rail's mode and the chunk buffers.
    void set_up_rail();
    // Where the host reduces the rail, each chunk buffer holds a whole unit: a call whose
    // units outgrow them (rail units above chunk_size, plan/rail_choice.h) grows them,
    // between calls; they stay for the calls after (coll_gpurdma_rail_unit bounds them).
    void fit_chunk_buffers(size_t unit_bytes);
    exec::State advance_set_up();
    // The call on a team that is set up: posts its buffers (Unsupported: this rank stages it).
    Status begin_call(const Call &call, const gpu::PointerInfo &sinfo, const gpu::PointerInfo &rinfo);
    // Where this rank's rail reduces, and the GPU's rail work if there.
    void choose_rail(const gpu::GdrDecision &gdr);
    // Whether auto weighs the modes: nothing requested, and no algorithm forced flat.
    bool wants_estimate() const;
    // The rail of the first slice this rank owns, for a full unit (none: it owns none).
    plan::Schedule first_rail() const;
    std::optional<gpu::RailCost> estimate_rail(bool direct_sends, bool gdr_eligible);
    void offer_gpu_landing(const gpu::GdrDecision &gdr);
    void log_mode(const gpu::GdrDecision &gdr) const;
    bool on_gpu() const { return rail_work_ != nullptr; }
    // The largest rail message (a landing slot): a chunk buffer's or send buffer's size.
    size_t slot_bytes() const { return std::max<size_t>(host_.plan().chunk_size, 64); }
    void enter(Step step);
    exec::State now() const;
    bool peers_reached(std::atomic<uint64_t> gpu::ControlSlot::*word);
    bool declined();
    bool map_peers();
    void pump();  // the pipeline: everything that can move without waiting
    void start_unit(Chunk &chunk, size_t index);  // mine_[index]'s schedule and executor
    // Advances a unit's executor (its rail only once the units before it have passed
    // theirs: wire order); true if it moved.
    bool step_unit(Chunk &chunk);
    void unit_back(Chunk &chunk);
    void launch_gather();
    bool stream_finished(Stage stage);
    void fail(Stage stage, const std::string &what);
    void add_time(Stage stage, std::chrono::steady_clock::time_point since);
    const plan::Schedule &rail_schedule(int slice, size_t count);
    bool multi() const { return team_ && team_->members().size() > 1; }
    static const char *stage_name(Stage stage);
    std::string describe_peer(int peer) const;

    gpu::DeviceSetup setup_;
    HostTeam &host_;
    DeviceSetUp team_state_ = DeviceSetUp::NotYet;
    std::unique_ptr<gpu::DeviceTeam> team_;
    std::unique_ptr<DeviceTeamSetUp> setting_up_;  // while the first call sets the team up
    std::unique_ptr<gpu::CopyRateProbe> rates_probe_;  // then, while it times this GPU's copies
    bool rates_probed_ = false;
    std::optional<gpu::CopyRates> rates_;  // none: not needed, or timing them failed (estimate_why_)
    gpu::RailMode rail_mode_;
    std::unique_ptr<gpu::DeviceRailWork> rail_work_;  // the rail's local work where the GPU reduces
    std::unique_ptr<gpu::GpuLanding> gpu_landing_;  // GPU memory offered for arrivals, if any
    std::string landing_reason_;  // where arrivals land, and why
    std::string estimate_why_;  // why auto had no estimate ("" when it had one, or was not asked)
    std::vector<Chunk> chunks_;
    std::string pinned_why_;  // "" when the chunk buffers are page-locked
    std::map<std::tuple<int, size_t, size_t>, plan::Schedule> rails_;  // (slice, count, elem)
    // The call in flight.
    Call call_;
    size_t elem_ = 0;
    uint64_t seq_ = 0;
    Step step_ = Step::Idle;
    Stage stage_ = Stage::NodeRs;  // where the call is (or failed), for messages
    int peer_index_ = 0;  // the next node member whose stage word is awaited
    uint64_t position_ = 0;
    std::string failure_;
    std::vector<plan::RailUnit> units_;  // every unit of the call
    std::vector<size_t> mine_;  // the units this rank owns, in wire order
    size_t next_out_ = 0, next_rail_ = 0, units_back_ = 0;
    std::vector<const char *> srcs_;  // per node member (local index): source, mapped here
    std::vector<const void *> node_srcs_;  // the same, for the units' node reduce
    std::vector<char *> dsts_;  // per node member: result
    std::array<double, size_t(Stage::Count)> stage_ms_{};
    // Verbose 3: per unit of this rank, ms since the call started: copy out launched,
    // copy out done (= rail started), rail done (= copy back launched), copy back done.
    struct Timeline {
        double out = 0, staged = 0, railed = 0, back = 0;
    };
    std::vector<Timeline> timeline_;
    std::chrono::steady_clock::time_point call_start_, stage_start_;
};

}  // namespace gpurdma::algo
