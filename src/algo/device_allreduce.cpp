#include "algo/device_allreduce.h"

#include <algorithm>
#include <utility>

#include "algo/device_team_setup.h"
#include "algo/node_ipc.h"
#include "gpu/buffer_query.h"
#include "gpu/stage_words.h"
#include "reduce/reduce.h"
#include "reduce/reduce_device.h"

namespace gpurdma::algo {

namespace {

constexpr uint64_t kFail = gpu::ControlSlot::kFail;

bool in_place(const Call &call)
{
    return call.sendbuf == nullptr || call.sendbuf == call.recvbuf;
}

}  // namespace

DeviceAllreduce::DeviceAllreduce(gpu::DeviceSetup setup, HostTeam *host) : setup_(std::move(setup)), host_(host) {}

DeviceAllreduce::~DeviceAllreduce() = default;

// Without a host team (a communicator of one rank): over the bootstrap, at once.
Status DeviceAllreduce::set_up(const gpu::PointerInfo &first_buffer)
{
    const Status st = gpu::DeviceTeam::create(setup_, first_buffer, &team_);
    if (st.is_ok()) team_state_ = DeviceSetUp::Ready;
    else if (st.is_unsupported()) team_state_ = DeviceSetUp::Staged;
    return st;
}

Status DeviceAllreduce::start(const Call &call)
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
exec::State DeviceAllreduce::advance_set_up()
{
    CallSetUpHooks hooks;
    hooks.begin = [this](const gpu::PointerInfo &s, const gpu::PointerInfo &r) { return begin_call(call_, s, r); };
    return step_call_set_up(call_, setup_, hooks, &setting_up_, &team_, &team_state_, &position_, &failure_, &step_);
}

Status DeviceAllreduce::begin_call(const Call &call, const gpu::PointerInfo &sinfo, const gpu::PointerInfo &rinfo)
{
    call_ = call;
    if (in_place(call)) call_.sendbuf = nullptr;
    elem_ = reduce::dtype_size(call.dtype);
    failure_.clear();
    const gpu::PointerInfo &srcinfo = call_.in_place() ? rinfo : sinfo;
    auto usable = [this](const gpu::PointerInfo &i) {
        return i.kind == gpu::MemoryKind::Device && i.context == team_->context() && i.base != 0;
    };
    const bool local_ok = usable(rinfo) && usable(srcinfo);

    if (setup_.size == 1) {  // a single rank: one copy on the GPU, none in place
        if (!local_ok) return Status::unsupported("the buffers are not device memory of this communicator's context");
        step_ = Step::Done;
        if (call_.in_place()) return Status::ok();
        const auto &d = gpu::CudaDriver::instance();
        gpu::ContextScope scope(team_->context());
        const int rc = d.api().memcpy_dtod_async(reinterpret_cast<gpu::CUdeviceptr>(call_.recvbuf),
                                                 reinterpret_cast<gpu::CUdeviceptr>(call_.sendbuf), call_.count * elem_,
                                                 team_->stream());
        if (rc != 0)
            return Status::error(GPURDMA_ERR_TRANSPORT,
                                 setup_.name + ": device copy: " + d.error_text("cuMemcpyDtoDAsync", rc));
        step_ = Step::Copying;
        return Status::ok();
    }

    // Slices start on 64-byte multiples (every element size divides 64), so the
    // kernel's 16-byte vector loads apply wherever the buffers are aligned.
    const size_t align = 64 / elem_, ranks = static_cast<size_t>(setup_.size);
    per_rank_ = ((call_.count + ranks - 1) / ranks + align - 1) / align * align;

    // Post: this call's buffers as IPC handles, and whether this rank can go on.
    post_buffers(*team_, setup_.rank, ++seq_, call_, srcinfo, rinfo, local_ok);
    enter(Step::Posted);
    return Status::ok();
}

exec::State DeviceAllreduce::advance()
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
                enter(Step::Reduced);
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
        failure_ = "device allreduce: advanced without a started call";
        step_ = Step::Failed;
        return exec::State::Failed;
    }
}

void DeviceAllreduce::enter(Step step)
{
    step_ = step;
    peer_ = 0;
    ++position_;
}

exec::State DeviceAllreduce::now() const
{
    return step_ == Step::Failed ? exec::State::Failed : exec::State::Running;
}

// Passes the peers whose stage word has reached this call, in rank order; false while
// one has not, or once one announced that it failed (then step_ is Failed).
bool DeviceAllreduce::peers_reached(std::atomic<uint64_t> gpu::ControlSlot::*word)
{
    const gpu::StageScan scan = scan_stage_words(*team_, team_->members(), setup_.rank, word, seq_, &peer_, &position_);
    if (scan != gpu::StageScan::PeerFailed) return scan == gpu::StageScan::Reached;
    failure_ = "device allreduce: " + team_->describe(team_->members()[size_t(peer_)]) + " failed in " + stage_name();
    if (step_ == Step::Reduced)  // this rank will not reach the allgather either
        team_->slot(setup_.rank).gathered.store(seq_ | kFail, std::memory_order_release);
    step_ = Step::Failed;
    return false;
}

// Every rank sees the same votes: all stage this call together.
bool DeviceAllreduce::declined()
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

// Reduce-scatter: this rank's slice, read straight out of every rank's buffer.
void DeviceAllreduce::launch_reduce()
{
    const int size = setup_.size, rank = setup_.rank;
    // Every rank of the communicator is on this node, in rank order.
    const Status mapped = map_member_buffers(*team_, team_->members(), rank, call_, &srcs_, &dsts_);
    if (!mapped.is_ok()) return fail(mapped.message());
    const size_t lo = slice_begin(rank), hi = slice_end(rank);
    if (hi > lo) {
        std::vector<const void *> in(static_cast<size_t>(size));
        for (size_t r = 0; r < in.size(); ++r) in[r] = srcs_[r] + lo * elem_;
        const Status launched = team_->kernels().reduce(call_.op, call_.dtype, dsts_[size_t(rank)] + lo * elem_,
                                                        in.data(), size, hi - lo, team_->stream());
        if (!launched.is_ok()) return fail("reduce-scatter kernel: " + launched.message());
    }
    enter(Step::Reducing);
}

// Allgather: the other slices out of their owners' results, by copy engine.
void DeviceAllreduce::launch_copies()
{
    const auto &d = gpu::CudaDriver::instance();
    gpu::ContextScope scope(team_->context());
    char *recv = static_cast<char *>(call_.recvbuf);
    for (int r = 0; r < setup_.size; ++r) {
        const size_t lo = slice_begin(r), hi = slice_end(r);
        if (r == setup_.rank || hi <= lo) continue;
        const int rc = d.api().memcpy_dtod_async(reinterpret_cast<gpu::CUdeviceptr>(recv + lo * elem_),
                                                 reinterpret_cast<gpu::CUdeviceptr>(dsts_[size_t(r)] + lo * elem_),
                                                 (hi - lo) * elem_, team_->stream());
        if (rc != 0)
            return fail("allgather copy from " + team_->describe(r) + ": " + d.error_text("cuMemcpyDtoDAsync", rc));
    }
    enter(Step::Gathering);
}

bool DeviceAllreduce::stream_finished()
{
    bool done = false;
    const Status polled = team_->stream_done(&done);
    if (polled.is_ok()) return done;
    if (step_ == Step::Copying) {
        failure_ = "device copy: " + polled.message();
        step_ = Step::Failed;
    } else {
        fail(std::string(step_ == Step::Reducing ? "reduce-scatter: " : "allgather: ") + polled.message());
    }
    return false;
}

// From the post on, a failure is announced in the stage words, so peers stop too.
void DeviceAllreduce::fail(const std::string &what)
{
    gpu::ControlSlot &me = team_->slot(setup_.rank);
    me.reduced.store(seq_ | kFail, std::memory_order_release);
    me.gathered.store(seq_ | kFail, std::memory_order_release);
    failure_ = "device allreduce: " + what;
    step_ = Step::Failed;
}

void DeviceAllreduce::abandon()
{
    if (setup_.size > 1 && team_) {
        gpu::ControlSlot &me = team_->slot(setup_.rank);
        if (step_ == Step::Reducing) me.reduced.store(seq_ | kFail, std::memory_order_release);
        if (step_ == Step::Reducing || step_ == Step::Reduced || step_ == Step::Gathering)
            me.gathered.store(seq_ | kFail, std::memory_order_release);
    }
    step_ = Step::Failed;
}

void DeviceAllreduce::finish()
{
    const Logger *log = setup_.log;
    if (setup_.size > 1 && log && log->enabled(2))
        log->log(2, "%s: allreduce %zu x %s %s on the GPU (IPC reduce-scatter + copy-engine allgather), call %llu",
                 setup_.name.c_str(), call_.count, gpurdma_dtype_name(call_.dtype), gpurdma_op_name(call_.op),
                 static_cast<unsigned long long>(seq_));
    step_ = Step::Idle;
}

const char *DeviceAllreduce::stage_name() const
{
    switch (step_) {
        case Step::Posted: return "device post";
        case Step::Reducing:
        case Step::Reduced: return "device reduce-scatter";
        case Step::Gathering:
        case Step::Gathered: return "device allgather";
        case Step::Copying: return "device copy";
        default: return "device allreduce";
    }
}

std::string DeviceAllreduce::describe_wait() const
{
    if (setting_up_) return setting_up_->describe_wait();
    const std::string stage = stage_name();
    switch (step_) {
        case Step::Posted:
        case Step::Reduced:
        case Step::Gathered: return stage + ", waiting for " + team_->describe(peer_);
        case Step::Reducing: return stage + ", waiting for this rank's reduce-scatter kernel";
        case Step::Gathering: return stage + ", waiting for this rank's allgather copies";
        case Step::Copying: return stage + ", waiting for the copy on the GPU";
        default: return stage;
    }
}

std::string DeviceAllreduce::describe_call() const
{
    if (setup_.size == 1) return "device copy";
    return "device allreduce (CUDA IPC reduce-scatter kernel + copy-engine allgather), " + std::to_string(setup_.size) +
           " ranks";
}

size_t DeviceAllreduce::slice_begin(int r) const
{
    return std::min(call_.count, per_rank_ * size_t(r));
}

size_t DeviceAllreduce::slice_end(int r) const
{
    return std::min(call_.count, per_rank_ * size_t(r) + per_rank_);
}

}  // namespace gpurdma::algo
