/*
 * Nonblocking (MPI_Iallreduce) and persistent (MPI_Allreduce_init, MPIX_Allreduce_init in
 * 4.1) allreduce: an Open MPI request whose call runs in the core's engine. The engine
 * moves under opal_progress (the component's progress callback), so MPI_Test/MPI_Wait*
 * need nothing of ours; the core's completion callback completes the request with
 * ompi_request_complete, which wakes a waiter in any thread.
 *
 * Lifetime: a request holds references of its own: one for the user's handle, one
 * while the core has a call in flight. The completion callback drops the second, the
 * request's req_free the first; whichever is last releases the object. The callback
 * runs with the communicator's engine held and must not call gpurdma for it, so a
 * request whose last reference goes there (its handle freed while in flight) is put
 * on a list and released at the next blocking call, persistent init or MPI_Start into
 * the shim, in a thread that holds nothing of the core's: never at a nonblocking start
 * or a request's free, which Open MPI also makes from inside its progress, for the
 * release may be a module's last, whose communicator's teardown waits (bounded) for its
 * peers to take back their landing slots. A request holds its module (and so the core
 * communicator) until it is released.
 */
#include "coll_gpurdma_request.h"
#include "coll_gpurdma.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#include "ompi/datatype/ompi_datatype.h"

static int request_free(ompi_request_t **rptr);
static int request_cancel(ompi_request_t *request, int complete);
static int request_start(size_t count, ompi_request_t **requests);

static void request_construct(mca_coll_gpurdma_request_t *r)
{
    r->super.req_type = OMPI_REQUEST_COLL;
    r->super.req_free = request_free;
    r->super.req_cancel = request_cancel;
    r->super.req_start = request_start;
    r->module = NULL;
    r->core = NULL;
    r->refs = 1;
    r->freed = 0;
    r->handed = 0;
    r->completions = 0;
    r->next_deferred = NULL;
    r->blocking = false;
    r->why = NULL;
    r->sbuf = NULL;
    r->rbuf = NULL;
    r->count = 0;
    r->dtype = NULL;
    r->op = NULL;
    r->call = NULL;
    r->inner = NULL;
}

static void request_destruct(mca_coll_gpurdma_request_t *r)
{
    /* ompi_request_t's destructor expects a finished request. */
    OMPI_REQUEST_FINI(&r->super);
    mca_coll_gpurdma_staged_release(r);
    if (r->dtype) OBJ_RELEASE(r->dtype);
    if (r->op) OBJ_RELEASE(r->op);
    r->dtype = NULL;
    r->op = NULL;
    if (r->call) {
        if (r->call->sdtype) OBJ_RELEASE(r->call->sdtype);
        if (r->call->rdtype) OBJ_RELEASE(r->call->rdtype);
        if (r->call->op) OBJ_RELEASE(r->call->op);
        free((void *)r->call->rcounts);
        free(r->call);
        r->call = NULL;
    }
    /* May be the module's last reference (its communicator already freed). */
    if (r->module) OBJ_RELEASE(r->module);
    r->module = NULL;
}

OBJ_CLASS_DECLARATION(mca_coll_gpurdma_request_t);
OBJ_CLASS_INSTANCE(mca_coll_gpurdma_request_t, ompi_request_t, request_construct, request_destruct);

void mca_coll_gpurdma_init_classes(void)
{
    opal_class_initialize(OBJ_CLASS(mca_coll_gpurdma_request_t));
    opal_class_initialize(OBJ_CLASS(mca_coll_gpurdma_module_t));
}

mca_coll_gpurdma_request_t *mca_coll_gpurdma_request_new(mca_coll_gpurdma_module_t *m, struct ompi_communicator_t *comm,
                                                         bool persistent)
{
    mca_coll_gpurdma_request_t *r = OBJ_NEW(mca_coll_gpurdma_request_t);
    if (NULL == r) return NULL;
    /* Persistent: inactive and complete until started. Otherwise pending. */
    OMPI_REQUEST_INIT(&r->super, persistent);
    r->super.req_status.MPI_SOURCE = MPI_ANY_SOURCE;
    r->super.req_status.MPI_TAG = MPI_ANY_TAG;
    r->super.req_status.MPI_ERROR = MPI_SUCCESS;
    r->super.req_status._ucount = 0;
    r->super.req_status._cancelled = 0;
    /* Errors found in MPI_Wait go to this communicator's handler (5.x). */
    r->super.req_mpi_object.comm = comm;
    OBJ_RETAIN(&m->super);
    r->module = m;
    return r;
}

void mca_coll_gpurdma_request_hand_over(mca_coll_gpurdma_request_t *r)
{
    r->super.req_state = OMPI_REQUEST_ACTIVE;
    r->refs = 2;
    r->handed = 1;
}

void mca_coll_gpurdma_request_drop_unstarted(mca_coll_gpurdma_request_t *r)
{
    r->core = NULL;
    r->refs = 1;
    r->handed = 0;
    OBJ_RELEASE(r);
}

/* ---- release, deferred out of the completion callback ---- */

static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static mca_coll_gpurdma_request_t *deferred_head;

void mca_coll_gpurdma_request_put(mca_coll_gpurdma_request_t *r, bool in_callback)
{
    if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (!in_callback) {
        OBJ_RELEASE(r);
        return;
    }
    pthread_mutex_lock(&deferred_lock);
    r->next_deferred = deferred_head;
    __atomic_store_n(&deferred_head, r, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&deferred_lock);
}

void mca_coll_gpurdma_release_deferred(void)
{
    /* Cheap when empty: every call into the shim passes here. */
    if (NULL == __atomic_load_n(&deferred_head, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&deferred_lock);
    mca_coll_gpurdma_request_t *r = deferred_head;
    deferred_head = NULL;
    pthread_mutex_unlock(&deferred_lock);
    while (r) {
        mca_coll_gpurdma_request_t *next = r->next_deferred;
        OBJ_RELEASE(r);
        r = next;
    }
}

/* The core's completion callback: the comm's engine is held; only MPI's request state
 * is touched. A failure's text (stage, peer, host) the core has printed already, at level
 * 0, when it failed. */
void mca_coll_gpurdma_request_complete(void *arg, gpurdma_status_t status)
{
    mca_coll_gpurdma_request_t *r = (mca_coll_gpurdma_request_t *)arg;
    if (!__atomic_load_n(&r->freed, __ATOMIC_ACQUIRE)) {
        r->super.req_status.MPI_ERROR = GPURDMA_OK == status ? MPI_SUCCESS : MPI_ERR_OTHER;
        ompi_request_complete(&r->super, true);
    }
    __atomic_fetch_add(&r->completions, 1, __ATOMIC_RELEASE); /* done with r but its reference */
    mca_coll_gpurdma_request_put(r, true);
}

/* ---- the request's functions ---- */

/* The caller's thread, about to reuse or free a request MPI found complete: its callbacks
 * have all returned (at once but for a few instructions; bounded all the same). */
static void await_callbacks(mca_coll_gpurdma_request_t *r)
{
    for (int i = 0; i < 1000000 && __atomic_load_n(&r->completions, __ATOMIC_ACQUIRE) != r->handed; ++i) sched_yield();
}

/* MPI_Request_free (any state), and MPI_Wait/MPI_Test of a completed nonblocking one. */
static int request_free(ompi_request_t **rptr)
{
    mca_coll_gpurdma_request_t *r = (mca_coll_gpurdma_request_t *)*rptr;
    if (REQUEST_COMPLETED == __atomic_load_n(&r->super.req_complete, __ATOMIC_ACQUIRE)) await_callbacks(r);
    *rptr = MPI_REQUEST_NULL;
    /* No deferred releases here: Open MPI frees requests from inside its progress too. */
    /* Set before the core is told: a callback from now on completes nothing. */
    __atomic_store_n(&r->freed, 1, __ATOMIC_RELEASE);
    if (r->core) {
        /* 1: still in flight, the callback runs later and drops its own reference. */
        (void)gpurdma_request_free(r->core);
        r->core = NULL;
    }
    mca_coll_gpurdma_request_put(r, false);
    return OMPI_SUCCESS;
}

/* Collectives cannot be cancelled (erroneous in MPI; libnbc answers the same). */
static int request_cancel(ompi_request_t *request, int complete)
{
    (void)request;
    (void)complete;
    return MPI_ERR_REQUEST;
}

/* MPI_Start/MPI_Startall of persistent requests. MPI_Startall ignores what this returns, so
 * a start that fails also completes its request with the error (MPI_Wait returns it). */
static int request_start(size_t count, ompi_request_t **requests)
{
    int rc = MPI_SUCCESS;
    mca_coll_gpurdma_release_deferred();
    for (size_t i = 0; i < count; i++) {
        mca_coll_gpurdma_request_t *r = (mca_coll_gpurdma_request_t *)requests[i];
        /* 4.1's MPI_Start does not check: starting an active request is erroneous. */
        if (OMPI_REQUEST_ACTIVE == r->super.req_state) {
            if (MPI_SUCCESS == rc) rc = MPI_ERR_REQUEST;
            continue;
        }
        await_callbacks(r); /* the last activation's */
        mca_coll_gpurdma_module_t *m = r->module;
        r->super.req_status.MPI_ERROR = MPI_SUCCESS;
        /* Pending before the core has it: its callback may run in another thread at once. */
        r->super.req_complete = REQUEST_PENDING;
        r->super.req_state = OMPI_REQUEST_ACTIVE;
        int err;
        if (r->blocking && r->call) {
            err = mca_coll_gpurdma_previous_call(m, r->call, r->why);
        } else if (r->blocking) {
            err = mca_coll_gpurdma_blocking_fallback(m, r->why, r->sbuf, r->rbuf, r->count, r->dtype, r->op);
        } else if (r->inner) {
            err = mca_coll_gpurdma_staged_start(r);
            if (MPI_SUCCESS == err) continue; /* completed by mca_coll_gpurdma_staged_progress */
        } else {
            __atomic_add_fetch(&r->refs, 1, __ATOMIC_ACQ_REL);
            ++r->handed;
            gpurdma_status_t st = gpurdma_request_start(r->core);
            if (GPURDMA_OK == st) continue;
            /* Nothing started: the user's reference remains, no callback comes. */
            --r->handed;
            __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL);
            err = mca_coll_gpurdma_start_error(m, st);
        }
        r->super.req_status.MPI_ERROR = err;
        ompi_request_complete(&r->super, true);
        if (MPI_SUCCESS != err && MPI_SUCCESS == rc) rc = err;
    }
    return rc;
}

/* ---- entry points ---- */

/* The core's element type and op, or why not (for the fallback's verbose line). */
static const char *core_takes(struct ompi_datatype_t *dtype, struct ompi_op_t *op, gpurdma_dtype_t *gdt,
                              gpurdma_op_t *gop)
{
    if (!mca_coll_gpurdma_map_op(op, gop)) return "user-defined or unsupported op";
    if (!mca_coll_gpurdma_map_datatype(dtype, gdt)) return "derived or unsupported datatype";
    return NULL;
}

static const char *const core_declined = "op not defined for this datatype, or set-up declined";

const char *mca_coll_gpurdma_declined_why(const mca_coll_gpurdma_module_t *m, const char *otherwise)
{
    return gpurdma_comm_is_set_up(m->core)
               ? otherwise
               : "before the communicator's set-up, which its first blocking collective runs";
}

static int iallreduce_fallback(mca_coll_gpurdma_module_t *m, const char *why, const void *sbuf, void *rbuf,
                               gpurdma_coll_count_t count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                               struct ompi_communicator_t *comm, ompi_request_t **request)
{
    if (m->prev_iallreduce) {
        /* Every rank runs the previous iallreduce, whatever its buffers (ranks may mix
         * host and GPU buffers): on host copies of GPU ones. */
        bool device = mca_coll_gpurdma_device_buffers(sbuf, rbuf);
        mca_coll_gpurdma_output(2, "%s: fallback to the previous iallreduce (%s)%s", m->name, why,
                                device ? ", staged through host memory" : "");
        if (device) return mca_coll_gpurdma_staged_iallreduce(m, sbuf, rbuf, count, dtype, op, comm, request);
        return m->prev_iallreduce(sbuf, rbuf, count, dtype, op, comm, request, m->prev_iallreduce_module);
    }
    /* No previous iallreduce: done now, and the request is one MPI_Wait/MPI_Test find
     * complete (as libnbc returns for trivial calls). */
    int rc = mca_coll_gpurdma_blocking_fallback(m, why, sbuf, rbuf, count, dtype, op);
    if (MPI_SUCCESS != rc) return rc;
    *request = &ompi_request_empty;
    return MPI_SUCCESS;
}

int mca_coll_gpurdma_iallreduce(const void *sbuf, void *rbuf, gpurdma_coll_count_t count, struct ompi_datatype_t *dtype,
                                struct ompi_op_t *op, struct ompi_communicator_t *comm, ompi_request_t **request,
                                mca_coll_base_module_t *module)
{
    mca_coll_gpurdma_module_t *m = (mca_coll_gpurdma_module_t *)module;
    /* No deferred releases here: Open MPI starts MPI_Iallreduce from inside its progress. */
    gpurdma_dtype_t gdt;
    gpurdma_op_t gop;
    const char *why = core_takes(dtype, op, &gdt, &gop);
    if (why) return iallreduce_fallback(m, why, sbuf, rbuf, count, dtype, op, comm, request);
#if OMPI_MAJOR_VERSION < 6
    if (count < 0) return MPI_ERR_COUNT;
#endif
    mca_coll_gpurdma_request_t *r = mca_coll_gpurdma_request_new(m, comm, false);
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    mca_coll_gpurdma_request_hand_over(r);
    gpurdma_status_t st = gpurdma_iallreduce(m->core, sbuf == MPI_IN_PLACE ? NULL : sbuf, rbuf, (size_t)count, gdt, gop,
                                             mca_coll_gpurdma_request_complete, r, &r->core);
    if (GPURDMA_OK == st) {
        *request = &r->super;
        return MPI_SUCCESS;
    }
    mca_coll_gpurdma_request_drop_unstarted(r);
    if (GPURDMA_ERR_UNSUPPORTED == st)
        return iallreduce_fallback(m, mca_coll_gpurdma_declined_why(m, core_declined), sbuf, rbuf, count, dtype, op,
                                   comm, request);
    return mca_coll_gpurdma_start_error(m, st);
}

static int allreduce_init_fallback(mca_coll_gpurdma_module_t *m, const char *why, const void *sbuf, void *rbuf,
                                   gpurdma_coll_count_t count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                   struct ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **request)
{
    bool device = mca_coll_gpurdma_device_buffers(sbuf, rbuf);
    if (m->prev_allreduce_init) {
        /* On every rank alike, as for iallreduce. */
        mca_coll_gpurdma_output(2, "%s: fallback to the previous persistent allreduce (%s)%s", m->name, why,
                                device ? ", staged through host memory" : "");
        if (device) return mca_coll_gpurdma_staged_allreduce_init(m, sbuf, rbuf, count, dtype, op, comm, info, request);
        return m->prev_allreduce_init(sbuf, rbuf, count, dtype, op, comm, info, request, m->prev_allreduce_init_module);
    }
    /* No previous persistent allreduce: ours, running the blocking fallback (staged through
     * host memory for GPU buffers) at every start. MPI_Allreduce_init retains the op and
     * type only for a pending request. */
    mca_coll_gpurdma_request_t *r = mca_coll_gpurdma_request_new(m, comm, true);
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    r->blocking = true;
    r->why = why;
    r->sbuf = sbuf;
    r->rbuf = rbuf;
    r->count = count;
    OBJ_RETAIN(dtype);
    r->dtype = dtype;
    OBJ_RETAIN(op);
    r->op = op;
    mca_coll_gpurdma_output(2, "%s: persistent allreduce runs the previous blocking allreduce at each start (%s)%s",
                            m->name, why, device ? ", staged through host memory" : "");
    *request = &r->super;
    return MPI_SUCCESS;
}

int mca_coll_gpurdma_allreduce_init(const void *sbuf, void *rbuf, gpurdma_coll_count_t count,
                                    struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                    ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpurdma_module_t *m = (mca_coll_gpurdma_module_t *)module;
    mca_coll_gpurdma_release_deferred();
    gpurdma_dtype_t gdt;
    gpurdma_op_t gop;
    const char *why = core_takes(dtype, op, &gdt, &gop);
    if (why) return allreduce_init_fallback(m, why, sbuf, rbuf, count, dtype, op, comm, info, request);
#if OMPI_MAJOR_VERSION < 6
    if (count < 0) return MPI_ERR_COUNT;
#endif
    mca_coll_gpurdma_request_t *r = mca_coll_gpurdma_request_new(m, comm, true);
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    /* Set-up, planning and registration happen here; MPI_Start only moves data. */
    gpurdma_status_t st = gpurdma_allreduce_init(m->core, sbuf == MPI_IN_PLACE ? NULL : sbuf, rbuf, (size_t)count, gdt,
                                                 gop, mca_coll_gpurdma_request_complete, r, &r->core);
    if (GPURDMA_OK == st) {
        *request = &r->super;
        return MPI_SUCCESS;
    }
    mca_coll_gpurdma_request_drop_unstarted(r);
    if (GPURDMA_ERR_UNSUPPORTED == st)
        return allreduce_init_fallback(m, mca_coll_gpurdma_declined_why(m, core_declined), sbuf, rbuf, count, dtype, op,
                                       comm, info, request);
    return mca_coll_gpurdma_start_error(m, st);
}
