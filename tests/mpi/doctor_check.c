/*
 * doctor_check: a job that goes wrong in a known way, for the live dump and
 * gpurdma-doctor (tests/mpi/run-doctor-tests.sh sends the signal and reads the dumps).
 *
 * Every rank runs K-1 checked calls on a dup of MPI_COMM_WORLD (allreduce of 1000 ints
 * and of 256 KiB, a bcast, a barrier, in turn), then call K (an allreduce of 1000
 * ints), then holds (sleeps HOLD seconds) before MPI_Finalize. Before call K each rank
 * prints "ENTER K rank R pid P"; before the hold, "HOLD rank R pid P".
 *
 *   healthy  nothing goes wrong.
 *   stop     rank VICTIM stops itself (SIGSTOP) before call K: the others wait in it.
 *   skip     rank VICTIM skips call K and holds: alive, but never enters it.
 *   count    rank VICTIM passes 1001 ints to call K, the others 1000.
 *   kill     call K is an allreduce of 64 MiB on every rank; rank VICTIM kills itself
 *            (SIGKILL) KILL_MS milliseconds into it (default 60; env DOCTOR_KILL_MS),
 *            which across nodes is in the stage between nodes. Run it with
 *            mpirun's --enable-recovery so that the others live on to time out.
 *
 * healthy also reads gpurdma's per-stage MPI_T counters around the calls and prints
 * "STAGES rank R node_rs_us=.. node_rs_bytes=.. rail_us=.. rail_bytes=.. node_ag_us=..
 * node_ag_bytes=.. found=N" (N: how many of the 6 counters exist).
 *
 * Usage: doctor_check healthy|stop|skip|count|kill K VICTIM HOLD
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pvars.h"

static void *kill_later(void *arg)
{
    const long ms = *(const long *)arg;
    const struct timespec wait = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&wait, NULL);
    raise(SIGKILL);
    return NULL;
}

static void hold(double seconds)
{
    const struct timespec step = {0, 10 * 1000 * 1000};
    for (double t = 0; t < seconds; t += 0.01) nanosleep(&step, NULL);
}

static const char *const stage_pvars[] = {"coll_gpurdma_stage_node_reduce_scatter_us",
                                          "coll_gpurdma_stage_node_reduce_scatter_bytes",
                                          "coll_gpurdma_stage_rail_us",
                                          "coll_gpurdma_stage_rail_bytes",
                                          "coll_gpurdma_stage_node_allgather_us",
                                          "coll_gpurdma_stage_node_allgather_bytes"};

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    pvars stages;
    pvars_watch(&stages, stage_pvars, 6);
    if (argc != 5) {
        fprintf(stderr, "usage: doctor_check healthy|stop|skip|count K VICTIM HOLD\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1];
    const int k = atoi(argv[2]);
    const int victim = atoi(argv[3]);
    const double hold_s = atof(argv[4]);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    const int big = 65536;
    int *in = malloc(sizeof(int) * (big + 1)), *out = malloc(sizeof(int) * (big + 1));
    int failures = 0;
    for (int i = 0; i < big + 1; i++) in[i] = rank + i;
    for (int call = 1; call < k; call++) {
        int rc = MPI_SUCCESS, expect_sum = 1;
        switch (call % 4) {
            case 1: rc = MPI_Allreduce(in, out, 1000, MPI_INT, MPI_SUM, comm); break;
            case 2: rc = MPI_Allreduce(in, out, big, MPI_INT, MPI_SUM, comm); break;
            case 3:
                memcpy(out, in, sizeof(int) * 1000);
                rc = MPI_Bcast(out, 1000, MPI_INT, 0, comm);
                expect_sum = 0;
                break;
            default: rc = MPI_Barrier(comm); expect_sum = -1;
        }
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "doctor_check: rank %d: call %d failed\n", rank, call);
            failures++;
            continue;
        }
        if (expect_sum < 0) continue;
        for (int i = 0; i < 1000; i++) {
            const int want = expect_sum ? size * i + size * (size - 1) / 2 : i;
            if (out[i] != want) {
                fprintf(stderr, "doctor_check: rank %d: call %d element %d is %d, not %d\n", rank, call, i, out[i], want);
                failures++;
                break;
            }
        }
    }
    printf("ENTER %d rank %d pid %ld\n", k, rank, (long)getpid());
    fflush(stdout);
    const int is_victim = rank == victim && strcmp(mode, "healthy") != 0;
    if (is_victim && strcmp(mode, "stop") == 0) raise(SIGSTOP);
    if (strcmp(mode, "kill") == 0) {
        const int huge = 16 << 20;
        int *a = calloc(huge, sizeof(int)), *b = calloc(huge, sizeof(int));
        static long kill_ms = 60;
        if (getenv("DOCTOR_KILL_MS")) kill_ms = atol(getenv("DOCTOR_KILL_MS"));
        pthread_t killer;
        if (is_victim) pthread_create(&killer, NULL, kill_later, &kill_ms);
        const int rc = MPI_Allreduce(a, b, huge, MPI_INT, MPI_SUM, comm);
        printf("doctor_check: rank %d: call %d %s\n", rank, k, rc == MPI_SUCCESS ? "succeeded" : "failed");
        fflush(stdout);
        free(a);
        free(b);
    } else if (!(is_victim && strcmp(mode, "skip") == 0)) {
        const int count = is_victim && strcmp(mode, "count") == 0 ? 1001 : 1000;
        if (MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS) {
            fprintf(stderr, "doctor_check: rank %d: call %d failed\n", rank, k);
            failures++;
        }
    }
    if (strcmp(mode, "healthy") == 0) {
        int found = 0;
        for (int i = 0; i < 6; i++) found += stages.found[i];
        printf("STAGES rank %d node_rs_us=%llu node_rs_bytes=%llu rail_us=%llu rail_bytes=%llu node_ag_us=%llu "
               "node_ag_bytes=%llu found=%d\n",
               rank, pvars_read(&stages, 0), pvars_read(&stages, 1), pvars_read(&stages, 2), pvars_read(&stages, 3),
               pvars_read(&stages, 4), pvars_read(&stages, 5), found);
    }
    printf("HOLD rank %d pid %ld\n", rank, (long)getpid());
    fflush(stdout);
    hold(hold_s);
    printf("doctor_check: rank %d: %d failures\n", rank, failures);
    free(in);
    free(out);
    MPI_Comm_free(&comm);
    pvars_done(&stages);
    MPI_T_finalize();
    MPI_Finalize();
    return failures ? 1 : 0;
}
