// Which algorithm a communicator's host-memory calls take, and the set-up lines that
// say so. All ranks on one node (algorithm auto or node): the node allreduce for
// every call; otherwise the schedules, ring / recursive doubling / hierarchical by
// message size (plan::choose_algorithm, the cost model's choice under auto).
#pragma once

#include <memory>
#include <string>

#include "algo/algorithm.h"
#include "algo/host_team.h"
#include "algo/node_allreduce.h"
#include "algo/node_collective.h"
#include "algo/schedule_allreduce.h"
#include "algo/schedule_collective.h"
#include "transport/shm_medium.h"

namespace gpurdma::algo {

class Selector {
public:
    // What the chosen algorithm needs from this rank's node segment (the host team
    // sizes the segment before the algorithms exist): slot channels for the
    // schedules, the node arena for the node allreduce.
    static transport::ShmMedium::Request shared_memory(const topo::Topology &topo, int rank,
                                                       const plan::PlanParams &plan, int slots);

    // The team must be connected (and calibrated, if asked) and outlive the selector.
    explicit Selector(HostTeam &team);

    // The algorithm object that takes this call, with its choice made: the node
    // allreduce, or the schedules set to plan::choose_algorithm's algorithm for the
    // call's message size (the parameter's forced choice, or the cost model's).
    Algorithm &choose(const Call &call);

    // The set-up summary at verbose 1 (rank 0): ranks, hosts, media, the choice over
    // the sizes, the cost model, chunking, the wait policy; one line per node with
    // its rail owners. setup_ms: how long the set-up took.
    void log_summary(double setup_ms) const;

private:
    // Auto's choices over the sizes, as ranges: "recursive-doubling up to 32 KiB, hierarchical above".
    std::string describe_choices() const;

    HostTeam &team_;
    std::unique_ptr<NodeSequence> sequence_;  // one node: the arena's blocks, shared by the two below
    std::unique_ptr<NodeAllreduce> node_;  // one node: every allreduce
    std::unique_ptr<NodeCollective> node_collectives_;  // one node: the other collectives
    std::unique_ptr<ScheduleAllreduce> schedules_;  // otherwise
    std::unique_ptr<ScheduleCollective> collectives_;  // the other collectives, where schedules run
};

}  // namespace gpurdma::algo
