// The hierarchical device path's pipeline: units of the call staged out of GPU memory
// into chunks, each chunk's rail allreduce, the copies back, then the node allgather.
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

// Moves every unit as far as it can go without waiting: stage out into free chunks,
// the rail stage of the next staged unit, copies back; all back: reduced.
void DeviceHierarchical::pump()
{
    for (bool moved = true; moved && step_ == Step::Pipeline;) {
        moved = false;
        // Copies back that have landed free their chunk.
        for (auto &c : chunks_) {
            if (c.state != Chunk::State::Back) continue;
            bool done = false;
            const Status polled = c.back->reached(&done);
            if (!polled.is_ok()) return fail(Stage::H2D, polled.message());
            if (!done) continue;
            add_time(Stage::H2D, c.since);
            unit_back(c);
            moved = true;
        }
        // The next units out into free chunks (kernel + copy out, on the stream).
        while (next_out_ < mine_.size()) {
            Chunk &c = chunks_[next_out_ % chunks_.size()];
            if (c.state != Chunk::State::Free) break;
            if (!stage_out(c, next_out_)) return;
            ++next_out_;
            moved = true;
        }
        // The rail stage: one unit at a time, in wire order.
        if (!rail_chunk_ && next_rail_ < next_out_) {
            Chunk &c = chunks_[next_rail_ % chunks_.size()];
            bool done = false;
            const Status polled = c.out->reached(&done);
            if (!polled.is_ok()) return fail(on_gpu() ? Stage::NodeRs : Stage::D2H, polled.message());
            if (done) {
                add_time(Stage::D2H, c.since);
                timeline_[c.mine].staged = ms_since(call_start_);
                if (!start_rail(c)) return;
                moved = true;
            }
        }
        if (rail_chunk_) {
            const size_t before = exec_->position();
            const exec::State st = exec_->advance();
            if (exec_->position() != before) ++position_, moved = true;
            if (st == exec::State::Failed) {
                const plan::Step *s = exec_->current();
                const int peer = s ? s->peer : -1;
                return fail(Stage::InterNode, "rail of slice " + std::to_string(units_[rail_chunk_->unit].slice) +
                                                  ", with " + describe_peer(peer) + ": " + exec_->error());
            }
            if (st == exec::State::Done) {
                add_time(Stage::InterNode, rail_chunk_->since);
                timeline_[rail_chunk_->mine].railed = ms_since(call_start_);
                // On the GPU the rail ran in place: the slice is where it belongs.
                if (on_gpu()) unit_back(*rail_chunk_);
                else if (!copy_back(*rail_chunk_)) return;
                rail_chunk_ = nullptr;
                exec_.reset();
                ++next_rail_;
                moved = true;
            }
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

void DeviceHierarchical::unit_back(Chunk &chunk)
{
    timeline_[chunk.mine].back = ms_since(call_start_);
    chunk.state = Chunk::State::Free;
    ++units_back_;
    ++position_;
}

// Node reduce-scatter of one unit (the kernel over the node's buffers into this
// rank's receive buffer), then, where the host reduces, its copy out to the chunk
// buffer; both on the stream. Where the GPU reduces, a node of one copies its source
// into the receive buffer instead (not in place): the rail runs there.
bool DeviceHierarchical::stage_out(Chunk &chunk, size_t index)
{
    const auto &d = gpu::CudaDriver::instance();
    const plan::RailUnit &u = units_[mine_[index]];
    const size_t off = u.first * elem_, bytes = u.count * elem_;
    chunk.unit = mine_[index];
    chunk.mine = index;
    chunk.since = Clock::now();
    timeline_[index].out = ms_since(call_start_);
    const char *from = srcs_[0] + off;  // a node of one: straight from the source
    if (multi()) {
        stage_ = Stage::NodeRs;
        const auto &members = team_->members();
        std::vector<const void *> in(members.size());
        for (size_t i = 0; i < in.size(); ++i) in[i] = srcs_[i] + off;
        const size_t me = size_t(std::find(members.begin(), members.end(), setup_.rank) - members.begin());
        const Status launched = team_->kernels().reduce(call_.op, call_.dtype, dsts_[me] + off, in.data(),
                                                        static_cast<int>(in.size()), u.count, team_->stream());
        if (!launched.is_ok()) {
            fail(Stage::NodeRs, "kernel: " + launched.message());
            return false;
        }
        from = dsts_[me] + off;
    }
    gpu::ContextScope scope(team_->context());
    if (on_gpu()) {
        char *into = static_cast<char *>(call_.recvbuf) + off;
        if (!multi() && from != into) {
            const int rc = d.api().memcpy_dtod_async(reinterpret_cast<gpu::CUdeviceptr>(into),
                                                     reinterpret_cast<gpu::CUdeviceptr>(from), bytes, team_->stream());
            if (rc != 0) {
                fail(Stage::NodeRs, d.error_text("cuMemcpyDtoDAsync", rc));
                return false;
            }
        }
        const Status fenced = chunk.out->record();
        if (!fenced.is_ok()) {
            fail(Stage::NodeRs, fenced.message());
            return false;
        }
        chunk.state = Chunk::State::Out;
        ++position_;
        return true;
    }
    stage_ = Stage::D2H;
    const auto src = reinterpret_cast<gpu::CUdeviceptr>(from);
    const int rc = d.api().memcpy_dtoh_async
                       ? d.api().memcpy_dtoh_async(chunk.buffer->data(), src, bytes, team_->stream())
                       : d.api().memcpy_async(reinterpret_cast<gpu::CUdeviceptr>(chunk.buffer->data()), src, bytes,
                                              team_->stream());
    if (rc != 0) {
        fail(Stage::D2H, d.error_text("cuMemcpyDtoHAsync", rc));
        return false;
    }
    const Status fenced = chunk.out->record();
    if (!fenced.is_ok()) {
        fail(Stage::D2H, fenced.message());
        return false;
    }
    chunk.state = Chunk::State::Out;
    ++position_;
    return true;
}

const plan::Schedule &DeviceHierarchical::rail_schedule(int slice, size_t count)
{
    const auto key = std::make_tuple(slice, count, elem_);
    auto it = rails_.find(key);
    if (it != rails_.end()) return it->second;
    if (rails_.size() >= kMaxCachedRails && !exec_) rails_.clear();
    return rails_
        .emplace(key, plan::build_rail_allreduce(host_.topology(), setup_.rank, slice, count, elem_, host_.plan()))
        .first->second;
}

bool DeviceHierarchical::start_rail(Chunk &chunk)
{
    stage_ = Stage::InterNode;
    const plan::RailUnit &u = units_[chunk.unit];
    if (on_gpu())
        exec_.emplace(rail_schedule(u.slice, u.count), host_.router(), call_.op, call_.dtype, nullptr,
                      static_cast<char *>(call_.recvbuf) + u.first * elem_, *rail_work_);
    else
        exec_.emplace(rail_schedule(u.slice, u.count), host_.router(), call_.op, call_.dtype, nullptr,
                      chunk.buffer->data());
    chunk.state = Chunk::State::Rail;
    chunk.since = Clock::now();
    rail_chunk_ = &chunk;
    ++position_;
    return true;
}

bool DeviceHierarchical::copy_back(Chunk &chunk)
{
    const auto &d = gpu::CudaDriver::instance();
    const plan::RailUnit &u = units_[chunk.unit];
    stage_ = Stage::H2D;
    chunk.since = Clock::now();
    gpu::ContextScope scope(team_->context());
    const auto dst = reinterpret_cast<gpu::CUdeviceptr>(static_cast<char *>(call_.recvbuf) + u.first * elem_);
    const size_t bytes = u.count * elem_;
    const int rc = d.api().memcpy_htod_async
                       ? d.api().memcpy_htod_async(dst, chunk.buffer->data(), bytes, team_->stream())
                       : d.api().memcpy_async(dst, reinterpret_cast<gpu::CUdeviceptr>(chunk.buffer->data()), bytes,
                                              team_->stream());
    if (rc != 0) {
        fail(Stage::H2D, d.error_text("cuMemcpyHtoDAsync", rc));
        return false;
    }
    const Status fenced = chunk.back->record();
    if (!fenced.is_ok()) {
        fail(Stage::H2D, fenced.message());
        return false;
    }
    chunk.state = Chunk::State::Back;
    return true;
}

// Node allgather: every unit this rank does not own, out of its owner's result.
void DeviceHierarchical::launch_gather()
{
    const auto &d = gpu::CudaDriver::instance();
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
