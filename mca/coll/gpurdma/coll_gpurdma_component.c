/*
 * Component: MCA parameters, open/close, and the process-wide core context.
 */
#include "coll_gpurdma.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <stddef.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

mca_coll_gpurdma_globals_t mca_coll_gpurdma_globals = {
    .priority = 0,
    .verbose = 0,
    .cuda = 1,
    .output = -1,
};

static int gpurdma_register(void);
static int gpurdma_open(void);
static int gpurdma_close(void);

const GPURDMA_COLL_COMPONENT_T mca_coll_gpurdma_component = {
    .collm_version = {
        GPURDMA_COLL_BASE_VERSION,
        .mca_component_name = "gpurdma",
        MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
        .mca_open_component = gpurdma_open,
        .mca_close_component = gpurdma_close,
        .mca_register_component_params = gpurdma_register,
    },
    .collm_data = {
        MCA_BASE_METADATA_PARAM_CHECKPOINT
    },
    .collm_init_query = mca_coll_gpurdma_init_query,
    .collm_comm_query = mca_coll_gpurdma_comm_query,
};

/* Storage for string parameters: MCA keeps pointing at these. */
static char *algorithm_param;
static char *ucx_tls_param;
static char *logical_nodes_param;
static char *net_devices_param;
static int cuda_param;
static char *gdr_level_param;
static size_t chunk_size_param;
static size_t small_msg_param;
static size_t node_chunk_param;
static int slots_param;
static double timeout_param;
static double spin_param;
static int calibrate_param;
/* RoCE/InfiniBand settings of gpurdma's UCX context (-1: UCX's own). */
static int ib_gid_index_param, ib_tc_param, ib_sl_param;
/* The cost model: name, storage, default taken from gpurdma_config_default. */
static double net_alpha_param, net_gbps_param, shm_alpha_param, shm_gbps_param, reduce_gbps_param;

static void reg(const char *name, const char *help, mca_base_var_type_t type, int level, void *storage)
{
    (void)mca_base_component_var_register(&mca_coll_gpurdma_component.collm_version, name, help, type,
                                          NULL, 0, 0, level, MCA_BASE_VAR_SCOPE_READONLY, storage);
}

/* MPI_T performance variables: the process totals of gpurdma's counters (ctx = the
 * field's offset). Zero before the first communicator set-up. */
static int read_counter(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void)obj;
    gpurdma_comm_stats_t totals;
    memset(&totals, 0, sizeof totals);
    if (mca_coll_gpurdma_globals.context) gpurdma_context_get_stats(mca_coll_gpurdma_globals.context, &totals);
    uint64_t v;
    memcpy(&v, (const char *)&totals + (size_t)(uintptr_t)pvar->ctx, sizeof v);
    *(unsigned long long *)value = (unsigned long long)v;
    return OMPI_SUCCESS;
}

static void register_counters(void)
{
    static const struct {
        const char *name;
        const char *help;
        size_t offset;
    } counters[] = {
        {"calls", "MPI_Allreduce calls completed by gpurdma in this process", offsetof(gpurdma_comm_stats_t, calls)},
        {"setups", "Communicator set-ups (exchanges of addresses, segments, registrations)",
         offsetof(gpurdma_comm_stats_t, setups)},
        {"registrations", "UCX memory registrations made (one per communicator that spans nodes)",
         offsetof(gpurdma_comm_stats_t, registrations)},
        {"shm_segments", "Node shared-memory segments created or attached (one per communicator)",
         offsetof(gpurdma_comm_stats_t, shm_segments)},
        {"bytes_put", "Payload bytes written to peers through slot channels (UCX and shared memory)",
         offsetof(gpurdma_comm_stats_t, bytes_put)},
        {"node_calls", "Calls that took the one-node shared-memory allreduce",
         offsetof(gpurdma_comm_stats_t, node_calls)},
        {"ring_calls", "Calls that took the ring", offsetof(gpurdma_comm_stats_t, ring_calls)},
        {"rd_calls", "Calls that took recursive doubling", offsetof(gpurdma_comm_stats_t, rd_calls)},
        {"hier_calls", "Calls that took the hierarchical allreduce", offsetof(gpurdma_comm_stats_t, hier_calls)},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        (void)mca_base_component_pvar_register(
            &mca_coll_gpurdma_component.collm_version, counters[i].name, counters[i].help, OPAL_INFO_LVL_4,
            MCA_BASE_PVAR_CLASS_COUNTER, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
            MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, read_counter, NULL, NULL,
            (void *)(uintptr_t)counters[i].offset);
}

static int gpurdma_register(void)
{
    gpurdma_config_t d;
    gpurdma_config_default(&d);
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;

    g->priority = 0;
    reg("priority", "Priority of coll/gpurdma (0 = off; 100 takes MPI_Allreduce on every "
        "intra-communicator of 2 or more ranks)", MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6, &g->priority);
    g->verbose = 0;
    reg("verbose", "0 silent; 1 one line per communicator (what was chosen and why) and warnings; "
        "2 one line per call and per fallback", MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6, &g->verbose);
    chunk_size_param = d.chunk_size;
    reg("chunk_size", "Pipeline chunk and landing-slot size in bytes (4096 .. 64 MiB)",
        MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_7, &chunk_size_param);
    slots_param = d.slots;
    reg("slots", "Landing slots per peer channel, i.e. pipeline depth (1 .. 64)", MCA_BASE_VAR_TYPE_INT,
        OPAL_INFO_LVL_7, &slots_param);
    node_chunk_param = d.node_chunk_size;
    reg("node_chunk_size", "Block size in bytes of the one-node shared-memory allreduce (4096 .. 64 MiB, a "
        "multiple of 64): the pipeline unit of its copy-in, reduce and copy-out", MCA_BASE_VAR_TYPE_SIZE_T,
        OPAL_INFO_LVL_7, &node_chunk_param);
    small_msg_param = d.small_msg_max;
    reg("small_msg_max", "Largest message in bytes for the latency path: the direct node allreduce "
        "(one wait; with two ranks on the node, every size) and recursive doubling between nodes; "
        "0 turns it off", MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_7, &small_msg_param);
    timeout_param = d.timeout_s;
    reg("timeout", "Seconds a collective waits on a peer before it fails with an error naming the "
        "stage and the peer", MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &timeout_param);
    spin_param = d.spin_us;
    reg("spin_us", "Microseconds a rank waits for a peer by spinning before it starts yielding its core "
        "(sched_yield) for the rest of that wait: a longer wait means the peer is not running, e.g. other "
        "hosts' or jobs' processes share the cores. Negative: spin until done. Where a host's ranks cannot "
        "each have a CPU of their own (decided from every rank's affinity mask, the job's processes on the host "
        "and cgroup limits) they always yield", MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_7, &spin_param);
    net_alpha_param = d.net_alpha_us;
    reg("net_alpha_us", "Cost model: microseconds per message between nodes (auto chooses the algorithm "
        "with the least estimated time; the model and its choices print at verbose 1)",
        MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_7, &net_alpha_param);
    net_gbps_param = d.net_gbps;
    reg("net_gbps", "Cost model: bandwidth between nodes in GB/s", MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_7,
        &net_gbps_param);
    shm_alpha_param = d.shm_alpha_us;
    reg("shm_alpha_us", "Cost model: microseconds per message between ranks of one node", MCA_BASE_VAR_TYPE_DOUBLE,
        OPAL_INFO_LVL_7, &shm_alpha_param);
    shm_gbps_param = d.shm_gbps;
    reg("shm_gbps", "Cost model: bandwidth between ranks of one node in GB/s", MCA_BASE_VAR_TYPE_DOUBLE,
        OPAL_INFO_LVL_7, &shm_gbps_param);
    calibrate_param = d.calibrate;
    reg("calibrate", "1: each communicator that spans nodes measures the cost model at set-up (ping-pong of 8 B and "
        "64 KiB between rank 0 and a rank on another node and one on its own node, and a float sum), a few ms, "
        "and every rank uses rank 0's numbers; 0: the *_alpha_us / *_gbps parameters", MCA_BASE_VAR_TYPE_INT,
        OPAL_INFO_LVL_7, &calibrate_param);
    reduce_gbps_param = d.reduce_gbps;
    reg("reduce_gbps", "Cost model: speed of a reduction in GB/s of input", MCA_BASE_VAR_TYPE_DOUBLE,
        OPAL_INFO_LVL_7, &reduce_gbps_param);
    algorithm_param = (char *)"auto";
    reg("algorithm", "Allreduce algorithm: auto (by message size and topology), node (one-node shared-memory "
        "reduce-scatter/allgather; auto's choice when all ranks share a node), ring, rd (recursive "
        "doubling, messages up to chunk_size), hier (node reduce-scatter, per-rail allreduce between "
        "nodes, node allgather)", MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, &algorithm_param);
    ucx_tls_param = (char *)"";
    reg("ucx_tls", "UCX transports for gpurdma's own UCX context (empty: UCX_TLS or UCX's default)",
        MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_7, &ucx_tls_param);
    logical_nodes_param = (char *)"";
    reg("logical_nodes", "Split each host into virtual nodes, for testing the hierarchical path on one "
        "machine: empty (one node per host), K (nodes of K processes) or a,b,c (node sizes, summing to "
        "the job's processes on the host); a process's node is fixed by its local rank, the same in every "
        "communicator", MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_7, &logical_nodes_param);
    net_devices_param = (char *)"";
    reg("net_devices", "Network devices for the rails between nodes, like NCCL_IB_HCA: empty (each "
        "rank uses the RDMA NIC nearest its CPUs by hwloc's PCI tree; UCX decides when there is none), "
        "a list (mlx5_0:1,mlx5_1:1), ^list to exclude, or none (UCX_NET_DEVICES/UCX decide)",
        MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, &net_devices_param);
    cuda_param = 1;
    reg("cuda", "1: recognise GPU (cudaMalloc) buffers when a CUDA driver is present (loaded at run time); "
        "0: never load the CUDA driver", MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6, &cuda_param);
    gdr_level_param = (char *)d.gdr_level;
    reg("gdr_level", "Farthest GPU-to-NIC path over which GPU buffers may go by GPUDirect RDMA between "
        "nodes, as NCCL_NET_GDR_LEVEL: LOC (same device), PIX (one PCIe bridge), PXB (several PCIe "
        "bridges), PHB (through the CPU's PCIe host bridge) or SYS (across NUMA nodes); farther GPUs stage "
        "through host memory", MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, &gdr_level_param);
    ib_gid_index_param = d.ib_gid_index;
    reg("ib_gid_index", "RoCE/InfiniBand port GID index for gpurdma's UCX context, like NCCL_IB_GID_INDEX "
        "(RoCE: selects the address and RoCE version), 0 .. 1023; -1: UCX's choice (UCX_IB_GID_INDEX or auto). "
        "Only RDMA devices use it", MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6, &ib_gid_index_param);
    ib_tc_param = d.ib_tc;
    reg("ib_tc", "InfiniBand traffic class / RoCEv2 traffic class byte (DSCP << 2) for gpurdma's UCX context, like "
        "NCCL_IB_TC, 0 .. 255; -1: UCX's choice (UCX_IB_TRAFFIC_CLASS or auto). Only RDMA devices use it",
        MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6, &ib_tc_param);
    ib_sl_param = d.ib_sl;
    reg("ib_sl", "InfiniBand service level / RoCEv2 Ethernet priority for gpurdma's UCX context, like NCCL_IB_SL, "
        "0 .. 15; -1: UCX's choice (UCX_IB_SL or auto). Only RDMA devices use it", MCA_BASE_VAR_TYPE_INT,
        OPAL_INFO_LVL_6, &ib_sl_param);
    register_counters();
    return OMPI_SUCCESS;
}

static int gpurdma_open(void)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    g->output = opal_output_open(NULL);
    opal_output_set_verbosity(g->output, g->verbose);
    g->closing = false;
    return OMPI_SUCCESS;
}

static int gpurdma_close(void)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    g->closing = true;
    mca_coll_gpurdma_release_context();
    if (g->output >= 0) opal_output_close(g->output);
    g->output = -1;
    return OMPI_SUCCESS;
}

static void log_message(int level, const char *message)
{
    (void)level;
    opal_output(0, "coll:gpurdma: %s", message);
}

static int progress_callback(void)
{
    return mca_coll_gpurdma_globals.context ? gpurdma_context_progress(mca_coll_gpurdma_globals.context) : 0;
}

/* A cost-model value in [lo, 1e6] replaces the default; anything else (NaN too) warns. */
static void model_param(const char *name, double value, double lo, double *out)
{
    if (value >= lo && value <= 1e6) *out = value;
    else opal_output(0, "coll:gpurdma: coll_gpurdma_%s=%g is not in [%g, 1e6]; using %g", name, value, lo, *out);
}

/* -1 (UCX's choice) or a value in [0, hi]; anything else warns and leaves UCX's. */
static int ib_param(const char *name, int value, int hi)
{
    if (value >= -1 && value <= hi) return value;
    opal_output(0, "coll:gpurdma: coll_gpurdma_%s=%d is not -1 or in 0..%d; using -1 (UCX's choice)", name, value, hi);
    return -1;
}

/* Out-of-range values get one warning and the default: never a crash. */
static void validated_config(gpurdma_config_t *c)
{
    gpurdma_config_default(c);
    c->verbose = mca_coll_gpurdma_globals.verbose;
    c->log = log_message;
    if (chunk_size_param >= 4096 && chunk_size_param <= ((size_t)64 << 20) && chunk_size_param % 64 == 0)
        c->chunk_size = chunk_size_param;
    else
        opal_output(0, "coll:gpurdma: coll_gpurdma_chunk_size=%zu is not a multiple of 64 in 4096..64 MiB; "
                    "using %zu", chunk_size_param, c->chunk_size);
    if (node_chunk_param >= 4096 && node_chunk_param <= ((size_t)64 << 20) && node_chunk_param % 64 == 0)
        c->node_chunk_size = node_chunk_param;
    else
        opal_output(0, "coll:gpurdma: coll_gpurdma_node_chunk_size=%zu is not a multiple of 64 in 4096..64 MiB; "
                    "using %zu", node_chunk_param, c->node_chunk_size);
    if (slots_param >= 1 && slots_param <= 64) c->slots = slots_param;
    else opal_output(0, "coll:gpurdma: coll_gpurdma_slots=%d is not in 1..64; using %d", slots_param, c->slots);
    /* Each peer channel holds slots x chunk_size: 64 x 64 MiB would ask for 4 GiB per peer. */
    if ((size_t)c->slots * c->chunk_size > ((size_t)1 << 30)) {
        gpurdma_config_t d;
        gpurdma_config_default(&d);
        opal_output(0, "coll:gpurdma: coll_gpurdma_slots=%d x coll_gpurdma_chunk_size=%zu is over 1 GiB per peer; "
                    "using %d slots", c->slots, c->chunk_size, d.slots);
        c->slots = d.slots;
    }
    /* Above the largest chunk it could never apply (recursive doubling needs one slot): a
     * negative value given on the command line arrives here as a huge size_t. */
    if (small_msg_param <= ((size_t)64 << 20)) c->small_msg_max = small_msg_param;
    else opal_output(0, "coll:gpurdma: coll_gpurdma_small_msg_max=%zu is not in 0..64 MiB; using %zu", small_msg_param,
                     c->small_msg_max);
    if (timeout_param > 0 && timeout_param <= 86400) c->timeout_s = timeout_param;
    else opal_output(0, "coll:gpurdma: coll_gpurdma_timeout=%g is not in (0, 86400]; using %g", timeout_param,
                     c->timeout_s);
    model_param("net_alpha_us", net_alpha_param, 0.0, &c->net_alpha_us);
    model_param("net_gbps", net_gbps_param, 1e-6, &c->net_gbps);
    model_param("shm_alpha_us", shm_alpha_param, 0.0, &c->shm_alpha_us);
    model_param("shm_gbps", shm_gbps_param, 1e-6, &c->shm_gbps);
    model_param("reduce_gbps", reduce_gbps_param, 1e-6, &c->reduce_gbps);
    if (calibrate_param == 0 || calibrate_param == 1) c->calibrate = calibrate_param;
    else opal_output(0, "coll:gpurdma: coll_gpurdma_calibrate=%d is not 0 or 1; using 0", calibrate_param);
    if (spin_param <= 1e6) c->spin_us = spin_param;
    else opal_output(0, "coll:gpurdma: coll_gpurdma_spin_us=%g is over 1 s; using %g", spin_param, c->spin_us);
    const char *alg = algorithm_param ? algorithm_param : "auto";
    if (0 == strcmp(alg, "auto") || 0 == strcmp(alg, "node") || 0 == strcmp(alg, "ring") || 0 == strcmp(alg, "rd") ||
        0 == strcmp(alg, "recursive_doubling") || 0 == strcmp(alg, "hier") || 0 == strcmp(alg, "hierarchical"))
        c->algorithm = alg;
    else
        opal_output(0, "coll:gpurdma: coll_gpurdma_algorithm='%s' is not one of auto, node, ring, rd, hier; using auto", alg);
    c->ucx_tls = ucx_tls_param ? ucx_tls_param : "";
    c->logical_nodes = logical_nodes_param ? logical_nodes_param : "";
    c->net_devices = net_devices_param ? net_devices_param : "";
    if (cuda_param != 0 && cuda_param != 1)
        opal_output(0, "coll:gpurdma: coll_gpurdma_cuda=%d is not 0 or 1; using 1", cuda_param);
    c->cuda = cuda_param != 0;
    /* The whole job's processes on this node, not just a communicator's: ranks of other
     * communicators may be the ones our spinning would starve. */
    c->local_processes = opal_process_info.num_local_peers + 1;
    /* Fixed for the process's life: its logical node is the same in every communicator. */
    c->local_rank = opal_process_info.my_local_rank;
    mca_coll_gpurdma_globals.cuda = c->cuda;
    c->ib_gid_index = ib_param("ib_gid_index", ib_gid_index_param, 1023);
    c->ib_tc = ib_param("ib_tc", ib_tc_param, 255);
    c->ib_sl = ib_param("ib_sl", ib_sl_param, 15);
    /* One process per host says what gpurdma's UCX context will get (all get the same). */
    if (mca_coll_gpurdma_globals.verbose >= 1 && c->local_rank <= 0 &&
        (c->ib_gid_index >= 0 || c->ib_tc >= 0 || c->ib_sl >= 0))
        opal_output(0, "coll:gpurdma: gpurdma's UCX context: IB GID index %d, traffic class %d, service level %d "
                    "(-1: UCX's choice; RDMA devices only)", c->ib_gid_index, c->ib_tc, c->ib_sl);
    if (gdr_level_param && gpurdma_gdr_level_valid(gdr_level_param))
        c->gdr_level = gdr_level_param;
    else
        opal_output(0, "coll:gpurdma: coll_gpurdma_gdr_level='%s' is not one of LOC, PIX, PXB, PHB, SYS; using %s",
                    gdr_level_param ? gdr_level_param : "", c->gdr_level);
}

bool mca_coll_gpurdma_ensure_context(void)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    if (g->context) return true;
    if (g->context_failed || g->closing) return false;
    gpurdma_config_t c;
    validated_config(&c);
    gpurdma_status_t st = gpurdma_context_create(&c, &g->context);
    if (st != GPURDMA_OK) {
        g->context_failed = true;
        g->context = NULL;
        if (g->verbose >= 1)
            opal_output(0, "coll:gpurdma: invalid configuration (%s); the previous allreduce stays in use",
                        gpurdma_status_name(st));
        return false;
    }
    /* While MPI waits elsewhere (e.g. in the set-up allgather), UCX still moves. */
    opal_progress_register(progress_callback);
    return true;
}

void mca_coll_gpurdma_release_context(void)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    /* Destroyed once the component is closing and no module uses it any more. */
    if (!g->context || !g->closing || g->live_modules > 0) return;
    opal_progress_unregister(progress_callback);
    gpurdma_context_destroy(g->context);
    g->context = NULL;
}

/*
 * The coll structs are only guaranteed within one release: 5.0.10 added a module field
 * without a version bump, which Open MPI's own check (coll API 2.4.0) cannot see. A
 * component built for another release steps aside (one line per host) instead of
 * running with a mismatched layout. (Another major version never gets here: its
 * libraries, libopen-pal.so.40 or .80, do not load.)
 */
static bool same_release_as_built(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    /* Allowed before MPI_Init completes; "Open MPI v5.0.7, package: ..." */
    if (MPI_SUCCESS != MPI_Get_library_version(lib, &len)) return true;
    char built[48];
    snprintf(built, sizeof built, "Open MPI v%d.%d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
    const char *p = strstr(lib, "Open MPI v");
    if (NULL == p) return true; /* not a string we know how to read: trust the build */
    size_t n = strlen(built);
    if (0 == strncmp(p, built, n) && !isdigit((unsigned char)p[n])) return true;
    size_t shown = strcspn(p, ",");
    if (opal_process_info.my_local_rank == 0)
        opal_output(0, "coll:gpurdma: built against %s but running in %.*s: the coll structs may differ; "
                    "gpurdma disabled (rebuild it against this Open MPI's headers)", built, (int)shown, p);
    return false;
}

int mca_coll_gpurdma_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return same_release_as_built() ? OMPI_SUCCESS : OMPI_ERR_NOT_SUPPORTED;
}
