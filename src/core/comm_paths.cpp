// A communicator's paths: which one takes a call (host algorithm, device one-node or
// hierarchical, staged through host memory, or back to the previous module), with the
// rules every rank must apply alike, and the path objects made on first use.
#include "core/comm.h"

#include <cstring>

#include "algo/call_spans.h"
#include "algo/host_team.h"
#include "algo/selector.h"
#include "core/counters.h"
#include "gpu/gpu_runtime.h"
#include "plan/planner.h"
#include "reduce/reduce.h"
#include "reduce/reduce_device.h"

using gpurdma::Status;
using gpurdma::exec::State;
using Kind = gpurdma_request::Kind;
using Phase = gpurdma_request::Phase;

gpurdma::gpu::DeviceSetup gpurdma_comm::device_setup() const
{
    gpurdma::gpu::DeviceSetup setup;
    setup.rank = rank;
    setup.size = size;
    setup.name = name;
    setup.host = context->host;
    setup.node = context->node;
    setup.bootstrap = bootstrap;
    setup.log = &context->log;
    setup.config = &context->config;
    setup.rail_device = context->rail_device;
    setup.ucx = [ctx = context](std::string *why) { return ctx->transport(why); };
    setup.buffers = &buffers_;
    return setup;
}

gpurdma::algo::DeviceOneNode &gpurdma_comm::device()
{
    if (!device_) device_ = std::make_unique<gpurdma::algo::DeviceOneNode>(device_setup(), team_.get());
    return *device_;
}

bool gpurdma_comm::device_across_nodes() const
{
    return team_ && team_->topology().nodes() > 1;
}

gpurdma::algo::DeviceHierarchical &gpurdma_comm::device_hierarchical()
{
    if (!device_hier_) device_hier_ = std::make_unique<gpurdma::algo::DeviceHierarchical>(device_setup(), *team_);
    return *device_hier_;
}

gpurdma::algo::DeviceNodeRail &gpurdma_comm::device_node_rail()
{
    if (!device_node_rail_) device_node_rail_ = std::make_unique<gpurdma::algo::DeviceNodeRail>(device_setup(), *team_);
    return *device_node_rail_;
}

void gpurdma_comm::abandon_device(const gpurdma_request &r)
{
    if (device_across_nodes()) {
        const bool allreduce = r.call.coll == gpurdma::plan::Coll::Allreduce;
        if (allreduce && device_hier_) device_hier_->abandon();
        if (!allreduce && device_node_rail_) device_node_rail_->abandon();
    } else if (device_) {
        device_->abandon();
    }
}

const gpurdma::exec::ProgressLoop &gpurdma_comm::device_loop()
{
    // Without a host team the placement is unknown: yield when idle, as device waits always did.
    if (!device_loop_) {
        gpurdma::exec::WaitPolicy policy{true, context->config.spin_us, context->config.timeout_s};
        policy.outside_progress = context->config.outside_progress;
        device_loop_.emplace(policy, gpurdma::exec::WaitSite{name, rank, context->host});
    }
    return *device_loop_;
}

const gpurdma::exec::ProgressLoop &gpurdma_comm::loop_for(const gpurdma_request &request)
{
    const gpurdma::exec::ProgressLoop &loop = team_ ? team_->loop() : device_loop();
    if (!request.call.barrier) return loop;
    // A barrier waits for the application's slowest rank: a bound of its own.
    if (!barrier_loop_) barrier_loop_.emplace(loop.with_timeout(context->config.barrier_timeout_s));
    return *barrier_loop_;
}

Status gpurdma_comm::prepare(const gpurdma::algo::Call &call, bool device_buffers, Kind kind)
{
    if (size == 1 && !device_buffers) return Status::ok();
    // The set-up waits for every rank: only a blocking call may (a nonblocking or
    // persistent start is local in MPI, and Open MPI starts some from inside its
    // progress, where a nested wait never returns). Every rank made the same calls
    // before this one, so every rank hands it on alike.
    if (kind != Kind::Blocking && !set_up()) {
        if (context->log.enabled(2) && !context->on_progress_thread())
            context->log.log(2,
                             "%s: %s %s before the communicator's set-up: handed on (the set-up runs in its first "
                             "blocking collective)",
                             name.c_str(), kind == Kind::Persistent ? "persistent" : "nonblocking",
                             gpurdma::algo::call_name(call));
        return Status::unsupported(name + ": not set up yet");
    }
    // GPU buffers that the device path declines go through host memory and the host
    // path, whose team is set up now too (a blocking call: see above).
    const Status host = size == 1 ? Status::ok() : ensure_host_team();
    // A blocking call on GPU buffers: the device path decides in start(), and a decline
    // without a host path is still handed on.
    if (device_buffers && kind == Kind::Blocking) return Status::ok();
    if (!host.is_ok()) return host;
    // The device path sets itself up when the call begins, among the node's ranks without
    // MPI, once the node agreed that every rank passes GPU memory (agree()): a peer that
    // passes host memory is never waited for.
    // A persistent call's schedule now (the staged one has the same shape), not at its starts.
    if (kind == Kind::Persistent && size > 1) return selector_->choose(call).prepare(call);
    return Status::ok();
}

State gpurdma_comm::begin_host(gpurdma_request &r)
{
    const gpurdma::algo::Call &call = r.call;
    ++r.moves;
    r.phase = Phase::Host;
    if (size == 1) {  // a single rank: its data is the result
        gpurdma::algo::single_rank(call);
        r.algorithm = nullptr;
        return State::Done;
    }
    gpurdma::algo::Algorithm &algorithm = selector_->choose(call);
    algorithm.record_to(&recorder_);  // its executors' stages
    const Status st = algorithm.start(call);
    if (!st.is_ok()) return failed(r, st);
    r.algorithm = &algorithm;
    // Not from the progress thread: the caller's logging is only for its own threads.
    if (context->log.enabled(2) && !context->on_progress_thread())
        context->log.log(2, "%s: %s %zu x %s %s: %s%s (call %llu; registrations so far %llu)", name.c_str(),
                         gpurdma::algo::call_name(call), call.count, gpurdma_dtype_name(call.dtype),
                         call.reduces() ? gpurdma_op_name(call.op) : "", algorithm.describe_call().c_str(),
                         r.kind == Kind::Nonblocking  ? ", nonblocking"
                         : r.kind == Kind::Persistent ? ", persistent"
                                                      : "",
                         static_cast<unsigned long long>(stats.calls + 1),
                         static_cast<unsigned long long>(stats.registrations));
    return State::Running;
}

State gpurdma_comm::begin_staged(gpurdma_request &r)
{
    ++r.moves;
    r.phase = Phase::Staged;
    recorder_.set_path(gpurdma::obs::RecorderPath::Staged);
    // The copies in are launched here; the staging algorithm polls them, then runs the host algorithm.
    staging_.record_to(&recorder_);
    const Status in = staging_.start(r.call);
    if (!in.is_ok()) return failed(r, in);
    r.algorithm = &staging_;
    if (context->log.enabled(2) && !context->on_progress_thread())
        context->log.log(2, "%s: %s %zu x %s %s on GPU buffers: %s (call %llu)", name.c_str(),
                         gpurdma::algo::call_name(r.call), r.call.count, gpurdma_dtype_name(r.call.dtype),
                         r.call.reduces() ? gpurdma_op_name(r.call.op) : "", staging_.describe_call().c_str(),
                         static_cast<unsigned long long>(stats.calls + 1));
    return State::Running;
}

State gpurdma_comm::begin(gpurdma_request &r)
{
    if (gpurdma::algo::nothing_to_do(r.call, size)) {  // nothing to move; it still takes its turn
        ++r.moves;
        return State::Done;
    }
    if (r.settling) {  // the application's GPU work before the call, not waited for at its start
        bool done = false;
        const Status polled = r.settle->reached(&done);
        if (!polled.is_ok())
            return failed(r, polled.prefixed(name + ": " + gpurdma::algo::call_name(r.call) +
                                             " on GPU buffers: waiting for the application's GPU work: "));
        if (!done) return State::Running;
        r.settling = false;
        ++r.moves;
    }
    r.number = ++calls_begun_;
    recorder_.open(r.number, &r, &gpurdma_comm::fill_record);
    // A blocking call reaches the ring when it ends or waits (obs/flight_recorder.h);
    // a nonblocking one may wait where no loop notes it (nobody drives it): now.
    if (r.kind != Kind::Blocking) recorder_.publish_open();
    const gpurdma::algo::CallKinds *kinds = team_ ? team_->call_kinds() : nullptr;
    // A rank with the other GPU vendor's buffer stages: its node peers must see it as a
    // rank with host buffers, and stage too.
    if (kinds) kinds->post(r.number, r.device && !r.other_vendor);
    if (!r.device) return begin_host(r);
    ++r.moves;
    if (r.other_vendor) {
        const auto &gpu = gpurdma::gpu::GpuRuntime::instance();
        if (context->log.enabled(2) && !context->on_progress_thread())
            context->log.log(
                2, "%s: call %llu: a %s buffer beside gpurdma's %s runtime: staged through host memory by %s's copies",
                name.c_str(), static_cast<unsigned long long>(r.number), gpu.other_vendor_name(), gpu.vendor_name(),
                gpu.other_vendor_name());
        return begin_routed(r, false);
    }
    if (!kinds) return begin_routed(r, true);
    // A collective that stages whatever the node's buffers (small, long double) needs
    // no agreement: a bcast's root may have begun a later call while a peer decides this one.
    if (r.call.coll != gpurdma::plan::Coll::Allreduce) {
        const gpurdma::algo::Path path = gpurdma::algo::route(route_facts(r, true)).path;
        if (path != gpurdma::algo::Path::DeviceOneNode && path != gpurdma::algo::Path::DeviceHierarchical)
            return stage_declined(r);
    }
    r.phase = Phase::Agreeing;
    r.peer_index = 0;
    return agree(r);
}

// GPU buffers on a node of several ranks: the device path only if every node peer
// passes GPU memory too; one that passes host memory runs the host path, so this
// rank stages and joins it there (each GPU rank of the node sees the same peers).
State gpurdma_comm::agree(gpurdma_request &r)
{
    using Kinds = gpurdma::algo::CallKinds;
    const std::vector<int> &members = team_->node_members();
    for (; r.peer_index < members.size(); ++r.peer_index, ++r.moves) {
        const int peer = members[r.peer_index];
        if (peer == rank) continue;
        const Kinds::Kind kind = team_->call_kinds()->peer(static_cast<int>(r.peer_index), r.number);
        if (kind == Kinds::Kind::Device) continue;
        const std::string who = "rank " + std::to_string(peer) + " on " + team_->hosts()[static_cast<size_t>(peer)];
        if (kind == Kinds::Kind::NotYet) {
            r.awaited_peer = "node peer " + who + " to begin call " + std::to_string(r.number) +
                             " (buffer-kind agreement: GPU buffers here)";
            return State::Running;
        }
        // Only an allreduce must meet every peer in the same call. A peer of another
        // collective that has begun a later call did not take the device path with this
        // rank in this one (that path holds every rank until all have joined it): it
        // staged (a peer passing host buffers, or a decline), and so does this rank.
        if (kind == Kinds::Kind::Later && r.call.coll != gpurdma::plan::Coll::Allreduce) return begin_routed(r, false);
        if (kind == Kinds::Kind::Later)
            return failed(r, Status::error(GPURDMA_ERR_TRANSPORT, name + ": buffer-kind agreement: node peer " + who +
                                                                      " has begun a later call than " +
                                                                      std::to_string(r.number)));
        if (context->log.enabled(2) && !context->on_progress_thread())
            context->log.log(2,
                             "%s: call %llu: node peer %s passes host buffers: GPU buffers stage through host memory",
                             name.c_str(), static_cast<unsigned long long>(r.number), who.c_str());
        return begin_routed(r, false);
    }
    return begin_routed(r, true);
}

gpurdma::algo::RouteFacts gpurdma_comm::route_facts(const gpurdma_request &r, bool node_all_device)
{
    gpurdma::algo::RouteFacts f;
    f.bytes = gpurdma::algo::total_count(r.call, size) * gpurdma::reduce::dtype_size(r.call.dtype);
    f.allreduce = r.call.coll == gpurdma::plan::Coll::Allreduce;
    f.device_buffers = r.device;
    f.other_vendor = r.other_vendor;
    f.node_all_device = node_all_device;
    f.device_kernel = !r.call.reduces() || gpurdma::reduce::device::device_supported(r.call.op, r.call.dtype);
    f.size = size;
    f.host_path = size == 1 || selector_ != nullptr;
    f.across_nodes = device_across_nodes();
    f.host_hierarchical =
        f.across_nodes && gpurdma::plan::choose_algorithm(team_->topology(), f.bytes, team_->plan()) ==
                              gpurdma::plan::Algorithm::Hierarchical;
    f.device_stage_max = context->config.device_stage_max;
    if (f.across_nodes && f.allreduce)
        f.device = device_hier_ ? device_hier_->set_up_state() : gpurdma::algo::DeviceSetUp::NotYet;
    else if (f.across_nodes)
        f.device = device_node_rail_ ? device_node_rail_->set_up_state() : gpurdma::algo::DeviceSetUp::NotYet;
    else f.device = device_ ? device_->set_up_state() : gpurdma::algo::DeviceSetUp::NotYet;
    return f;
}

State gpurdma_comm::begin_routed(gpurdma_request &r, bool node_all_device)
{
    using gpurdma::algo::Path;
    const gpurdma::algo::RouteFacts facts = route_facts(r, node_all_device);
    const gpurdma::algo::Route route = gpurdma::algo::route(facts);
    switch (route.path) {
        case Path::DeviceOneNode: return begin_device(r, device());
        case Path::DeviceHierarchical:
            if (r.call.coll == gpurdma::plan::Coll::Allreduce) return begin_device(r, device_hierarchical());
            return begin_device(r, device_node_rail());
        case Path::Staged:
            if (!facts.device_kernel && !facts.across_nodes && context->log.enabled(2))
                context->log.log(2,
                                 "%s: %s %s on GPU buffers: no device kernel (long double), staged through host memory",
                                 name.c_str(), gpurdma_op_name(r.call.op), gpurdma_dtype_name(r.call.dtype));
            return begin_staged(r);
        case Path::Decline: return State::Declined;  // only a blocking call can still be handed on
        case Path::Host: break;
    }
    return begin_host(r);
}

State gpurdma_comm::begin_device(gpurdma_request &r, gpurdma::algo::Algorithm &path)
{
    path.record_to(&recorder_);
    const Status st = path.start(r.call);
    if (st.is_unsupported()) return stage_declined(r);  // this call, or (at its set-up) the communicator
    if (!st.is_ok()) return failed(r, st);
    r.phase = Phase::Device;
    r.algorithm = &path;
    return State::Running;
}

State gpurdma_comm::stage_declined(gpurdma_request &r)
{
    // The route's rule for a device path that stages: through host memory, or handed on
    // where there is no host path.
    gpurdma::algo::RouteFacts facts = route_facts(r, true);
    facts.device = gpurdma::algo::DeviceSetUp::Staged;
    return gpurdma::algo::route(facts).path == gpurdma::algo::Path::Decline ? State::Declined : begin_staged(r);
}

State gpurdma_comm::failed(gpurdma_request &r, const Status &status)
{
    r.failure = status.message();
    return State::Failed;
}
