/*
 * Component: MCA parameters, open/close, and the process-wide core context.
 */
#include "coll_gpurdma.h"

#include <string.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

mca_coll_gpurdma_globals_t mca_coll_gpurdma_globals = {
    .priority = 0,
    .verbose = 0,
    .cuda = 1,
    .output = -1,
};

static int gpurdma_register(void);
static int gpurdma_open(void);
static int gpurdma_close(void);

const mca_coll_base_component_2_0_0_t mca_coll_gpurdma_component = {
    .collm_version = {
        MCA_COLL_BASE_VERSION_2_0_0,
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
static size_t chunk_size_param;
static size_t small_msg_param;
static int slots_param;
static double timeout_param;

static void reg(const char *name, const char *help, mca_base_var_type_t type, int level, void *storage)
{
    (void)mca_base_component_var_register(&mca_coll_gpurdma_component.collm_version, name, help, type,
                                          NULL, 0, 0, level, MCA_BASE_VAR_SCOPE_READONLY, storage);
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
    small_msg_param = d.small_msg_max;
    reg("small_msg_max", "Largest message in bytes for the latency path (recursive doubling); "
        "larger ones use the ring", MCA_BASE_VAR_TYPE_SIZE_T, OPAL_INFO_LVL_7, &small_msg_param);
    timeout_param = d.timeout_s;
    reg("timeout", "Seconds a collective waits on a peer before it fails with an error naming the "
        "stage and the peer", MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &timeout_param);
    algorithm_param = (char *)"auto";
    reg("algorithm", "Allreduce algorithm: auto (by message size and topology), ring, rd (recursive "
        "doubling, messages up to chunk_size), hier (node reduce-scatter, per-rail allreduce between "
        "nodes, node allgather)", MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, &algorithm_param);
    ucx_tls_param = (char *)"";
    reg("ucx_tls", "UCX transports for gpurdma's own UCX context (empty: UCX_TLS or UCX's default)",
        MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_7, &ucx_tls_param);
    logical_nodes_param = (char *)"";
    reg("logical_nodes", "Split each host into virtual nodes, for testing the hierarchical path on one "
        "machine: empty (one node per host), K (nodes of K ranks) or a,b,c (node sizes, summing to the "
        "ranks per host)", MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_7, &logical_nodes_param);
    net_devices_param = (char *)"";
    reg("net_devices", "Network devices for the rails between nodes, like NCCL_IB_HCA: empty (each "
        "rank uses the RDMA NIC nearest its CPUs by hwloc's PCI tree; UCX decides when there is none), "
        "a list (mlx5_0:1,mlx5_1:1), ^list to exclude, or none (UCX_NET_DEVICES/UCX decide)",
        MCA_BASE_VAR_TYPE_STRING, OPAL_INFO_LVL_6, &net_devices_param);
    cuda_param = 1;
    reg("cuda", "1: recognise GPU (cudaMalloc) buffers when a CUDA driver is present (loaded at run time); "
        "0: never load the CUDA driver", MCA_BASE_VAR_TYPE_INT, OPAL_INFO_LVL_6, &cuda_param);
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
    if (slots_param >= 1 && slots_param <= 64) c->slots = slots_param;
    else opal_output(0, "coll:gpurdma: coll_gpurdma_slots=%d is not in 1..64; using %d", slots_param, c->slots);
    c->small_msg_max = small_msg_param;
    if (timeout_param > 0 && timeout_param <= 86400) c->timeout_s = timeout_param;
    else opal_output(0, "coll:gpurdma: coll_gpurdma_timeout=%g is not in (0, 86400]; using %g", timeout_param,
                     c->timeout_s);
    const char *alg = algorithm_param ? algorithm_param : "auto";
    if (0 == strcmp(alg, "auto") || 0 == strcmp(alg, "ring") || 0 == strcmp(alg, "rd") ||
        0 == strcmp(alg, "recursive_doubling") || 0 == strcmp(alg, "hier") || 0 == strcmp(alg, "hierarchical"))
        c->algorithm = alg;
    else
        opal_output(0, "coll:gpurdma: coll_gpurdma_algorithm='%s' is not one of auto, ring, rd, hier; using auto", alg);
    c->ucx_tls = ucx_tls_param ? ucx_tls_param : "";
    c->logical_nodes = logical_nodes_param ? logical_nodes_param : "";
    c->net_devices = net_devices_param ? net_devices_param : "";
    c->cuda = cuda_param != 0;
    mca_coll_gpurdma_globals.cuda = c->cuda;
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

int mca_coll_gpurdma_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}
