// extern "C" entry points: argument checks, exception barrier, then the C++ objects.
#include <cstring>
#include <new>
#include <stdexcept>

#include "core/comm.h"
#include "core/context.h"
#include "gpurdma/gpurdma.h"
#include "gpu/cuda_driver.h"
#include "topo/nic.h"
#include "topo/placement.h"
#include "topo/topology.h"

gpurdma_context::gpurdma_context(const gpurdma_config_t &c)
    : config(c),
      algorithm_text(c.algorithm ? c.algorithm : "auto"),
      ucx_tls(c.ucx_tls ? c.ucx_tls : ""),
      logical_nodes(c.logical_nodes ? c.logical_nodes : ""),
      net_devices(c.net_devices ? c.net_devices : ""),
      log(c.log, c.verbose)
{
    config.algorithm = algorithm_text.c_str();
    config.ucx_tls = ucx_tls.c_str();
    config.logical_nodes = logical_nodes.c_str();
    config.net_devices = net_devices.c_str();
    std::vector<std::string> devices;
    bool exclude = false;
    if (net_devices != "none" && !gpurdma::topo::parse_device_list(net_devices, &devices, &exclude))
        throw std::invalid_argument("net_devices '" + net_devices + "' is not a list like mlx5_0:1,mlx5_1:1 or ^mlx5_2");
    choose_rail();
    host = gpurdma::topo::this_host();
    std::string warning;
    node = gpurdma::topo::logical_node(host, logical_nodes, config.local_rank, config.local_processes, &warning);
    // One process per host says it (every process would reach the same verdict).
    if (!warning.empty() && config.local_rank <= 0) log.log(0, "%s", warning.c_str());
    host_cpus = gpurdma::topo::host_cpu_budget();
    cgroup = gpurdma::topo::own_cgroup();
    plan.chunk_size = config.chunk_size;
    plan.small_msg_max = config.small_msg_max;
    plan.node_chunk = config.node_chunk_size;
    plan.model.net = {config.net_alpha_us, config.net_gbps};
    plan.model.shm = {config.shm_alpha_us, config.shm_gbps};
    plan.model.reduce_gbps = config.reduce_gbps;
    if (!gpurdma::plan::parse_algorithm(algorithm_text, &plan.algorithm))
        throw std::invalid_argument("unknown algorithm '" + algorithm_text + "'");
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
    if (!ucx && ucx_failure.empty()) {
        try {
            gpurdma::transport::UcxIbSettings ib;
            ib.gid_index = config.ib_gid_index;
            ib.tc = config.ib_tc;
            ib.sl = config.ib_sl;
            ucx = std::make_unique<gpurdma::transport::UcxContext>(ucx_tls, rail_device, ib);
        } catch (const std::exception &e) {
            ucx_failure = std::string("cannot start UCX: ") + e.what();
        }
    }
    if (!ucx) *why = ucx_failure;
    return ucx.get();
}

extern "C" {

gpurdma_status_t gpurdma_context_create(const gpurdma_config_t *config, gpurdma_context_t **out)
{
    if (!config || !out) return GPURDMA_ERR_INVALID;
    *out = nullptr;
    if (config->slots < 1 || config->chunk_size < 64 || config->node_chunk_size < 64 || config->timeout_s <= 0)
        return GPURDMA_ERR_INVALID;
    // The cost model divides by the bandwidths; NaN would make every comparison false.
    if (!(config->net_gbps > 0) || !(config->shm_gbps > 0) || !(config->reduce_gbps > 0) ||
        !(config->net_alpha_us >= 0) || !(config->shm_alpha_us >= 0))
        return GPURDMA_ERR_INVALID;
    gpurdma::Logger log(config->log, config->verbose);
    if (!config->cuda) gpurdma::gpu::CudaDriver::disable();
    try {
        *out = new gpurdma_context(*config);
        return GPURDMA_OK;
    } catch (const std::invalid_argument &e) {
        log.log(0, "%s", e.what());
        return GPURDMA_ERR_INVALID;
    } catch (const std::bad_alloc &) {
        return GPURDMA_ERR_NO_RESOURCE;
    }
}

void gpurdma_context_destroy(gpurdma_context_t *context)
{
    delete context;
}

int gpurdma_context_progress(gpurdma_context_t *context)
{
    return context && context->ucx ? static_cast<int>(context->ucx->progress()) : 0;
}

gpurdma_status_t gpurdma_comm_create(gpurdma_context_t *context, const gpurdma_comm_params_t *params,
                                     gpurdma_comm_t **out)
{
    if (!context || !params || !out || !params->bootstrap.allgather || params->size < 1 ||
        params->rank < 0 || params->rank >= params->size)
        return GPURDMA_ERR_INVALID;
    try {
        *out = new gpurdma_comm(context, *params);
        return GPURDMA_OK;
    } catch (const std::bad_alloc &) {
        return GPURDMA_ERR_NO_RESOURCE;
    }
}

void gpurdma_comm_destroy(gpurdma_comm_t *comm)
{
    delete comm;
}

gpurdma_status_t gpurdma_allreduce(gpurdma_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                   gpurdma_dtype_t dtype, gpurdma_op_t op)
{
    if (!comm || (count > 0 && !recvbuf)) return GPURDMA_ERR_INVALID;
    if (static_cast<unsigned>(dtype) >= GPURDMA_DTYPE_COUNT || static_cast<unsigned>(op) >= GPURDMA_OP_COUNT)
        return GPURDMA_ERR_UNSUPPORTED;
    try {
        return comm->allreduce(sendbuf, recvbuf, count, dtype, op);
    } catch (const std::bad_alloc &) {
        comm->last_error = comm->name + ": out of memory planning the allreduce";
        return GPURDMA_ERR_NO_RESOURCE;
    } catch (const std::exception &e) {
        comm->last_error = comm->name + ": " + e.what();
        return GPURDMA_ERR_TRANSPORT;
    }
}

int gpurdma_is_device_memory(const void *ptr)
{
    return gpurdma::gpu::CudaDriver::instance().query(ptr).kind == gpurdma::gpu::MemoryKind::Device;
}

gpurdma_status_t gpurdma_memcpy(void *dst, const void *src, size_t bytes)
{
    const auto &cuda = gpurdma::gpu::CudaDriver::instance();
    const auto d = cuda.query(dst), s = cuda.query(src);
    if (d.kind != gpurdma::gpu::MemoryKind::Device && s.kind != gpurdma::gpu::MemoryKind::Device) {
        std::memmove(dst, src, bytes);
        return GPURDMA_OK;
    }
    return cuda.copy(dst, src, bytes, d.context ? d.context : s.context).is_ok() ? GPURDMA_OK : GPURDMA_ERR_TRANSPORT;
}

const char *gpurdma_comm_last_error(const gpurdma_comm_t *comm)
{
    return comm ? comm->last_error.c_str() : "";
}

void gpurdma_context_get_stats(const gpurdma_context_t *context, gpurdma_comm_stats_t *stats)
{
    if (context && stats) *stats = context->totals;
}

void gpurdma_comm_get_stats(const gpurdma_comm_t *comm, gpurdma_comm_stats_t *stats)
{
    if (comm && stats) *stats = comm->stats;
}

}  // extern "C"
