// The device path for GPU buffers on one node, an algo::Algorithm (one per
// communicator; its DeviceTeam is set up on the first call), for every collective:
//  - GPUs that can reach each other (or one GPU shared by the ranks): each rank posts
//    the buffers its peers read or write as CUDA IPC handles in the node-shared control
//    block, then does its part straight out of (or into) the peers' buffers: kernels
//    that reduce, copy-engine copies (algo/device_node_work.h: the allreduce's
//    zero-copy reduce-scatter and allgather, reduce-scatter, allgather, bcast, reduce);
//  - anything else (several nodes, no peer access, long double, managed memory, a
//    buffer CUDA IPC cannot export, ...) is unsupported or declined on every rank
//    alike, and the communicator stages through host memory (algo/host_staging.h).
// A call is a state machine that exec::ProgressLoop drives; it never waits itself:
//   start: post (IPC handles, vote) -> all posted -> votes (Declined if any rank cannot
//   share its buffers) -> kernels launched -> stream done -> reduced -> all reduced
//   (where the copies need every rank's reductions) -> copies launched -> stream done
//   -> gathered -> all gathered -> Done.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/device_node_work.h"
#include "algo/device_team_setup.h"
#include "algo/route.h"
#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/device_memory.h"
#include "gpu/device_team.h"

namespace gpurdma::algo {
class HostTeam;
}  // namespace gpurdma::algo

namespace gpurdma::algo {

class DeviceOneNode : public Algorithm, private NonCopyable {
public:
    // host: the communicator's host team, if set up: the device set-up then runs among
    // the node's ranks without MPI (algo/node_exchange.h), so it may run from any
    // thread's progress; without one, over the bootstrap (blocking calls only).
    DeviceOneNode(gpu::DeviceSetup setup, HostTeam *host);
    ~DeviceOneNode() override;

    // The first call does the collective device set-up (every rank calls start for the
    // same call). Unsupported (the same on every rank) when this communicator or this
    // call must stage through host memory; another error names the stage.
    Status start(const Call &call) override;
    // The set-up's state, a fact of algo::route.
    DeviceSetUp set_up_state() const { return team_state_; }
    // May return exec::State::Declined: a rank found a buffer it cannot share: stage this call.
    exec::State advance() override;
    uint64_t position() const override { return position_ + (setting_up_ ? setting_up_->position() : 0); }
    std::string describe_wait() const override;
    std::string describe_failure() const override { return failure_; }
    void finish() override;
    uint64_t gpurdma_comm_stats_t::*counter() const override { return &gpurdma_comm_stats_t::device_calls; }
    const char *collective() const override { return plan::coll_name(call_.coll); }
    std::string describe_call() const override;

    // After the progress loop gave up on a started call (timeout): marks the stage words
    // this rank will not reach as failed, so that peers stop too instead of waiting.
    void abandon();

private:
    enum class Step {
        Idle,
        SettingUp,  // the node's device set-up (algo/device_team_setup.h), then the call
        Posted,  // waiting for every rank's post
        Reducing,  // the reduction kernels are on the stream
        Reduced,  // waiting for every rank's reductions
        Gathering,  // the copies are on the stream
        Gathered,  // waiting for every rank to finish reading this rank's buffers
        Copying,  // a single rank: the copy is on the stream
        Done,
        Failed,
        Declined,
    };

    Status set_up(const gpu::PointerInfo &first_buffer);
    exec::State advance_set_up();
    // The call on a team that is set up: posts its buffers (Unsupported: this rank stages it).
    Status begin_call(const Call &call, const gpu::PointerInfo &sinfo, const gpu::PointerInfo &rinfo);
    void enter(Step step);
    exec::State now() const;  // Running, or Failed once a step failed
    bool peers_reached(std::atomic<uint64_t> gpu::ControlSlot::*word);
    bool declined();
    void launch_reduce();
    void launch_copies();
    bool stream_finished();
    void fail(const std::string &what);
    std::string stage_name() const;

    gpu::DeviceSetup setup_;
    HostTeam *host_;  // null: set up over the bootstrap
    DeviceSetUp team_state_ = DeviceSetUp::NotYet;
    std::unique_ptr<gpu::DeviceTeam> team_;
    std::unique_ptr<DeviceTeamSetUp> setting_up_;  // while the first call sets the team up
    // The call in flight.
    Call call_;
    DeviceNodeWork work_;  // this rank's kernels and copies
    std::unique_ptr<gpu::DeviceMemory> scratch_;  // grown on demand (algo::device_node_scratch)
    size_t scratch_bytes_ = 0;
    uint64_t seq_ = 0;
    Step step_ = Step::Idle;
    int peer_ = 0;  // the next peer whose stage word is awaited
    uint64_t position_ = 0;
    std::string failure_;
    std::vector<const char *> srcs_;  // every rank's source, mapped into this process
    std::vector<char *> dsts_;  // every rank's result
};

}  // namespace gpurdma::algo
