/*
 * osu-compat/osu_bcast.c
 *
 * MPI_Bcast latency benchmark whose command line and output are compatible with
 * osu_bcast from the OSU Micro-Benchmarks (OMB) 7.x. An independent implementation of
 * OMB's method; it shares no code with OMB. The run around the timed loop is
 * harness.c's.
 *
 * The root is rank 0 in every iteration, as in OMB 7.4's osu_bcast (which has no -k
 * and no -l). One buffer of the largest size on every rank.
 *
 * Output layout (rank 0, stdout), as OMB 7.x prints it:
 *
 *   <empty line>
 *   # OSU MPI Broadcast Latency Test v7.4
 *   # Datatype: MPI_CHAR.
 *   # Size       Avg Latency(us)[   Min Latency(us)   Max Latency(us)  Iterations][          Validation]
 */
#include <mpi.h>

#include "harness.h"

static const struct osuc_bench osuc_bcast_bench = {
    "osu_bcast",
    "# OSU MPI Broadcast Latency Test v" OSUC_OMB_VERSION,
    0,
    OSUC_COLL_BCAST,
};

/* OMB's method for one size: iterations of MPI_Wtime, MPI_Bcast, MPI_Wtime,
 * MPI_Barrier (no barrier before the first), then a barrier; each rank averages its
 * timed iterations. Returns the failures -c found (on every rank). */
static int osuc_one_size(struct osuc_run *r, size_t size)
{
    const struct osuc_opts *o = &r->o;
    size_t count = size / r->tsize;
    double timer = 0.0;
    int iters, skip, i, local_err = 0;

    osuc_counts(o, size, &iters, &skip);
    r->root = 0;
    for (i = 0; i < iters + skip; i++) {
        double t0, t1;

        osuc_iter_prepare(r, count, i);
        t0 = MPI_Wtime();
        OSUC_MPI(MPI_Bcast(r->sendbuf, (int)count, r->mpi_type, r->root, MPI_COMM_WORLD));
        t1 = MPI_Wtime();
        OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        local_err += osuc_iter_check(r, count, i);
        if (i >= skip) {
            timer += t1 - t0;
            if (o->tail) r->lat[i - skip] = (t1 - t0) * 1e6;
        }
    }
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return osuc_report_latency(r, size, timer, iters, local_err);
}

int main(int argc, char *argv[])
{
    struct osuc_run r;
    int rc = osuc_run_init(&r, &osuc_bcast_bench, &argc, &argv);

    if (rc >= 0) return rc;
    return osuc_run_finish(&r, osuc_run_sweep(&r, osuc_one_size), argv[0]);
}
