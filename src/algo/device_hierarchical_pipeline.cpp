// The hierarchical device path's pipeline: each unit of the call a schedule run by an
// executor (node reduce, copy out, rail, copy back), then the node allgather.
#include "algo/device_hierarchical.h"

#include <algorithm>

#include "plan/planner.h"
#include "reduce/reduce.h"
#include "reduce/reduce_device.h"

namespace gpurdma::algo {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

// Moves every unit as far as it can go without waiting: each unit is a schedule
// (plan/device_unit.h) that an executor runs over its chunk's local work; free chunks
// take the next units; the rail stages run one unit at a time, in wire order. All
// back: reduced.
void DeviceHierarchical::pump()
{
    const size_t n = chunks_.size();
    for (bool moved = true; moved && step_ == Step::Pipeline;) {
        moved = false;
        while (next_out_ < mine_.size()) {
            Chunk &c = chunks_[next_out_ % n];
            if (c.state != Chunk::State::Free) break;
            start_unit(c, next_out_++);
            moved = true;
        }
        // The units in flight, oldest first (at most one per chunk).
        for (size_t k = next_out_ > n ? next_out_ - n : 0; k < next_out_ && step_ == Step::Pipeline; ++k) {
            Chunk &c = chunks_[k % n];
            if (c.state != Chunk::State::Free && c.mine == k && step_unit(c)) moved = true;
        }
    }
    if (step_ != Step::Pipeline || units_back_ < mine_.size()) return;
    stage_ = Stage::NodeAg;
    stage_start_ = Clock::now();
    if (!multi()) {
        enter(Step::Done);
        return;
    }
    team_->slot(setup_.rank).reduced.store(seq_, std::memory_order_release);
    enter(Step::Reduced);
}

void DeviceHierarchical::start_unit(Chunk &chunk, size_t index)
{
    const plan::RailUnit &u = units_[mine_[index]];
    chunk.unit = mine_[index];
    chunk.mine = index;
    chunk.since = Clock::now();
    timeline_[index].out = ms_since(call_start_);
    plan::DeviceUnit unit;
    unit.first_byte = u.first * elem_;
    unit.bytes = u.count * elem_;
    unit.node_reduce = multi();
    unit.stage_on_host = !on_gpu();
    unit.in_place = call_.in_place();
    chunk.schedule = plan::build_device_unit(rail_schedule(u.slice, u.count), unit, &chunk.span);
    chunk.exec.emplace(chunk.schedule, host_.router(), call_.op, call_.dtype, call_.sendbuf, call_.recvbuf,
                       *chunk.work);
    if (chunk.buffer) chunk.exec->set_stage(chunk.buffer->data());
    chunk.exec->set_node_sources(&node_srcs_);
    chunk.exec->set_recorder(recorder_);
    chunk.state = Chunk::State::Out;
    stage_ = multi() ? Stage::NodeRs : Stage::D2H;
    ++position_;
}

bool DeviceHierarchical::step_unit(Chunk &chunk)
{
    exec::Executor &e = *chunk.exec;
    // Wire order: the rail of this unit only after the units before it passed theirs
    // (next_rail_ counts them); a unit past its rail has no limit.
    e.set_limit(chunk.mine <= next_rail_ ? SIZE_MAX : chunk.span.rail_begin);
    const size_t before = e.position();
    const exec::State st = e.advance();
    bool moved = e.position() != before;
    if (moved) ++position_;
    if (st == exec::State::Failed) {
        const size_t at = e.position();
        if (at < chunk.span.rail_begin) {
            fail(at == 0 && multi() ? Stage::NodeRs : on_gpu() ? Stage::NodeRs : Stage::D2H, e.error());
        } else if (at < chunk.span.rail_end) {
            const plan::Step *s = e.current();
            fail(Stage::InterNode, "rail of slice " + std::to_string(units_[chunk.unit].slice) + ", with " +
                                       describe_peer(s ? s->peer : -1) + ": " + e.error());
        } else {
            fail(Stage::H2D, e.error());
        }
        return false;
    }
    if (chunk.state == Chunk::State::Out && e.position() >= chunk.span.rail_begin) {
        add_time(Stage::D2H, chunk.since);
        timeline_[chunk.mine].staged = ms_since(call_start_);
        chunk.state = Chunk::State::Rail;
        chunk.since = Clock::now();
        stage_ = Stage::InterNode;
        moved = true;
    }
    if (chunk.state == Chunk::State::Rail && e.position() >= chunk.span.rail_end) {
        add_time(Stage::InterNode, chunk.since);
        timeline_[chunk.mine].railed = ms_since(call_start_);
        chunk.state = Chunk::State::Back;
        chunk.since = Clock::now();
        ++next_rail_;
        if (!on_gpu()) stage_ = Stage::H2D;
        moved = true;
    }
    if (st == exec::State::Done) {
        // On the GPU the rail ran in place: the slice is where it belongs.
        if (!on_gpu()) add_time(Stage::H2D, chunk.since);
        unit_back(chunk);
        moved = true;
    }
    return moved;
}

void DeviceHierarchical::unit_back(Chunk &chunk)
{
    timeline_[chunk.mine].back = ms_since(call_start_);
    chunk.exec.reset();
    chunk.state = Chunk::State::Free;
    ++units_back_;
    ++position_;
}

const plan::Schedule &DeviceHierarchical::rail_schedule(int slice, size_t count)
{
    const auto key = std::make_tuple(slice, count, elem_);
    auto it = rails_.find(key);
    if (it != rails_.end()) return it->second;
    if (rails_.size() >= kMaxCachedRails) rails_.clear();  // the units copy theirs
    return rails_
        .emplace(key, plan::build_rail_allreduce(host_.topology(), setup_.rank, slice, count, elem_, host_.plan()))
        .first->second;
}

// Node allgather: every unit this rank does not own, out of its owner's result.
void DeviceHierarchical::launch_gather()
{
    const auto &d = gpu::GpuRuntime::instance();
    const topo::Topology &t = host_.topology();
    const int node = t.node_of[static_cast<size_t>(setup_.rank)];
    const auto &members = team_->members();
    gpu::ContextScope scope(team_->context());
    char *recv = static_cast<char *>(call_.recvbuf);
    for (const auto &u : units_) {
        const int owner = plan::slice_owner(t, node, u.slice);
        if (owner == setup_.rank) continue;
        const size_t i = size_t(std::find(members.begin(), members.end(), owner) - members.begin());
        const size_t off = u.first * elem_;
        const int rc = d.api().memcpy_dtod_async(reinterpret_cast<gpu::CUdeviceptr>(recv + off),
                                                 reinterpret_cast<gpu::CUdeviceptr>(dsts_[i] + off), u.count * elem_,
                                                 team_->stream());
        if (rc != 0)
            return fail(Stage::NodeAg,
                        "copy from " + team_->describe(owner) + ": " + d.error_text("cuMemcpyDtoDAsync", rc));
    }
    enter(Step::Gathering);
}

bool DeviceHierarchical::stream_finished(Stage stage)
{
    bool done = false;
    const Status polled = team_->stream_done(&done);
    if (polled.is_ok()) return done;
    fail(stage, polled.message());
    return false;
}

}  // namespace gpurdma::algo
