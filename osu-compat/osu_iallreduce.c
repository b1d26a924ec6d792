/*
 * osu-compat/osu_iallreduce.c
 *
 * MPI_Iallreduce overlap benchmark whose command line and output are compatible with
 * osu_iallreduce from the OSU Micro-Benchmarks (OMB) 7.x. An independent
 * implementation of OMB's method; it shares no code with OMB. The run around the
 * timed loops is harness.c's, the compute phase compute.c's.
 *
 * For each size, OMB's method:
 *  1. pure communication: MPI_Iallreduce then MPI_Wait at once, timed (as the
 *     blocking benchmark times MPI_Allreduce); each rank's average is its "pure" time;
 *  2. overlap: MPI_Iallreduce, a compute phase of that rank's pure time (no MPI calls
 *     in it by default; -t N adds N MPI_Test calls spread over it), MPI_Wait; the
 *     whole is "overall", the compute phase without its MPI_Test calls "compute";
 *  3. every time averaged over the ranks, and
 *     overlap % = max(0, 100 * (1 - (overall - compute) / pure)):
 *     100 when the allreduce finished entirely behind the compute phase, 0 when the
 *     compute phase added its full length to the allreduce.
 * Every iteration ends with MPI_Barrier, outside the timed part.
 *
 * Output layout (rank 0, stdout), as OMB 7.x prints it:
 *
 *   <empty line>
 *   # OSU MPI Non-blocking Allreduce Latency Test v7.4
 *   # Overall = Coll. Init + Compute + MPI_Test + MPI_Wait
 *   <empty line>
 *   # Datatype: MPI_CHAR.
 *   # Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)
 *
 * -f adds Coll. Init, MPI_Test and MPI_Wait after Compute and Min/Max Comm. after Pure
 * Comm. (OMB's full layout); -c a Validation column; -z the percentiles of the
 * overall time per iteration.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

#include "compute.h"
#include "harness.h"

static const struct osuc_bench osuc_iallreduce_bench = {
    "osu_iallreduce",
    "# OSU MPI Non-blocking Allreduce Latency Test v" OSUC_OMB_VERSION,
    1,
    OSUC_COLL_ALLREDUCE,
};

/* Step 1: MPI_Iallreduce + MPI_Wait; returns this rank's average in seconds. */
static double osuc_pure_comm(struct osuc_run *r, size_t count, int iters, int skip, int *local_err)
{
    void *sbuf = osuc_sendbuf(r);
    double timer = 0.0;
    int i;

    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (i = 0; i < iters + skip; i++) {
        MPI_Request req;
        double t0, t1;

        osuc_iter_prepare(r, count, i);
        t0 = MPI_Wtime();
        OSUC_MPI(MPI_Iallreduce(sbuf, r->recvbuf, (int)count, r->mpi_type, MPI_SUM, MPI_COMM_WORLD, &req));
        OSUC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        t1 = MPI_Wtime();
        OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        *local_err += osuc_iter_check(r, count, i);
        if (i >= skip) timer += t1 - t0;
    }
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return timer / iters;
}

/* This rank's sums over the timed iterations of step 2, in seconds. */
struct osuc_overlap_sums {
    double overall, compute, init, test, wait;
};

/* Step 2: MPI_Iallreduce, the compute phase of pure seconds, MPI_Wait. */
static void osuc_overlapped(struct osuc_run *r, size_t count, int iters, int skip, double pure,
                            struct osuc_overlap_sums *s, int *local_err)
{
    void *sbuf = osuc_sendbuf(r);
    int i;

    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (i = 0; i < iters + skip; i++) {
        MPI_Request req;
        double t_start, t_init, t_comp, t_wait, test;

        osuc_iter_prepare(r, count, i);
        t_start = MPI_Wtime();
        OSUC_MPI(MPI_Iallreduce(sbuf, r->recvbuf, (int)count, r->mpi_type, MPI_SUM, MPI_COMM_WORLD, &req));
        t_init = MPI_Wtime();
        test = osuc_compute(pure, r->o.num_probes, &req);
        t_comp = MPI_Wtime();
        OSUC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        t_wait = MPI_Wtime();
        OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        *local_err += osuc_iter_check(r, count, i);
        if (i >= skip) {
            s->overall += t_wait - t_start;
            s->init += t_init - t_start;
            s->compute += t_comp - t_init - test;
            s->test += test;
            s->wait += t_wait - t_comp;
            if (r->o.tail) r->lat[i - skip] = (t_wait - t_start) * 1e6;
        }
    }
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* Returns the failures -c found (on every rank). */
static int osuc_one_size(struct osuc_run *r, size_t size)
{
    size_t count = size / r->tsize;
    struct osuc_overlap_sums s = {0.0, 0.0, 0.0, 0.0, 0.0};
    struct osuc_overlap_row row;
    double pure, us, tail[OSUC_MAX_PCT] = {0};
    int iters, skip, local_err = 0, errors;

    osuc_counts(&r->o, size, &iters, &skip);
    pure = osuc_pure_comm(r, count, iters, skip, &local_err);
    osuc_overlapped(r, count, iters, skip, pure, &s, &local_err);

    /* Step 3: per-iteration averages in us, then over the ranks. */
    us = 1e6 / iters;
    row.overall = osuc_over_ranks(r, s.overall * us).avg;
    row.compute = osuc_over_ranks(r, s.compute * us).avg;
    row.init = osuc_over_ranks(r, s.init * us).avg;
    row.test = osuc_over_ranks(r, s.test * us).avg;
    row.wait = osuc_over_ranks(r, s.wait * us).avg;
    row.pure = osuc_over_ranks(r, pure * 1e6);
    row.overlap = 0.0;
    if (row.pure.avg > 0.0) row.overlap = 100.0 * (1.0 - (row.overall - row.compute) / row.pure.avg);
    if (row.overlap < 0.0) row.overlap = 0.0;
    osuc_tail(r, iters, tail);
    errors = osuc_errors_over_ranks(r, local_err);
    if (0 == r->rank) osuc_print_overlap_row(&r->o, size, &row, errors, tail);
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return errors;
}

int main(int argc, char *argv[])
{
    struct osuc_run r;
    int rc = osuc_run_init(&r, &osuc_iallreduce_bench, &argc, &argv);

    if (rc >= 0) return rc;
    return osuc_run_finish(&r, osuc_run_sweep(&r, osuc_one_size), argv[0]);
}
