/*
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Allgather, MPI_Bcast, MPI_Reduce and
 * MPI_Barrier through gpurdma (blocking forms): the same decisions as mca/coll/gpurdma's
 * (coll_gpurdma_collectives.c), taken alike on every rank; what the core declines goes to
 * the PMPI_ function, through host copies when a buffer is in GPU memory.
 */
#include "pmpi/interposer.h"

#include <stdlib.h>
#include <string.h>

#include "mpi-common/mpi_handles.h"
#include "pmpi/entry.h"

typedef struct pcall {
    gpurdma_coll_t coll;
    const void *sbuf;
    void *rbuf;
    int scount; /* allgather's send count; bcast, reduce: the count */
    MPI_Datatype sdtype; /* the reductions' and bcast's type; allgather's send type */
    int rcount; /* allgather's receive count; reduce_scatter_block's count */
    MPI_Datatype rdtype;
    const int *rcounts; /* reduce_scatter (v) */
    MPI_Op op;
    int root;
    MPI_Comm comm;
} pcall_t;

static int call_pmpi(const pcall_t *c, const void *sbuf, void *rbuf)
{
    switch (c->coll) {
        case GPURDMA_COLL_REDUCE_SCATTER:
            if (c->rcounts) return PMPI_Reduce_scatter(sbuf, rbuf, c->rcounts, c->sdtype, c->op, c->comm);
            return PMPI_Reduce_scatter_block(sbuf, rbuf, c->rcount, c->sdtype, c->op, c->comm);
        case GPURDMA_COLL_ALLGATHER:
            return PMPI_Allgather(sbuf, c->scount, c->sdtype, rbuf, c->rcount, c->rdtype, c->comm);
        case GPURDMA_COLL_BCAST: return PMPI_Bcast(rbuf, c->scount, c->sdtype, c->root, c->comm);
        case GPURDMA_COLL_REDUCE: return PMPI_Reduce(sbuf, rbuf, c->scount, c->sdtype, c->op, c->root, c->comm);
        default: return MPI_ERR_INTERN;
    }
}

static size_t span_of(MPI_Datatype dtype, size_t count, MPI_Aint *true_lb)
{
    MPI_Aint true_extent = 0;
    *true_lb = 0;
    if (0 == count) return 0;
    MPI_Aint lb, extent;
    PMPI_Type_get_extent(dtype, &lb, &extent);
    PMPI_Type_get_true_extent(dtype, true_lb, &true_extent);
    return (count - 1) * (size_t)extent + (size_t)true_extent;
}

static int copy_in(const void *buf, size_t span, MPI_Aint true_lb, char **mem, void **host)
{
    *mem = NULL;
    *host = (void *)buf;
    if (0 == span || MPI_IN_PLACE == buf || !gpurdma_is_device_memory(buf)) return MPI_SUCCESS;
    *mem = malloc(span);
    if (NULL == *mem) return MPI_ERR_NO_MEM;
    if (GPURDMA_OK != gpurdma_memcpy(*mem, (const char *)buf + true_lb, span)) return MPI_ERR_OTHER;
    *host = *mem - true_lb;
    return MPI_SUCCESS;
}

/* The PMPI_ call, on host copies of GPU buffers (the MPI may not be CUDA-aware). */
static int previous(const pmpi_comm_t *pc, const pcall_t *c, const char *why)
{
    int size = 1, rank = 0;
    PMPI_Comm_size(c->comm, &size);
    PMPI_Comm_rank(c->comm, &rank);
    const bool in_place = MPI_IN_PLACE == c->sbuf;
    size_t send_n = 0, recv_n = 0;
    MPI_Datatype recv_type = c->sdtype;
    switch (c->coll) {
        case GPURDMA_COLL_REDUCE_SCATTER:
            if (c->rcounts)
                for (int i = 0; i < size; i++) send_n += (size_t)c->rcounts[i];
            else send_n = (size_t)c->rcount * (size_t)size;
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
        default: return MPI_ERR_INTERN;
    }
    if (GPURDMA_COLL_BCAST == c->coll || in_place) send_n = 0;
    MPI_Aint send_lb, recv_lb;
    const size_t send_span = span_of(c->sdtype, send_n, &send_lb);
    const size_t recv_span = span_of(recv_type, recv_n, &recv_lb);
    const bool device = pmpi_gpu_buffers_enabled() && ((send_span && gpurdma_is_device_memory(c->sbuf)) ||
                                                       (recv_span && gpurdma_is_device_memory(c->rbuf)));
    if (pc)
        pmpi_output(2, "%s: %s: fallback to PMPI (%s)%s", pc->name, gpurdma_coll_name(c->coll), why,
                    device ? ", staged through host memory" : "");
    if (!device) return call_pmpi(c, c->sbuf, c->rbuf);
    char *smem = NULL, *rmem = NULL;
    void *shost = (void *)c->sbuf, *rhost = c->rbuf;
    int rc = copy_in(c->sbuf, send_span, send_lb, &smem, &shost);
    if (MPI_SUCCESS == rc) rc = copy_in(c->rbuf, recv_span, recv_lb, &rmem, &rhost);
    if (MPI_SUCCESS == rc) rc = call_pmpi(c, shost, rhost);
    if (MPI_SUCCESS == rc && rmem && GPURDMA_OK != gpurdma_memcpy((char *)c->rbuf + recv_lb, rmem, recv_span))
        rc = MPI_ERR_OTHER;
    free(smem);
    free(rmem);
    return rc;
}

/* Allgather's and bcast's type: a predefined one, or any contiguous one as bytes. */
static bool map_moved_type(MPI_Datatype dtype, int count, gpurdma_dtype_t *gdt, size_t *elements)
{
    *elements = (size_t)count;
    if (gpurdma_mpi_map_datatype(dtype, gdt)) return true;
    MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    int size = 0;
    PMPI_Type_get_extent(dtype, &lb, &extent);
    PMPI_Type_get_true_extent(dtype, &true_lb, &true_extent);
    PMPI_Type_size(dtype, &size);
    if (0 != lb || 0 != true_lb || extent != size || true_extent != size) return false;
    /* Its bytes fill its extent from 0: no holes, so count of them are count x size bytes. */
    *gdt = GPURDMA_BYTE;
    *elements = (size_t)count * (size_t)size;
    return true;
}

static const char *core_args(const pcall_t *c, int size, gpurdma_coll_args_t *a, size_t **counts)
{
    *counts = NULL;
    memset(a, 0, sizeof *a);
    a->coll = c->coll;
    a->sendbuf = MPI_IN_PLACE == c->sbuf ? NULL : c->sbuf;
    a->recvbuf = c->rbuf;
    a->root = c->root;
    a->op = GPURDMA_SUM;
    if (GPURDMA_COLL_ALLGATHER == c->coll) {
        if (!map_moved_type(c->rdtype, c->rcount, &a->dtype, &a->count)) return "derived or unsupported datatype";
        if (MPI_IN_PLACE != c->sbuf && (c->sdtype != c->rdtype || c->scount != c->rcount))
            return "send and receive signatures differ";
        return NULL;
    }
    if (GPURDMA_COLL_BCAST == c->coll) {
        if (!map_moved_type(c->sdtype, c->scount, &a->dtype, &a->count)) return "derived or unsupported datatype";
        return NULL;
    }
    if (!gpurdma_mpi_map_op(c->op, &a->op)) return "user-defined or unsupported op";
    if (!gpurdma_mpi_map_datatype(c->sdtype, &a->dtype)) return "derived or unsupported datatype";
    if (GPURDMA_COLL_REDUCE == c->coll) {
        a->count = (size_t)c->scount;
        return NULL;
    }
    a->count = (size_t)c->rcount;
    if (c->rcounts) {
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

static int run(const pcall_t *c)
{
    bool bad = c->scount < 0 || c->rcount < 0;
    int size = 1;
    const pmpi_comm_t *pc = bad ? NULL : pmpi_comm_state(c->comm);
    if (pc && pc->core) {
        PMPI_Comm_size(c->comm, &size);
        if (c->rcounts)
            for (int i = 0; i < size; i++) bad |= c->rcounts[i] < 0;
        if (GPURDMA_COLL_BCAST == c->coll || GPURDMA_COLL_REDUCE == c->coll) bad |= c->root < 0 || c->root >= size;
    }
    /* Off, not started, an inter-communicator, a bad count: MPI's own (host memory only). */
    if (bad || NULL == pc || NULL == pc->core) return call_pmpi(c, c->sbuf, c->rbuf);
    gpurdma_coll_args_t a;
    size_t *counts;
    const char *why = core_args(c, size, &a, &counts);
    if (why) {
        free(counts);
        return previous(pc, c, why);
    }
    gpurdma_status_t st = gpurdma_collective(pc->core, &a);
    free(counts);
    if (GPURDMA_OK == st) return MPI_SUCCESS;
    if (GPURDMA_ERR_UNSUPPORTED == st)
        return previous(pc, c, "op not defined for this datatype, collective switched off, or set-up declined");
    return gpurdma_pmpi_core_error(pc, st);
}

int gpurdma_pmpi_reduce_scatter_block_entry(const void *sbuf, void *rbuf, int rcount, int dtype, int op, int comm)
{
    const pcall_t c = {GPURDMA_COLL_REDUCE_SCATTER, sbuf, rbuf,       0, (MPI_Datatype)dtype, rcount,
                       MPI_DATATYPE_NULL,           NULL, (MPI_Op)op, 0, (MPI_Comm)comm};
    return run(&c);
}

int gpurdma_pmpi_reduce_scatter_entry(const void *sbuf, void *rbuf, const int *rcounts, int dtype, int op, int comm)
{
    const pcall_t c = {GPURDMA_COLL_REDUCE_SCATTER, sbuf,    rbuf,       0, (MPI_Datatype)dtype, 0,
                       MPI_DATATYPE_NULL,           rcounts, (MPI_Op)op, 0, (MPI_Comm)comm};
    return run(&c);
}

int gpurdma_pmpi_allgather_entry(const void *sbuf, int scount, int sdtype, void *rbuf, int rcount, int rdtype, int comm)
{
    pcall_t c = {GPURDMA_COLL_ALLGATHER, sbuf, rbuf,        scount, (MPI_Datatype)sdtype, rcount,
                 (MPI_Datatype)rdtype,   NULL, MPI_OP_NULL, 0,      (MPI_Comm)comm};
    if (MPI_IN_PLACE == sbuf) c.scount = 0; /* ignored by MPI */
    return run(&c);
}

int gpurdma_pmpi_bcast_entry(void *buf, int count, int dtype, int root, int comm)
{
    const pcall_t c = {GPURDMA_COLL_BCAST, NULL, buf,         count, (MPI_Datatype)dtype, 0,
                       MPI_DATATYPE_NULL,  NULL, MPI_OP_NULL, root,  (MPI_Comm)comm};
    return run(&c);
}

int gpurdma_pmpi_reduce_entry(const void *sbuf, void *rbuf, int count, int dtype, int op, int root, int comm)
{
    const pcall_t c = {GPURDMA_COLL_REDUCE, sbuf, rbuf,       count, (MPI_Datatype)dtype, 0,
                       MPI_DATATYPE_NULL,   NULL, (MPI_Op)op, root,  (MPI_Comm)comm};
    return run(&c);
}

int gpurdma_pmpi_barrier_entry(int comm)
{
    const pmpi_comm_t *pc = pmpi_comm_state((MPI_Comm)comm);
    /* Off, not started, an inter-communicator: MPI's own. */
    if (NULL == pc || NULL == pc->core) return PMPI_Barrier((MPI_Comm)comm);
    const gpurdma_status_t st = gpurdma_barrier(pc->core);
    if (GPURDMA_OK == st) return MPI_SUCCESS;
    if (GPURDMA_ERR_UNSUPPORTED == st) {
        pmpi_output(2, "%s: barrier: fallback to PMPI (collective switched off, or set-up declined)", pc->name);
        return PMPI_Barrier((MPI_Comm)comm);
    }
    return gpurdma_pmpi_core_error(pc, st);
}
