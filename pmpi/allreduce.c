/*
 * MPI_Allreduce through gpurdma: the core takes predefined types and ops on
 * intra-communicators; everything else goes to PMPI_Allreduce (through host copies
 * when a buffer is in GPU memory: the MPI may not be CUDA-aware). The same decisions as
 * mca/coll/gpurdma's allreduce, taken alike on every rank.
 */
#include "pmpi/interposer.h"

#include <stdlib.h>

#include "mpi-common/mpi_handles.h"
#include "pmpi/entry.h"

_Static_assert(sizeof(MPI_Comm) == sizeof(int) && sizeof(MPI_Datatype) == sizeof(int) && sizeof(MPI_Op) == sizeof(int),
               "libgpurdma_pmpi is for MPICH-ABI MPIs, whose handles are ints");
_Static_assert(sizeof(MPI_Count) == sizeof(int64_t), "MPI_Count is not 64-bit");

static bool extent_of(MPI_Datatype handle, ptrdiff_t *lb, ptrdiff_t *extent)
{
    MPI_Aint l = 0, e = 0;
    if (MPI_SUCCESS != PMPI_Type_get_extent(handle, &l, &e)) return false;
    *lb = (ptrdiff_t)l;
    *extent = (ptrdiff_t)e;
    return true;
}

bool pmpi_layouts_match(void)
{
    gpurdma_mpi_type_t bad;
    ptrdiff_t extent = 0;
    if (gpurdma_mpi_check_layouts(extent_of, &bad, &extent)) return true;
    pmpi_output(0, "an MPI datatype has extent %ld, the core expects %zu for %s; gpurdma disabled", (long)extent,
                gpurdma_dtype_size(bad.dtype), gpurdma_dtype_name(bad.dtype));
    return false;
}

static int previous(const void *sbuf, void *rbuf, MPI_Count count, MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                    bool large_count)
{
#if GPURDMA_PMPI_LARGE_COUNT
    if (large_count) return PMPI_Allreduce_c(sbuf, rbuf, count, dtype, op, comm);
#endif
    (void)large_count;
    return PMPI_Allreduce(sbuf, rbuf, (int)count, dtype, op, comm);
}

static bool device_buffers(const void *sbuf, const void *rbuf)
{
    return pmpi_gpu_buffers_enabled() &&
           (gpurdma_is_device_memory(rbuf) || (sbuf != MPI_IN_PLACE && gpurdma_is_device_memory(sbuf)));
}

/* An error of ours goes through the communicator's error handler as MPI's own do; if
 * the handler returns (MPI_ERRORS_RETURN), so does the code. */
static int raise_error(const pmpi_comm_t *c, int code)
{
    (void)PMPI_Comm_call_errhandler(c->comm, code);
    return code;
}

/* PMPI_Allreduce, called back on host copies (gpurdma_staged_host_call). */
struct staged_args {
    const pmpi_comm_t *c;
    MPI_Count count;
    MPI_Datatype dtype;
    MPI_Op op;
    bool large_count;
};

static int previous_on_host(const void *send, void *recv, void *arg)
{
    const struct staged_args *a = arg;
    return previous(send ? send : MPI_IN_PLACE, recv, a->count, a->dtype, a->op, a->c->comm, a->large_count);
}

/* PMPI_Allreduce on host copies of the buffers' whole span, the result copied back. */
static int staged_previous(const pmpi_comm_t *c, const void *sbuf, void *rbuf, MPI_Count count, MPI_Datatype dtype,
                           MPI_Op op, bool large_count)
{
    MPI_Aint lb, extent, true_lb, true_extent;
    PMPI_Type_get_extent(dtype, &lb, &extent);
    PMPI_Type_get_true_extent(dtype, &true_lb, &true_extent);
    struct staged_args args = {c, count, dtype, op, large_count};
    int rc = MPI_SUCCESS;
    gpurdma_status_t st = gpurdma_staged_host_call(sbuf == MPI_IN_PLACE ? NULL : sbuf, rbuf, (size_t)count, extent,
                                                   true_lb, true_extent, previous_on_host, &args, &rc);
    if (GPURDMA_OK != st) {
        pmpi_output(0, "%s: copying GPU buffers for PMPI_Allreduce failed", c->name);
        return raise_error(c, GPURDMA_ERR_NO_RESOURCE == st ? MPI_ERR_NO_MEM : MPI_ERR_OTHER);
    }
    return rc;
}

static int fallback(const pmpi_comm_t *c, const char *why, const void *sbuf, void *rbuf, MPI_Count count,
                    MPI_Datatype dtype, MPI_Op op, bool large_count)
{
    bool device = device_buffers(sbuf, rbuf);
    pmpi_output(2, "%s: fallback to PMPI_Allreduce (%s)%s", c->name, why, device ? ", staged through host memory" : "");
    if (device) return staged_previous(c, sbuf, rbuf, count, dtype, op, large_count);
    return previous(sbuf, rbuf, count, dtype, op, c->comm, large_count);
}

/* The MPI error for a core failure, through the communicator's error handler; the core
 * has printed the stage and the peer, this names what it does not. */
int gpurdma_pmpi_core_error(const pmpi_comm_t *c, gpurdma_status_t st)
{
    if (GPURDMA_ERR_CONCURRENT == st)
        pmpi_output(0, "concurrent collective calls on %s from two threads (erroneous in MPI)", c->name);
    else if (GPURDMA_ERR_BROKEN == st)
        pmpi_output(0, "%s: disabled after an earlier failure (%s)", c->name, gpurdma_comm_last_error(c->core));
    return raise_error(c, MPI_ERR_OTHER);
}

int gpurdma_pmpi_allreduce(const void *sbuf, void *rbuf, MPI_Count count, MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                           bool large_count)
{
    const pmpi_comm_t *c = count >= 0 ? pmpi_comm_state(comm) : NULL;
    /* Off, not started, an inter-communicator, a bad count: MPI's own, which also
     * reports bad arguments. Host memory only: without gpurdma, GPU buffers are the
     * program's business, as they would be without the library. */
    if (NULL == c || NULL == c->core) return previous(sbuf, rbuf, count, dtype, op, comm, large_count);
    gpurdma_dtype_t gdt;
    gpurdma_op_t gop;
    if (!gpurdma_mpi_map_op(op, &gop))
        return fallback(c, "user-defined or unsupported op", sbuf, rbuf, count, dtype, op, large_count);
    if (!gpurdma_mpi_map_datatype(dtype, &gdt))
        return fallback(c, "derived or unsupported datatype", sbuf, rbuf, count, dtype, op, large_count);
    gpurdma_status_t st = gpurdma_allreduce(c->core, sbuf == MPI_IN_PLACE ? NULL : sbuf, rbuf, (size_t)count, gdt, gop);
    if (GPURDMA_OK == st) return MPI_SUCCESS;
    if (GPURDMA_ERR_UNSUPPORTED == st)
        return fallback(c, "op not defined for this datatype, or set-up declined", sbuf, rbuf, count, dtype, op,
                        large_count);
    return gpurdma_pmpi_core_error(c, st);
}

int gpurdma_pmpi_allreduce_entry(const void *sbuf, void *rbuf, int64_t count, int dtype, int op, int comm,
                                 int large_count)
{
    return gpurdma_pmpi_allreduce(sbuf, rbuf, (MPI_Count)count, (MPI_Datatype)dtype, (MPI_Op)op, (MPI_Comm)comm,
                                  large_count != 0);
}
