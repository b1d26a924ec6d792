#include "algo/schedule_allreduce.h"

#include "base/text.h"
#include "reduce/reduce.h"

namespace gpurdma::algo {

namespace {

constexpr size_t kMaxCachedSchedules = 32;

}  // namespace

Status ScheduleAllreduce::start(const Call &call)
{
    start_schedule(schedule_for(call.count, reduce::dtype_size(call.dtype), call.in_place(), algorithm_), call);
    return Status::ok();
}

Status ScheduleAllreduce::prepare(const Call &call)
{
    (void)schedule_for(call.count, reduce::dtype_size(call.dtype), call.in_place(), algorithm_);
    return Status::ok();
}

void ScheduleAllreduce::start_schedule(const plan::Schedule &schedule, const Call &call)
{
    schedule_ = &schedule;
    name_ = call_name(call);
    exec_.emplace(schedule, team_.router(), call.op, call.dtype, call.sendbuf, call.recvbuf);
    exec_->set_recorder(recorder_);
}

const plan::Schedule &ScheduleAllreduce::schedule_for(size_t count, size_t elem_size, bool in_place,
                                                      plan::Algorithm algorithm)
{
    const auto key = std::make_tuple(count, elem_size, in_place, algorithm);
    auto it = schedules_.find(key);
    if (it != schedules_.end()) return it->second;
    if (schedules_.size() >= kMaxCachedSchedules) schedules_.clear();
    return schedules_
        .emplace(key, plan::build(team_.topology(), team_.rank(), count, elem_size, in_place, algorithm, team_.plan()))
        .first->second;
}

std::string ScheduleAllreduce::describe_peer(int peer) const
{
    return describe_rank(peer, team_.hosts());
}

std::string ScheduleAllreduce::stage() const
{
    const plan::Step *step = exec_->current();
    std::string phase = step ? plan::phase_name(step->phase) : "completion";
    if (step && step->peer >= 0) {
        const auto &node_of = team_.topology().node_of;
        phase += node_of[static_cast<size_t>(step->peer)] == node_of[static_cast<size_t>(team_.rank())]
                     ? " (intra-node)"
                     : " (inter-node)";
    }
    return phase;
}

std::string ScheduleAllreduce::describe_wait() const
{
    const plan::Step *step = exec_->current();
    if (!step) return stage() + ", waiting for sends to complete";
    if (step->kind == plan::StepKind::Send)
        return stage() + ", waiting for " + describe_peer(step->peer) + " to free a landing slot";
    return stage() + ", waiting for data from " + describe_peer(step->peer);
}

std::string ScheduleAllreduce::describe_failure() const
{
    const plan::Step *step = exec_->current();
    return std::string(name_) + " failed in " + stage() + " with " + describe_peer(step ? step->peer : -1) + ": " +
           exec_->error();
}

uint64_t gpurdma_comm_stats_t::*ScheduleAllreduce::counter() const
{
    switch (schedule_->algorithm) {
        case plan::Algorithm::Ring: return &gpurdma_comm_stats_t::ring_calls;
        case plan::Algorithm::Hierarchical: return &gpurdma_comm_stats_t::hier_calls;
        default: return &gpurdma_comm_stats_t::rd_calls;
    }
}

std::string ScheduleAllreduce::describe_call() const
{
    return std::string(plan::algorithm_name(schedule_->algorithm)) + ", " + std::to_string(schedule_->steps.size()) +
           " steps";
}

}  // namespace gpurdma::algo
