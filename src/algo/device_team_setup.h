// The device team's set-up among the ranks of one node (those that pass GPU buffers to
// the call that starts it), as resumable steps: each step() posts this rank's record of
// a round (algo/node_exchange.h) or polls for the node peers', and never waits. The
// device paths run it from their advance(), under the progress loop, with its idle clock
// and timeout like every other wait: whichever thread drives the queue is never held by
// a node peer that is slow to join. The rounds are DeviceTeam::create's: where every
// rank is and its GPU; the control block's name; the vote on what each rank could set up;
// and, where that agreed, attaching the control block and checking peer access.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/host_team.h"
#include "algo/node_exchange.h"
#include "algo/route.h"
#include "base/noncopyable.h"
#include "base/status.h"
#include "exec/task.h"
#include "gpu/device_team.h"

namespace gpurdma::algo {

class DeviceTeamSetUp : private NonCopyable {
public:
    // buffer: the first device buffer of the call that starts the set-up (its context).
    // exchange: the node exchange's name suffix (algo/node_exchange.h).
    DeviceTeamSetUp(const gpu::DeviceSetup &setup, HostTeam &host, const gpu::PointerInfo &buffer,
                    const std::string &exchange = "-dev");

    // Ok with *done: *team is ready. Unsupported (every rank of the node alike): the node
    // stages through host memory. Another error names the set-up's stage.
    Status step(bool *done, std::unique_ptr<gpu::DeviceTeam> *team);
    // Grows whenever a node peer moves (for the wait's idle clock).
    uint64_t position() const { return exchange_.position() + rounds_; }
    std::string describe_wait() const { return exchange_.describe_wait(); }

private:
    enum class Round { Open, Records, Names, Vote, Attach, Done };
    // Posts `mine` (once), then collects: true with *all once every member has posted.
    bool round(const std::string &mine, std::vector<std::string> *all, Status *st);
    // The node's verdict from a vote round's records ("-why" from a rank that cannot).
    Status verdict_of(const std::vector<std::string> &all) const;
    Status finish(std::unique_ptr<gpu::DeviceTeam> *team);

    NodeExchange exchange_;
    std::unique_ptr<gpu::DeviceTeam> team_;
    Status mine_;  // what this rank could set up
    Status verdict_;  // the node's
    Status attach_;  // this rank's attach and peer check
    std::string segment_name_;
    Round round_ = Round::Open;
    bool posted_ = false;
    uint64_t rounds_ = 0;
};

// What a device algorithm does between the node's team and the call that started the set-up.
struct CallSetUpHooks {
    // The algorithm's own set-up on the team, which may take steps too: Ok with *done
    // once it is ready; an error fails the call. None: nothing of its own.
    std::function<Status(bool *done)> ready;
    // The call on the team that is set up, given its buffers: Unsupported where this rank stages it.
    std::function<Status(const gpu::PointerInfo &sinfo, const gpu::PointerInfo &rinfo)> begin;
};

// One set-up step of `call`, which started it, the same for every device algorithm:
// the node's team while *setting_up (released once it ends, *position moved), then
// hooks.ready until done (then *state is Ready), then hooks.begin. Running until the
// call has begun and after; Declined where the node stages (*state Staged: the
// communicator stages from now on) or begin said Unsupported; Failed with *failure.
exec::State step_call_set_up(const Call &call, const gpu::DeviceSetup &setup, const CallSetUpHooks &hooks,
                             std::unique_ptr<DeviceTeamSetUp> *setting_up, std::unique_ptr<gpu::DeviceTeam> *team,
                             DeviceSetUp *state, uint64_t *position, std::string *failure);

// The same, and the algorithm's *step (an enum with Declined and Failed) follows what it says.
template <class Step>
exec::State step_call_set_up(const Call &call, const gpu::DeviceSetup &setup, const CallSetUpHooks &hooks,
                             std::unique_ptr<DeviceTeamSetUp> *setting_up, std::unique_ptr<gpu::DeviceTeam> *team,
                             DeviceSetUp *state, uint64_t *position, std::string *failure, Step *step)
{
    const exec::State st = step_call_set_up(call, setup, hooks, setting_up, team, state, position, failure);
    if (st == exec::State::Declined) *step = Step::Declined;
    if (st == exec::State::Failed) *step = Step::Failed;
    return st;
}

}  // namespace gpurdma::algo
