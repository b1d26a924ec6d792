/*
 * stuck_peer_check: a peer stops (SIGSTOP) or dies (SIGKILL) in the middle of a
 * stream of allreduces.
 *
 * All ranks gather their pids first (over MPI_COMM_WORLD's pt2pt path), then run
 * a stream of checked MPI_Allreduce calls (MPI_INT SUM, COUNT elements) on a dup of
 * world with MPI_ERRORS_RETURN. At call AT the victim rank raises the signal on
 * itself.
 *
 *   stop: every other rank must get an error (never a wrong result, never success
 *         with bad data) from the stuck call within TIMEOUT + 5 s. Rank 0 (or rank 1
 *         if the victim is 0) then sends SIGCONT to the victim; the victim's own call
 *         fails in turn (its peers gave up) within 2 x TIMEOUT + 10 s. Every rank then
 *         meets in MPI_Barrier on world and the job ends normally. Each rank prints
 *         "DETECT rank R: error after X s" for the failing call; the runner checks the
 *         message that names stage, peer and host.
 *   kill: the victim prints "KILLTIME <unix time>" and raises SIGKILL; the others keep
 *         calling. The runner measures how long the job takes to end, checks that
 *         no process of it is left and nothing in /dev/shm. The others must never
 *         print a wrong result; a rank whose call fails prints its error and waits
 *         (in MPI_Barrier) for mpirun to end the job.
 *
 *   stream: no signal (VICTIM and AT are ignored): CALLS checked calls while the script
 *         breaks the network (link down, loss). Each call either succeeds with the right
 *         result or fails within TIMEOUT + 5 s; after a failure the rank stops calling.
 *         Each rank prints "STREAM rank R: N ok, slowest call X s[, error after Y s]".
 *
 * COLL (stop only): allreduce (default), allgather (COUNT each) or reduce_scatter
 * (MPI_Reduce_scatter_block, COUNT each): collectives whose every result needs every
 * rank, so that no call past the stop can succeed.
 *
 * Every result that comes back MPI_SUCCESS is checked element by element.
 * Usage: stuck_peer_check stop|kill|stream VICTIM AT COUNT TIMEOUT [CALLS [COLL]]
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "stuck_peer_check"
#include "check_common.h" /* summary */

static double now_unix(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One call of the stream's collective (COLL). */
static int call_coll(int gather, int scatter, const int *in, int *out, int count, MPI_Comm comm)
{
    if (gather) return MPI_Allgather(in, count, MPI_INT, out, count, MPI_INT, comm);
    if (scatter) return MPI_Reduce_scatter_block(in, out, count, MPI_INT, MPI_SUM, comm);
    return MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, comm);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    g_world_rank = rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 6 || (strcmp(argv[1], "stop") && strcmp(argv[1], "kill") && strcmp(argv[1], "stream"))) {
        if (rank == 0) fprintf(stderr, "usage: %s stop|kill|stream VICTIM AT COUNT TIMEOUT [CALLS]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const int stop_mode = strcmp(argv[1], "stop") == 0, stream_mode = strcmp(argv[1], "stream") == 0;
    const int victim = stream_mode ? 0 : atoi(argv[2]), at = stream_mode ? 1 : atoi(argv[3]), count = atoi(argv[4]);
    const double timeout = atof(argv[5]);
    const int calls = argc > 6 ? atoi(argv[6]) : at + 1000;
    const char *coll = argc > 7 ? argv[7] : "allreduce";
    const int gather = !strcmp(coll, "allgather"), scatter = !strcmp(coll, "reduce_scatter");
    if (victim < 0 || victim >= size || count < 1 || at < 1 || size < 2 ||
        (!gather && !scatter && strcmp(coll, "allreduce"))) {
        if (rank == 0) fprintf(stderr, "bad arguments\n");
        MPI_Finalize();
        return 2;
    }
    int failed = 0, passed = 0;
    int *pids = malloc(sizeof(int) * (size_t)size);
    int me = (int)getpid();
    MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("PIDS");
        for (int r = 0; r < size; r++) printf(" %d", pids[r]);
        printf("\n");
        fflush(stdout);
    }
    /* Open every pt2pt connection now: the final barrier must not need a new one while
     * a link is down (Open MPI's tcp btl connects lazily and can hang on a failed connect). */
    int *all = malloc(sizeof(int) * (size_t)size * 2);
    for (int r = 0; r < size; r++) all[r] = rank;
    MPI_Alltoall(all, 1, MPI_INT, all + size, 1, MPI_INT, MPI_COMM_WORLD);
    free(all);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    /* Allgather's result and reduce-scatter's input are COUNT per rank. */
    const int in_count = scatter ? count * size : count, out_count = gather ? count * size : count;
    int *in = malloc(sizeof(int) * (size_t)in_count), *out = malloc(sizeof(int) * (size_t)out_count);
    int got_error = 0, ok_calls = 0;
    double slowest = 0, error_after = -1;
    for (int c = 0; c < calls && !got_error; c++) {
        if (!stream_mode && rank == victim && c == at) {
            if (stop_mode) {
                printf("STOPTIME %.3f rank %d stops itself at call %d\n", now_unix(), rank, c);
                fflush(stdout);
                raise(SIGSTOP);
                printf("rank %d continued at %.3f\n", rank, now_unix());
                fflush(stdout);
            } else {
                printf("KILLTIME %.3f rank %d kills itself at call %d\n", now_unix(), rank, c);
                fflush(stdout);
                raise(SIGKILL);
            }
        }
        for (int i = 0; i < in_count; i++) in[i] = (c * 7 + i) % 1000 + rank;
        memset(out, 0xff, sizeof(int) * (size_t)out_count);
        const double t0 = MPI_Wtime();
        const int rc = call_coll(gather, scatter, in, out, count, comm);
        const double waited = MPI_Wtime() - t0;
        if (waited > slowest) slowest = waited;
        if (rc == MPI_SUCCESS) {
            int bad = 0;
            for (int i = 0; i < out_count && !bad; i++) {
                /* allgather: block r is rank r's input; reduce-scatter: my block of the sum */
                const int want = gather    ? (c * 7 + i % count) % 1000 + i / count
                                 : scatter ? size * ((c * 7 + rank * count + i) % 1000) + size * (size - 1) / 2
                                           : size * ((c * 7 + i) % 1000) + size * (size - 1) / 2;
                if (out[i] != want) {
                    printf("FAIL [world rank %d] call %d: element %d is %d, expected %d (success returned)\n", rank, c,
                           i, out[i], want);
                    bad = 1;
                }
            }
            failed += bad;
            /* Calls past the stop point cannot all succeed: the victim is not there. */
            if (!bad && stop_mode && rank != victim && c > at + 1) {
                printf("FAIL [world rank %d] call %d returned success while rank %d is stopped\n", rank, c, victim);
                failed++;
            }
            passed += !bad;
            ok_calls += !bad;
            continue;
        }
        got_error = 1;
        error_after = waited;
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("DETECT rank %d: error after %.2f s at call %d (%s)\n", rank, waited, c, msg);
        fflush(stdout);
        const double limit = rank == victim && !stream_mode ? 2 * timeout + 10.0 : timeout + 5.0;
        if ((stop_mode || stream_mode) && waited > limit) {
            printf("FAIL [world rank %d] the error came after %.1f s; limit %.1f s\n", rank, waited, limit);
            failed++;
        } else {
            passed++;
        }
        if (stop_mode && rank != victim && c < at) {
            printf("FAIL [world rank %d] call %d failed before the victim stopped\n", rank, c);
            failed++;
        }
    }
    if (stop_mode && !got_error) {
        printf("FAIL [world rank %d] no call failed although rank %d was stopped\n", rank, victim);
        failed++;
    }
    if (stream_mode) {
        printf("STREAM rank %d: %d of %d calls ok, slowest call %.2f s", rank, ok_calls, calls, slowest);
        if (error_after >= 0) printf(", then an error after %.2f s", error_after);
        printf("\n");
        fflush(stdout);
        /* Let a broken link come back before MPI's own barrier below. */
        if (error_after >= 0) sleep(3);
    }
    /* Wake the victim: the rank that does it has already seen its own error. */
    const int waker = victim == 0 ? 1 : 0;
    if (stop_mode && rank == waker) {
        sleep(1);
        printf("rank %d sends SIGCONT to rank %d (pid %d) at %.3f\n", rank, victim, pids[victim], now_unix());
        fflush(stdout);
        if (kill((pid_t)pids[victim], SIGCONT) != 0) {
            perror("kill(SIGCONT)");
            failed++;
        }
    }
    /* A later call on the broken communicator fails at once instead of hanging. */
    if (stop_mode && got_error) {
        const double t0 = MPI_Wtime();
        const int rc = call_coll(gather, scatter, in, out, count, comm);
        if (rc == MPI_SUCCESS) {
            printf("FAIL [world rank %d] a call on the failed communicator returned success\n", rank);
            failed++;
        } else if (MPI_Wtime() - t0 > 1.0) {
            printf("FAIL [world rank %d] a call on the failed communicator took %.1f s\n", rank, MPI_Wtime() - t0);
            failed++;
        } else {
            passed++;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(in);
    free(out);
    free(pids);
    MPI_Comm_free(&comm);
    /* The victim frees the broken communicator last, and its teardown waits (bounded) for
     * its peers' landing slots: a barrier (bounded by coll_gpurdma_barrier_timeout where
     * gpurdma takes it) absorbs that before world's allreduce below, whose bound is short. */
    MPI_Barrier(MPI_COMM_WORLD);
    g_passed = passed;
    g_failed = failed;
    long long totals[3];
    check_totals(0, totals);
    return check_finish(totals); /* MPI_Finalize */
}
