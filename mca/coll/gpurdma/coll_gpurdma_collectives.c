/*
 * The collectives beyond allreduce: MPI_Reduce_scatter_block, MPI_Reduce_scatter,
 * MPI_Allgather, MPI_Bcast and MPI_Reduce, blocking, nonblocking and persistent. Each
 * entry point describes the call once (mca_coll_gpurdma_call_t), maps it to the core's
 * arguments, and hands it to the core; what the core declines (a derived datatype, a user
 * op, allgather with different send and receive signatures, the collective switched off)
 * goes to the previous module, on host copies where a buffer is GPU memory. Requests are
 * coll_gpurdma_request.c's.
 */
#include "coll_gpurdma.h"
#include "coll_gpurdma_request.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/datatype/ompi_datatype.h"

#if OMPI_MAJOR_VERSION < 6

#define SAVE(m, comm, name)                                                   \
    do {                                                                      \
        (m)->prev_##name = (comm)->c_coll->coll_##name;                       \
        (m)->prev_##name##_module = (comm)->c_coll->coll_##name##_module;     \
        if ((m)->prev_##name##_module) OBJ_RETAIN((m)->prev_##name##_module); \
    } while (0)

void mca_coll_gpurdma_save_previous_collectives(mca_coll_gpurdma_module_t *m, struct ompi_communicator_t *comm)
{
    SAVE(m, comm, reduce_scatter_block);
    SAVE(m, comm, reduce_scatter);
    SAVE(m, comm, bcast);
    SAVE(m, comm, reduce);
    SAVE(m, comm, ireduce_scatter_block);
    SAVE(m, comm, ireduce_scatter);
    SAVE(m, comm, iallgather);
    SAVE(m, comm, ibcast);
    SAVE(m, comm, ireduce);
    SAVE(m, comm, reduce_scatter_block_init);
    SAVE(m, comm, reduce_scatter_init);
    SAVE(m, comm, allgather_init);
    SAVE(m, comm, bcast_init);
    SAVE(m, comm, reduce_init);
    SAVE(m, comm, barrier);
    SAVE(m, comm, ibarrier);
    SAVE(m, comm, barrier_init);
}
#endif

#define RELEASE(m, name)                                                       \
    do {                                                                       \
        if ((m)->prev_##name##_module) OBJ_RELEASE((m)->prev_##name##_module); \
        (m)->prev_##name##_module = NULL;                                      \
    } while (0)

void mca_coll_gpurdma_release_previous_collectives(mca_coll_gpurdma_module_t *m)
{
    RELEASE(m, reduce_scatter_block);
    RELEASE(m, reduce_scatter);
    RELEASE(m, bcast);
    RELEASE(m, reduce);
    RELEASE(m, ireduce_scatter_block);
    RELEASE(m, ireduce_scatter);
    RELEASE(m, iallgather);
    RELEASE(m, ibcast);
    RELEASE(m, ireduce);
    RELEASE(m, reduce_scatter_block_init);
    RELEASE(m, reduce_scatter_init);
    RELEASE(m, allgather_init);
    RELEASE(m, bcast_init);
    RELEASE(m, reduce_init);
    RELEASE(m, barrier);
    RELEASE(m, ibarrier);
    RELEASE(m, barrier_init);
}

#if OMPI_MAJOR_VERSION < 6

/* ---- the previous module, on host copies of GPU buffers ---- */

const char *mca_coll_gpurdma_call_name(const mca_coll_gpurdma_call_t *c)
{
    if (GPURDMA_COLL_REDUCE_SCATTER == c->coll) return c->rcounts ? "reduce_scatter" : "reduce_scatter_block";
    return gpurdma_coll_name(c->coll);
}

/* Elements of the whole vector of a reduce-scatter. */
static size_t scatter_total(const mca_coll_gpurdma_call_t *c, int size)
{
    if (!c->rcounts) return (size_t)c->rcount * (size_t)size;
    size_t total = 0;
    for (int i = 0; i < size; i++) total += (size_t)c->rcounts[i];
    return total;
}

static int call_previous(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, const void *sbuf, void *rbuf)
{
    switch (c->coll) {
        case GPURDMA_COLL_REDUCE_SCATTER:
            if (c->rcounts)
                return m->prev_reduce_scatter(sbuf, rbuf, c->rcounts, c->sdtype, c->op, m->comm,
                                              m->prev_reduce_scatter_module);
            return m->prev_reduce_scatter_block(sbuf, rbuf, c->rcount, c->sdtype, c->op, m->comm,
                                                m->prev_reduce_scatter_block_module);
        case GPURDMA_COLL_ALLGATHER:
            return m->prev_allgather(sbuf, c->scount, c->sdtype, rbuf, c->rcount, c->rdtype, m->comm,
                                     m->prev_allgather_module);
        case GPURDMA_COLL_BCAST:
            return m->prev_bcast(rbuf, c->scount, c->sdtype, c->root, m->comm, m->prev_bcast_module);
        case GPURDMA_COLL_REDUCE:
            return m->prev_reduce(sbuf, rbuf, c->scount, c->sdtype, c->op, c->root, m->comm, m->prev_reduce_module);
        default: return MPI_ERR_INTERN;
    }
}

/* The bytes `count` elements of dtype span, and where they start (the true lower bound). */
static size_t span_of(struct ompi_datatype_t *dtype, size_t count, ptrdiff_t *true_lb)
{
    ptrdiff_t lb, extent, true_extent;
    *true_lb = 0;
    if (0 == count || NULL == dtype) return 0;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, true_lb, &true_extent);
    return (count - 1) * (size_t)extent + (size_t)true_extent;
}

/* A host copy of a GPU buffer's span; *host is placed as the buffer is (NULL span: as given). */
typedef struct host_copy {
    char *mem;
    void *host;
} host_copy_t;

static int copy_in(const void *buf, size_t span, ptrdiff_t true_lb, host_copy_t *out)
{
    out->mem = NULL;
    out->host = (void *)buf;
    if (0 == span || MPI_IN_PLACE == buf || !gpurdma_is_device_memory(buf)) return MPI_SUCCESS;
    out->mem = malloc(span);
    if (NULL == out->mem) return OMPI_ERR_OUT_OF_RESOURCE;
    if (GPURDMA_OK != gpurdma_memcpy(out->mem, (const char *)buf + true_lb, span)) return MPI_ERR_OTHER;
    out->host = out->mem - true_lb;
    return MPI_SUCCESS;
}

bool mca_coll_gpurdma_call_spans(const mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c,
                                 mca_coll_gpurdma_spans_t *out)
{
    const int size = ompi_comm_size(m->comm), rank = ompi_comm_rank(m->comm);
    const bool in_place = MPI_IN_PLACE == c->sbuf;
    size_t send_n = 0, recv_n = 0;
    struct ompi_datatype_t *recv_type = c->sdtype;
    switch (c->coll) {
        case GPURDMA_COLL_REDUCE_SCATTER:
            send_n = scatter_total(c, size);
            recv_n = in_place ? send_n : (size_t)(c->rcounts ? c->rcounts[rank] : c->rcount);
            break;
        case GPURDMA_COLL_ALLGATHER:
            send_n = (size_t)c->scount;
            recv_n = (size_t)c->rcount * (size_t)size;
            recv_type = c->rdtype;
            break;
        case GPURDMA_COLL_BCAST: recv_n = (size_t)c->scount; break;
        case GPURDMA_COLL_REDUCE:
            send_n = (size_t)c->scount;
            recv_n = rank == c->root ? (size_t)c->scount : 0;
            break;
        default: return false;
    }
    if (GPURDMA_COLL_BCAST == c->coll || in_place) send_n = 0;
    out->send = span_of(c->sdtype, send_n, &out->send_lb);
    out->recv = span_of(recv_type, recv_n, &out->recv_lb);
    out->device = mca_coll_gpurdma_globals.gpu_buffers && ((out->send && gpurdma_is_device_memory(c->sbuf)) ||
                                                           (out->recv && gpurdma_is_device_memory(c->rbuf)));
    return true;
}

int mca_coll_gpurdma_previous_call(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, const char *why)
{
    mca_coll_gpurdma_spans_t spans;
    if (!mca_coll_gpurdma_call_spans(m, c, &spans)) return MPI_ERR_INTERN;
    mca_coll_gpurdma_output(2, "%s: %s: fallback to the previous module (%s)%s", m->name, mca_coll_gpurdma_call_name(c),
                            why, spans.device ? ", staged through host memory" : "");
    if (!spans.device) return call_previous(m, c, c->sbuf, c->rbuf);
    /* The receive span is copied in too: in place it is the operand (bcast's root data),
     * and the copy back must keep what a datatype's gaps leave alone. */
    host_copy_t s = {NULL, (void *)c->sbuf}, r = {NULL, c->rbuf};
    int rc = copy_in(c->sbuf, spans.send, spans.send_lb, &s);
    if (MPI_SUCCESS == rc) rc = copy_in(c->rbuf, spans.recv, spans.recv_lb, &r);
    if (MPI_SUCCESS == rc) rc = call_previous(m, c, s.host, r.host);
    if (MPI_SUCCESS == rc && r.mem &&
        GPURDMA_OK != gpurdma_memcpy((char *)c->rbuf + spans.recv_lb, r.mem, spans.recv)) {
        mca_coll_gpurdma_output(0, "%s: %s: copying the result back to the GPU failed", m->name,
                                mca_coll_gpurdma_call_name(c));
        rc = MPI_ERR_OTHER;
    }
    free(s.mem);
    free(r.mem);
    return rc;
}

/* ---- the core's arguments ---- */

/* A datatype for a call that only moves data (allgather, bcast): a predefined one the core
 * knows, or any contiguous one without a lower bound, as bytes. */
static bool map_moved_type(struct ompi_datatype_t *dtype, gpurdma_coll_count_t count, gpurdma_dtype_t *gdt,
                           size_t *elements)
{
    *elements = (size_t)count;
    if (mca_coll_gpurdma_map_datatype(dtype, gdt)) return true;
    ptrdiff_t lb, extent;
    size_t size;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_type_size(dtype, &size);
    if (0 != lb || (size_t)extent != size || !ompi_datatype_is_contiguous_memory_layout(dtype, 2)) return false;
    *gdt = GPURDMA_BYTE;
    *elements = (size_t)count * size;
    return true;
}

/* The core's arguments for c, or why not (*counts: a copy to free, for reduce_scatter). */
static const char *core_args(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, gpurdma_coll_args_t *a,
                             size_t **counts)
{
    *counts = NULL;
    memset(a, 0, sizeof *a);
    a->coll = c->coll;
    a->sendbuf = MPI_IN_PLACE == c->sbuf ? NULL : c->sbuf;
    a->recvbuf = c->rbuf;
    a->root = c->root;
    a->op = GPURDMA_SUM;
    switch (c->coll) {
        case GPURDMA_COLL_ALLGATHER: {
            size_t elements;
            if (!map_moved_type(c->rdtype, c->rcount, &a->dtype, &elements)) return "derived or unsupported datatype";
            if (MPI_IN_PLACE != c->sbuf && (c->sdtype != c->rdtype || c->scount != c->rcount))
                return "send and receive signatures differ";
            a->count = elements;
            return NULL;
        }
        case GPURDMA_COLL_BCAST:
            if (!map_moved_type(c->sdtype, c->scount, &a->dtype, &a->count)) return "derived or unsupported datatype";
            return NULL;
        default: break;
    }
    if (!mca_coll_gpurdma_map_op(c->op, &a->op)) return "user-defined or unsupported op";
    if (!mca_coll_gpurdma_map_datatype(c->sdtype, &a->dtype)) return "derived or unsupported datatype";
    if (GPURDMA_COLL_REDUCE == c->coll) {
        a->count = (size_t)c->scount;
        return NULL;
    }
    a->count = (size_t)c->rcount;
    if (c->rcounts) {
        const int size = ompi_comm_size(m->comm);
        /* Equal counts are the block form: nothing to copy. */
        int i = 1;
        while (i < size && c->rcounts[i] == c->rcounts[0]) i++;
        if (i == size) {
            a->count = (size_t)c->rcounts[0];
            return NULL;
        }
        *counts = malloc(sizeof(size_t) * (size_t)size);
        if (NULL == *counts) return "out of memory";
        for (int i = 0; i < size; i++) (*counts)[i] = (size_t)c->rcounts[i];
        a->counts = *counts;
    }
    return NULL;
}

static bool negative_count(const mca_coll_gpurdma_call_t *c, int size)
{
    if (c->scount < 0 || c->rcount < 0) return true;
    if (c->rcounts)
        for (int i = 0; i < size; i++)
            if (c->rcounts[i] < 0) return true;
    return false;
}

static const char *const core_declined =
    "op not defined for this datatype, collective switched off, or set-up declined";

/* ---- blocking ---- */

/* Open MPI's own communicator creation allgathers one integer per rank over the parent
 * (MPI_Comm_dup, split): such a blocking allgather on a communicator gpurdma has not set
 * up goes to the previous module rather than pay for the set-up (an exchange of
 * addresses, segments and endpoints) for nothing; the same on every rank (same count,
 * same calls before it). Nonblocking calls before the set-up the core hands on itself. */
static const char *before_set_up(mca_coll_gpurdma_module_t *m, const gpurdma_coll_args_t *a)
{
    if (GPURDMA_COLL_ALLGATHER != a->coll || a->count > 1 || __atomic_load_n(&m->set_up, __ATOMIC_ACQUIRE)) return NULL;
    if (!gpurdma_comm_is_set_up(m->core)) return "one element before the communicator's set-up";
    __atomic_store_n(&m->set_up, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int blocking(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c)
{
    mca_coll_gpurdma_release_deferred();
    if (negative_count(c, ompi_comm_size(m->comm))) return MPI_ERR_COUNT;
    gpurdma_coll_args_t a;
    size_t *counts;
    const char *why = core_args(m, c, &a, &counts);
    if (NULL == why) why = before_set_up(m, &a);
    if (why) {
        free(counts);
        return mca_coll_gpurdma_previous_call(m, c, why);
    }
    gpurdma_status_t st = gpurdma_collective(m->core, &a);
    free(counts);
    if (GPURDMA_ERR_UNSUPPORTED == st) return mca_coll_gpurdma_previous_call(m, c, core_declined);
    return mca_coll_gpurdma_start_error(m, st);
}

/* ---- nonblocking and persistent ---- */

int mca_coll_gpurdma_previous_request(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, bool persistent,
                                      struct ompi_info_t *info, ompi_request_t **request)
{
    struct ompi_communicator_t *comm = m->comm;
    switch (c->coll) {
        case GPURDMA_COLL_REDUCE_SCATTER:
            if (c->rcounts) {
                if (persistent)
                    return m->prev_reduce_scatter_init(c->sbuf, c->rbuf, c->rcounts, c->sdtype, c->op, comm, info,
                                                       request, m->prev_reduce_scatter_init_module);
                return m->prev_ireduce_scatter(c->sbuf, c->rbuf, c->rcounts, c->sdtype, c->op, comm, request,
                                               m->prev_ireduce_scatter_module);
            }
            if (persistent)
                return m->prev_reduce_scatter_block_init(c->sbuf, c->rbuf, c->rcount, c->sdtype, c->op, comm, info,
                                                         request, m->prev_reduce_scatter_block_init_module);
            return m->prev_ireduce_scatter_block(c->sbuf, c->rbuf, c->rcount, c->sdtype, c->op, comm, request,
                                                 m->prev_ireduce_scatter_block_module);
        case GPURDMA_COLL_ALLGATHER:
            if (persistent)
                return m->prev_allgather_init(c->sbuf, c->scount, c->sdtype, c->rbuf, c->rcount, c->rdtype, comm, info,
                                              request, m->prev_allgather_init_module);
            return m->prev_iallgather(c->sbuf, c->scount, c->sdtype, c->rbuf, c->rcount, c->rdtype, comm, request,
                                      m->prev_iallgather_module);
        case GPURDMA_COLL_BCAST:
            if (persistent)
                return m->prev_bcast_init(c->rbuf, c->scount, c->sdtype, c->root, comm, info, request,
                                          m->prev_bcast_init_module);
            return m->prev_ibcast(c->rbuf, c->scount, c->sdtype, c->root, comm, request, m->prev_ibcast_module);
        case GPURDMA_COLL_REDUCE:
            if (persistent)
                return m->prev_reduce_init(c->sbuf, c->rbuf, c->scount, c->sdtype, c->op, c->root, comm, info, request,
                                           m->prev_reduce_init_module);
            return m->prev_ireduce(c->sbuf, c->rbuf, c->scount, c->sdtype, c->op, c->root, comm, request,
                                   m->prev_ireduce_module);
        default: return MPI_ERR_INTERN;
    }
}

static bool has_previous_request(const mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, bool persistent)
{
    switch (c->coll) {
        case GPURDMA_COLL_REDUCE_SCATTER:
            if (c->rcounts) return persistent ? NULL != m->prev_reduce_scatter_init : NULL != m->prev_ireduce_scatter;
            return persistent ? NULL != m->prev_reduce_scatter_block_init : NULL != m->prev_ireduce_scatter_block;
        case GPURDMA_COLL_ALLGATHER: return persistent ? NULL != m->prev_allgather_init : NULL != m->prev_iallgather;
        case GPURDMA_COLL_BCAST: return persistent ? NULL != m->prev_bcast_init : NULL != m->prev_ibcast;
        case GPURDMA_COLL_REDUCE: return persistent ? NULL != m->prev_reduce_init : NULL != m->prev_ireduce;
        default: return false;
    }
}

static bool call_on_device(const mca_coll_gpurdma_call_t *c)
{
    if (!mca_coll_gpurdma_globals.gpu_buffers) return false;
    if (c->rbuf && gpurdma_is_device_memory(c->rbuf)) return true;
    return MPI_IN_PLACE != c->sbuf && c->sbuf && gpurdma_is_device_memory(c->sbuf);
}

mca_coll_gpurdma_call_t *mca_coll_gpurdma_keep_call(const mca_coll_gpurdma_module_t *m,
                                                    const mca_coll_gpurdma_call_t *c)
{
    mca_coll_gpurdma_call_t *kept = malloc(sizeof *kept);
    int *counts = NULL;
    if (kept && c->rcounts) {
        const int size = ompi_comm_size(m->comm);
        counts = malloc(sizeof(int) * (size_t)size);
        if (counts) memcpy(counts, c->rcounts, sizeof(int) * (size_t)size);
    }
    if (NULL == kept || (c->rcounts && NULL == counts)) {
        free(kept);
        free(counts);
        return NULL;
    }
    *kept = *c;
    kept->rcounts = counts;
    if (kept->sdtype) OBJ_RETAIN(kept->sdtype);
    if (kept->rdtype) OBJ_RETAIN(kept->rdtype);
    if (kept->op) OBJ_RETAIN(kept->op);
    return kept;
}

/* A persistent request whose every start runs the previous blocking call (on host copies
 * of GPU buffers): the call kept, its types and op retained, its counts copied. */
static int blocking_start_request(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, const char *why,
                                  ompi_request_t **request)
{
    mca_coll_gpurdma_request_t *r = mca_coll_gpurdma_request_new(m, m->comm, true);
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    if (NULL == (r->call = mca_coll_gpurdma_keep_call(m, c))) {
        OBJ_RELEASE(r);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    r->blocking = true;
    r->why = why;
    mca_coll_gpurdma_output(2, "%s: persistent %s runs the previous blocking call at each start (%s)", m->name,
                            mca_coll_gpurdma_call_name(c), why);
    *request = &r->super;
    return MPI_SUCCESS;
}

static int request_fallback(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, const char *why,
                            bool persistent, struct ompi_info_t *info, ompi_request_t **request)
{
    if (has_previous_request(m, c, persistent)) {
        const bool device = call_on_device(c);
        mca_coll_gpurdma_output(2, "%s: %s: fallback to the previous %s call (%s)%s", m->name,
                                mca_coll_gpurdma_call_name(c), persistent ? "persistent" : "nonblocking", why,
                                device ? ", staged through host memory" : "");
        /* GPU buffers: the previous module's call on host copies (never a blocking call
         * here: a nonblocking start must not wait on its peers). */
        if (device) return mca_coll_gpurdma_staged_request(m, c, persistent, info, request);
        return mca_coll_gpurdma_previous_request(m, c, persistent, info, request);
    }
    if (persistent) return blocking_start_request(m, c, why, request);
    /* No previous nonblocking call at all (no lower module has one): done now, on host
     * copies of GPU buffers, and the request is one MPI_Wait/MPI_Test find complete. */
    int rc = mca_coll_gpurdma_previous_call(m, c, why);
    if (MPI_SUCCESS != rc) return rc;
    *request = &ompi_request_empty;
    return MPI_SUCCESS;
}

static int with_request(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, bool persistent,
                        struct ompi_info_t *info, ompi_request_t **request)
{
    /* Not at a nonblocking start, which Open MPI may make from inside its progress. */
    if (persistent) mca_coll_gpurdma_release_deferred();
    if (negative_count(c, ompi_comm_size(m->comm))) return MPI_ERR_COUNT;
    gpurdma_coll_args_t a;
    size_t *counts;
    const char *why = core_args(m, c, &a, &counts);
    if (why) {
        free(counts);
        return request_fallback(m, c, why, persistent, info, request);
    }
    mca_coll_gpurdma_request_t *r = mca_coll_gpurdma_request_new(m, m->comm, persistent);
    if (NULL == r) {
        free(counts);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    gpurdma_status_t st;
    if (persistent) {
        /* Set-up and planning here; MPI_Start only moves data. */
        st = gpurdma_collective_init(m->core, &a, mca_coll_gpurdma_request_complete, r, &r->core);
    } else {
        mca_coll_gpurdma_request_hand_over(r);
        st = gpurdma_icollective(m->core, &a, mca_coll_gpurdma_request_complete, r, &r->core);
    }
    free(counts);
    if (GPURDMA_OK == st) {
        *request = &r->super;
        return MPI_SUCCESS;
    }
    mca_coll_gpurdma_request_drop_unstarted(r);
    if (GPURDMA_ERR_UNSUPPORTED == st)
        return request_fallback(m, c, mca_coll_gpurdma_declined_why(m, core_declined), persistent, info, request);
    return mca_coll_gpurdma_start_error(m, st);
}

/* ---- entry points ---- */

#define MODULE(module) ((mca_coll_gpurdma_module_t *)(module))

static mca_coll_gpurdma_call_t reduce_scatter_call(const void *sbuf, void *rbuf, int rcount, const int *rcounts,
                                                   struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    mca_coll_gpurdma_call_t c = {GPURDMA_COLL_REDUCE_SCATTER, sbuf, rbuf, 0, dtype, rcount, NULL, rcounts, op, 0};
    return c;
}

static mca_coll_gpurdma_call_t allgather_call(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                                              int rcount, struct ompi_datatype_t *rdtype)
{
    mca_coll_gpurdma_call_t c = {GPURDMA_COLL_ALLGATHER, sbuf, rbuf, scount, sdtype, rcount, rdtype, NULL, NULL, 0};
    if (MPI_IN_PLACE == sbuf) c.sdtype = NULL, c.scount = 0; /* ignored by MPI; not retained */
    return c;
}

static mca_coll_gpurdma_call_t bcast_call(void *buf, int count, struct ompi_datatype_t *dtype, int root)
{
    mca_coll_gpurdma_call_t c = {GPURDMA_COLL_BCAST, NULL, buf, count, dtype, 0, NULL, NULL, NULL, root};
    return c;
}

static mca_coll_gpurdma_call_t reduce_call(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                                           struct ompi_op_t *op, int root)
{
    mca_coll_gpurdma_call_t c = {GPURDMA_COLL_REDUCE, sbuf, rbuf, count, dtype, 0, NULL, NULL, op, root};
    return c;
}

static int reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, struct ompi_datatype_t *dtype,
                                struct ompi_op_t *op, struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = reduce_scatter_call(sbuf, rbuf, rcount, NULL, dtype, op);
    return blocking(MODULE(module), &c);
}

static int reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts, struct ompi_datatype_t *dtype,
                          struct ompi_op_t *op, struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = reduce_scatter_call(sbuf, rbuf, 0, rcounts, dtype, op);
    return blocking(MODULE(module), &c);
}

static int allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                     struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = allgather_call(sbuf, scount, sdtype, rbuf, rcount, rdtype);
    return blocking(MODULE(module), &c);
}

static int bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root, struct ompi_communicator_t *comm,
                 mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = bcast_call(buf, count, dtype, root);
    return blocking(MODULE(module), &c);
}

static int reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                  int root, struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = reduce_call(sbuf, rbuf, count, dtype, op, root);
    return blocking(MODULE(module), &c);
}

static int ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount, struct ompi_datatype_t *dtype,
                                 struct ompi_op_t *op, struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = reduce_scatter_call(sbuf, rbuf, rcount, NULL, dtype, op);
    return with_request(MODULE(module), &c, false, NULL, request);
}

static int ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts, struct ompi_datatype_t *dtype,
                           struct ompi_op_t *op, struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = reduce_scatter_call(sbuf, rbuf, 0, rcounts, dtype, op);
    return with_request(MODULE(module), &c, false, NULL, request);
}

static int iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                      struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm, ompi_request_t **request,
                      mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = allgather_call(sbuf, scount, sdtype, rbuf, rcount, rdtype);
    return with_request(MODULE(module), &c, false, NULL, request);
}

static int ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root, struct ompi_communicator_t *comm,
                  ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = bcast_call(buf, count, dtype, root);
    return with_request(MODULE(module), &c, false, NULL, request);
}

static int ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                   int root, struct ompi_communicator_t *comm, ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = reduce_call(sbuf, rbuf, count, dtype, op, root);
    return with_request(MODULE(module), &c, false, NULL, request);
}

static int reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount, struct ompi_datatype_t *dtype,
                                     struct ompi_op_t *op, struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                     ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = reduce_scatter_call(sbuf, rbuf, rcount, NULL, dtype, op);
    return with_request(MODULE(module), &c, true, info, request);
}

static int reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts, struct ompi_datatype_t *dtype,
                               struct ompi_op_t *op, struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = reduce_scatter_call(sbuf, rbuf, 0, rcounts, dtype, op);
    return with_request(MODULE(module), &c, true, info, request);
}

static int allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                          struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm, struct ompi_info_t *info,
                          ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = allgather_call(sbuf, scount, sdtype, rbuf, rcount, rdtype);
    return with_request(MODULE(module), &c, true, info, request);
}

static int bcast_init(void *buf, int count, struct ompi_datatype_t *dtype, int root, struct ompi_communicator_t *comm,
                      struct ompi_info_t *info, ompi_request_t **request, mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = bcast_call(buf, count, dtype, root);
    return with_request(MODULE(module), &c, true, info, request);
}

static int reduce_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                       int root, struct ompi_communicator_t *comm, struct ompi_info_t *info, ompi_request_t **request,
                       mca_coll_base_module_t *module)
{
    (void)comm;
    const mca_coll_gpurdma_call_t c = reduce_call(sbuf, rbuf, count, dtype, op, root);
    return with_request(MODULE(module), &c, true, info, request);
}

void mca_coll_gpurdma_install_collectives(mca_coll_gpurdma_module_t *m)
{
    m->super.coll_reduce_scatter_block = reduce_scatter_block;
    m->super.coll_reduce_scatter = reduce_scatter;
    m->super.coll_allgather = allgather;
    m->super.coll_bcast = bcast;
    m->super.coll_reduce = reduce;
    m->super.coll_ireduce_scatter_block = ireduce_scatter_block;
    m->super.coll_ireduce_scatter = ireduce_scatter;
    m->super.coll_iallgather = iallgather;
    m->super.coll_ibcast = ibcast;
    m->super.coll_ireduce = ireduce;
    m->super.coll_reduce_scatter_block_init = reduce_scatter_block_init;
    m->super.coll_reduce_scatter_init = reduce_scatter_init;
    m->super.coll_allgather_init = allgather_init;
    m->super.coll_bcast_init = bcast_init;
    m->super.coll_reduce_init = reduce_init;
}

#endif /* OMPI_MAJOR_VERSION < 6 */
