/*
 * Component: MCA parameters, open/close, and the process-wide core context.
 */
#include "coll_gpurdma.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

mca_coll_gpurdma_globals_t mca_coll_gpurdma_globals = {
    .priority = 0,
    .verbose = 0,
    .gpu_buffers = 1,
    .output = -1,
};

static int gpurdma_register(void);
static int gpurdma_open(void);
static int gpurdma_close(void);

const GPURDMA_COLL_COMPONENT_T mca_coll_gpurdma_component = {
    .collm_version =
        {
            GPURDMA_COLL_BASE_VERSION,
            .mca_component_name = "gpurdma",
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_open_component = gpurdma_open,
            .mca_close_component = gpurdma_close,
            .mca_register_component_params = gpurdma_register,
        },
    .collm_data = {MCA_BASE_METADATA_PARAM_CHECKPOINT},
    .collm_init_query = mca_coll_gpurdma_init_query,
    .collm_comm_query = mca_coll_gpurdma_comm_query,
};

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
        {"device_calls", "Calls on GPU buffers that took a device path (not staged through host memory)",
         offsetof(gpurdma_comm_stats_t, device_calls)},
        {"nonblocking_calls", "Of the calls, MPI_Iallreduce calls completed by gpurdma",
         offsetof(gpurdma_comm_stats_t, nonblocking_calls)},
        {"persistent_calls", "Of the calls, persistent allreduce starts (MPI_Start) completed by gpurdma",
         offsetof(gpurdma_comm_stats_t, persistent_calls)},
        {"reduce_scatter_calls", "MPI_Reduce_scatter(_block) calls (any form) completed by gpurdma",
         offsetof(gpurdma_comm_stats_t, reduce_scatter_calls)},
        {"allgather_calls", "MPI_Allgather calls (any form) completed by gpurdma",
         offsetof(gpurdma_comm_stats_t, allgather_calls)},
        {"bcast_calls", "MPI_Bcast calls (any form) completed by gpurdma", offsetof(gpurdma_comm_stats_t, bcast_calls)},
        {"reduce_calls", "MPI_Reduce calls (any form) completed by gpurdma",
         offsetof(gpurdma_comm_stats_t, reduce_calls)},
        {"barrier_calls", "MPI_Barrier calls (any form) completed by gpurdma",
         offsetof(gpurdma_comm_stats_t, barrier_calls)},
        {"stage_node_reduce_scatter_us",
         "Microseconds in the node reduce-scatter stage (its window per call; schedules' calls, not the one-node "
         "latency path)",
         offsetof(gpurdma_comm_stats_t, stage_node_reduce_scatter_us)},
        {"stage_node_reduce_scatter_bytes", "Bytes this process sent in the node reduce-scatter stage",
         offsetof(gpurdma_comm_stats_t, stage_node_reduce_scatter_bytes)},
        {"stage_rail_us",
         "Microseconds in the schedules' exchanges (the rail between nodes; a flat ring, recursive doubling, "
         "halving-doubling or tree as a whole)",
         offsetof(gpurdma_comm_stats_t, stage_rail_us)},
        {"stage_rail_bytes", "Bytes this process sent in the schedules' exchanges",
         offsetof(gpurdma_comm_stats_t, stage_rail_bytes)},
        {"stage_node_allgather_us", "Microseconds in the node allgather stage",
         offsetof(gpurdma_comm_stats_t, stage_node_allgather_us)},
        {"stage_node_allgather_bytes", "Bytes this process sent in the node allgather stage",
         offsetof(gpurdma_comm_stats_t, stage_node_allgather_bytes)},
        {"stage_gpu_copy_us", "Microseconds of GPU buffers' copies to and from page-locked staging (across nodes)",
         offsetof(gpurdma_comm_stats_t, stage_gpu_copy_us)},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        (void)mca_base_component_pvar_register(&mca_coll_gpurdma_component.collm_version, counters[i].name,
                                               counters[i].help, OPAL_INFO_LVL_4, MCA_BASE_PVAR_CLASS_COUNTER,
                                               MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
                                               MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
                                               read_counter, NULL, NULL, (void *)(uintptr_t)counters[i].offset);
}

static int gpurdma_register(void)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    g->priority = 0;
    /* The component's own; every other parameter is the core's (coll_gpurdma_params.c). */
    (void)mca_base_component_var_register(&mca_coll_gpurdma_component.collm_version, "priority",
                                          "Priority of coll/gpurdma (0 = off; 100 takes MPI_Allreduce on every "
                                          "intra-communicator of 2 or more ranks)",
                                          MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_6,
                                          MCA_BASE_VAR_SCOPE_READONLY, &g->priority);
    mca_coll_gpurdma_register_params();
    register_counters();
    return OMPI_SUCCESS;
}

/* The component's output stream: stderr (stdout if Open MPI's own output goes there),
 * verbosity coll_gpurdma_verbose (level 0, errors and warnings, always printed), and
 * a prefix that names the process as Open MPI's does, plus its rank in the job:
 * "[host:pid rank 3] ". */
static int open_output(int verbose)
{
    opal_output_stream_t lds;
    OBJ_CONSTRUCT(&lds, opal_output_stream_t);
    const char *to_stdout = getenv("OPAL_OUTPUT_INTERNAL_TO_STDOUT");
    if (to_stdout && '1' == to_stdout[0]) lds.lds_want_stdout = true;
    else lds.lds_want_stderr = true;
    lds.lds_verbose_level = verbose > 0 ? verbose : 0;
    char host[64] = "";
    if (opal_process_info.nodename) snprintf(host, sizeof host, "%s", opal_process_info.nodename);
    else gethostname(host, sizeof host - 1);
    char prefix[128];
    const opal_vpid_t rank = OPAL_PROC_MY_NAME.vpid;
    if (OPAL_VPID_INVALID == rank) snprintf(prefix, sizeof prefix, "[%s:%05d] ", host, (int)getpid());
    else snprintf(prefix, sizeof prefix, "[%s:%05d rank %lu] ", host, (int)getpid(), (unsigned long)rank);
    lds.lds_prefix = prefix; /* copied by opal_output_open */
    int output = opal_output_open(&lds);
    OBJ_DESTRUCT(&lds);
    return output;
}

static int gpurdma_open(void)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    gpurdma_config_t c;
    mca_coll_gpurdma_config_from_params(&c);
    g->verbose = c.verbose;
    g->output = open_output(g->verbose);
    g->closing = false;
    mca_coll_gpurdma_init_classes();
    return OMPI_SUCCESS;
}

static int gpurdma_close(void)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    /* Requests freed while in flight hold their modules (and so the context). */
    mca_coll_gpurdma_release_deferred();
    g->closing = true;
    mca_coll_gpurdma_release_context();
    if (g->output >= 0) opal_output_close(g->output);
    g->output = -1;
    return OMPI_SUCCESS;
}

void mca_coll_gpurdma_output(int level, const char *format, ...)
{
    const mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    char text[2048];
    va_list ap;
    va_start(ap, format);
    vsnprintf(text, sizeof text, format, ap);
    va_end(ap);
    if (g->output >= 0) {
        opal_output_verbose(level, g->output, "coll:gpurdma: %s", text);
    } else if (level <= 0 || level <= g->verbose) {
        /* Before open or after close (a communicator freed late): Open MPI's own stream. */
        opal_output(0, "coll:gpurdma: %s", text);
    }
}

static void log_message(int level, const char *message)
{
    mca_coll_gpurdma_output(level, "%s", message);
}

static void outside_progress(void)
{
    (void)opal_progress();
}

static int progress_callback(void)
{
    return mca_coll_gpurdma_globals.context ? gpurdma_context_progress(mca_coll_gpurdma_globals.context) : 0;
}

/* The MCA values, checked by the core: out-of-range values get one warning and the
 * default, never a crash. */
static void validated_config(gpurdma_config_t *c)
{
    mca_coll_gpurdma_config_from_params(c);
    c->log = log_message;
    /* Our blocking waits keep Open MPI's other operations moving (MPI's progress rule):
     * a peer may wait on this rank's libnbc request before it joins our call. */
    c->outside_progress = outside_progress;
    (void)gpurdma_config_validate(c);
    /* The whole job's processes on this node, not just a communicator's: ranks of other
     * communicators may be the ones our spinning would starve. */
    c->local_processes = opal_process_info.num_local_peers + 1;
    /* Fixed for the process's life: its logical node is the same in every communicator. */
    c->local_rank = opal_process_info.my_local_rank;
    /* The thread level is known before the first communicator is queried (MPI_Init_thread
     * sets it first). */
    c->threads = gpurdma_mpi_thread_multiple() ? 1 : 0;
    mca_coll_gpurdma_globals.gpu_buffers = c->cuda || c->rocm;
    /* One process per host says what gpurdma's UCX context will get (all get the same). */
    if (c->local_rank <= 0 && (c->ib_gid_index >= 0 || c->ib_tc >= 0 || c->ib_sl >= 0))
        mca_coll_gpurdma_output(1,
                                "gpurdma's UCX context: IB GID index %d, traffic class %d, service level %d "
                                "(-1: UCX's choice; RDMA devices only)",
                                c->ib_gid_index, c->ib_tc, c->ib_sl);
}

/* Communicators are created and freed in whichever thread asks (MPI_THREAD_MULTIPLE), and
 * Open MPI runs comm_query outside any lock of its own: the context's creation and release
 * are serialised here. Taken only there, never on a call's path. */
static pthread_mutex_t context_lock = PTHREAD_MUTEX_INITIALIZER;

bool mca_coll_gpurdma_ensure_context(void)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    bool ok = false;
    pthread_mutex_lock(&context_lock);
    if (g->context) {
        ok = true;
    } else if (!g->context_failed && !g->closing && mca_coll_gpurdma_check_layouts()) {
        gpurdma_config_t c;
        validated_config(&c);
        gpurdma_status_t st = gpurdma_context_create(&c, &g->context);
        if (st != GPURDMA_OK) {
            g->context_failed = true;
            g->context = NULL;
            mca_coll_gpurdma_output(1, "invalid configuration (%s); the previous allreduce stays in use",
                                    gpurdma_status_name(st));
        } else {
            g->context_threads = c.threads;
            /* While MPI waits elsewhere (e.g. in the set-up allgather), UCX still moves. */
            opal_progress_register(progress_callback);
            ok = true;
        }
    }
    pthread_mutex_unlock(&context_lock);
    /* A 5.x session initialised at MPI_THREAD_MULTIPLE after the context was made for one
     * thread: its UCX worker is not thread-safe, so this communicator is not ours. */
    if (ok && !g->context_threads && gpurdma_mpi_thread_multiple()) {
        mca_coll_gpurdma_output(1,
                                "MPI_THREAD_MULTIPLE was turned on after gpurdma started single-threaded; "
                                "declining");
        return false;
    }
    return ok;
}

void mca_coll_gpurdma_release_context(void)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    pthread_mutex_lock(&context_lock);
    /* Destroyed once the component is closing and no module uses it any more. */
    if (g->context && g->closing && __atomic_load_n(&g->live_modules, __ATOMIC_ACQUIRE) <= 0) {
        opal_progress_unregister(progress_callback);
        gpurdma_context_destroy(g->context);
        g->context = NULL;
    }
    pthread_mutex_unlock(&context_lock);
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
        mca_coll_gpurdma_output(0,
                                "built against %s but running in %.*s: the coll structs may differ; "
                                "gpurdma disabled (rebuild it against this Open MPI's headers)",
                                built, (int)shown, p);
    return false;
}

int mca_coll_gpurdma_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return same_release_as_built() ? OMPI_SUCCESS : OMPI_ERR_NOT_SUPPORTED;
}
