// The schedule-driven allreduces: ring, recursive doubling and hierarchical, each a
// plan::Schedule (the algorithm chosen by algo::Selector per call, its schedule built
// by the planner per message shape and cached) run by exec::Executor over the host
// team's router (shared memory within a node, UCX between nodes).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "algo/algorithm.h"
#include "algo/host_team.h"
#include "exec/executor.h"
#include "plan/schedule.h"

namespace gpurdma::algo {

class ScheduleAllreduce final : public Algorithm {
public:
    explicit ScheduleAllreduce(HostTeam &team) : team_(team) {}

    // The algorithm the next start() builds (Ring, RecursiveDoubling or Hierarchical):
    // Selector::choose sets it for every call before handing this object out.
    void set_algorithm(plan::Algorithm algorithm) { algorithm_ = algorithm; }
    plan::Algorithm algorithm() const { return algorithm_; }

    // The call's schedule for the set algorithm from the cache (built on first use),
    // and its executor.
    Status start(const Call &call) override;
    // Builds (and caches) the call's schedule for the set algorithm.
    Status prepare(const Call &call) override;
    // Runs `schedule` (which must outlive the call) for `call` instead: set-up's
    // calibration ping-pong.
    void start_schedule(const plan::Schedule &schedule, const Call &call);

    Status run(const exec::ProgressLoop &loop) override { return loop.run_as(*this); }
    exec::State advance() override { return exec_->advance(); }
    uint64_t position() const override { return exec_->position(); }
    // "ring reduce-scatter (inter-node), waiting for data from rank 3 on host b"
    std::string describe_wait() const override;
    // "allreduce failed in ring allgather (inter-node) with rank 3 on host b: <transport error>"
    std::string describe_failure() const override;
    uint64_t gpurdma_comm_stats_t::*counter() const override;
    std::string describe_call() const override;  // "ring, 14 steps"
    const char *collective() const override { return name_; }

private:
    const plan::Schedule &schedule_for(size_t count, size_t elem_size, bool in_place, plan::Algorithm algorithm);
    // The phase of the step waited on, and whether its peer is on this node.
    std::string stage() const;
    std::string describe_peer(int peer) const;

    HostTeam &team_;
    plan::Algorithm algorithm_ = plan::Algorithm::Ring;  // the next call's, set by the selector
    // By (count, elem_size, in_place, algorithm).
    std::map<std::tuple<size_t, size_t, bool, plan::Algorithm>, plan::Schedule> schedules_;
    const plan::Schedule *schedule_ = nullptr;  // the current call's
    std::optional<exec::Executor> exec_;
    const char *name_ = "allreduce";  // the current call's, for messages ("barrier" too)
};

}  // namespace gpurdma::algo
