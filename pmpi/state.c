/*
 * Process and communicator state, kept in MPI attributes:
 *  - the core context: made by the first call that needs it, released at MPI_Finalize
 *    (an attribute on MPI_COMM_SELF, whose attributes MPI_Finalize deletes first) once
 *    no communicator uses it any more, as the component releases it at close;
 *  - one core communicator per MPI communicator, made on its first MPI_Allreduce and
 *    freed by the attribute's delete callback (MPI_Comm_free; MPI_Finalize for
 *    MPI_COMM_WORLD). Its set-up bootstrap is PMPI_Allgather on the communicator.
 *    MPI_Finalize releases those of communicators the application never freed (MPICH
 *    deletes no attribute of theirs), as Open MPI's finalize does the component's: their
 *    resources go and their counts are reported (IMB leaves its communicators to it).
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "pmpi/interposer.h"

static struct {
    pthread_mutex_t lock; /* creation and release of the context; never on a call's path */
    gpurdma_context_t *context;
    bool failed; /* do not retry a context that could not start */
    bool closing; /* MPI_Finalize has begun */
    int live_comms; /* the context outlives every core communicator (atomic) */
    int comm_keyval;
    int finalize_keyval;
    bool gpu_buffers; /* coll_gpurdma_cuda or coll_gpurdma_rocm */
    pmpi_comm_t *comms; /* every state made, until its attribute is deleted (under lock) */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .comm_keyval = MPI_KEYVAL_INVALID, .finalize_keyval = MPI_KEYVAL_INVALID};

bool pmpi_gpu_buffers_enabled(void)
{
    return g.gpu_buffers;
}

/* Destroyed once MPI_Finalize has begun and no communicator uses it any more. */
static void release_context(void)
{
    pthread_mutex_lock(&g.lock);
    if (g.context && g.closing && __atomic_load_n(&g.live_comms, __ATOMIC_ACQUIRE) <= 0) {
        gpurdma_context_destroy(g.context);
        g.context = NULL;
    }
    pthread_mutex_unlock(&g.lock);
}

static int comm_deleted(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm, (void)keyval, (void)extra;
    pmpi_comm_t *c = value;
    pthread_mutex_lock(&g.lock);
    for (pmpi_comm_t **p = &g.comms; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    pthread_mutex_unlock(&g.lock);
    if (c->core) {
        gpurdma_comm_destroy(c->core);
        __atomic_sub_fetch(&g.live_comms, 1, __ATOMIC_ACQ_REL);
    }
    free(c);
    release_context();
    return MPI_SUCCESS;
}

static int finalize_began(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm, (void)keyval, (void)value, (void)extra;
    pthread_mutex_lock(&g.lock);
    g.closing = true;
    /* No state is made from now on; attributes still set are deleted all the same. */
    (void)PMPI_Comm_free_keyval(&g.comm_keyval);
    (void)PMPI_Comm_free_keyval(&g.finalize_keyval);
    /* Communicators still alive: no call can come any more. Their states stay listed
     * (their attributes may yet be deleted, which frees them). */
    for (pmpi_comm_t *c = g.comms; c; c = c->next)
        if (c->core) {
            gpurdma_comm_destroy(c->core);
            c->core = NULL;
            __atomic_sub_fetch(&g.live_comms, 1, __ATOMIC_ACQ_REL);
        }
    pthread_mutex_unlock(&g.lock);
    release_context();
    return MPI_SUCCESS;
}

/* The caller's progress while a blocking call waits: a peer may be waiting for one of
 * this rank's MPI operations (a rendezvous send) before it joins our call. */
static void outside_progress(void)
{
    int flag;
    (void)PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

/* Environment values, checked by the core: out-of-range values get one warning and the
 * default, never a crash. The launcher's facts stand in for Open MPI's process info. */
static void validated_config(gpurdma_config_t *c)
{
    pmpi_config_from_environment(c);
    c->log = pmpi_log;
    c->outside_progress = outside_progress;
    (void)gpurdma_config_validate(c);
    /* Hydra (mpiexec.mpich) and Intel MPI's launcher set these; without them the core
     * decides the wait policy from the host's CPUs and logical_nodes cannot apply. */
    const char *local_processes = getenv("MPI_LOCALNRANKS"), *local_rank = getenv("MPI_LOCALRANKID");
    c->local_processes = local_processes ? atoi(local_processes) : 0;
    c->local_rank = local_rank ? atoi(local_rank) : -1;
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    c->threads = MPI_THREAD_MULTIPLE == level;
    g.gpu_buffers = c->cuda || c->rocm;
}

static bool ensure_context(void)
{
    if (__atomic_load_n(&g.context, __ATOMIC_ACQUIRE)) return true;
    bool ok = false;
    pthread_mutex_lock(&g.lock);
    int initialized = 0, finalized = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (g.context) {
        ok = true;
    } else if (!g.failed && !g.closing && initialized && !finalized) {
        g.failed = true; /* until it has started */
        int rank = 0;
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        pmpi_set_rank(rank);
        gpurdma_config_t c;
        validated_config(&c);
        pmpi_set_verbose(c.verbose);
        gpurdma_context_t *context = NULL;
        gpurdma_status_t st = GPURDMA_ERR_INVALID;
        if (pmpi_layouts_match() &&
            MPI_SUCCESS == PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_deleted, &g.comm_keyval, NULL) &&
            MPI_SUCCESS == PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_began, &g.finalize_keyval, NULL) &&
            MPI_SUCCESS == PMPI_Comm_set_attr(MPI_COMM_SELF, g.finalize_keyval, NULL))
            st = gpurdma_context_create(&c, &context);
        if (GPURDMA_OK == st) {
            g.failed = false;
            __atomic_store_n(&g.context, context, __ATOMIC_RELEASE);
            ok = true;
        } else {
            pmpi_output(1, "could not start (%s); PMPI_Allreduce stays in use", gpurdma_status_name(st));
        }
    }
    pthread_mutex_unlock(&g.lock);
    return ok;
}

/* "MPI_COMM_WORLD (handle 0x44000000)": the name as set when the state was made. */
static void describe(MPI_Comm comm, char *name, size_t size)
{
    char mpi_name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    PMPI_Comm_get_name(comm, mpi_name, &len);
    /* A long MPI name is cut to fit (the handle stays). */
    if (mpi_name[0])
        snprintf(name, size, "%.*s (handle 0x%x)", (int)(size > 32 ? size - 32 : 0), mpi_name, (unsigned)comm);
    else snprintf(name, size, "communicator 0x%x", (unsigned)comm);
}

static int bootstrap_allgather(const void *send, void *recv, size_t bytes, void *arg)
{
    const pmpi_comm_t *c = arg;
    if (bytes > (size_t)INT_MAX) return -1;
    int rc = PMPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, c->comm);
    return MPI_SUCCESS == rc ? 0 : -1;
}

pmpi_comm_t *pmpi_comm_state(MPI_Comm comm)
{
    if (pmpi_priority() <= 0 || __atomic_load_n(&g.closing, __ATOMIC_ACQUIRE) || !ensure_context()) return NULL;
    pmpi_comm_t *c = NULL;
    int found = 0;
    if (MPI_SUCCESS != PMPI_Comm_get_attr(comm, g.comm_keyval, &c, &found)) return NULL;
    if (found) return c;
    /* The first call on this communicator (every member makes it). */
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    c = calloc(1, sizeof *c);
    if (NULL == c) return NULL;
    c->comm = comm;
    describe(comm, c->name, sizeof c->name);
    if (!inter) {
        int rank, size;
        PMPI_Comm_rank(comm, &rank);
        PMPI_Comm_size(comm, &size);
        gpurdma_comm_params_t params = {
            .rank = rank,
            .size = size,
            .bootstrap = {.allgather = bootstrap_allgather, .arg = c},
            .name = c->name,
        };
        if (GPURDMA_OK == gpurdma_comm_create(g.context, &params, &c->core))
            __atomic_add_fetch(&g.live_comms, 1, __ATOMIC_ACQ_REL);
        else c->core = NULL;
    }
    if (MPI_SUCCESS != PMPI_Comm_set_attr(comm, g.comm_keyval, c)) {
        if (c->core) {
            gpurdma_comm_destroy(c->core);
            __atomic_sub_fetch(&g.live_comms, 1, __ATOMIC_ACQ_REL);
        }
        free(c);
        return NULL;
    }
    pthread_mutex_lock(&g.lock);
    c->next = g.comms;
    g.comms = c;
    pthread_mutex_unlock(&g.lock);
    return c;
}
