/*
 * osu-compat/osu_allreduce.c
 *
 * MPI_Allreduce latency benchmark whose command line and output are compatible with
 * osu_allreduce from the OSU Micro-Benchmarks (OMB) 7.x, so that tools which parse
 * OMB output can parse ours. This is an independent implementation; it shares no
 * code with OMB. The run around the timed loop is harness.c's; osu_iallreduce.c is
 * the nonblocking benchmark.
 *
 * Output layout (rank 0, stdout), as OMB 7.x prints it:
 *
 *   <empty line>
 *   # OSU MPI Allreduce Latency Test v7.4
 *   # Datatype: MPI_CHAR.
 *   # Size       Avg Latency(us)[   Min Latency(us)   Max Latency(us)  Iterations][          Validation]
 *   1                       1.23 ...
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const struct osuc_bench osuc_allreduce_bench = {
    "osu_allreduce",
    "# OSU MPI Allreduce Latency Test v" OSUC_OMB_VERSION,
    0,
    OSUC_COLL_ALLREDUCE,
};

/* OMB's method for one size: each iteration is MPI_Wtime, MPI_Allreduce, MPI_Wtime,
 * MPI_Barrier; each rank averages its timed iterations. Returns the failures -c found
 * (on every rank). */
static int osuc_one_size(struct osuc_run *r, size_t size)
{
    const struct osuc_opts *o = &r->o;
    size_t count = size / r->tsize;
    void *sbuf = osuc_sendbuf(r);
    double timer = 0.0, tail[OSUC_MAX_PCT] = {0};
    struct osuc_stat lat;
    int iters, skip, i, local_err = 0, errors;

    osuc_counts(o, size, &iters, &skip);
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (i = 0; i < iters + skip; i++) {
        double t0, t1;

        osuc_iter_prepare(r, count, i);
        t0 = MPI_Wtime();
        OSUC_MPI(MPI_Allreduce(sbuf, r->recvbuf, (int)count, r->mpi_type, MPI_SUM, MPI_COMM_WORLD));
        t1 = MPI_Wtime();
        OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        local_err += osuc_iter_check(r, count, i);
        if (i >= skip) {
            timer += t1 - t0;
            if (o->tail) r->lat[i - skip] = (t1 - t0) * 1e6;
        }
    }
    lat = osuc_over_ranks(r, timer * 1e6 / (double)iters);
    osuc_tail(r, iters, tail);
    errors = osuc_errors_over_ranks(r, local_err);
    if (0 == r->rank) osuc_print_latency_row(o, size, lat, iters, errors, tail, osuc_busbw_factor(r));
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return errors;
}

/* --memcpy-ref: the same buffers, one process copying: what a memory copy costs here,
 * at 16 MiB (the size bus bandwidth is usually quoted at) or the largest size. */
static void osuc_memcpy_ref(struct osuc_run *r)
{
    size_t bytes = r->o.max_size < ((size_t)16 << 20) ? r->o.max_size : ((size_t)16 << 20);
    int reps = bytes >= ((size_t)1 << 24) ? 20 : 200;
    double best = 0.0;

    for (int round = 0; round < 3; round++) {
        double t = MPI_Wtime();
        for (int k = 0; k < reps; k++) {
            memcpy(r->recvbuf, r->sendbuf, bytes);
            ((volatile char *)r->sendbuf)[(size_t)k % bytes] ^= 1;
        }
        t = MPI_Wtime() - t;
        if (t > 0 && (double)bytes * reps / t > best) best = (double)bytes * reps / t;
    }
    fprintf(stdout, "# memcpy reference: %zu bytes at %.2f GB/s (rank 0, best of 3 x %d copies)\n", bytes, best / 1e9,
            reps);
    fflush(stdout);
}

int main(int argc, char *argv[])
{
    struct osuc_run r;
    size_t failed_size;
    int rc = osuc_run_init(&r, &osuc_allreduce_bench, &argc, &argv);

    if (rc >= 0) return rc;
    failed_size = osuc_run_sweep(&r, osuc_one_size);
    if (r.o.memcpy_ref && 0 == r.rank && 0 == failed_size) osuc_memcpy_ref(&r);
    return osuc_run_finish(&r, failed_size, argv[0]);
}
