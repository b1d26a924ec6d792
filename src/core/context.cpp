#include "core/context.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/counters.h"
#include "core/params.h"
#include "exec/ucx_close.h"
#include "obs/dump_service.h"
#include "plan/rail_choice.h"
#include "topo/nic.h"
#include "topo/placement.h"
#include "topo/switch_topology.h"
#include "topo/topology.h"

gpurdma_context::gpurdma_context(const gpurdma_config_t &c)
    : config(c),
      algorithm_text(c.algorithm ? c.algorithm : "auto"),
      ucx_tls(c.ucx_tls ? c.ucx_tls : ""),
      logical_nodes(c.logical_nodes ? c.logical_nodes : ""),
      net_devices(c.net_devices ? c.net_devices : ""),
      gdr_level(c.gdr_level ? c.gdr_level : "PXB"),
      rail_reduce(c.rail_reduce ? c.rail_reduce : "auto"),
      rail_algorithm(c.rail_algorithm ? c.rail_algorithm : "auto"),
      dump_dir(c.dump_dir ? c.dump_dir : ""),
      dump_trigger(c.dump_trigger ? c.dump_trigger : ""),
      trace_dir(c.trace_dir ? c.trace_dir : ""),
      fabric_topology(c.fabric_topology ? c.fabric_topology : ""),
      log(c.log, c.verbose),
      engine(gpurdma::exec::ProgressPacing{c.progress_thread != 0, c.progress_thread_pause_us,
                                           c.progress_thread_grace_us, c.progress_thread_linger_us},
             [this] {
                 // The worker is thread-safe whenever the thread exists (transport()).
                 gpurdma::transport::UcxContext *u = ucx_started_.load(std::memory_order_acquire);
                 return u ? static_cast<int>(u->progress()) : 0;
             })
{
    arenas = std::make_unique<gpurdma::transport::ShmArenas>(c.shm_arena_size);
    config.algorithm = algorithm_text.c_str();
    config.ucx_tls = ucx_tls.c_str();
    config.logical_nodes = logical_nodes.c_str();
    config.net_devices = net_devices.c_str();
    config.gdr_level = gdr_level.c_str();  // the caller's strings need not outlive the context
    config.rail_reduce = rail_reduce.c_str();
    config.rail_algorithm = rail_algorithm.c_str();
    config.dump_dir = dump_dir.c_str();
    config.dump_trigger = dump_trigger.c_str();
    config.trace_dir = trace_dir.c_str();
    config.fabric_topology = fabric_topology.c_str();
    // The live dump (signal, trigger file, timeouts): one per process, counted by contexts.
    gpurdma::obs::DumpOptions dump;
    dump.dir = dump_dir;
    dump.signal = c.dump_signal;
    dump.trigger = dump_trigger;
    dump.on_timeout = c.dump_on_timeout != 0;
    gpurdma::obs::DumpService::instance().start(dump);
}

gpurdma::Status gpurdma_context::create(const gpurdma_config_t &c, std::unique_ptr<gpurdma_context> *out)
{
    std::unique_ptr<gpurdma_context> ctx(new gpurdma_context(c));
    std::vector<std::string> devices;
    bool exclude = false;
    if (ctx->net_devices != "none" && !gpurdma::topo::parse_device_list(ctx->net_devices, &devices, &exclude))
        return gpurdma::Status::error(GPURDMA_ERR_INVALID, "net_devices '" + ctx->net_devices +
                                                               "' is not a list like mlx5_0:1,mlx5_1:1 or ^mlx5_2");
    ctx->choose_rail();
    ctx->host = gpurdma::topo::this_host();
    std::string warning;
    const gpurdma_config_t &cfg = ctx->config;
    ctx->node =
        gpurdma::topo::logical_node(ctx->host, ctx->logical_nodes, cfg.local_rank, cfg.local_processes, &warning);
    // One process per host says it (every process would reach the same verdict).
    if (!warning.empty() && cfg.local_rank <= 0) ctx->log.log(0, "%s", warning.c_str());
    const gpurdma::topo::FabricAddress fabric = gpurdma::topo::find_fabric_address(ctx->fabric_topology, ctx->host);
    ctx->fabric_address = fabric.address;
    if (!fabric.warning.empty() && cfg.local_rank <= 0) ctx->log.log(0, "%s", fabric.warning.c_str());
    if (!fabric.address.empty() && cfg.local_rank <= 0)
        ctx->log.log(2, "host %s sits under switches %s (%s)", ctx->host.c_str(), fabric.address.c_str(),
                     fabric.source.c_str());
    ctx->host_cpus = gpurdma::topo::host_cpu_budget();
    ctx->cgroup = gpurdma::topo::own_cgroup();
    gpurdma::plan::PlanParams &plan = ctx->plan;
    plan.chunk_size = cfg.chunk_size;
    plan.small_msg_max = cfg.small_msg_max;
    plan.node_chunk = cfg.node_chunk_size;
    plan.model.net = {cfg.net_alpha_us, cfg.net_gbps};
    plan.model.shm = {cfg.shm_alpha_us, cfg.shm_gbps};
    plan.model.reduce_gbps = cfg.reduce_gbps;
    if (!gpurdma::plan::parse_algorithm(ctx->algorithm_text, &plan.algorithm))
        return gpurdma::Status::error(GPURDMA_ERR_INVALID, "unknown algorithm '" + ctx->algorithm_text + "'");
    plan.rail_unit = cfg.rail_unit;
    if (!gpurdma::plan::parse_algorithm(ctx->rail_algorithm, &plan.rail_algorithm) ||
        !gpurdma::plan::is_rail_algorithm(plan.rail_algorithm))
        return gpurdma::Status::error(GPURDMA_ERR_INVALID, "unknown rail algorithm '" + ctx->rail_algorithm + "'");
    *out = std::move(ctx);
    return gpurdma::Status::ok();
}

void gpurdma_context::choose_rail()
{
    // "none": leave UCX_NET_DEVICES to the user/UCX. Otherwise the nearest allowed RDMA
    // NIC by hwloc's PCI tree; without one (Ethernet only) UCX decides.
    if (net_devices == "none") return;
    std::vector<std::string> devices;
    bool exclude = false;
    gpurdma::topo::parse_device_list(net_devices, &devices, &exclude);
    std::string why;
    rail_device = gpurdma::topo::choose_rail_device(gpurdma::topo::local_nics(&why), devices, exclude);
    // A list that names devices but matches none here is most likely a typo: say so
    // once, and let UCX choose rather than fail.
    if (!devices.empty() && !exclude && rail_device.empty())
        log.log(0, "coll_gpurdma_net_devices '%s' names no RDMA device of this host%s; UCX chooses the rail",
                net_devices.c_str(), why.empty() ? "" : (" (" + why + ")").c_str());
}

gpurdma::transport::UcxContext *gpurdma_context::transport(std::string *why)
{
    std::lock_guard<std::mutex> hold(transport_lock_);
    if (!ucx && ucx_failure.empty()) {
        gpurdma::transport::UcxIbSettings ib;
        ib.gid_index = config.ib_gid_index;
        ib.tc = config.ib_tc;
        ib.sl = config.ib_sl;
        const gpurdma::Status started = gpurdma::transport::UcxContext::create(
            ucx_tls, rail_device, ib, &ucx, config.threads != 0 || config.progress_thread != 0, config.timeout_s);
        if (!started.is_ok()) ucx_failure = "cannot start UCX: " + started.message();
        ucx_started_.store(ucx.get(), std::memory_order_release);
    }
    if (!ucx) *why = ucx_failure;
    return ucx.get();
}

gpurdma::algo::HostSetup gpurdma_context::host_setup()
{
    gpurdma::algo::HostSetup s;
    s.log = &log;
    s.config = &config;
    s.plan = plan;
    s.host = host;
    s.node = node;
    s.fabric_address = fabric_address;
    s.rail_device = rail_device;
    s.cgroup = cgroup;
    s.host_cpus = host_cpus;
    s.ucx = [this](std::string *why) { return transport(why); };
    s.arenas = arenas.get();
    s.write_agreed = [this](gpurdma::wire::Writer &w) { gpurdma::params::write_agreed(w, config); };
    s.compare_agreed = [this](gpurdma::wire::Reader &r, std::string *differing) {
        return gpurdma::params::compare_agreed(r, config, differing);
    };
    return s;
}

gpurdma_context::~gpurdma_context()
{
    engine.stop_thread();  // nothing polls UCX behind the close
    gpurdma::obs::DumpService::instance().stop();
    ucx_started_.store(nullptr, std::memory_order_release);
    // Endpoints closed and the worker idle under the wait loop, before UCX goes.
    gpurdma::exec::close_ucx(std::move(ucx), config.spin_us, &log);
}

int gpurdma_context::progress()
{
    gpurdma::exec::ProgressEngine::CallerPolling polling(engine);
    gpurdma::transport::UcxContext *u = ucx_started_.load(std::memory_order_acquire);
    const int events = u ? static_cast<int>(u->progress()) : 0;
    if (engine.nothing_queued()) return events;
    return events + engine.progress_calls(true);
}

void gpurdma_context::add_total(uint64_t gpurdma_comm_stats_t::*field, uint64_t n)
{
    if (concurrent()) gpurdma::counters::add_shared(totals, field, n);
    else totals.*field += n;  // one thread: the reader (MPI_T) is this thread too
}

gpurdma_comm_stats_t gpurdma_context::read_totals() const
{
    return gpurdma::counters::snapshot(totals);
}
