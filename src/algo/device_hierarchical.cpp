#include "algo/device_hierarchical.h"

#include <algorithm>

#include "algo/device_team_setup.h"
#include "algo/node_ipc.h"
#include "base/text.h"
#include "gpu/buffer_query.h"
#include "gpu/stage_words.h"
#include "plan/planner.h"
#include "reduce/reduce.h"
#include "reduce/reduce_device.h"

namespace gpurdma::algo {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kFail = gpu::ControlSlot::kFail;

bool in_place(const Call &call)
{
    return call.sendbuf == nullptr || call.sendbuf == call.recvbuf;
}

double ms_since(Clock::time_point t)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

DeviceHierarchical::DeviceHierarchical(gpu::DeviceSetup setup, HostTeam &host) : setup_(std::move(setup)), host_(host)
{
    setup_.node_scope = true;
}

DeviceHierarchical::~DeviceHierarchical()
{
    for (auto &c : chunks_) c.exec.reset();
    std::string why;
    if (!chunks_.empty() && !chunks_unused(&why)) {
        // Freeing memory that a copy or a send still uses is undefined (a NIC may read
        // reused pages): after a peer stuck past the timeout, the buffers stay allocated.
        if (setup_.log)
            setup_.log->log(0, "%s: rank %d: chunk buffers still in use at release, kept: %s", setup_.name.c_str(),
                            setup_.rank, why.c_str());
        for (auto &c : chunks_) (void)c.buffer.release();
        (void)rail_work_.release();  // its send buffers and the landing region's mapping too
        (void)gpu_landing_.release();  // and the GPU memory offered for arrivals
    }
    chunks_.clear();  // events and page-locked memory before the team's stream and context
    rail_work_.reset();
    gpu_landing_.reset();  // once no kernel reads it: withdrawn, then freed
}

// A failed call may leave copies on the stream and rail sends (puts, active messages)
// reading a chunk buffer: both are waited for, under the host team's loop (network
// progress, the timeout), before the buffers go.
bool DeviceHierarchical::chunks_unused(std::string *why)
{
    struct CopiesDone : exec::Task {
        gpu::DeviceTeam &team;
        const gpu::DeviceRailWork *rail;
        CopiesDone(gpu::DeviceTeam &t, const gpu::DeviceRailWork *r) : team(t), rail(r) {}
        exec::State advance() override
        {
            // A failing query: the stream's work will never run (a sticky error).
            bool done = false;
            if (team.stream_done(&done).is_ok() && !done) return exec::State::Running;
            done = false;
            if (rail && rail->stream_done(&done).is_ok() && !done) return exec::State::Running;
            return exec::State::Done;
        }
        uint64_t position() const override { return 0; }
        std::string describe_wait() const override
        {
            return "device hierarchical teardown, waiting for a failed call's copies on the stream";
        }
        std::string describe_failure() const override { return describe_wait(); }
    } copies(*team_, rail_work_.get());
    Status st = host_.loop().run(copies);
    std::vector<exec::SourceRange> ranges;
    for (const auto &c : chunks_)
        if (c.buffer) ranges.push_back({c.buffer->data(), c.buffer->size()});
    if (rail_work_) {
        const auto staged = rail_work_->send_buffers();
        ranges.insert(ranges.end(), staged.begin(), staged.end());
    }
    if (st.is_ok())
        st = exec::wait_until_unread(
            host_.loop(), host_.router(), ranges,
            "device hierarchical teardown, waiting for a failed call's rail sends to stop reading the chunk or send "
            "buffers");
    *why = st.message();
    return st.is_ok();
}

Status DeviceHierarchical::start(const Call &call)
{
    gpu::PointerInfo sinfo, rinfo;
    gpu::buffer_info(setup_.buffers, {call.sendbuf, call.recvbuf}, &sinfo, &rinfo);
    if (team_state_ == DeviceSetUp::NotYet) {
        // Among the node's ranks, as steps of this call (advance): nothing waits here.
        call_ = call;
        failure_.clear();
        // A team already set up: an earlier call gave up while this rank's rail was set up.
        if (!team_)
            setting_up_ =
                std::make_unique<DeviceTeamSetUp>(setup_, host_, rinfo.kind == gpu::MemoryKind::Device ? rinfo : sinfo);
        step_ = Step::SettingUp;
        return Status::ok();
    }
    if (team_state_ == DeviceSetUp::Staged) return Status::unsupported("this communicator stages GPU buffers");
    return begin_call(call, sinfo, rinfo);
}

// The set-up step of a call that started it: Running until the node agreed and this
// rank's rail is set up (algo/device_hierarchical_setup.cpp), then the call.
exec::State DeviceHierarchical::advance_set_up()
{
    CallSetUpHooks hooks;
    hooks.ready = [this](bool *done) { return set_up_rail_step(done); };
    hooks.begin = [this](const gpu::PointerInfo &s, const gpu::PointerInfo &r) { return begin_call(call_, s, r); };
    return step_call_set_up(call_, setup_, hooks, &setting_up_, &team_, &team_state_, &position_, &failure_, &step_);
}

Status DeviceHierarchical::begin_call(const Call &call, const gpu::PointerInfo &sinfo, const gpu::PointerInfo &rinfo)
{
    call_ = call;
    if (in_place(call)) call_.sendbuf = nullptr;
    elem_ = reduce::dtype_size(call.dtype);
    failure_.clear();
    stage_ms_.fill(0);
    call_start_ = stage_start_ = Clock::now();
    const gpu::PointerInfo &srcinfo = call_.in_place() ? rinfo : sinfo;
    auto usable = [this](const gpu::PointerInfo &i) {
        return i.kind == gpu::MemoryKind::Device && i.context == team_->context() && i.base != 0;
    };
    const bool local_ok = usable(rinfo) && usable(srcinfo);

    // This rank's units, in the order the rail stage runs them.
    const topo::Topology &t = host_.topology();
    const int node = t.node_of[static_cast<size_t>(setup_.rank)];
    units_ = plan::hierarchical_units(t, call_.count, elem_, host_.plan());
    mine_.clear();
    for (size_t i = 0; i < units_.size(); ++i)
        if (plan::slice_owner(t, node, units_[i].slice) == setup_.rank) mine_.push_back(i);
    next_out_ = next_rail_ = units_back_ = 0;
    timeline_.assign(mine_.size(), Timeline{});
    size_t largest = 0;
    for (size_t i : mine_) largest = std::max(largest, units_[i].count * elem_);
    fit_chunk_buffers(largest);
    for (auto &c : chunks_) {
        c.exec.reset();
        c.state = Chunk::State::Free;
        c.work->set_call(call_.in_place() ? call_.recvbuf : call_.sendbuf, call_.recvbuf, call_.count * elem_);
    }
    const uint64_t seq = ++seq_;
    stage_ = Stage::NodeRs;

    if (!multi()) {  // a node of one rank: no node stage, nothing to post
        if (!local_ok) return Status::unsupported("the buffers are not device memory of this communicator's context");
        srcs_.assign(1, static_cast<const char *>(call_.in_place() ? call_.recvbuf : call_.sendbuf));
        dsts_.assign(1, static_cast<char *>(call_.recvbuf));
        enter(Step::Pipeline);
        return Status::ok();
    }
    // Post: this call's buffers as IPC handles, and whether this rank can go on.
    post_buffers(*team_, setup_.rank, seq, call_, srcinfo, rinfo, local_ok);
    enter(Step::Posted);
    return Status::ok();
}

exec::State DeviceHierarchical::advance()
{
    for (;;) {
        switch (step_) {
            case Step::Posted:
                if (!peers_reached(&gpu::ControlSlot::posted)) return now();
                if (declined()) return exec::State::Declined;
                if (!map_peers()) return now();
                enter(Step::Pipeline);
                continue;
            case Step::Pipeline:
                pump();
                if (step_ == Step::Pipeline) return now();
                continue;
            case Step::Reduced:
                if (!peers_reached(&gpu::ControlSlot::reduced)) return now();
                launch_gather();
                continue;
            case Step::Gathering:
                if (!stream_finished(Stage::NodeAg)) return now();
                team_->slot(setup_.rank).gathered.store(seq_, std::memory_order_release);
                enter(Step::Gathered);
                continue;
            case Step::Gathered:
                if (!peers_reached(&gpu::ControlSlot::gathered)) return now();
                add_time(Stage::NodeAg, stage_start_);
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
        failure_ = "device hierarchical allreduce: advanced without a started call";
        step_ = Step::Failed;
        return exec::State::Failed;
    }
}

void DeviceHierarchical::enter(Step step)
{
    step_ = step;
    peer_index_ = 0;
    ++position_;
}

exec::State DeviceHierarchical::now() const
{
    return step_ == Step::Failed ? exec::State::Failed : exec::State::Running;
}

// The node members' stage words, in rank order; false while one has not reached this
// call, or once one announced that it failed (then step_ is Failed).
bool DeviceHierarchical::peers_reached(std::atomic<uint64_t> gpu::ControlSlot::*word)
{
    const gpu::StageScan scan =
        scan_stage_words(*team_, team_->members(), setup_.rank, word, seq_, &peer_index_, &position_);
    if (scan != gpu::StageScan::PeerFailed) return scan == gpu::StageScan::Reached;
    const char *what = step_ == Step::Posted    ? " failed before posting its buffers"
                       : step_ == Step::Reduced ? " failed before its slices were back"
                                                : " failed in its allgather";
    fail(step_ == Step::Posted ? Stage::NodeRs : Stage::NodeAg,
         team_->describe(team_->members()[size_t(peer_index_)]) + what + " (node peer)");
    return false;
}

// Every rank of the node sees the same votes: the whole node stages this call.
bool DeviceHierarchical::declined()
{
    const int r = refusing_member(*team_, team_->members());
    if (r < 0) return false;
    const Logger *log = setup_.log;
    if (log && log->enabled(2))
        log->log(2, "%s: call %llu: %s cannot share its GPU buffers: this node stages the call", setup_.name.c_str(),
                 static_cast<unsigned long long>(seq_), team_->describe(r).c_str());
    step_ = Step::Declined;
    return true;
}

bool DeviceHierarchical::map_peers()
{
    const Status mapped = map_member_buffers(*team_, team_->members(), setup_.rank, call_, &srcs_, &dsts_);
    if (!mapped.is_ok()) fail(Stage::NodeRs, mapped.message());
    node_srcs_.assign(srcs_.begin(), srcs_.end());
    return mapped.is_ok();
}

// A failure is announced in the stage words this rank has not reached, so node peers stop too.
void DeviceHierarchical::fail(Stage stage, const std::string &what)
{
    stage_ = stage;
    if (step_ != Step::Failed) abandon();
    failure_ = std::string("device hierarchical allreduce failed in ") + stage_name(stage) + ": " + what;
    step_ = Step::Failed;
}

void DeviceHierarchical::abandon()
{
    if (multi() && step_ != Step::Idle && step_ != Step::Done && step_ != Step::Declined) {
        gpu::ControlSlot &me = team_->slot(setup_.rank);
        if ((me.reduced.load(std::memory_order_relaxed) & ~kFail) < seq_)
            me.reduced.store(seq_ | kFail, std::memory_order_release);
        if ((me.gathered.load(std::memory_order_relaxed) & ~kFail) < seq_)
            me.gathered.store(seq_ | kFail, std::memory_order_release);
    }
    step_ = Step::Failed;
}

void DeviceHierarchical::add_time(Stage stage, Clock::time_point since)
{
    stage_ms_[size_t(stage)] += ms_since(since);
}

void DeviceHierarchical::finish()
{
    const Logger *log = setup_.log;
    if (log && log->enabled(2)) {
        // Host steady-clock time inside each stage, summed over the units (stages of
        // different units overlap, so the sum can exceed the call's time).
        if (on_gpu())
            log->log(2,
                     "%s: rank %d allreduce %zu x %s %s on GPU buffers across nodes (hierarchical, rail on the %s, "
                     "%zu units here of %zu), call %llu: %.3f ms; stage times (ms, summed over units): node RS "
                     "%.3f, inter-node with the GPU's reductions%s %.3f, node AG %.3f",
                     setup_.name.c_str(), setup_.rank, call_.count, gpurdma_dtype_name(call_.dtype),
                     gpurdma_op_name(call_.op), gpu::rail_mode_name(rail_mode_).c_str(), mine_.size(), units_.size(),
                     static_cast<unsigned long long>(seq_), ms_since(call_start_), stage_ms_[size_t(Stage::D2H)],
                     rail_mode_.direct_sends ? "" : " and staged sends", stage_ms_[size_t(Stage::InterNode)],
                     stage_ms_[size_t(Stage::NodeAg)]);
        else
            log->log(2,
                     "%s: rank %d allreduce %zu x %s %s on GPU buffers across nodes (hierarchical, rail on the host, "
                     "%zu units here of %zu), call %llu: %.3f ms; stage times (ms, summed over units): node RS+D2H "
                     "%.3f, inter-node %.3f, H2D %.3f, node AG %.3f",
                     setup_.name.c_str(), setup_.rank, call_.count, gpurdma_dtype_name(call_.dtype),
                     gpurdma_op_name(call_.op), mine_.size(), units_.size(), static_cast<unsigned long long>(seq_),
                     ms_since(call_start_), stage_ms_[size_t(Stage::D2H)], stage_ms_[size_t(Stage::InterNode)],
                     stage_ms_[size_t(Stage::H2D)], stage_ms_[size_t(Stage::NodeAg)]);
        if (on_gpu() && gpu_landing_) {
            const transport::UcxChannels &ch = *host_.net_channels();
            log->log(2,
                     "%s: rank %d call %llu: so far %llu arrivals landed in GPU memory (%llu copied for the CPU), "
                     "%llu GPUDirect RDMA flushes",
                     setup_.name.c_str(), setup_.rank, static_cast<unsigned long long>(seq_),
                     static_cast<unsigned long long>(ch.offered_arrivals()),
                     static_cast<unsigned long long>(ch.offered_copies()),
                     static_cast<unsigned long long>(rail_work_->flushes()));
        }
    }
    if (log && log->enabled(3)) {
        // The pipeline's timeline: copies of one unit beside the network on another.
        for (size_t i = 0; i < timeline_.size(); ++i) {
            const Timeline &t = timeline_[i];
            const plan::RailUnit &u = units_[mine_[i]];
            if (on_gpu())
                log->log(3,
                         "%s: rank %d call %llu unit %zu (slice %d, %zu elements): node RS %.3f-%.3f, inter-node "
                         "on the GPU %.3f-%.3f ms",
                         setup_.name.c_str(), setup_.rank, static_cast<unsigned long long>(seq_), i, u.slice, u.count,
                         t.out, t.staged, t.staged, t.railed);
            else
                log->log(3,
                         "%s: rank %d call %llu unit %zu (slice %d, %zu elements): node RS+D2H %.3f-%.3f, "
                         "inter-node %.3f-%.3f, H2D %.3f-%.3f ms",
                         setup_.name.c_str(), setup_.rank, static_cast<unsigned long long>(seq_), i, u.slice, u.count,
                         t.out, t.staged, t.staged, t.railed, t.railed, t.back);
        }
    }
    step_ = Step::Idle;
}

const char *DeviceHierarchical::stage_name(Stage stage)
{
    switch (stage) {
        case Stage::NodeRs: return "node RS";
        case Stage::D2H: return "D2H";
        case Stage::InterNode: return "inter-node";
        case Stage::H2D: return "H2D";
        case Stage::NodeAg: return "node AG";
        default: return "device hierarchical allreduce";
    }
}

std::string DeviceHierarchical::describe_wait() const
{
    if (setting_up_) return setting_up_->describe_wait();
    if (rates_probe_) return "device hierarchical set-up, " + rates_probe_->describe_wait();
    const std::string stage = std::string("device hierarchical ") + stage_name(stage_);
    switch (step_) {
        case Step::Posted:
        case Step::Reduced:
        case Step::Gathered: {
            const auto &m = team_->members();
            const int peer = size_t(peer_index_) < m.size() ? m[size_t(peer_index_)] : -1;
            const char *what = step_ == Step::Posted    ? " to post its buffers"
                               : step_ == Step::Reduced ? " to have its slices back"
                                                        : " to finish its allgather";
            return stage + ", waiting for " + team_->describe(peer) + what + " (node peer)";
        }
        case Step::Pipeline: {
            const Chunk *railing = nullptr;  // the unit whose rail stage runs
            for (const auto &c : chunks_)
                if (c.state == Chunk::State::Rail && c.exec) railing = &c;
            if (railing) {
                const exec::Executor &e = *railing->exec;
                const plan::Step *s = e.current();
                const std::string rail = std::string("device hierarchical inter-node (rail of slice ") +
                                         std::to_string(units_[railing->unit].slice) + "), waiting for ";
                if (s && e.working())
                    return rail + "this rank's GPU to " +
                           (s->kind == plan::StepKind::Send ? "stage a send to " : "take in data from ") +
                           describe_peer(s->peer) + " (rail stream)";
                if (s && s->peer >= 0)
                    return rail + (s->kind == plan::StepKind::Send ? "a landing slot of " : "data from ") +
                           describe_peer(s->peer) + " (rail peer)";
            }
            return stage + ", waiting for this rank's copies on the GPU (" + std::to_string(units_back_) + " of " +
                   std::to_string(mine_.size()) + " units back)";
        }
        case Step::Gathering: return stage + ", waiting for this rank's allgather copies";
        default: return stage;
    }
}

// "rank 3 on host h#1": the peer's node (logical node name under coll_gpurdma_logical_nodes).
std::string DeviceHierarchical::describe_peer(int peer) const
{
    const topo::Topology &t = host_.topology();
    if (peer < 0 || peer >= t.size) return describe_rank(peer, {});
    return "rank " + std::to_string(peer) + " on host " +
           t.node_names[static_cast<size_t>(t.node_of[static_cast<size_t>(peer)])];
}

std::string DeviceHierarchical::describe_call() const
{
    return std::string("device hierarchical (GPU node stages, rail allreduce ") +
           (on_gpu() ? "on the GPU slices" : "from pinned host chunks") + "), " + std::to_string(mine_.size()) +
           " of " + std::to_string(units_.size()) + " units here";
}

}  // namespace gpurdma::algo
