#include "core/context.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/comm.h"
#include "core/counters.h"

#include "core/params.h"
#include "exec/ucx_close.h"
#include "topo/nic.h"
#include "topo/placement.h"
#include "topo/topology.h"

gpurdma_context::gpurdma_context(const gpurdma_config_t &c)
    : config(c),
      algorithm_text(c.algorithm ? c.algorithm : "auto"),
      ucx_tls(c.ucx_tls ? c.ucx_tls : ""),
      logical_nodes(c.logical_nodes ? c.logical_nodes : ""),
      net_devices(c.net_devices ? c.net_devices : ""),
      gdr_level(c.gdr_level ? c.gdr_level : "PXB"),
      rail_reduce(c.rail_reduce ? c.rail_reduce : "auto"),
      log(c.log, c.verbose)
{
    config.algorithm = algorithm_text.c_str();
    config.ucx_tls = ucx_tls.c_str();
    config.logical_nodes = logical_nodes.c_str();
    config.net_devices = net_devices.c_str();
    config.gdr_level = gdr_level.c_str();  // the caller's strings need not outlive the context
    config.rail_reduce = rail_reduce.c_str();
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
            ucx_tls, rail_device, ib, &ucx, config.threads != 0 || config.progress_thread != 0);
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
    s.rail_device = rail_device;
    s.cgroup = cgroup;
    s.host_cpus = host_cpus;
    s.ucx = [this](std::string *why) { return transport(why); };
    s.write_agreed = [this](gpurdma::wire::Writer &w) { gpurdma::params::write_agreed(w, config); };
    s.compare_agreed = [this](gpurdma::wire::Reader &r, std::string *differing) {
        return gpurdma::params::compare_agreed(r, config, differing);
    };
    return s;
}

gpurdma_context::~gpurdma_context()
{
    if (progress_thread_.joinable()) {
        {
            std::lock_guard<std::mutex> hold(wake_lock_);
            stopping_ = true;
            stopping_requested_.store(true);
        }
        wake_.notify_one();
        progress_thread_.join();
    }
    // Endpoints closed and the worker idle under the wait loop, before UCX goes.
    gpurdma::exec::close_ucx(std::move(ucx), config.spin_us, &log);
}

int gpurdma_context::progress()
{
    CallerPolling polling(*this);
    gpurdma::transport::UcxContext *u = ucx_started_.load(std::memory_order_acquire);
    const int events = u ? static_cast<int>(u->progress()) : 0;
    if (active_count_.load(std::memory_order_acquire) == 0) return events;
    return events + progress_calls(true);
}

int gpurdma_context::progress_calls(bool report)
{
    int events = 0;
    bool yield = false;
    {
        // Another thread is going through the active calls: it drives ours too. Waiting
        // for it would starve this thread, a blocking call's wait polling from inside its
        // communicator's engine, behind a holder that takes the lock again at once.
        std::unique_lock<std::mutex> hold(active_lock_, std::try_to_lock);
        if (!hold.owns_lock()) return 0;
        {
            std::lock_guard<std::mutex> arriving(arrivals_lock_);
            for (gpurdma_comm *comm : arrivals_) {
                if (std::find(active_.begin(), active_.end(), comm) == active_.end()) active_.push_back(comm);
                else active_count_.fetch_sub(1, std::memory_order_release);
            }
            arrivals_.clear();
        }
        for (size_t i = 0; i < active_.size();) {
            bool idle = false;
            bool still = false;
            events += active_[i]->poll(report, &idle, &still);
            yield = yield || still;
            if (idle) {
                active_[i] = active_.back();
                active_.pop_back();
                active_count_.fetch_sub(1, std::memory_order_release);
            } else {
                ++i;
            }
        }
    }
    // An MPI thread in MPI_Wait's progress loop: the peer a still call waits for may
    // need this core. The progress thread pauses on its own.
    if (report && events == 0 && yield) std::this_thread::yield();
    return events;
}

void gpurdma_context::progress_thread_main()
{
    // The pacing (coll_gpurdma_progress_thread_{pause,grace,linger}_us): a pause after a
    // poll that moved nothing; keeping off while an MPI thread polls, and this long
    // after; polling on a timer for a while after the last call before sleeping.
    const auto ns = [](double us) { return static_cast<int64_t>(us * 1e3); };
    const auto idle_pause = std::chrono::nanoseconds(ns(config.progress_thread_pause_us));
    const int64_t caller_grace_ns = ns(config.progress_thread_grace_us);
    const int64_t linger_ns = ns(config.progress_thread_linger_us);
    // The timer's period while lingering: the grace, so that a caller that returns sees
    // the thread within it (never a zero sleep: a busy loop).
    const auto linger_step = std::chrono::nanoseconds(std::max<int64_t>(caller_grace_ns, 1000));
    int64_t quiet_since = steady_ns();
    for (;;) {
        if (active_count_.load(std::memory_order_acquire) == 0) {
            if (steady_ns() - quiet_since < linger_ns) {
                std::this_thread::sleep_for(linger_step);
                if (!stopping_requested_.load(std::memory_order_relaxed)) continue;
            }
            std::unique_lock<std::mutex> hold(wake_lock_);
            waiting_.store(true);  // seq_cst, then the count: activate() stores the count, then reads this
            wake_.wait(hold, [this] { return stopping_ || active_count_.load() > 0; });
            waiting_.store(false);
            if (stopping_) return;
        }
        if (stopping_requested_.load(std::memory_order_relaxed)) return;
        quiet_since = steady_ns();
        const int64_t since_caller = callers_polling_.load(std::memory_order_relaxed) > 0
                                         ? 0
                                         : quiet_since - caller_poll_ns_.load(std::memory_order_relaxed);
        if (since_caller < caller_grace_ns) {
            std::this_thread::sleep_for(std::chrono::nanoseconds(caller_grace_ns - since_caller));
            continue;
        }
        // The worker is thread-safe whenever this thread exists (transport()).
        gpurdma::transport::UcxContext *u = ucx_started_.load(std::memory_order_acquire);
        int events = u ? static_cast<int>(u->progress()) : 0;
        events += progress_calls(false);
        if (events == 0 && idle_pause.count() > 0) std::this_thread::sleep_for(idle_pause);
    }
}

void gpurdma_context::activate(gpurdma_comm *comm)
{
    {
        std::lock_guard<std::mutex> hold(arrivals_lock_);
        arrivals_.push_back(comm);  // the next progress round takes it into active_
        active_count_.fetch_add(1);  // seq_cst: before reading waiting_
        if (config.progress_thread && !progress_thread_.joinable()) {
            progress_thread_started_.store(true, std::memory_order_relaxed);
            progress_thread_ = std::thread([this] { progress_thread_main(); });
        }
    }
    // Only a thread asleep on wake_ needs waking (a lingering one sees the count); the
    // flag is set under wake_lock_ before it waits, so a set flag is never missed.
    if (config.progress_thread && waiting_.load()) {
        std::lock_guard<std::mutex> hold(wake_lock_);  // the thread checks the count under it
        wake_.notify_one();
    }
}

void gpurdma_context::deactivate(gpurdma_comm *comm)
{
    std::lock_guard<std::mutex> hold(active_lock_);
    std::lock_guard<std::mutex> arriving(arrivals_lock_);
    size_t gone = 0;
    for (auto *list : {&active_, &arrivals_}) {
        const auto end = std::remove(list->begin(), list->end(), comm);
        gone += static_cast<size_t>(list->end() - end);
        list->erase(end, list->end());
    }
    active_count_.fetch_sub(gone, std::memory_order_release);
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
