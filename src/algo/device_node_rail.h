// Reduce-scatter, allgather, bcast and reduce on GPU buffers across nodes, an
// algo::Algorithm (one per communicator; its node-scoped DeviceTeam is set up on the
// first call, as the other device paths' are, with a node exchange of its own): the
// stage within each node on the GPUs over CUDA IPC, the rail between nodes by the host
// schedule's rail part (plan::build_collective_rail) on page-locked copies; who does
// what is algo/device_node_rail_work.h. The rail's messages are the host schedule's,
// so a node that stages the call whole (a rank that cannot share its buffers, or the
// node's ranks on host buffers) interoperates with a node on this path.
// A call is a state machine that exec::ProgressLoop drives; it never waits itself:
//   post (IPC handles, vote) -> all posted -> votes (Declined if a rank cannot share)
//   -> the node's kernels, copies within this rank and copies out, on the stream
//   -> [reduce-scatter, reduce: word "reduced": done reading the members' inputs]
//   -> the rail (host executor over the host team's router)
//   -> [reduce-scatter, reduce: every member's "reduced"] -> copies back
//   -> [allgather, bcast: word "reduced", every member's, the copies out of the
//      members' results, word "gathered", every member's] -> Done.
// A failed rank marks the words it will not reach, so its node peers stop too; its
// rail peers stop at their timeout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/device_node_rail_work.h"
#include "algo/device_team_setup.h"
#include "algo/host_team.h"
#include "algo/route.h"
#include "base/noncopyable.h"
#include "base/status.h"
#include "exec/executor.h"
#include "gpu/device_memory.h"
#include "gpu/device_team.h"
#include "gpu/pinned_buffer.h"
#include "plan/collective.h"

namespace gpurdma::algo {

class DeviceNodeRail : public Algorithm, private NonCopyable {
public:
    // The host team must be set up, span nodes, and outlive this object.
    DeviceNodeRail(gpu::DeviceSetup setup, HostTeam &host);
    ~DeviceNodeRail() override;

    // The node's set-up on first use (no MPI: it may run from progress); Unsupported
    // (every rank of the node alike) when this communicator or call stages through host memory.
    Status start(const Call &call) override;
    DeviceSetUp set_up_state() const { return team_state_; }
    // May return exec::State::Declined: a rank of this node cannot share its buffers:
    // this node stages the call (the rail's messages are the same, other nodes go on).
    exec::State advance() override;
    uint64_t position() const override;
    std::string describe_wait() const override;
    std::string describe_failure() const override { return failure_; }
    void finish() override;
    uint64_t gpurdma_comm_stats_t::*counter() const override { return &gpurdma_comm_stats_t::device_calls; }
    const char *collective() const override { return plan::coll_name(call_.coll); }
    std::string describe_call() const override;

    // After the progress loop gave up on a started call: marks the stage words this
    // rank will not reach as failed, so that node peers stop too.
    void abandon();

private:
    enum class Step {
        Idle,
        SettingUp,
        Posted,  // waiting for every member's post
        Out,  // kernels and copies out on the stream
        Rail,  // the rail's executor
        Settling,  // reduce-scatter, reduce: waiting for every member to be done reading the inputs
        In,  // copies back on the stream
        Reduced,  // allgather, bcast: waiting for every member's copies back
        Gathering,  // copies out of the members' results on the stream
        Gathered,  // waiting for every member to be done reading this rank's result
        Done,
        Failed,
        Declined,
    };

    exec::State advance_set_up();
    Status begin_call(const Call &call, const gpu::PointerInfo &sinfo, const gpu::PointerInfo &rinfo);
    // The page-locked buffers and GPU scratch of this call (false: this rank stages it).
    bool reserve(const NodeRailSizes &sizes);
    // Maps the members' buffers, makes the work, launches the kernels and copies out.
    void launch_out();
    void start_rail();
    void launch_in();
    void launch_gather();
    Status enqueue(const std::vector<DeviceCopy> &copies, const char *what);
    bool stream_finished();
    void enter(Step step);
    exec::State now() const;
    bool peers_reached(std::atomic<uint64_t> gpu::ControlSlot::*word);
    bool declined();
    void mark(std::atomic<uint64_t> gpu::ControlSlot::*word);
    void fail(const std::string &what);
    bool multi() const { return team_ && team_->members().size() > 1; }
    const plan::Schedule &rail_schedule();
    std::string stage_name() const;

    gpu::DeviceSetup setup_;
    HostTeam &host_;
    DeviceSetUp team_state_ = DeviceSetUp::NotYet;
    std::unique_ptr<gpu::DeviceTeam> team_;
    std::unique_ptr<DeviceTeamSetUp> setting_up_;
    std::unique_ptr<gpu::PinnedBuffer> rail_send_, rail_recv_;  // grown on demand, kept
    std::unique_ptr<gpu::DeviceMemory> scratch_;
    size_t scratch_bytes_ = 0;
    std::vector<char> stage_;  // the rail's accumulator (the CPU folds in it)
    std::map<plan::CollShape, plan::Schedule> schedules_;
    // The call in flight.
    Call call_;
    NodeRailWork work_;
    const plan::Schedule *schedule_ = nullptr;
    std::optional<exec::Executor> exec_;
    std::vector<const char *> srcs_;  // per node member, mapped here
    std::vector<char *> dsts_;
    uint64_t seq_ = 0;
    Step step_ = Step::Idle;
    int peer_index_ = 0;  // the next member whose stage word is awaited
    uint64_t position_ = 0;
    std::string failure_;
};

}  // namespace gpurdma::algo
