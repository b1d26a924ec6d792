/*
 * setup_wait_check: a communicator's first call on GPU buffers sets the device path up
 * among its node's ranks; that set-up must never hold the rank that drives it while a
 * node peer is away computing. Three ranks or more (world rank 1 is the slow one):
 *
 *   comm A: every world rank but 2 (GPU buffers); comm B: world ranks 0 and 2 (host).
 *   Rank 1 starts MPI_Iallreduce on A (it posts its buffer kind), passes a barrier, then
 *   computes for --compute seconds without calling MPI. The others start MPI_Iallreduce
 *   on A a tenth of that after the barrier (rank 1 has left it by then): on rank 0 the node agrees (rank 1 has posted), so the device
 *   set-up begins there while rank 1 is away. Rank 0 then runs --calls MPI_Allreduce on B
 *   with rank 2, and only then waits for A.
 *
 * Checks: rank 0's MPI_Iallreduce on A returned, and its calls on B completed, before
 * rank 1 came back (within half the compute time: a set-up that waited inside the call,
 * or held the process's progress, would take all of it); A's result is the exact sum on
 * every rank; the compute time is below the timeout (--compute is set to about 0.6 x
 * coll_gpurdma_timeout by the caller), so nothing may time out: only polling time counts.
 *
 * The CUDA driver is loaded at run time (gpu_driver.h; the stand-in without a GPU).
 * Exit status: 0 if every check passed, 1 on any failure, 77 (SKIP) without a driver.
 *
 * Usage: setup_wait_check [--compute SECONDS] [--calls N] [--count N]
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRAM "setup_wait_check"
#include "check_common.h"
#include "gpu_driver.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Computes (no MPI call) for `seconds`. */
static void compute(double seconds)
{
    const double until = now_s() + seconds;
    struct timespec pause = { 0, 10 * 1000 * 1000 };
    while (now_s() < until)
        nanosleep(&pause, NULL);
}

int main(int argc, char **argv)
{
    double compute_s = 3.0;
    int calls = 20;
    int count = 1 << 18; /* floats: 1 MiB, above the staging threshold and chunked */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--compute") == 0 && i + 1 < argc)
            compute_s = atof(argv[++i]);
        else if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
            calls = atoi(argv[++i]);
        else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
            count = atoi(argv[++i]);
    }
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 3) {
        if (g_world_rank == 0)
            printf("SKIP " PROGRAM ": needs 3 ranks or more\n");
        MPI_Finalize();
        return 77;
    }
    char why[256] = "";
    int have = gpu_open(false, 0, why, sizeof why) ? 1 : 0, all_have = 0;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_have) {
        if (g_world_rank == 0)
            printf("SKIP " PROGRAM ": %s\n", have ? "a rank has no CUDA driver" : why);
        MPI_Finalize();
        return 77;
    }
    const bool in_a = g_world_rank != 2, in_b = g_world_rank == 0 || g_world_rank == 2;
    MPI_Comm a, b;
    MPI_Comm_split(MPI_COMM_WORLD, in_a ? 0 : MPI_UNDEFINED, g_world_rank, &a);
    MPI_Comm_split(MPI_COMM_WORLD, in_b ? 0 : MPI_UNDEFINED, g_world_rank, &b);
    /* Both communicators' host set-up first (a blocking host call each): the device
     * set-up is what is timed. */
    int one = 1, sum = 0;
    if (in_a)
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, a);
    if (in_b)
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, b);

    const size_t bytes = (size_t)count * sizeof(float);
    float *host = xmalloc(bytes);
    devptr dsend = 0, drecv = 0;
    int a_size = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    if (in_a) {
        MPI_Comm_size(a, &a_size);
        for (int i = 0; i < count; i++)
            host[i] = (float)((g_world_rank + 1) * (i % 1000));
        gpu_must(cu.mem_alloc(&dsend, bytes), "cuMemAlloc (send)");
        gpu_must(cu.mem_alloc(&drecv, bytes), "cuMemAlloc (recv)");
        gpu_must(cu.htod(dsend, host, bytes), "cuMemcpyHtoD");
    }
    double t0 = 0, t_returned = 0, t_b_done = 0;
    if (g_world_rank == 1)
        MPI_Iallreduce((void *)(uintptr_t)dsend, (void *)(uintptr_t)drecv, count, MPI_FLOAT, MPI_SUM, a, &req);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_world_rank == 1) {
        compute(compute_s);
    } else {
        /* Rank 1 may still be in the barrier's progress, where it would join a set-up
         * started now: give it time to be away first. */
        compute(compute_s / 10);
        t0 = now_s();
        if (in_a)
            MPI_Iallreduce((void *)(uintptr_t)dsend, (void *)(uintptr_t)drecv, count, MPI_FLOAT, MPI_SUM, a, &req);
        t_returned = now_s();
        if (in_b) {
            long long ok = 0;
            for (int c = 0; c < calls; c++) {
                int mine = g_world_rank + c, got = 0;
                MPI_Allreduce(&mine, &got, 1, MPI_INT, MPI_SUM, b);
                ok += got == 2 + 2 * c; /* world ranks 0 and 2 */
            }
            if (ok == calls)
                g_passed++;
            else
                fail("%lld of %d allreduces on the other communicator gave a wrong sum", calls - ok, calls);
        }
        t_b_done = now_s();
    }
    if (in_a)
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (g_world_rank == 0) {
        printf(PROGRAM ": rank 0: MPI_Iallreduce returned after %.3f s, %d calls on the other communicator done "
                       "after %.3f s; the node peer computed %.1f s\n",
               t_returned - t0, calls, t_b_done - t0, compute_s);
        /* Half the compute time: the set-up must not have waited for rank 1 in either. */
        if (t_returned - t0 < compute_s / 2)
            g_passed++;
        else
            fail("MPI_Iallreduce on GPU buffers took %.2f s to return while a node peer computed for %.1f s "
                 "(its device set-up waited inside the call)",
                 t_returned - t0, compute_s);
        if (t_b_done - t0 < compute_s / 2)
            g_passed++;
        else
            fail("%d allreduces on another communicator took %.2f s while a node peer computed for %.1f s "
                 "(the device set-up held this process's progress)",
                 calls, t_b_done - t0, compute_s);
    }
    if (in_a) {
        float *got = xmalloc(bytes);
        gpu_must(cu.dtoh(got, drecv, bytes), "cuMemcpyDtoH");
        /* Sum over A's world ranks (all but 2) of (rank + 1), times i % 1000: exact in float. */
        long long factor = 0;
        for (int r = 0; r < size; r++)
            if (r != 2)
                factor += r + 1;
        int bad = 0;
        for (int i = 0; i < count && bad < 1; i++)
            if (got[i] != (float)(factor * (i % 1000))) {
                fail("comm A element %d: expected %.1f got %.1f", i, (double)(factor * (i % 1000)), (double)got[i]);
                bad++;
            }
        if (!bad)
            g_passed++;
        free(got);
        gpu_must(cu.mem_free(dsend), "cuMemFree");
        gpu_must(cu.mem_free(drecv), "cuMemFree");
        MPI_Comm_free(&a);
    }
    if (in_b)
        MPI_Comm_free(&b);
    free(host);
    long long totals[3];
    check_totals(0, totals);
    return check_finish(totals);
}
