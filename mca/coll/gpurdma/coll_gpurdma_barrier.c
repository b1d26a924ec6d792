/*
 * MPI_Barrier, MPI_Ibarrier and MPI_Barrier_init (MPIX_ in 4.1) through the core's barrier
 * (a one-byte allreduce on the allreduce's paths). What the core hands on (before the
 * communicator's set-up for the nonblocking and persistent forms, a set-up that declined,
 * coll_gpurdma_barrier_enable 0) goes to the previous module, on every rank alike.
 * Requests are coll_gpurdma_request.c's.
 */
#include "coll_gpurdma.h"
#include "coll_gpurdma_request.h"

#if OMPI_MAJOR_VERSION < 6

static const char *const barrier_declined = "collective switched off, or set-up declined";

static int barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpurdma_module_t *m = (mca_coll_gpurdma_module_t *)module;
    mca_coll_gpurdma_release_deferred();
    const gpurdma_status_t st = gpurdma_barrier(m->core);
    if (GPURDMA_ERR_UNSUPPORTED == st) {
        mca_coll_gpurdma_output(2, "%s: barrier: fallback to the previous module (%s)", m->name, barrier_declined);
        return m->prev_barrier(comm, m->prev_barrier_module);
    }
    return mca_coll_gpurdma_start_error(m, st);
}

static int previous_request(mca_coll_gpurdma_module_t *m, struct ompi_communicator_t *comm, bool persistent,
                            struct ompi_info_t *info, ompi_request_t **request)
{
    mca_coll_gpurdma_output(2, "%s: barrier: fallback to the previous %s call (%s)", m->name,
                            persistent ? "persistent" : "nonblocking",
                            mca_coll_gpurdma_declined_why(m, barrier_declined));
    if (persistent) {
        /* Without one below us Open MPI has no persistent barrier either. */
        if (NULL == m->prev_barrier_init) return OMPI_ERR_NOT_SUPPORTED;
        return m->prev_barrier_init(comm, info, request, m->prev_barrier_init_module);
    }
    if (NULL == m->prev_ibarrier) return OMPI_ERR_NOT_SUPPORTED;
    return m->prev_ibarrier(comm, request, m->prev_ibarrier_module);
}

static int with_request(mca_coll_gpurdma_module_t *m, struct ompi_communicator_t *comm, bool persistent,
                        struct ompi_info_t *info, ompi_request_t **request)
{
    /* Not at a nonblocking start, which Open MPI may make from inside its progress. */
    if (persistent) mca_coll_gpurdma_release_deferred();
    mca_coll_gpurdma_request_t *r = mca_coll_gpurdma_request_new(m, comm, persistent);
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    gpurdma_status_t st;
    if (persistent) {
        st = gpurdma_barrier_init(m->core, mca_coll_gpurdma_request_complete, r, &r->core);
    } else {
        mca_coll_gpurdma_request_hand_over(r);
        st = gpurdma_ibarrier(m->core, mca_coll_gpurdma_request_complete, r, &r->core);
    }
    if (GPURDMA_OK == st) {
        *request = &r->super;
        return MPI_SUCCESS;
    }
    mca_coll_gpurdma_request_drop_unstarted(r);
    if (GPURDMA_ERR_UNSUPPORTED == st) return previous_request(m, comm, persistent, info, request);
    return mca_coll_gpurdma_start_error(m, st);
}

static int ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request, mca_coll_base_module_t *module)
{
    return with_request((mca_coll_gpurdma_module_t *)module, comm, false, NULL, request);
}

static int barrier_init(struct ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **request,
                        mca_coll_base_module_t *module)
{
    return with_request((mca_coll_gpurdma_module_t *)module, comm, true, info, request);
}

void mca_coll_gpurdma_install_barrier(mca_coll_gpurdma_module_t *m)
{
    m->super.coll_barrier = barrier;
    m->super.coll_ibarrier = ibarrier;
    m->super.coll_barrier_init = barrier_init;
}

#endif /* OMPI_MAJOR_VERSION < 6 */
