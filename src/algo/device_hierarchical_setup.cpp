// The hierarchical device path's set-up: the node team (among the node's ranks that pass
// GPU buffers), the rail's mode and cost, GPU memory offered for arrivals, the chunk
// buffers, and the verbose line that says what was chosen.
#include "algo/device_hierarchical.h"

#include <algorithm>

#include "algo/node_exchange.h"
#include "base/text.h"
#include "gpu/gpu_runtime.h"
#include "plan/planner.h"
#include "reduce/reduce.h"

namespace gpurdma::algo {

// The node's team is set up (algo/device_team_setup.h, among the node's ranks only: a
// node of host-buffer ranks never joins, and a node peer that passes host buffers is
// never sent anything). Where auto weighs the modes, this GPU's copies are timed first,
// as steps of the call (the progress loop's idle clock and timeout bound them), once
// per process and device.
Status DeviceHierarchical::set_up_rail_step(bool *done)
{
    *done = false;
    if (!rates_probed_ && wants_estimate() && !first_rail().steps.empty())
        rates_probe_ = std::make_unique<gpu::CopyRateProbe>(team_->context(), slot_bytes());
    rates_probed_ = true;
    if (rates_probe_) {
        bool measured = false;
        const Status st = rates_probe_->step(&measured);
        if (st.is_ok() && !measured) return Status::ok();
        if (st.is_ok()) rates_ = rates_probe_->rates();
        else estimate_why_ = "timing this GPU's copies failed: " + st.message();
        position_ += rates_probe_->position() + 1;  // position() keeps growing
        rates_probe_.reset();
    }
    set_up_rail();
    *done = true;
    return Status::ok();
}

// The rail's mode and the chunk buffers, local work.
void DeviceHierarchical::set_up_rail()
{
    const gpu::GdrDecision gdr = team_->gdr_decision();
    choose_rail(gdr);
    chunks_.reserve(kChunkBuffers);  // the units' executors refer to their chunk's schedule
    for (size_t i = 0; i < kChunkBuffers; ++i) {
        Chunk c;
        c.work = std::make_unique<gpu::UnitWork>(team_->context(), team_->stream(), team_->kernels(), rail_work_.get());
        if (!on_gpu()) {  // on the GPU the rail runs in place: no chunk, no copy back
            std::string why;
            c.buffer = std::make_unique<gpu::PinnedBuffer>(slot_bytes(), team_->context(), &why);
            if (!why.empty()) pinned_why_ = why;
        }
        chunks_.push_back(std::move(c));
    }
    log_mode(gdr);
}

void DeviceHierarchical::fit_chunk_buffers(size_t unit_bytes)
{
    for (Chunk &c : chunks_) {
        if (!c.buffer || c.buffer->size() >= unit_bytes) continue;
        std::string why;
        c.buffer = std::make_unique<gpu::PinnedBuffer>(unit_bytes, team_->context(), &why);
        if (!why.empty()) pinned_why_ = why;
    }
}

// Sends may go straight from GPU memory where GPUDirect RDMA is eligible, or where the
// stand-in driver's "device memory" is host memory (what UCX reads then is what it is).
void DeviceHierarchical::choose_rail(const gpu::GdrDecision &gdr)
{
    gpu::RailModeInputs in;
    const gpurdma_config_t *cfg = setup_.config;
    if (cfg && cfg->rail_reduce) in.requested = cfg->rail_reduce;
    const bool host_memory = gpu::GpuRuntime::instance().device_memory_is_host();
    in.direct_sends = gdr.eligible || host_memory;
    in.direct_why =
        gdr.eligible  ? "GPUDirect RDMA: " + gdr.reason
        : host_memory ? "the stand-in driver's device memory is host memory; GPUDirect RDMA not eligible: " + gdr.reason
                      : "GPUDirect RDMA not eligible: " + gdr.reason;
    if (wants_estimate()) in.cost = estimate_rail(in.direct_sends, gdr.eligible);
    rail_mode_ = gpu::choose_rail_mode(in);
    if (rail_mode_.reduce != gpu::RailReduce::Device) return;
    gpu::RailWorkSetup w;
    w.ctx = team_->context();
    w.kernels = &team_->kernels();
    w.transport = &host_.router();
    w.landing = host_.landing_from_other_nodes();
    w.direct_sends = rail_mode_.direct_sends;
    w.send_buffer_bytes = slot_bytes();
    // As many as a peer's credits let be in flight, within 2..8 (slots goes to 64, chunks
    // to 64 MiB): a send that finds none free waits for one, which is never wrong.
    w.send_buffers = std::min(8, std::max(2, cfg ? cfg->slots : 2));
    const Status st = gpu::DeviceRailWork::create(w, &rail_work_);
    if (st.is_ok()) {
        offer_gpu_landing(gdr);
        return;
    }
    rail_work_.reset();
    rail_mode_ =
        gpu::RailMode{gpu::RailReduce::Host, false,
                      rail_mode_.reason + "; but the GPU cannot reduce here (" + st.message() + "): the host does"};
}

// Timed only where a call may take the rail (no algorithm forced flat).
bool DeviceHierarchical::wants_estimate() const
{
    const gpurdma_config_t *cfg = setup_.config;
    const std::string requested = cfg && cfg->rail_reduce ? cfg->rail_reduce : "";
    const plan::Algorithm forced = host_.plan().algorithm;
    return requested != "host" && requested != "device" &&
           (forced == plan::Algorithm::Auto || forced == plan::Algorithm::Hierarchical);
}

plan::Schedule DeviceHierarchical::first_rail() const
{
    const topo::Topology &t = host_.topology();
    const int node = t.node_of[static_cast<size_t>(setup_.rank)];
    plan::Schedule rail;
    for (int slice = 0; slice < t.max_ppn() && rail.steps.empty(); ++slice)
        if (plan::slice_owner(t, node, slice) == setup_.rank)
            rail = plan::build_rail_allreduce(t, setup_.rank, slice, slot_bytes() / sizeof(float), sizeof(float),
                                              host_.plan());
    return rail;
}

// auto's estimate for a full unit (a slice of chunk_size bytes) of the first slice this
// rank owns: the rail's own schedule counted, this node's copies and GPU step timed at
// set-up (set_up_rail_step), the CPU's reduction rate and the network's from the host
// cost model. None (auto then falls back to its rule) where the timing failed; verbose 1
// says why.
std::optional<gpu::RailCost> DeviceHierarchical::estimate_rail(bool direct_sends, bool gdr_eligible)
{
    const plan::PlanParams &plan = host_.plan();
    const plan::Schedule rail = first_rail();
    if (rail.steps.empty() || !rates_) return std::nullopt;
    const gpu::CopyRates &rates = *rates_;
    const gpu::RailRates r{rates.d2h_gbps, rates.h2d_gbps, rates.step_us, plan.model.reduce_gbps};
    // Large arrivals land in GPU memory where GPUDirect RDMA is eligible and allowed.
    const bool arrivals_in_gpu = gdr_eligible && (!setup_.config || setup_.config->gdr_recv != 0);
    return gpu::estimate_rail_cost(gpu::count_rail_work(rail, plan.model.net), r, direct_sends, arrivals_in_gpu);
}

// Where the GPU reduces, arrivals may land in its memory (gpu/gdr_landing.h); if the
// offer fails they land in host memory, as they would without it.
void DeviceHierarchical::offer_gpu_landing(const gpu::GdrDecision &gdr)
{
    const auto &d = gpu::GpuRuntime::instance();
    gpu::GdrLandingInputs in;
    in.allowed = !setup_.config || setup_.config->gdr_recv != 0;
    in.rail_on_gpu = on_gpu();
    in.net_channels = host_.net_channels() != nullptr;
    in.gdr_eligible = gdr.eligible;
    in.gdr_why = gdr.reason;
    in.stand_in_host_memory = d.device_memory_is_host();
    in.flush_entry = d.api().flush_gpu_direct_rdma_writes != nullptr;
    gpu::CUdevice dev = -1;
    {
        gpu::ContextScope scope(team_->context());
        if (d.api().ctx_get_device && d.api().ctx_get_device(&dev) == 0 && d.api().device_get_attribute) {
            if (d.api().device_get_attribute(&in.writes_ordering, gpu::kDevAttrGdrWritesOrdering, dev) != 0)
                in.writes_ordering = -1;
            if (d.api().device_get_attribute(&in.flush_options, gpu::kDevAttrGdrFlushWritesOptions, dev) != 0)
                in.flush_options = -1;
        }
    }
    gpu::GdrLanding landing = gpu::decide_gdr_landing(in);
    if (landing.offer) {
        const Status st = gpu::GpuLanding::create(team_->context(), *host_.net_channels(), landing.register_as_host,
                                                  host_.loop().policy(), &gpu_landing_);
        if (st.is_ok()) {
            rail_work_->set_gpu_landing(gpu_landing_->range(), landing.flush);
        } else {
            gpu_landing_.reset();
            landing.reason = "arrivals land in host memory: offering GPU memory for them failed (" + st.message() + ")";
        }
    }
    landing_reason_ = landing.reason;
}

void DeviceHierarchical::log_mode(const gpu::GdrDecision &gdr) const
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
             setup_.rank, gpu::rail_mode_name(rail_mode_).c_str(), rail_mode_.reason.c_str());
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
             "%s: rank %d: device buffers across nodes (%s): hierarchical: node reduce-scatter on the GPUs (%s "
             "kernel), per-rail allreduce of each slice %s, node allgather by copy engine; for the sizes the host "
             "path runs hierarchically, the others stage whole. GPUDirect RDMA %s: %s",
             setup_.name.c_str(), setup_.rank, t.summary().c_str(), gpu::GpuRuntime::instance().ipc_name(),
             rail.c_str(), gdr.eligible ? "eligible" : "not eligible", gdr.reason.c_str());
}

}  // namespace gpurdma::algo
