#include "gpu/device_hierarchical.h"

#include <algorithm>

#include "base/text.h"
#include "gpu/buffer_query.h"
#include "gpu/node_exchange.h"
#include "gpu/stage_words.h"
#include "plan/planner.h"
#include "reduce/reduce.h"
#include "reduce/reduce_device.h"

namespace gpurdma::gpu {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kFail = ControlSlot::kFail;
constexpr size_t kChunkBuffers = 3;  // copy out k+1 and copy back k-1 while k is on the network
constexpr size_t kMaxCachedRails = 64;

bool in_place(const algo::Call &call)
{
    return call.sendbuf == nullptr || call.sendbuf == call.recvbuf;
}

double ms_since(Clock::time_point t)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

DeviceHierarchical::DeviceHierarchical(DeviceSetup setup, algo::HostTeam &host) : setup_(std::move(setup)), host_(host)
{
    setup_.node_scope = true;
}

DeviceHierarchical::~DeviceHierarchical()
{
    exec_.reset();
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
        DeviceTeam &team;
        const DeviceRailWork *rail;
        CopiesDone(DeviceTeam &t, const DeviceRailWork *r) : team(t), rail(r) {}
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

bool DeviceHierarchical::takes(const algo::Call &call) const
{
    return plan::choose_algorithm(host_.topology(), call.count * reduce::dtype_size(call.dtype), host_.plan()) ==
           plan::Algorithm::Hierarchical;
}

Status DeviceHierarchical::set_up(const PointerInfo &first_buffer)
{
    // Set up among the node's ranks only (gpu/node_exchange.h): a node of host-buffer
    // ranks never joins, and a node peer that passes host buffers is never sent anything.
    DeviceSetup setup = setup_;
    const Status joined = use_node_exchange(host_, &setup);
    if (!joined.is_ok()) return joined;
    const Status st = DeviceTeam::create(setup, first_buffer, &team_);
    if (st.is_unsupported()) team_state_ = Team::Staged;
    if (!st.is_ok()) return st;
    const GdrDecision gdr = team_->gdr_decision();
    choose_rail(gdr);
    for (size_t i = 0; i < kChunkBuffers; ++i) {
        Chunk c;
        c.out = std::make_unique<CopyFence>(team_->context(), team_->stream());
        if (!on_gpu()) {  // on the GPU the rail runs in place: no chunk, no copy back
            std::string why;
            c.buffer = std::make_unique<PinnedBuffer>(slot_bytes(), team_->context(), &why);
            if (!why.empty()) pinned_why_ = why;
            c.back = std::make_unique<CopyFence>(team_->context(), team_->stream());
        }
        chunks_.push_back(std::move(c));
    }
    team_state_ = Team::Ready;
    log_mode(gdr);
    return Status::ok();
}

// Sends may go straight from GPU memory where GPUDirect RDMA is eligible, or where the
// stand-in driver's "device memory" is host memory (what UCX reads then is what it is).
void DeviceHierarchical::choose_rail(const GdrDecision &gdr)
{
    RailModeInputs in;
    const gpurdma_config_t *cfg = setup_.config;
    if (cfg && cfg->rail_reduce) in.requested = cfg->rail_reduce;
    const bool host_memory = CudaDriver::instance().device_memory_is_host();
    in.direct_sends = gdr.eligible || host_memory;
    in.direct_why =
        gdr.eligible  ? "GPUDirect RDMA: " + gdr.reason
        : host_memory ? "the stand-in driver's device memory is host memory; GPUDirect RDMA not eligible: " + gdr.reason
                      : "GPUDirect RDMA not eligible: " + gdr.reason;
    // Timed only where a call may take the rail (no algorithm forced flat).
    const plan::Algorithm forced = host_.plan().algorithm;
    if (in.requested != "host" && in.requested != "device" &&
        (forced == plan::Algorithm::Auto || forced == plan::Algorithm::Hierarchical))
        in.cost = estimate_rail(in.direct_sends, gdr.eligible);
    rail_mode_ = choose_rail_mode(in);
    if (rail_mode_.reduce != RailReduce::Device) return;
    RailWorkSetup w;
    w.ctx = team_->context();
    w.kernels = &team_->kernels();
    w.transport = &host_.router();
    w.landing = host_.landing_from_other_nodes();
    w.direct_sends = rail_mode_.direct_sends;
    w.send_buffer_bytes = slot_bytes();
    // As many as a peer's credits let be in flight, within 2..8 (slots goes to 64, chunks
    // to 64 MiB): a send that finds none free waits for one, which is never wrong.
    w.send_buffers = std::min(8, std::max(2, cfg ? cfg->slots : 2));
    const Status st = DeviceRailWork::create(w, &rail_work_);
    if (st.is_ok()) {
        offer_gpu_landing(gdr);
        return;
    }
    rail_work_.reset();
    rail_mode_ = RailMode{RailReduce::Host, false,
                          rail_mode_.reason + "; but the GPU cannot reduce here (" + st.message() + "): the host does"};
}

// auto's estimate for a full unit (a slice of chunk_size bytes) of the first slice this
// rank owns: the rail's own schedule counted, this node's copies and GPU step timed
// now, the CPU's reduction rate and the network's from the host cost model. None (auto
// then falls back to its rule) where the timing fails; verbose 1 says why.
std::optional<RailCost> DeviceHierarchical::estimate_rail(bool direct_sends, bool gdr_eligible)
{
    const topo::Topology &t = host_.topology();
    const plan::PlanParams &plan = host_.plan();
    const int node = t.node_of[static_cast<size_t>(setup_.rank)];
    plan::Schedule rail;
    for (int slice = 0; slice < t.max_ppn() && rail.steps.empty(); ++slice)
        if (plan::slice_owner(t, node, slice) == setup_.rank)
            rail = plan::build_rail_allreduce(t, setup_.rank, slice, slot_bytes() / sizeof(float), sizeof(float), plan);
    if (rail.steps.empty()) return std::nullopt;
    CopyRates rates;
    const double timeout = setup_.config ? setup_.config->timeout_s : 30.0;
    const Status st = measure_copy_rates(team_->context(), slot_bytes(), timeout, &rates);
    if (!st.is_ok()) {
        estimate_why_ = "timing this GPU's copies failed: " + st.message();
        return std::nullopt;
    }
    const RailRates r{rates.d2h_gbps, rates.h2d_gbps, rates.step_us, plan.model.reduce_gbps};
    // Large arrivals land in GPU memory where GPUDirect RDMA is eligible and allowed.
    const bool arrivals_in_gpu = gdr_eligible && (!setup_.config || setup_.config->gdr_recv != 0);
    return estimate_rail_cost(count_rail_work(rail, plan.model.net), r, direct_sends, arrivals_in_gpu);
}

// Where the GPU reduces, arrivals may land in its memory (gpu/gdr_landing.h); if the
// offer fails they land in host memory, as they would without it.
void DeviceHierarchical::offer_gpu_landing(const GdrDecision &gdr)
{
    const auto &d = CudaDriver::instance();
    GdrLandingInputs in;
    in.allowed = !setup_.config || setup_.config->gdr_recv != 0;
    in.rail_on_gpu = on_gpu();
    in.net_channels = host_.net_channels() != nullptr;
    in.gdr_eligible = gdr.eligible;
    in.gdr_why = gdr.reason;
    in.stand_in_host_memory = d.device_memory_is_host();
    in.flush_entry = d.api().flush_gpu_direct_rdma_writes != nullptr;
    CUdevice dev = -1;
    {
        ContextScope scope(team_->context());
        if (d.api().ctx_get_device && d.api().ctx_get_device(&dev) == 0 && d.api().device_get_attribute) {
            if (d.api().device_get_attribute(&in.writes_ordering, kDevAttrGdrWritesOrdering, dev) != 0)
                in.writes_ordering = -1;
            if (d.api().device_get_attribute(&in.flush_options, kDevAttrGdrFlushWritesOptions, dev) != 0)
                in.flush_options = -1;
        }
    }
    GdrLanding landing = decide_gdr_landing(in);
    if (landing.offer) {
        const Status st =
            GpuLanding::create(team_->context(), *host_.net_channels(), landing.register_as_host, &gpu_landing_);
        if (st.is_ok()) {
            rail_work_->set_gpu_landing(gpu_landing_->range(), landing.flush);
        } else {
            gpu_landing_.reset();
            landing.reason = "arrivals land in host memory: offering GPU memory for them failed (" + st.message() + ")";
        }
    }
    landing_reason_ = landing.reason;
}

void DeviceHierarchical::log_mode(const GdrDecision &gdr) const
{
    const Logger *log = setup_.log;
    if (!log || !log->enabled(1)) return;
    if (!pinned_why_.empty())
        log->log(1, "%s: rank %d: chunk buffers are pageable host memory, not page-locked: %s", setup_.name.c_str(),
                 setup_.rank, pinned_why_.c_str());
    if (rail_work_ && !rail_work_->pageable_why().empty())
        log->log(1, "%s: rank %d: rail send buffers are pageable host memory, not page-locked: %s", setup_.name.c_str(),
                 setup_.rank, rail_work_->pageable_why().c_str());
    // Each rank decides where its rail reduces (the wire is the same): each says so.
    log->log(1, "%s: rank %d: device buffers across nodes: rail stage reduces on the %s (%s)", setup_.name.c_str(),
             setup_.rank, rail_mode_name(rail_mode_).c_str(), rail_mode_.reason.c_str());
    if (!estimate_why_.empty())
        log->log(1, "%s: rank %d: device buffers across nodes: no estimate for auto: %s", setup_.name.c_str(),
                 setup_.rank, estimate_why_.c_str());
    if (on_gpu())
        log->log(1, "%s: rank %d: device buffers across nodes: %s", setup_.name.c_str(), setup_.rank,
                 landing_reason_.c_str());
    if (team_->members()[0] != setup_.rank) return;  // once per node that sets up
    const topo::Topology &t = host_.topology();
    const std::string rail =
        on_gpu() ? std::string(
                       "in place on the GPU slices, arrivals reduced by the GPU out of their landing slots, "
                       "sends ") +
                       (rail_mode_.direct_sends ? "straight from GPU memory"
                                                : "staged through page-locked buffers on a stream of its own")
                 : "from " + std::to_string(chunks_.size()) + " " + (pinned_why_.empty() ? "page-locked" : "pageable") +
                       " host chunk buffers of " + format_bytes(chunks_[0].buffer->size()) +
                       " (copies on the stream overlapped with the network), the CPU reducing";
    log->log(1,
             "%s: rank %d: device buffers across nodes (%s): hierarchical: node reduce-scatter on the GPUs (CUDA IPC "
             "kernel), per-rail allreduce of each slice %s, node allgather by copy engine; for the sizes the host "
             "path runs hierarchically, the others stage whole. GPUDirect RDMA %s: %s",
             setup_.name.c_str(), setup_.rank, t.summary().c_str(), rail.c_str(),
             gdr.eligible ? "eligible" : "not eligible", gdr.reason.c_str());
}

Status DeviceHierarchical::ready_for(const algo::Call &call, PointerInfo *sinfo, PointerInfo *rinfo)
{
    if (!reduce::device::device_supported(call.op, call.dtype))
        return Status::unsupported("no device kernel (long double)");
    buffer_info(setup_.buffers, call, sinfo, rinfo);
    if (team_state_ == Team::NotYet) {
        const Status st = set_up(rinfo->kind == MemoryKind::Device ? *rinfo : *sinfo);
        if (!st.is_ok()) return st;
    }
    if (team_state_ == Team::Staged) return Status::unsupported("this communicator stages GPU buffers");
    if (!takes(call)) return Status::unsupported("the host path runs this size flat");
    return Status::ok();
}

Status DeviceHierarchical::start(const algo::Call &call)
{
    PointerInfo sinfo, rinfo;
    const Status ready = ready_for(call, &sinfo, &rinfo);
    if (!ready.is_ok()) return ready;
    call_ = call;
    if (in_place(call)) call_.sendbuf = nullptr;
    elem_ = reduce::dtype_size(call.dtype);
    failure_.clear();
    stage_ms_.fill(0);
    call_start_ = stage_start_ = Clock::now();
    const PointerInfo &srcinfo = call_.in_place() ? rinfo : sinfo;
    auto usable = [this](const PointerInfo &i) {
        return i.kind == MemoryKind::Device && i.context == team_->context() && i.base != 0;
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
    rail_chunk_ = nullptr;
    exec_.reset();
    for (auto &c : chunks_) c.state = Chunk::State::Free;
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
    ControlSlot &me = team_->slot(setup_.rank);
    uint32_t vote = local_ok;
    if (vote) {
        const auto &api = CudaDriver::instance().api();
        ContextScope scope(team_->context());
        vote = api.ipc_get_mem_handle(&me.src_handle, srcinfo.base) == 0 &&
               api.ipc_get_mem_handle(&me.dst_handle, rinfo.base) == 0;
        const void *src = call_.in_place() ? call_.recvbuf : call_.sendbuf;
        me.src_id = srcinfo.buffer_id;
        me.dst_id = rinfo.buffer_id;
        me.src_offset = reinterpret_cast<uintptr_t>(src) - srcinfo.base;
        me.dst_offset = reinterpret_cast<uintptr_t>(call_.recvbuf) - rinfo.base;
    }
    me.vote = vote;
    me.posted.store(seq, std::memory_order_release);
    enter(Step::Posted);
    return Status::ok();
}

exec::State DeviceHierarchical::advance()
{
    for (;;) {
        switch (step_) {
            case Step::Posted:
                if (!peers_reached(&ControlSlot::posted)) return now();
                if (declined()) return exec::State::Declined;
                if (!map_peers()) return now();
                enter(Step::Pipeline);
                continue;
            case Step::Pipeline:
                pump();
                if (step_ == Step::Pipeline) return now();
                continue;
            case Step::Reduced:
                if (!peers_reached(&ControlSlot::reduced)) return now();
                launch_gather();
                continue;
            case Step::Gathering:
                if (!stream_finished(Stage::NodeAg)) return now();
                team_->slot(setup_.rank).gathered.store(seq_, std::memory_order_release);
                enter(Step::Gathered);
                continue;
            case Step::Gathered:
                if (!peers_reached(&ControlSlot::gathered)) return now();
                add_time(Stage::NodeAg, stage_start_);
                enter(Step::Done);
                continue;
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
bool DeviceHierarchical::peers_reached(std::atomic<uint64_t> ControlSlot::*word)
{
    const StageScan scan =
        scan_stage_words(*team_, team_->members(), setup_.rank, word, seq_, &peer_index_, &position_);
    if (scan != StageScan::PeerFailed) return scan == StageScan::Reached;
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
    for (int r : team_->members()) {
        if (team_->slot(r).vote) continue;
        const Logger *log = setup_.log;
        if (log && log->enabled(2))
            log->log(2, "%s: call %llu: %s cannot share its GPU buffers: this node stages the call",
                     setup_.name.c_str(), static_cast<unsigned long long>(seq_), team_->describe(r).c_str());
        step_ = Step::Declined;
        return true;
    }
    return false;
}

bool DeviceHierarchical::map_peers()
{
    const auto &members = team_->members();
    IpcCache &ipc = team_->ipc();
    ipc.begin_call();
    srcs_.assign(members.size(), nullptr);
    dsts_.assign(members.size(), nullptr);
    for (size_t i = 0; i < members.size(); ++i) {
        const int r = members[i];
        if (r == setup_.rank) {
            srcs_[i] = static_cast<const char *>(call_.in_place() ? call_.recvbuf : call_.sendbuf);
            dsts_[i] = static_cast<char *>(call_.recvbuf);
            continue;
        }
        const ControlSlot &p = team_->slot(r);
        uintptr_t sbase = 0, dbase = 0;
        Status mapped = ipc.map(r, p.src_id, p.src_handle, &sbase);
        if (mapped.is_ok()) mapped = ipc.map(r, p.dst_id, p.dst_handle, &dbase);
        if (!mapped.is_ok()) {
            fail(Stage::NodeRs, "mapping the buffers of " + team_->describe(r) + ": " + mapped.message());
            return false;
        }
        srcs_[i] = reinterpret_cast<const char *>(sbase + p.src_offset);
        dsts_[i] = reinterpret_cast<char *>(dbase + p.dst_offset);
    }
    return true;
}

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
    const auto &d = CudaDriver::instance();
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
    ContextScope scope(team_->context());
    if (on_gpu()) {
        char *into = static_cast<char *>(call_.recvbuf) + off;
        if (!multi() && from != into) {
            const int rc = d.api().memcpy_dtod_async(reinterpret_cast<CUdeviceptr>(into),
                                                     reinterpret_cast<CUdeviceptr>(from), bytes, team_->stream());
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
    const auto src = reinterpret_cast<CUdeviceptr>(from);
    const int rc =
        d.api().memcpy_dtoh_async
            ? d.api().memcpy_dtoh_async(chunk.buffer->data(), src, bytes, team_->stream())
            : d.api().memcpy_async(reinterpret_cast<CUdeviceptr>(chunk.buffer->data()), src, bytes, team_->stream());
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
    const auto &d = CudaDriver::instance();
    const plan::RailUnit &u = units_[chunk.unit];
    stage_ = Stage::H2D;
    chunk.since = Clock::now();
    ContextScope scope(team_->context());
    const auto dst = reinterpret_cast<CUdeviceptr>(static_cast<char *>(call_.recvbuf) + u.first * elem_);
    const size_t bytes = u.count * elem_;
    const int rc =
        d.api().memcpy_htod_async
            ? d.api().memcpy_htod_async(dst, chunk.buffer->data(), bytes, team_->stream())
            : d.api().memcpy_async(dst, reinterpret_cast<CUdeviceptr>(chunk.buffer->data()), bytes, team_->stream());
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
    const auto &d = CudaDriver::instance();
    const topo::Topology &t = host_.topology();
    const int node = t.node_of[static_cast<size_t>(setup_.rank)];
    const auto &members = team_->members();
    ContextScope scope(team_->context());
    char *recv = static_cast<char *>(call_.recvbuf);
    for (const auto &u : units_) {
        const int owner = plan::slice_owner(t, node, u.slice);
        if (owner == setup_.rank) continue;
        const size_t i = size_t(std::find(members.begin(), members.end(), owner) - members.begin());
        const size_t off = u.first * elem_;
        const int rc =
            d.api().memcpy_dtod_async(reinterpret_cast<CUdeviceptr>(recv + off),
                                      reinterpret_cast<CUdeviceptr>(dsts_[i] + off), u.count * elem_, team_->stream());
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
        ControlSlot &me = team_->slot(setup_.rank);
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
                     gpurdma_op_name(call_.op), rail_mode_name(rail_mode_).c_str(), mine_.size(), units_.size(),
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
            if (rail_chunk_ && exec_) {
                const plan::Step *s = exec_->current();
                const std::string rail = std::string("device hierarchical inter-node (rail of slice ") +
                                         std::to_string(units_[rail_chunk_->unit].slice) + "), waiting for ";
                if (s && exec_->working())
                    return rail + "this rank's GPU to " +
                           (s->kind == plan::StepKind::Send ? "stage a send to " : "take in data from ") +
                           describe_peer(s->peer) + " (rail stream)";
                if (s)
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

}  // namespace gpurdma::gpu
