#include "algo/schedule_collective.h"

#include "algo/call_spans.h"
#include "base/text.h"
#include "plan/planner.h"

namespace gpurdma::algo {

namespace {

constexpr size_t kMaxCachedSchedules = 32;

}  // namespace

const plan::Schedule &ScheduleCollective::schedule_for(const Call &call)
{
    plan::CollShape shape = shape_of(call, team_.topology().size);
    auto it = schedules_.find(shape);
    if (it != schedules_.end()) return it->second;
    if (schedules_.size() >= kMaxCachedSchedules) schedules_.clear();
    plan::Schedule s = plan::build_collective(team_.topology(), team_.rank(), shape, team_.plan());
    return schedules_.emplace(std::move(shape), std::move(s)).first->second;
}

Status ScheduleCollective::prepare(const Call &call)
{
    const plan::Schedule &s = schedule_for(call);
    if (stage_.size() < s.stage_bytes) stage_.resize(s.stage_bytes);
    return Status::ok();
}

Status ScheduleCollective::start(const Call &call)
{
    schedule_ = &schedule_for(call);
    coll_ = call.coll;
    if (stage_.size() < schedule_->stage_bytes) stage_.resize(schedule_->stage_bytes);
    exec_.emplace(*schedule_, team_.router(), call.op, call.dtype, call.sendbuf, call.recvbuf);
    exec_->set_stage(stage_.data());
    exec_->set_recorder(recorder_);
    return Status::ok();
}

std::string ScheduleCollective::stage() const
{
    const plan::Step *step = exec_->current();
    std::string phase =
        std::string(plan::coll_name(coll_)) + " " + (step ? plan::phase_name(step->phase) : "completion");
    if (step && step->peer >= 0) {
        const auto &node_of = team_.topology().node_of;
        phase += node_of[static_cast<size_t>(step->peer)] == node_of[static_cast<size_t>(team_.rank())]
                     ? " (intra-node)"
                     : " (inter-node)";
    }
    return phase;
}

std::string ScheduleCollective::describe_wait() const
{
    const plan::Step *step = exec_->current();
    if (!step) return stage() + ", waiting for sends to complete";
    const std::string peer = describe_rank(step->peer, team_.hosts());
    if (step->kind == plan::StepKind::Send) return stage() + ", waiting for " + peer + " to free a landing slot";
    return stage() + ", waiting for data from " + peer;
}

std::string ScheduleCollective::describe_failure() const
{
    const plan::Step *step = exec_->current();
    return std::string(plan::coll_name(coll_)) + " failed in " + stage() + " with " +
           describe_rank(step ? step->peer : -1, team_.hosts()) + ": " + exec_->error();
}

std::string ScheduleCollective::describe_call() const
{
    return std::string(plan::algorithm_name(schedule_->algorithm)) + " schedule, " +
           std::to_string(schedule_->steps.size()) + " steps";
}

}  // namespace gpurdma::algo
