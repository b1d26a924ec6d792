/*
 * osu-compat/osu_allgather.c
 *
 * MPI_Allgather latency benchmark whose command line and output are compatible with
 * osu_allgather from the OSU Micro-Benchmarks (OMB) 7.x. An independent
 * implementation of OMB's method; it shares no code with OMB. The run around the
 * timed loop is harness.c's.
 *
 * The message size is what each rank contributes; the receive buffer holds size x
 * ranks bytes, so the largest size is limited to the memory limit (-M) / ranks, as in
 * OMB. -l passes MPI_IN_PLACE, each rank's block then in its place in the receive
 * buffer.
 *
 * Output layout (rank 0, stdout), as OMB 7.x prints it:
 *
 *   <empty line>
 *   # OSU MPI Allgather Latency Test v7.4
 *   # Datatype: MPI_CHAR.
 *   # Size       Avg Latency(us)[   Min Latency(us)   Max Latency(us)  Iterations][          Validation]
 */
#include <mpi.h>

#include "harness.h"

static const struct osuc_bench osuc_allgather_bench = {
    "osu_allgather",
    "# OSU MPI Allgather Latency Test v" OSUC_OMB_VERSION,
    0,
    OSUC_COLL_ALLGATHER,
};

/* OMB's method for one size: a barrier, then iterations of MPI_Wtime, MPI_Allgather,
 * MPI_Wtime, MPI_Barrier, then a barrier; each rank averages its timed iterations.
 * Returns the failures -c found (on every rank). */
static int osuc_one_size(struct osuc_run *r, size_t size)
{
    const struct osuc_opts *o = &r->o;
    size_t count = size / r->tsize;
    void *sbuf = osuc_sendbuf(r);
    double timer = 0.0;
    int iters, skip, i, local_err = 0, errors;

    osuc_counts(o, size, &iters, &skip);
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (i = 0; i < iters + skip; i++) {
        double t0, t1;

        osuc_iter_prepare(r, count, i);
        t0 = MPI_Wtime();
        OSUC_MPI(MPI_Allgather(sbuf, (int)count, r->mpi_type, r->recvbuf, (int)count, r->mpi_type, MPI_COMM_WORLD));
        t1 = MPI_Wtime();
        OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        local_err += osuc_iter_check(r, count, i);
        if (i >= skip) {
            timer += t1 - t0;
            if (o->tail) r->lat[i - skip] = (t1 - t0) * 1e6;
        }
    }
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    errors = osuc_report_latency(r, size, timer, iters, local_err);
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return errors;
}

int main(int argc, char *argv[])
{
    struct osuc_run r;
    int rc = osuc_run_init(&r, &osuc_allgather_bench, &argc, &argv);

    if (rc >= 0) return rc;
    return osuc_run_finish(&r, osuc_run_sweep(&r, osuc_one_size), argv[0]);
}
