/*
 * thread_check: concurrent MPI_Allreduce from THREADS threads, each on its own
 * communicator (a dup of world), under MPI_THREAD_MULTIPLE.
 *
 * gpurdma takes such a job's communicators (the runner checks the verbose set-up line
 * and that nothing was declined) and every result must be right.
 * Each thread runs CALLS allreduces of three sizes (1, 1000 and 100000 ints, SUM, and
 * MAX on doubles), every result checked; the inputs depend on thread, call and rank.
 *
 * Usage: thread_check [CALLS [THREADS]]   (defaults 200, 4)
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 16

static int rank, size, calls = 200;

struct job {
    int id;
    MPI_Comm comm;
    int failed;
    int passed;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    static const int counts[3] = { 1, 1000, 100000 };
    int *in = malloc(sizeof(int) * 100000), *out = malloc(sizeof(int) * 100000);
    double din, dout;
    for (int c = 0; c < calls; c++) {
        const int n = counts[c % 3];
        const int salt = j->id * 1000 + c;
        for (int i = 0; i < n; i++) in[i] = (i + salt) % 977 + rank;
        int rc = MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, j->comm);
        int bad = rc != MPI_SUCCESS;
        for (int i = 0; i < n && !bad; i++)
            if (out[i] != size * ((i + salt) % 977) + size * (size - 1) / 2) {
                printf("FAIL [world rank %d] thread %d call %d: element %d is %d\n", rank, j->id, c, i, out[i]);
                bad = 1;
            }
        din = salt + rank * 0.5;
        rc = MPI_Allreduce(&din, &dout, 1, MPI_DOUBLE, MPI_MAX, j->comm);
        if (rc != MPI_SUCCESS || dout != salt + (size - 1) * 0.5) {
            printf("FAIL [world rank %d] thread %d call %d: MAX is %g (rc %d)\n", rank, j->id, c, dout, rc);
            bad = 1;
        }
        if (bad) j->failed++;
        else j->passed++;
    }
    free(in);
    free(out);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) calls = atoi(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    if (threads < 1 || threads > MAX_THREADS) threads = 4;
    int failed = 0, passed = 0;
    if (provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0) printf("FAIL: MPI_THREAD_MULTIPLE not provided (got %d)\n", provided);
        failed++;
    }
    struct job jobs[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        jobs[t].id = t;
        jobs[t].failed = jobs[t].passed = 0;
        MPI_Comm_dup(MPI_COMM_WORLD, &jobs[t].comm);
        MPI_Comm_set_errhandler(jobs[t].comm, MPI_ERRORS_RETURN);
    }
    for (int t = 0; t < threads; t++) pthread_create(&tids[t], NULL, worker, &jobs[t]);
    for (int t = 0; t < threads; t++) {
        pthread_join(tids[t], NULL);
        failed += jobs[t].failed;
        passed += jobs[t].passed;
        MPI_Comm_free(&jobs[t].comm);
    }
    int total_failed = 0, total_passed = 0;
    MPI_Allreduce(&failed, &total_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&passed, &total_passed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("thread_check: %d passed, %d failed\n", total_passed, total_failed);
    MPI_Finalize();
    return total_failed ? 1 : 0;
}
