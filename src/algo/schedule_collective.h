// The collectives beyond allreduce (reduce-scatter, allgather, bcast, reduce) as
// schedules (plan/collective.h) run by exec::Executor over the host team's router: the
// path wherever the node's segment holds slot channels (communicators across nodes, or
// a forced schedule algorithm). Schedules are cached per call shape; the accumulator a
// schedule needs (Stage) is this object's, kept between calls.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/host_team.h"
#include "exec/executor.h"
#include "plan/collective.h"
#include "plan/schedule.h"

namespace gpurdma::algo {

class ScheduleCollective final : public Algorithm {
public:
    explicit ScheduleCollective(HostTeam &team) : team_(team) {}

    Status start(const Call &call) override;
    Status prepare(const Call &call) override;
    Status run(const exec::ProgressLoop &loop) override { return loop.run_as(*this); }
    exec::State advance() override { return exec_->advance(); }
    uint64_t position() const override { return exec_->position(); }
    // "bcast tree (inter-node), waiting for data from rank 3 on host b"
    std::string describe_wait() const override;
    std::string describe_failure() const override;
    uint64_t gpurdma_comm_stats_t::*counter() const override { return &gpurdma_comm_stats_t::ring_calls; }
    const char *collective() const override { return plan::coll_name(coll_); }
    std::string describe_call() const override;  // "allgather schedule, 14 steps"

private:
    const plan::Schedule &schedule_for(const Call &call);
    std::string stage() const;

    HostTeam &team_;
    plan::Coll coll_ = plan::Coll::Bcast;  // the current call's
    std::map<plan::CollShape, plan::Schedule> schedules_;
    const plan::Schedule *schedule_ = nullptr;
    std::vector<char> stage_;  // the accumulator, grown to the largest schedule's stage_bytes
    std::optional<exec::Executor> exec_;
};

}  // namespace gpurdma::algo
