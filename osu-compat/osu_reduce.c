/*
 * osu-compat/osu_reduce.c
 *
 * MPI_Reduce (MPI_SUM) latency benchmark whose command line and output are compatible
 * with osu_reduce from the OSU Micro-Benchmarks (OMB) 7.x. An independent
 * implementation of OMB's method; it shares no code with OMB. The run around the
 * timed loop is harness.c's.
 *
 * The root is rank 0 (OMB's default), a fixed rank with -k fixed:RANK, or rank
 * i mod ranks in iteration i with -k rotate. With -l the root passes MPI_IN_PLACE and
 * the other ranks their receive buffer as the send buffer, as OMB does. -c checks the
 * root's result.
 *
 * Output layout (rank 0, stdout), as OMB 7.x prints it:
 *
 *   <empty line>
 *   # OSU MPI Reduce Latency Test v7.4
 *   # Datatype: MPI_CHAR.
 *   # Size       Avg Latency(us)[   Min Latency(us)   Max Latency(us)  Iterations][          Validation]
 */
#include <mpi.h>

#include "harness.h"

static const struct osuc_bench osuc_reduce_bench = {
    "osu_reduce",
    "# OSU MPI Reduce Latency Test v" OSUC_OMB_VERSION,
    0,
    OSUC_COLL_REDUCE,
};

/* OMB's method for one size, which differs from the other benchmarks' in where the
 * barrier is: a barrier, then iterations of MPI_Barrier, MPI_Wtime, MPI_Reduce,
 * MPI_Wtime; each rank averages its timed iterations. Returns the failures -c found
 * (on every rank). */
static int osuc_one_size(struct osuc_run *r, size_t size)
{
    const struct osuc_opts *o = &r->o;
    size_t count = size / r->tsize;
    double timer = 0.0;
    int iters, skip, i, local_err = 0, errors;

    osuc_counts(o, size, &iters, &skip);
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (i = 0; i < iters + skip; i++) {
        double t0, t1;
        void *sbuf = r->sendbuf;

        r->root = osuc_root(r, i);
        if (o->in_place) sbuf = (r->rank == r->root) ? MPI_IN_PLACE : (void *)r->recvbuf;
        /* With -c this ends with the barrier before the timed call. */
        osuc_iter_prepare(r, count, i);
        if (!o->validate) OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        t0 = MPI_Wtime();
        OSUC_MPI(MPI_Reduce(sbuf, r->recvbuf, (int)count, r->mpi_type, MPI_SUM, r->root, MPI_COMM_WORLD));
        t1 = MPI_Wtime();
        local_err += osuc_iter_check(r, count, i);
        if (i >= skip) {
            timer += t1 - t0;
            if (o->tail) r->lat[i - skip] = (t1 - t0) * 1e6;
        }
    }
    errors = osuc_report_latency(r, size, timer, iters, local_err);
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return errors;
}

int main(int argc, char *argv[])
{
    struct osuc_run r;
    int rc = osuc_run_init(&r, &osuc_reduce_bench, &argc, &argv);

    if (rc >= 0) return rc;
    return osuc_run_finish(&r, osuc_run_sweep(&r, osuc_one_size), argv[0]);
}
