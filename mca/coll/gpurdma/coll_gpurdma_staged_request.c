/*
 * A declined nonblocking or persistent call on GPU buffers (allreduce, and the other
 * collectives): the previous module's nonblocking (persistent) call on host copies of
 * the buffers. The ranks of a call
 * may mix host and GPU buffers; each must run the same algorithm, and a host-buffer rank
 * runs the previous module's nonblocking one on its own buffers. So a GPU-buffer rank
 * runs it too, on host copies, and copies the result back when it completes.
 *
 * The copy back runs in the previous module's request's completion callback, before MPI
 * sees the request complete. A nonblocking call returns that request itself: MPI's
 * MPI_Iallreduce keeps a user op or derived datatype in it (it must be the previous
 * module's kind of request), chaining our callback behind its own, which it then calls
 * with the callback data instead of the request; both are the request here. A persistent
 * call returns our request (coll_gpurdma_request.c), which copies the GPU data in at
 * each start and completes when the inner one has.
 */
#include "coll_gpurdma.h"
#include "coll_gpurdma_request.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "ompi/datatype/ompi_datatype.h"

/* One staged call: the previous module's request, its host copies, and ours (persistent). */
typedef struct staged_call {
    ompi_request_t *inner;
    gpurdma_host_copies_t *copies;
    mca_coll_gpurdma_request_t *outer; /* NULL: a nonblocking call (the user holds inner) */
    const char *name; /* the communicator, for messages */
    struct staged_call *next;
} staged_call_t;

static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;
static staged_call_t *calls;

static void add_call(staged_call_t *c)
{
    pthread_mutex_lock(&calls_lock);
    c->next = calls;
    calls = c;
    pthread_mutex_unlock(&calls_lock);
}

/* The call of an inner request; unlinked when `unlink` (its last completion). */
static staged_call_t *find_call(const ompi_request_t *inner, bool unlink)
{
    pthread_mutex_lock(&calls_lock);
    staged_call_t **link = &calls;
    while (*link && (*link)->inner != inner) link = &(*link)->next;
    staged_call_t *c = *link;
    if (c && unlink) *link = c->next;
    pthread_mutex_unlock(&calls_lock);
    return c;
}

static void free_call(staged_call_t *c)
{
    gpurdma_host_copies_destroy(c->copies);
    free(c);
}

/* The inner request's completion callback (called with the request, or with the callback
 * data, which is the request too): the result back to GPU memory. */
static int staged_done(ompi_request_t *inner)
{
    staged_call_t *c = find_call(inner, false);
    if (NULL == c) return 0;
    gpurdma_status_t st = MPI_SUCCESS == inner->req_status.MPI_ERROR ? GPURDMA_OK : GPURDMA_ERR_TRANSPORT;
    if (GPURDMA_OK == st && GPURDMA_OK != (st = gpurdma_host_copies_copy_back(c->copies))) {
        mca_coll_gpurdma_output(0, "%s: copying the previous module's result back to GPU memory failed (%s)", c->name,
                                gpurdma_status_name(st));
        inner->req_status.MPI_ERROR = MPI_ERR_OTHER;
    }
    if (c->outer) {
        /* As MPI_Wait would leave it, ready for the next start. */
        inner->req_state = OMPI_REQUEST_INACTIVE;
        mca_coll_gpurdma_request_complete(c->outer, st);
    } else {
        (void)find_call(inner, true);
        free_call(c);
    }
    return 0;
}

/* Host copies of the spans of a call's buffers (send NULL or MPI_IN_PLACE: none of it). */
static int new_call(mca_coll_gpurdma_module_t *m, const void *sbuf, void *rbuf, const mca_coll_gpurdma_spans_t *spans,
                    staged_call_t **out)
{
    staged_call_t *c = calloc(1, sizeof *c);
    if (NULL == c) return OMPI_ERR_OUT_OF_RESOURCE;
    c->name = m->name;
    const void *send = sbuf == MPI_IN_PLACE || 0 == spans->send ? NULL : sbuf;
    gpurdma_status_t st = gpurdma_host_copies_create_spans(send, spans->send, spans->send_lb, rbuf, spans->recv,
                                                           spans->recv_lb, &c->copies);
    if (GPURDMA_OK != st) {
        free(c);
        if (GPURDMA_ERR_NO_RESOURCE == st) return OMPI_ERR_OUT_OF_RESOURCE;
        mca_coll_gpurdma_output(0, "%s: copying GPU buffers for the previous module's call failed (%s)", m->name,
                                gpurdma_status_name(st));
        return MPI_ERR_OTHER;
    }
    *out = c;
    return MPI_SUCCESS;
}

/* An allreduce's two buffers span the same bytes. */
static mca_coll_gpurdma_spans_t allreduce_spans(gpurdma_coll_count_t count, struct ompi_datatype_t *dtype)
{
    ptrdiff_t lb, extent, true_lb, true_extent;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
    const size_t span = count > 0 ? (size_t)(count - 1) * (size_t)extent + (size_t)true_extent : 0;
    mca_coll_gpurdma_spans_t spans = {span, true_lb, span, true_lb, true};
    return spans;
}

static const void *host_send(staged_call_t *c)
{
    const void *send = gpurdma_host_copies_send(c->copies);
    return send ? send : MPI_IN_PLACE;
}

int mca_coll_gpurdma_staged_iallreduce(mca_coll_gpurdma_module_t *m, const void *sbuf, void *rbuf,
                                       gpurdma_coll_count_t count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm, ompi_request_t **request)
{
    staged_call_t *c;
    const mca_coll_gpurdma_spans_t spans = allreduce_spans(count, dtype);
    int rc = new_call(m, sbuf, rbuf, &spans, &c);
    if (MPI_SUCCESS != rc) return rc;
    rc = m->prev_iallreduce(host_send(c), gpurdma_host_copies_recv(c->copies), count, dtype, op, comm, &c->inner,
                            m->prev_iallreduce_module);
    if (MPI_SUCCESS != rc) {
        free_call(c);
        return rc;
    }
    add_call(c);
    *request = c->inner;
    /* Runs staged_done now if the request has already completed. */
    (void)ompi_request_set_callback(c->inner, staged_done, c->inner);
    return MPI_SUCCESS;
}

int mca_coll_gpurdma_staged_allreduce_init(mca_coll_gpurdma_module_t *m, const void *sbuf, void *rbuf,
                                           gpurdma_coll_count_t count, struct ompi_datatype_t *dtype,
                                           struct ompi_op_t *op, struct ompi_communicator_t *comm,
                                           struct ompi_info_t *info, ompi_request_t **request)
{
    mca_coll_gpurdma_request_t *r = mca_coll_gpurdma_request_new(m, comm, true);
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    staged_call_t *c;
    const mca_coll_gpurdma_spans_t spans = allreduce_spans(count, dtype);
    int rc = new_call(m, sbuf, rbuf, &spans, &c);
    if (MPI_SUCCESS == rc) {
        rc = m->prev_allreduce_init(host_send(c), gpurdma_host_copies_recv(c->copies), count, dtype, op, comm, info,
                                    &c->inner, m->prev_allreduce_init_module);
        if (MPI_SUCCESS != rc) free_call(c);
    }
    if (MPI_SUCCESS != rc) {
        OBJ_RELEASE(r);
        return rc;
    }
    c->outer = r;
    r->inner = c->inner;
    add_call(c);
    /* The user may free them while the request lives (MPI_Allreduce_init keeps them only
     * for a pending request). */
    OBJ_RETAIN(dtype);
    r->dtype = dtype;
    OBJ_RETAIN(op);
    r->op = op;
    *request = &r->super;
    return MPI_SUCCESS;
}

#if OMPI_MAJOR_VERSION < 6
int mca_coll_gpurdma_staged_request(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *call, bool persistent,
                                    struct ompi_info_t *info, ompi_request_t **request)
{
    mca_coll_gpurdma_spans_t spans;
    if (!mca_coll_gpurdma_call_spans(m, call, &spans)) return MPI_ERR_INTERN;
    mca_coll_gpurdma_request_t *r = NULL;
    if (persistent) {
        /* Ours, holding the call (its types and op retained for the request's life). */
        r = mca_coll_gpurdma_request_new(m, m->comm, true);
        if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
        if (NULL == (r->call = mca_coll_gpurdma_keep_call(m, call))) {
            OBJ_RELEASE(r);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
    }
    staged_call_t *c;
    int rc = new_call(m, call->sbuf, call->rbuf, &spans, &c);
    if (MPI_SUCCESS == rc) {
        mca_coll_gpurdma_call_t host = *call;
        host.sbuf = host_send(c);
        host.rbuf = gpurdma_host_copies_recv(c->copies);
        rc = mca_coll_gpurdma_previous_request(m, &host, persistent, info, &c->inner);
        if (MPI_SUCCESS != rc) free_call(c);
    }
    if (MPI_SUCCESS != rc) {
        if (r) OBJ_RELEASE(r);
        return rc;
    }
    add_call(c);
    if (!persistent) {
        *request = c->inner;
        (void)ompi_request_set_callback(c->inner, staged_done, c->inner);
        return MPI_SUCCESS;
    }
    c->outer = r;
    r->inner = c->inner;
    *request = &r->super;
    return MPI_SUCCESS;
}
#endif

int mca_coll_gpurdma_staged_start(mca_coll_gpurdma_request_t *r)
{
    staged_call_t *c = find_call(r->inner, false);
    /* The last completion's callback has returned; MPI marks the inner request complete
     * just after (at once but for a few instructions; bounded all the same). */
    for (int i = 0; i < 1000000 && REQUEST_COMPLETED != __atomic_load_n(&r->inner->req_complete, __ATOMIC_ACQUIRE); ++i)
        sched_yield();
    /* The GPU data as it is at this start. */
    gpurdma_status_t st = gpurdma_host_copies_fill(c->copies);
    if (GPURDMA_OK != st) {
        mca_coll_gpurdma_output(0, "%s: copying GPU buffers for the previous persistent call failed (%s)", c->name,
                                gpurdma_status_name(st));
        return MPI_ERR_OTHER;
    }
    __atomic_add_fetch(&r->refs, 1, __ATOMIC_ACQ_REL);
    ++r->handed;
    int rc = r->inner->req_start(1, &r->inner);
    if (MPI_SUCCESS != rc) {
        --r->handed;
        __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL);
        return rc;
    }
    (void)ompi_request_set_callback(r->inner, staged_done, r->inner);
    return MPI_SUCCESS;
}

void mca_coll_gpurdma_staged_release(mca_coll_gpurdma_request_t *r)
{
    if (NULL == r->inner) return;
    /* The request's last reference is gone: no start of it is in flight. */
    staged_call_t *c = find_call(r->inner, true);
    (void)ompi_request_free(&r->inner);
    r->inner = NULL;
    if (c) free_call(c);
}
