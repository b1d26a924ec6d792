#include "algo/device_node_rail.h"

#include <chrono>
#include <thread>
#include <utility>

#include "algo/call_spans.h"
#include "algo/node_ipc.h"
#include "base/text.h"
#include "gpu/buffer_query.h"
#include "gpu/gpu_runtime.h"
#include "gpu/stage_words.h"
#include "reduce/reduce.h"

namespace gpurdma::algo {

namespace {

constexpr uint64_t kFail = gpu::ControlSlot::kFail;
constexpr size_t kMaxCachedSchedules = 32;
// Its own node exchange: the allreduce's device path may set up its team beside this one.
const char *const kExchange = "-devc";

}  // namespace

DeviceNodeRail::DeviceNodeRail(gpu::DeviceSetup setup, HostTeam &host) : setup_(std::move(setup)), host_(host) {}

DeviceNodeRail::~DeviceNodeRail()
{
    // A failed call's copies may still run into the buffers released below: wait, bounded.
    if (!team_) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(setup_.config->timeout_s);
    bool done = false;
    while (team_->stream_done(&done).is_ok() && !done && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
}

Status DeviceNodeRail::start(const Call &call)
{
    gpu::PointerInfo sinfo, rinfo;
    gpu::buffer_info(setup_.buffers, {call.sendbuf, call.recvbuf}, &sinfo, &rinfo);
    if (team_state_ == DeviceSetUp::NotYet) {
        // Among the node's ranks, as steps of this call (advance): nothing waits here.
        call_ = call;
        failure_.clear();
        if (!team_)
            setting_up_ = std::make_unique<DeviceTeamSetUp>(
                setup_, host_, rinfo.kind == gpu::MemoryKind::Device ? rinfo : sinfo, kExchange);
        step_ = Step::SettingUp;
        return Status::ok();
    }
    if (team_state_ == DeviceSetUp::Staged) return Status::unsupported("this communicator stages GPU buffers");
    return begin_call(call, sinfo, rinfo);
}

exec::State DeviceNodeRail::advance_set_up()
{
    CallSetUpHooks hooks;
    hooks.begin = [this](const gpu::PointerInfo &s, const gpu::PointerInfo &r) { return begin_call(call_, s, r); };
    return step_call_set_up(call_, setup_, hooks, &setting_up_, &team_, &team_state_, &position_, &failure_, &step_);
}

bool DeviceNodeRail::reserve(const NodeRailSizes &sizes)
{
    auto grow = [this](std::unique_ptr<gpu::PinnedBuffer> *buffer, size_t bytes) {
        if (bytes == 0 || (*buffer && (*buffer)->size() >= bytes)) return;
        const size_t grown = *buffer ? 2 * (*buffer)->size() : 0;
        buffer->reset();  // the old one first: never both pinned at once
        *buffer = std::make_unique<gpu::PinnedBuffer>(std::max<size_t>({bytes, grown, 64}), team_->context());
    };
    grow(&rail_send_, sizes.rail_send);
    grow(&rail_recv_, sizes.rail_recv);
    if (sizes.scratch > scratch_bytes_) {
        scratch_.reset();  // the previous call's work on it has finished
        scratch_bytes_ = 0;
        const Status made = gpu::DeviceMemory::create(team_->context(), sizes.scratch, &scratch_);
        if (made.is_ok()) scratch_bytes_ = sizes.scratch;
        else {
            if (setup_.log && setup_.log->enabled(2))
                setup_.log->log(2, "%s: GPU scratch of %zu bytes: %s: the call stages", setup_.name.c_str(),
                                sizes.scratch, made.message().c_str());
            return false;
        }
    }
    return true;
}

Status DeviceNodeRail::begin_call(const Call &call, const gpu::PointerInfo &sinfo, const gpu::PointerInfo &rinfo)
{
    call_ = call;
    failure_.clear();
    exec_.reset();
    const topo::Topology &t = host_.topology();
    const gpu::PointerInfo &srcinfo = call_.in_place() ? rinfo : sinfo;
    auto usable = [this](const gpu::PointerInfo &i) {
        return i.kind == gpu::MemoryKind::Device && i.context == team_->context() && i.base != 0;
    };
    const BufferSides used = used_sides(call_, setup_.rank);
    bool local_ok = (!used.dst || usable(rinfo)) && (!used.src || usable(srcinfo));
    if (local_ok) local_ok = reserve(node_rail_sizes(t, setup_.rank, call_));
    schedule_ = &rail_schedule();
    if (stage_.size() < schedule_->stage_bytes) stage_.resize(schedule_->stage_bytes);
    const uint64_t seq = ++seq_;
    if (!multi()) {  // a node of one rank: nothing to post, no peer to wait for
        if (!local_ok) return Status::unsupported("the buffers are not device memory of this communicator's context");
        enter(Step::Posted);
        return Status::ok();
    }
    post_buffers(*team_, setup_.rank, seq, call_, srcinfo, rinfo, local_ok, node_rail_shared(t, setup_.rank, call_));
    enter(Step::Posted);
    return Status::ok();
}

const plan::Schedule &DeviceNodeRail::rail_schedule()
{
    plan::CollShape shape = shape_of(call_, host_.topology().size);
    auto it = schedules_.find(shape);
    if (it != schedules_.end()) return it->second;
    if (schedules_.size() >= kMaxCachedSchedules) schedules_.clear();
    plan::Schedule s = plan::build_collective_rail(host_.topology(), setup_.rank, shape, host_.plan());
    return schedules_.emplace(std::move(shape), std::move(s)).first->second;
}

exec::State DeviceNodeRail::advance()
{
    for (;;) {
        switch (step_) {
            case Step::Posted:
                if (multi()) {
                    if (!peers_reached(&gpu::ControlSlot::posted)) return now();
                    if (declined()) return exec::State::Declined;
                }
                launch_out();
                continue;
            case Step::Out:
                if (!stream_finished()) return now();
                if (work_.reads_before_rail) mark(&gpu::ControlSlot::reduced);
                start_rail();
                continue;
            case Step::Rail: {
                const exec::State st = exec_ ? exec_->advance() : exec::State::Done;
                if (st == exec::State::Failed) {
                    const plan::Step *at = exec_->current();
                    fail("the rail between nodes, with " + describe_rank(at ? at->peer : -1, host_.hosts()) + ": " +
                         exec_->error());
                    continue;
                }
                if (st != exec::State::Done) return now();
                position_ += exec_ ? exec_->position() : 0;
                exec_.reset();
                if (work_.reads_before_rail) enter(Step::Settling);
                else launch_in();
                continue;
            }
            case Step::Settling:
                if (!peers_reached(&gpu::ControlSlot::reduced)) return now();
                launch_in();
                continue;
            case Step::In:
                if (!stream_finished()) return now();
                if (work_.reads_before_rail) {
                    enter(Step::Done);
                    continue;
                }
                mark(&gpu::ControlSlot::reduced);
                enter(Step::Reduced);
                continue;
            case Step::Reduced:
                if (!peers_reached(&gpu::ControlSlot::reduced)) return now();
                launch_gather();
                continue;
            case Step::Gathering:
                if (!stream_finished()) return now();
                mark(&gpu::ControlSlot::gathered);
                enter(Step::Gathered);
                continue;
            case Step::Gathered:
                if (!peers_reached(&gpu::ControlSlot::gathered)) return now();
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
        failure_ = "device collective across nodes: advanced without a started call";
        step_ = Step::Failed;
        return exec::State::Failed;
    }
}

void DeviceNodeRail::launch_out()
{
    const topo::Topology &t = host_.topology();
    const auto &members = t.members[static_cast<size_t>(t.node_of[static_cast<size_t>(setup_.rank)])];
    if (multi()) {
        const Status mapped = map_member_buffers(*team_, members, setup_.rank, call_, &srcs_, &dsts_);
        if (!mapped.is_ok()) return fail(mapped.message());
    } else {
        srcs_.assign(1, static_cast<const char *>(call_.in_place() ? call_.recvbuf : call_.sendbuf));
        dsts_.assign(1, static_cast<char *>(call_.recvbuf));
    }
    work_ = node_rail_work(t, setup_.rank, call_, srcs_, dsts_, rail_send_ ? rail_send_->data() : nullptr,
                           rail_recv_ ? rail_recv_->data() : nullptr,
                           scratch_ ? static_cast<char *>(scratch_->data()) : nullptr);
    for (const DeviceReduction &r : work_.reductions) {
        const Status launched = team_->kernels().reduce(call_.op, call_.dtype, r.dst, r.srcs.data(),
                                                        static_cast<int>(r.srcs.size()), r.count, team_->stream());
        if (!launched.is_ok()) return fail("the node's reduction kernel: " + launched.message());
    }
    Status st = enqueue(work_.local, "own block");
    if (st.is_ok()) st = enqueue(work_.out, "copy out to the rail");
    if (!st.is_ok()) return fail(st.message());
    enter(Step::Out);
}

void DeviceNodeRail::start_rail()
{
    enter(Step::Rail);
    if (schedule_->steps.empty()) return;
    exec_.emplace(*schedule_, host_.router(), call_.op, call_.dtype, rail_send_ ? rail_send_->data() : nullptr,
                  rail_recv_ ? rail_recv_->data() : nullptr);
    exec_->set_stage(stage_.data());
    exec_->set_recorder(recorder_);
}

void DeviceNodeRail::launch_in()
{
    const Status st = enqueue(work_.in, "copy back from the rail");
    if (!st.is_ok()) return fail(st.message());
    enter(Step::In);
}

void DeviceNodeRail::launch_gather()
{
    const Status st = enqueue(work_.gather, "copies out of the node members' results");
    if (!st.is_ok()) return fail(st.message());
    enter(Step::Gathering);
}

// Unified addressing: one copy call for either direction.
Status DeviceNodeRail::enqueue(const std::vector<DeviceCopy> &copies, const char *what)
{
    const auto &d = gpu::GpuRuntime::instance();
    gpu::ContextScope scope(team_->context());
    for (const DeviceCopy &c : copies) {
        if (!d.api().memcpy_async) {  // older than any driver that loads the kernels: synchronous
            const Status copied = d.copy(c.dst, c.src, c.bytes, team_->context());
            if (!copied.is_ok()) return copied.prefixed(std::string(what) + ": ");
            continue;
        }
        const int rc = d.api().memcpy_async(reinterpret_cast<gpu::CUdeviceptr>(c.dst),
                                            reinterpret_cast<gpu::CUdeviceptr>(c.src), c.bytes, team_->stream());
        if (rc != 0)
            return Status::error(GPURDMA_ERR_TRANSPORT, std::string(what) + ": " + d.error_text("cuMemcpyAsync", rc));
    }
    return Status::ok();
}

bool DeviceNodeRail::stream_finished()
{
    bool done = false;
    const Status polled = team_->stream_done(&done);
    if (polled.is_ok()) return done;
    fail(polled.message());
    return false;
}

void DeviceNodeRail::enter(Step step)
{
    step_ = step;
    peer_index_ = 0;
    ++position_;
}

exec::State DeviceNodeRail::now() const
{
    return step_ == Step::Failed ? exec::State::Failed : exec::State::Running;
}

void DeviceNodeRail::mark(std::atomic<uint64_t> gpu::ControlSlot::*word)
{
    if (multi()) (team_->slot(setup_.rank).*word).store(seq_, std::memory_order_release);
}

bool DeviceNodeRail::peers_reached(std::atomic<uint64_t> gpu::ControlSlot::*word)
{
    if (!multi()) return true;
    const gpu::StageScan scan =
        scan_stage_words(*team_, team_->members(), setup_.rank, word, seq_, &peer_index_, &position_);
    if (scan != gpu::StageScan::PeerFailed) return scan == gpu::StageScan::Reached;
    fail(team_->describe(team_->members()[size_t(peer_index_)]) + " (node peer) failed");
    return false;
}

// Every rank of the node sees the same votes: the whole node stages this call.
bool DeviceNodeRail::declined()
{
    const int r = refusing_member(*team_, team_->members());
    if (r < 0) return false;
    if (setup_.log && setup_.log->enabled(2))
        setup_.log->log(2, "%s: call %llu: %s cannot share its GPU buffers: this node stages the %s",
                        setup_.name.c_str(), static_cast<unsigned long long>(seq_), team_->describe(r).c_str(),
                        plan::coll_name(call_.coll));
    step_ = Step::Declined;
    return true;
}

// A failure is announced in the stage words this rank has not reached, so node peers stop too.
void DeviceNodeRail::fail(const std::string &what)
{
    const std::string stage = stage_name();
    if (step_ != Step::Failed) abandon();
    failure_ = "device " + std::string(plan::coll_name(call_.coll)) + " across nodes failed in " + stage + ": " + what;
    step_ = Step::Failed;
}

void DeviceNodeRail::abandon()
{
    if (multi() && step_ != Step::Idle && step_ != Step::Done && step_ != Step::Declined) {
        gpu::ControlSlot &me = team_->slot(setup_.rank);
        for (auto word : {&gpu::ControlSlot::reduced, &gpu::ControlSlot::gathered})
            if (((me.*word).load(std::memory_order_relaxed) & ~kFail) < seq_)
                (me.*word).store(seq_ | kFail, std::memory_order_release);
    }
    step_ = Step::Failed;
}

uint64_t DeviceNodeRail::position() const
{
    return position_ + (setting_up_ ? setting_up_->position() : 0) + (exec_ ? exec_->position() : 0);
}

void DeviceNodeRail::finish()
{
    const Logger *log = setup_.log;
    if (log && log->enabled(2))
        log->log(2,
                 "%s: rank %d %s %zu x %s %s on GPU buffers across nodes: node stage on the GPUs (%zu kernels, "
                 "%zu copies over %s), rail from page-locked copies (%zu out, %zu steps, %zu back), call %llu",
                 setup_.name.c_str(), setup_.rank, plan::coll_name(call_.coll), call_.count,
                 gpurdma_dtype_name(call_.dtype), call_.reduces() ? gpurdma_op_name(call_.op) : "",
                 work_.reductions.size(), work_.gather.size(), gpu::GpuRuntime::instance().ipc_name(), work_.out.size(),
                 schedule_->steps.size(), work_.in.size(), static_cast<unsigned long long>(seq_));
    step_ = Step::Idle;
}

std::string DeviceNodeRail::stage_name() const
{
    switch (step_) {
        case Step::Posted: return "the node stage (post)";
        case Step::Out: return "the node stage (kernels and copies out)";
        case Step::Rail: return "the rail between nodes";
        case Step::Settling: return "the node stage (release of the inputs)";
        case Step::In: return "the copies back from the rail";
        case Step::Reduced:
        case Step::Gathering: return "the node stage (copies out of the members' results)";
        case Step::Gathered: return "the node stage (release)";
        case Step::SettingUp: return "the device set-up";
        default: return "the device path";
    }
}

std::string DeviceNodeRail::describe_wait() const
{
    if (setting_up_) return setting_up_->describe_wait();
    const std::string stage = "device " + std::string(plan::coll_name(call_.coll)) + " across nodes, " + stage_name();
    switch (step_) {
        case Step::Posted:
        case Step::Settling:
        case Step::Reduced:
        case Step::Gathered:
            return stage + ", waiting for " + team_->describe(team_->members()[size_t(peer_index_)]) + " (node peer)";
        case Step::Out:
        case Step::In:
        case Step::Gathering: return stage + ", waiting for this rank's GPU work";
        case Step::Rail: {
            const plan::Step *at = exec_ ? exec_->current() : nullptr;
            if (!at) return stage + ", waiting for sends to complete";
            const std::string peer = describe_rank(at->peer, host_.hosts());
            return stage + (at->kind == plan::StepKind::Send ? ", waiting for " + peer + " to free a landing slot"
                                                             : ", waiting for data from " + peer);
        }
        default: return stage;
    }
}

std::string DeviceNodeRail::describe_call() const
{
    return "device " + std::string(plan::coll_name(call_.coll)) + " across nodes (node stage over " +
           gpu::GpuRuntime::instance().ipc_name() + ", rail from page-locked copies)";
}

}  // namespace gpurdma::algo
