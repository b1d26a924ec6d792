/*
 * osu-compat/osu_reduce_scatter.c
 *
 * MPI_Reduce_scatter (MPI_SUM) latency benchmark whose command line and output are
 * compatible with osu_reduce_scatter from the OSU Micro-Benchmarks (OMB) 7.x. An
 * independent implementation of OMB's method; it shares no code with OMB. The run
 * around the timed loop is harness.c's.
 *
 * The message size is the whole vector each rank contributes: it is divided among the
 * ranks as OMB divides it (osuc_split_counts), so each rank receives about size / ranks
 * bytes of the sum. -l passes MPI_IN_PLACE, the vector then in the receive buffer.
 *
 * Output layout (rank 0, stdout), as OMB 7.x prints it:
 *
 *   <empty line>
 *   # OSU MPI Reduce_scatter Latency Test v7.4
 *   # Datatype: MPI_CHAR.
 *   # Size       Avg Latency(us)[   Min Latency(us)   Max Latency(us)  Iterations][          Validation]
 */
#include <mpi.h>

#include "harness.h"

static const struct osuc_bench osuc_reduce_scatter_bench = {
    "osu_reduce_scatter",
    "# OSU MPI Reduce_scatter Latency Test v" OSUC_OMB_VERSION,
    0,
    OSUC_COLL_REDUCE_SCATTER,
};

/* OMB's method for one size: a barrier, then iterations of MPI_Wtime,
 * MPI_Reduce_scatter, MPI_Wtime, MPI_Barrier; each rank averages its timed iterations.
 * Returns the failures -c found (on every rank). */
static int osuc_one_size(struct osuc_run *r, size_t size)
{
    const struct osuc_opts *o = &r->o;
    size_t count = size / r->tsize;
    void *sbuf = osuc_sendbuf(r);
    double timer = 0.0;
    int iters, skip, i, local_err = 0, errors;

    osuc_counts(o, size, &iters, &skip);
    osuc_split_counts(r, count);
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (i = 0; i < iters + skip; i++) {
        double t0, t1;

        osuc_iter_prepare(r, count, i);
        t0 = MPI_Wtime();
        OSUC_MPI(MPI_Reduce_scatter(sbuf, r->recvbuf, r->recvcounts, r->mpi_type, MPI_SUM, MPI_COMM_WORLD));
        t1 = MPI_Wtime();
        OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
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
    int rc = osuc_run_init(&r, &osuc_reduce_scatter_bench, &argc, &argv);

    if (rc >= 0) return rc;
    return osuc_run_finish(&r, osuc_run_sweep(&r, osuc_one_size), argv[0]);
}
