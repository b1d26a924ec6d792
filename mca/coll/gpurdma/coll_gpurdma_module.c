/*
 * Module: one per communicator. Saves the previous allreduce/allgather (and the
 * nonblocking and persistent allreduce) in enable, creates the core communicator (whose
 * set-up runs lazily on the first call), and routes each MPI_Allreduce to the core or,
 * when it declines, to the previous module. The nonblocking and persistent entry points
 * are in coll_gpurdma_request.c.
 */
#include "coll_gpurdma.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"

static void module_construct(mca_coll_gpurdma_module_t *m)
{
    m->comm = NULL;
    m->core = NULL;
    m->prev_allreduce = NULL;
    m->prev_allreduce_module = NULL;
    m->prev_allgather = NULL;
    m->prev_allgather_module = NULL;
    m->prev_iallreduce = NULL;
    m->prev_iallreduce_module = NULL;
    m->prev_allreduce_init = NULL;
    m->prev_allreduce_init_module = NULL;
    /* The other collectives' previous functions, up to set_up: none yet. */
    memset(
        &m->prev_reduce_scatter_block, 0,
        offsetof(mca_coll_gpurdma_module_t, set_up) - offsetof(mca_coll_gpurdma_module_t, prev_reduce_scatter_block));
    m->set_up = 0;
    m->name[0] = '\0';
    /* Modules come and go in whichever thread creates or frees a communicator. */
    __atomic_add_fetch(&mca_coll_gpurdma_globals.live_modules, 1, __ATOMIC_ACQ_REL);
}

/* Keeps the communicator's current coll_<name> (the lower-priority winner) and its module, retained. */
#define SAVE_PREVIOUS(m, comm, name)                                          \
    do {                                                                      \
        (m)->prev_##name = (comm)->c_coll->coll_##name;                       \
        (m)->prev_##name##_module = (comm)->c_coll->coll_##name##_module;     \
        if ((m)->prev_##name##_module) OBJ_RETAIN((m)->prev_##name##_module); \
    } while (0)

#define RELEASE_PREVIOUS(m, name)                                              \
    do {                                                                       \
        if ((m)->prev_##name##_module) OBJ_RELEASE((m)->prev_##name##_module); \
        (m)->prev_##name##_module = NULL;                                      \
    } while (0)

static void module_destruct(mca_coll_gpurdma_module_t *m)
{
    if (m->core) gpurdma_comm_destroy(m->core);
    m->core = NULL;
    RELEASE_PREVIOUS(m, allreduce);
    RELEASE_PREVIOUS(m, allgather);
    RELEASE_PREVIOUS(m, iallreduce);
    RELEASE_PREVIOUS(m, allreduce_init);
    mca_coll_gpurdma_release_previous_collectives(m);
    __atomic_sub_fetch(&mca_coll_gpurdma_globals.live_modules, 1, __ATOMIC_ACQ_REL);
    mca_coll_gpurdma_release_context();
}

OBJ_CLASS_INSTANCE(mca_coll_gpurdma_module_t, mca_coll_base_module_t, module_construct, module_destruct);

/* The core's set-up bootstrap: the previous module's allgather over this communicator. */
static int bootstrap_allgather(const void *send, void *recv, size_t bytes, void *arg)
{
    mca_coll_gpurdma_module_t *m = (mca_coll_gpurdma_module_t *)arg;
    if (bytes > (size_t)GPURDMA_COLL_COUNT_MAX) return -1;
    int rc = m->prev_allgather(send, (gpurdma_coll_count_t)bytes, MPI_BYTE, recv, (gpurdma_coll_count_t)bytes, MPI_BYTE,
                               m->comm, m->prev_allgather_module);
    return rc == OMPI_SUCCESS ? 0 : -1;
}

static int module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_gpurdma_module_t *m = (mca_coll_gpurdma_module_t *)module;
    /* enable() runs in ascending priority: c_coll holds the lower-priority winners. */
    if (NULL == comm->c_coll->coll_allreduce_module || NULL == comm->c_coll->coll_allgather_module) {
        mca_coll_gpurdma_output(0, "%s: no previous allreduce/allgather to fall back on; disabled",
                                gpurdma_comm_name(comm));
        return OMPI_ERROR;
    }
    m->comm = comm;
    SAVE_PREVIOUS(m, comm, allreduce);
    SAVE_PREVIOUS(m, comm, allgather);
    /* NULL if no lower module has them: the blocking fallback then runs in their place. */
    SAVE_PREVIOUS(m, comm, iallreduce);
    SAVE_PREVIOUS(m, comm, allreduce_init);
#if OMPI_MAJOR_VERSION < 6
    mca_coll_gpurdma_save_previous_collectives(m, comm);
#endif

    const char *comm_name = gpurdma_comm_name(comm);
    if (comm_name[0]) snprintf(m->name, sizeof m->name, "%s (cid %u)", comm_name, gpurdma_comm_cid(comm));
    else snprintf(m->name, sizeof m->name, "communicator cid %u", gpurdma_comm_cid(comm));
    gpurdma_comm_params_t params = {
        .rank = ompi_comm_rank(comm),
        .size = ompi_comm_size(comm),
        .bootstrap = {.allgather = bootstrap_allgather, .arg = m},
        .name = m->name,
    };
    if (GPURDMA_OK != gpurdma_comm_create(mca_coll_gpurdma_globals.context, &params, &m->core)) {
        m->core = NULL;
        return OMPI_ERROR;
    }
#if GPURDMA_COLL_MODULE_INSTALLS
    /* Open MPI 6: the base no longer copies the module's pointers; each module puts its
     * own in (and takes them out in disable). */
    comm->c_coll->coll_allreduce = mca_coll_gpurdma_allreduce;
    comm->c_coll->coll_allreduce_module = &m->super;
    comm->c_coll->coll_iallreduce = mca_coll_gpurdma_iallreduce;
    comm->c_coll->coll_iallreduce_module = &m->super;
    comm->c_coll->coll_allreduce_init = mca_coll_gpurdma_allreduce_init;
    comm->c_coll->coll_allreduce_init_module = &m->super;
#endif
    return OMPI_SUCCESS;
}

#if GPURDMA_COLL_MODULE_INSTALLS
/* Called in the reverse order of enable: if ours is still the installed allreduce, the
 * one we replaced goes back. Idempotent. */
static int module_disable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_gpurdma_module_t *m = (mca_coll_gpurdma_module_t *)module;
    if (comm->c_coll->coll_allreduce_module == module) {
        comm->c_coll->coll_allreduce = m->prev_allreduce;
        comm->c_coll->coll_allreduce_module = m->prev_allreduce_module;
    }
    if (comm->c_coll->coll_iallreduce_module == module) {
        comm->c_coll->coll_iallreduce = m->prev_iallreduce;
        comm->c_coll->coll_iallreduce_module = m->prev_iallreduce_module;
    }
    if (comm->c_coll->coll_allreduce_init_module == module) {
        comm->c_coll->coll_allreduce_init = m->prev_allreduce_init;
        comm->c_coll->coll_allreduce_init_module = m->prev_allreduce_init_module;
    }
    return OMPI_SUCCESS;
}
#endif

mca_coll_base_module_t *mca_coll_gpurdma_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_gpurdma_globals_t *g = &mca_coll_gpurdma_globals;
    *priority = g->priority;
    if (g->priority <= 0) return NULL;
    /* Single-rank communicators too: coll/self would touch GPU buffers from the CPU. */
    if (OMPI_COMM_IS_INTER(comm)) return NULL;
    /* Only decisions every rank makes alike belong here: anything that can fail on one
     * rank alone (UCX, memory) is agreed on in the core's lazy set-up instead. The layout
     * check and the context are made once, by the first communicator (MPI_COMM_WORLD, in
     * MPI_Init); later queries may run in several threads at once (communicators created
     * concurrently), hence the lock inside. */
    if (!mca_coll_gpurdma_ensure_context()) return NULL;

    mca_coll_gpurdma_module_t *m = OBJ_NEW(mca_coll_gpurdma_module_t);
    if (NULL == m) return NULL;
    m->super.coll_module_enable = module_enable;
    m->super.coll_allreduce = mca_coll_gpurdma_allreduce;
    m->super.coll_iallreduce = mca_coll_gpurdma_iallreduce;
    m->super.coll_allreduce_init = mca_coll_gpurdma_allreduce_init;
#if OMPI_MAJOR_VERSION < 6
    mca_coll_gpurdma_install_collectives(m);
    mca_coll_gpurdma_install_barrier(m);
#endif
#if GPURDMA_COLL_MODULE_INSTALLS
    m->super.coll_module_disable = module_disable;
#endif
    return &m->super;
}

/* The previous allreduce, called back on host copies (gpurdma_staged_host_call). */
struct staged_args {
    mca_coll_gpurdma_module_t *m;
    gpurdma_coll_count_t count;
    struct ompi_datatype_t *dtype;
    struct ompi_op_t *op;
};

static int previous_on_host(const void *send, void *recv, void *arg)
{
    struct staged_args *a = arg;
    return a->m->prev_allreduce(send ? send : MPI_IN_PLACE, recv, a->count, a->dtype, a->op, a->m->comm,
                                a->m->prev_allreduce_module);
}

/*
 * The previous module cannot read GPU memory (Open MPI is not CUDA-aware): give it
 * host copies of the buffers' whole span, then copy the result back.
 */
static int staged_fallback(mca_coll_gpurdma_module_t *m, const void *sbuf, void *rbuf, gpurdma_coll_count_t count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    ptrdiff_t lb, extent, true_lb, true_extent;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
    struct staged_args args = {m, count, dtype, op};
    int rc = OMPI_SUCCESS;
    gpurdma_status_t st = gpurdma_staged_host_call(sbuf == MPI_IN_PLACE ? NULL : sbuf, rbuf, (size_t)count, extent,
                                                   true_lb, true_extent, previous_on_host, &args, &rc);
    if (GPURDMA_ERR_NO_RESOURCE == st) return OMPI_ERR_OUT_OF_RESOURCE;
    if (GPURDMA_OK != st) {
        mca_coll_gpurdma_output(0, "%s: copying GPU buffers for the previous allreduce failed", m->name);
        return MPI_ERR_OTHER;
    }
    return rc;
}

bool mca_coll_gpurdma_device_buffers(const void *sbuf, const void *rbuf)
{
    return mca_coll_gpurdma_globals.gpu_buffers &&
           (gpurdma_is_device_memory(rbuf) || (sbuf != MPI_IN_PLACE && gpurdma_is_device_memory(sbuf)));
}

int mca_coll_gpurdma_blocking_fallback(mca_coll_gpurdma_module_t *m, const char *why, const void *sbuf, void *rbuf,
                                       gpurdma_coll_count_t count, struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    bool device = mca_coll_gpurdma_device_buffers(sbuf, rbuf);
    mca_coll_gpurdma_output(2, "%s: fallback to the previous allreduce (%s)%s", m->name, why,
                            device ? ", staged through host memory" : "");
    if (device) return staged_fallback(m, sbuf, rbuf, count, dtype, op);
    return m->prev_allreduce(sbuf, rbuf, count, dtype, op, m->comm, m->prev_allreduce_module);
}

int mca_coll_gpurdma_allreduce(const void *sbuf, void *rbuf, gpurdma_coll_count_t count, struct ompi_datatype_t *dtype,
                               struct ompi_op_t *op, struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpurdma_module_t *m = (mca_coll_gpurdma_module_t *)module;
    (void)comm;
    mca_coll_gpurdma_release_deferred();
    gpurdma_dtype_t gdt;
    gpurdma_op_t gop;
    if (!mca_coll_gpurdma_map_op(op, &gop))
        return mca_coll_gpurdma_blocking_fallback(m, "user-defined or unsupported op", sbuf, rbuf, count, dtype, op);
    if (!mca_coll_gpurdma_map_datatype(dtype, &gdt))
        return mca_coll_gpurdma_blocking_fallback(m, "derived or unsupported datatype", sbuf, rbuf, count, dtype, op);
#if OMPI_MAJOR_VERSION < 6
    if (count < 0) return MPI_ERR_COUNT;
#endif
    gpurdma_status_t st = gpurdma_allreduce(m->core, sbuf == MPI_IN_PLACE ? NULL : sbuf, rbuf, (size_t)count, gdt, gop);
    if (GPURDMA_ERR_UNSUPPORTED == st)
        return mca_coll_gpurdma_blocking_fallback(m, "op not defined for this datatype, or set-up declined", sbuf, rbuf,
                                                  count, dtype, op);
    return mca_coll_gpurdma_start_error(m, st);
}

int mca_coll_gpurdma_start_error(mca_coll_gpurdma_module_t *m, gpurdma_status_t st)
{
    switch (st) {
        case GPURDMA_OK: return MPI_SUCCESS;
        case GPURDMA_ERR_CONCURRENT: {
            /* Nothing was done; the other thread's call goes on. The name as it is now
             * (MPI_Comm_set_name may have come after enable). */
            const char *now = gpurdma_comm_name(m->comm);
            if (now[0])
                mca_coll_gpurdma_output(
                    0, "concurrent collective calls on %s (cid %u) from two threads (erroneous in MPI)", now,
                    gpurdma_comm_cid(m->comm));
            else
                mca_coll_gpurdma_output(0, "concurrent collective calls on %s from two threads (erroneous in MPI)",
                                        m->name);
            return MPI_ERR_OTHER;
        }
        case GPURDMA_ERR_BROKEN:
            mca_coll_gpurdma_output(0, "%s: disabled after an earlier failure (%s)", m->name,
                                    gpurdma_comm_last_error(m->core));
            return MPI_ERR_OTHER;
        default:
            /* The core has printed the stage and peer; MPI's error handler decides what next. */
            return MPI_ERR_OTHER;
    }
}
