#include "algo/device_one_node.h"

#include <algorithm>
#include <utility>

#include "algo/call_spans.h"
#include "algo/device_team_setup.h"
#include "algo/node_ipc.h"
#include "gpu/buffer_query.h"
#include "gpu/gpu_runtime.h"
#include "gpu/stage_words.h"
#include "reduce/reduce.h"
#include "reduce/reduce_device.h"

namespace gpurdma::algo {

namespace {

constexpr uint64_t kFail = gpu::ControlSlot::kFail;

}  // namespace

DeviceOneNode::DeviceOneNode(gpu::DeviceSetup setup, HostTeam *host) : setup_(std::move(setup)), host_(host) {}

DeviceOneNode::~DeviceOneNode() = default;

// Without a host team (a communicator of one rank): over the bootstrap, at once.
Status DeviceOneNode::set_up(const gpu::PointerInfo &first_buffer)
{
    const Status st = gpu::DeviceTeam::create(setup_, first_buffer, &team_);
    if (st.is_ok()) team_state_ = DeviceSetUp::Ready;
    else if (st.is_unsupported()) team_state_ = DeviceSetUp::Staged;
    return st;
}

Status DeviceOneNode::start(const Call &call)
{
    gpu::PointerInfo sinfo, rinfo;
    gpu::buffer_info(setup_.buffers, {call.sendbuf, call.recvbuf}, &sinfo, &rinfo);
    const gpu::PointerInfo &first = rinfo.kind == gpu::MemoryKind::Device ? rinfo : sinfo;
    if (team_state_ == DeviceSetUp::NotYet && host_) {
        // Among the node's ranks, as steps of this call (advance): nothing waits here.
        call_ = call;
        failure_.clear();
        setting_up_ = std::make_unique<DeviceTeamSetUp>(setup_, *host_, first);
        step_ = Step::SettingUp;
        return Status::ok();
    }
    if (team_state_ == DeviceSetUp::NotYet) {
        const Status st = set_up(first);
        if (!st.is_ok()) return st;  // unsupported: this communicator stages from now on
    }
    if (team_state_ == DeviceSetUp::Staged) return Status::unsupported("this communicator stages GPU buffers");
    return begin_call(call, sinfo, rinfo);
}

// The set-up step of a call that started it: Running until the node agreed, then the call.
exec::State DeviceOneNode::advance_set_up()
{
    CallSetUpHooks hooks;
    hooks.begin = [this](const gpu::PointerInfo &s, const gpu::PointerInfo &r) { return begin_call(call_, s, r); };
    return step_call_set_up(call_, setup_, hooks, &setting_up_, &team_, &team_state_, &position_, &failure_, &step_);
}

Status DeviceOneNode::begin_call(const Call &call, const gpu::PointerInfo &sinfo, const gpu::PointerInfo &rinfo)
{
    call_ = call;
    if (call.coll == plan::Coll::Bcast || (call.coll == plan::Coll::Allreduce && call.sendbuf == call.recvbuf))
        call_.sendbuf = nullptr;  // the one buffer is the receive buffer
    failure_.clear();
    const gpu::PointerInfo &srcinfo = call_.in_place() ? rinfo : sinfo;
    auto usable = [this](const gpu::PointerInfo &i) {
        return i.kind == gpu::MemoryKind::Device && i.context == team_->context() && i.base != 0;
    };
    const BufferSides used = used_sides(call_, setup_.rank);
    bool local_ok = (!used.dst || usable(rinfo)) && (!used.src || usable(srcinfo));

    if (setup_.size == 1) {  // a single rank: one copy on the GPU, none in place
        if (!local_ok) return Status::unsupported("the buffers are not device memory of this communicator's context");
        step_ = Step::Done;
        const size_t bytes = call_.coll == plan::Coll::Bcast || call_.in_place()
                                 ? 0
                                 : total_count(call_, 1) * reduce::dtype_size(call_.dtype);
        if (bytes == 0) return Status::ok();
        const auto &d = gpu::GpuRuntime::instance();
        gpu::ContextScope scope(team_->context());
        const int rc =
            d.api().memcpy_dtod_async(reinterpret_cast<gpu::CUdeviceptr>(call_.recvbuf),
                                      reinterpret_cast<gpu::CUdeviceptr>(call_.sendbuf), bytes, team_->stream());
        if (rc != 0)
            return Status::error(GPURDMA_ERR_TRANSPORT,
                                 setup_.name + ": device copy: " + d.error_text("cuMemcpyDtoDAsync", rc));
        step_ = Step::Copying;
        return Status::ok();
    }

    // Scratch memory, before the post: a rank without it votes to stage the call.
    const size_t scratch = device_node_scratch(call_, setup_.rank);
    if (local_ok && scratch > scratch_bytes_) {
        scratch_.reset();  // the previous call's work on it has finished
        scratch_bytes_ = 0;
        const Status made = gpu::DeviceMemory::create(team_->context(), scratch, &scratch_);
        if (made.is_ok()) scratch_bytes_ = scratch;
        else {
            local_ok = false;
            if (setup_.log && setup_.log->enabled(2))
                setup_.log->log(2, "%s: GPU scratch of %zu bytes: %s: the call stages", setup_.name.c_str(), scratch,
                                made.message().c_str());
        }
    }
    // Post: this call's buffers as IPC handles, and whether this rank can go on.
    post_buffers(*team_, setup_.rank, ++seq_, call_, srcinfo, rinfo, local_ok, shared_sides(call_, setup_.rank));
    enter(Step::Posted);
    return Status::ok();
}

exec::State DeviceOneNode::advance()
{
    for (;;) {
        gpu::ControlSlot *me = setup_.size > 1 && team_ ? &team_->slot(setup_.rank) : nullptr;
        switch (step_) {
            case Step::Posted:
                if (!peers_reached(&gpu::ControlSlot::posted)) return now();
                if (declined()) return exec::State::Declined;
                launch_reduce();
                continue;
            case Step::Reducing:
                if (!stream_finished()) return now();
                me->reduced.store(seq_, std::memory_order_release);
                if (work_.barrier) enter(Step::Reduced);
                else launch_copies();
                continue;
            case Step::Reduced:
                if (!peers_reached(&gpu::ControlSlot::reduced)) return now();
                launch_copies();
                continue;
            case Step::Gathering:
                if (!stream_finished()) return now();
                // No rank returns (and lets its caller reuse the buffers) while a peer still reads them.
                me->gathered.store(seq_, std::memory_order_release);
                enter(Step::Gathered);
                continue;
            case Step::Gathered:
                if (!peers_reached(&gpu::ControlSlot::gathered)) return now();
                enter(Step::Done);
                continue;
            case Step::Copying:
                if (!stream_finished()) return now();
                enter(Step::Done);
                continue;
            case Step::SettingUp: {
                const exec::State st = advance_set_up();
                if (st != exec::State::Running || step_ == Step::SettingUp) return st;
                continue;
            }
            case Step::Done: return exec::State::Done;
            case Step::Failed: return exec::State::Failed;
            case Step::Declined: return exec::State::Declined;
            case Step::Idle: break;
        }
        failure_ = "device path: advanced without a started call";
        step_ = Step::Failed;
        return exec::State::Failed;
    }
}

void DeviceOneNode::enter(Step step)
{
    step_ = step;
    peer_ = 0;
    ++position_;
}

exec::State DeviceOneNode::now() const
{
    return step_ == Step::Failed ? exec::State::Failed : exec::State::Running;
}

// Passes the peers whose stage word has reached this call, in rank order; false while
// one has not, or once one announced that it failed (then step_ is Failed).
bool DeviceOneNode::peers_reached(std::atomic<uint64_t> gpu::ControlSlot::*word)
{
    const gpu::StageScan scan = scan_stage_words(*team_, team_->members(), setup_.rank, word, seq_, &peer_, &position_);
    if (scan != gpu::StageScan::PeerFailed) return scan == gpu::StageScan::Reached;
    failure_ = std::string("device ") + plan::coll_name(call_.coll) + ": " +
               team_->describe(team_->members()[size_t(peer_)]) + " failed in " + stage_name();
    if (step_ == Step::Reduced)  // this rank will not reach the allgather either
        team_->slot(setup_.rank).gathered.store(seq_ | kFail, std::memory_order_release);
    step_ = Step::Failed;
    return false;
}

// Every rank sees the same votes: all stage this call together.
bool DeviceOneNode::declined()
{
    const int r = refusing_member(*team_, team_->members());
    if (r < 0) return false;
    const Logger *log = setup_.log;
    if (log && log->enabled(2))
        log->log(2,
                 "%s: call %llu: %s cannot take the device path (managed/host memory, another context, or no "
                 "IPC handle), staged through host memory",
                 setup_.name.c_str(), static_cast<unsigned long long>(seq_), team_->describe(r).c_str());
    step_ = Step::Declined;
    return true;
}

// The reductions: this rank's part, read straight out of every rank's buffer.
void DeviceOneNode::launch_reduce()
{
    const int rank = setup_.rank;
    // Every rank of the communicator is on this node, in rank order.
    const Status mapped = map_member_buffers(*team_, team_->members(), rank, call_, &srcs_, &dsts_);
    if (!mapped.is_ok()) return fail(mapped.message());
    work_ = device_node_work(call_, setup_.size, rank, srcs_, dsts_,
                             scratch_ ? static_cast<char *>(scratch_->data()) : nullptr);
    for (const DeviceReduction &r : work_.reductions) {
        const Status launched = team_->kernels().reduce(call_.op, call_.dtype, r.dst, r.srcs.data(),
                                                        static_cast<int>(r.srcs.size()), r.count, team_->stream());
        if (!launched.is_ok()) return fail("reduction kernel: " + launched.message());
    }
    enter(Step::Reducing);
}

// The copies: out of the peers' buffers (or this rank's own), by copy engine.
void DeviceOneNode::launch_copies()
{
    const auto &d = gpu::GpuRuntime::instance();
    gpu::ContextScope scope(team_->context());
    for (const DeviceCopy &c : work_.copies) {
        const int rc = d.api().memcpy_dtod_async(reinterpret_cast<gpu::CUdeviceptr>(c.dst),
                                                 reinterpret_cast<gpu::CUdeviceptr>(c.src), c.bytes, team_->stream());
        if (rc != 0) return fail("copy: " + d.error_text("cuMemcpyDtoDAsync", rc));
    }
    enter(Step::Gathering);
}

bool DeviceOneNode::stream_finished()
{
    bool done = false;
    const Status polled = team_->stream_done(&done);
    if (polled.is_ok()) return done;
    if (step_ == Step::Copying) {
        failure_ = "device copy: " + polled.message();
        step_ = Step::Failed;
    } else {
        fail(std::string(step_ == Step::Reducing ? "reduction: " : "copies: ") + polled.message());
    }
    return false;
}

// From the post on, a failure is announced in the stage words, so peers stop too.
void DeviceOneNode::fail(const std::string &what)
{
    gpu::ControlSlot &me = team_->slot(setup_.rank);
    me.reduced.store(seq_ | kFail, std::memory_order_release);
    me.gathered.store(seq_ | kFail, std::memory_order_release);
    failure_ = std::string("device ") + plan::coll_name(call_.coll) + ": " + what;
    step_ = Step::Failed;
}

void DeviceOneNode::abandon()
{
    if (setup_.size > 1 && team_) {
        gpu::ControlSlot &me = team_->slot(setup_.rank);
        if (step_ == Step::Reducing) me.reduced.store(seq_ | kFail, std::memory_order_release);
        if (step_ == Step::Reducing || step_ == Step::Reduced || step_ == Step::Gathering)
            me.gathered.store(seq_ | kFail, std::memory_order_release);
    }
    step_ = Step::Failed;
}

void DeviceOneNode::finish()
{
    const Logger *log = setup_.log;
    if (setup_.size > 1 && log && log->enabled(2))
        log->log(2, "%s: %s %zu x %s %s on the GPU (%zu kernels, %zu copies over %s), call %llu", setup_.name.c_str(),
                 plan::coll_name(call_.coll), call_.count, gpurdma_dtype_name(call_.dtype),
                 call_.reduces() ? gpurdma_op_name(call_.op) : "", work_.reductions.size(), work_.copies.size(),
                 gpu::GpuRuntime::instance().ipc_name(), static_cast<unsigned long long>(seq_));
    step_ = Step::Idle;
}

std::string DeviceOneNode::stage_name() const
{
    const std::string coll = plan::coll_name(call_.coll);
    switch (step_) {
        case Step::Posted: return "device " + coll + ": post";
        case Step::Reducing:
        case Step::Reduced: return "device " + coll + ": reductions";
        case Step::Gathering: return "device " + coll + ": copies";
        case Step::Gathered: return "device " + coll + ": release";
        case Step::Copying: return "device copy";
        default: return "device " + coll;
    }
}

std::string DeviceOneNode::describe_wait() const
{
    if (setting_up_) return setting_up_->describe_wait();
    const std::string stage = stage_name();
    switch (step_) {
        case Step::Posted:
        case Step::Reduced:
        case Step::Gathered: return stage + ", waiting for " + team_->describe(peer_);
        case Step::Reducing: return stage + ", waiting for this rank's reduction kernels";
        case Step::Gathering: return stage + ", waiting for this rank's copies";
        case Step::Copying: return stage + ", waiting for the copy on the GPU";
        default: return stage;
    }
}

std::string DeviceOneNode::describe_call() const
{
    if (setup_.size == 1) return "device copy";
    const std::string ipc = gpu::GpuRuntime::instance().ipc_name();
    std::string how;
    switch (call_.coll) {
        case plan::Coll::Allreduce: how = ipc + " reduce-scatter kernel + copy-engine allgather"; break;
        case plan::Coll::ReduceScatter: how = ipc + " reduction kernel"; break;
        case plan::Coll::Allgather: how = "copy engine over " + ipc; break;
        case plan::Coll::Bcast: how = "copy engine out of the root's buffer over " + ipc; break;
        case plan::Coll::Reduce: how = ipc + " reduction kernels into the root's buffer"; break;
    }
    return std::string("device ") + plan::coll_name(call_.coll) + " (" + how + "), " + std::to_string(setup_.size) +
           " ranks";
}

}  // namespace gpurdma::algo
