/*
 * A peer that does not arrive: rank 1 sleeps past coll_gpurdma_timeout before its
 * allreduce. The others must get an MPI error (MPI_ERRORS_RETURN) within the timeout
 * plus a margin, never hang, and the late rank must fail too (its peers have given
 * up). The message naming stage and peer is checked by the runner script.
 *
 *   blocking     MPI_Allreduce
 *   nonblocking  MPI_Iallreduce, then MPI_Wait: the error comes from MPI_Wait (or the
 *                start), timed from the start
 *   persistent   MPI_Allreduce_init (MPIX_ in Open MPI 4.1) on every rank before the
 *                sleep, then MPI_Start and MPI_Wait
 *
 * Afterwards the broken communicator keeps failing (in the same form of call) instead
 * of hanging, and MPI_COMM_WORLD still works. (Persistent: Open MPI has freed the request
 * whose MPI_Wait failed; the next call initialises a new one, which must fail at once.)
 *
 * The communicator has MPI_ERRORS_RETURN. Open MPI 4.1 raises an error found in
 * MPI_Wait on a collective request on MPI_COMM_WORLD's handler instead of the request's
 * communicator's (ompi/errhandler/errhandler_invoke.c in v4.1.4 has no
 * OMPI_REQUEST_COLL case; 5.0 has), libnbc's requests as well: world gets a handler
 * that counts and returns, which is a note under Open MPI 4 and a failure elsewhere.
 *
 * Usage: timeout_check TIMEOUT_SECONDS [blocking|nonblocking|persistent]
 *        (TIMEOUT_SECONDS: the value given as coll_gpurdma_timeout)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "persistent_allreduce.h"

enum { BLOCKING, NONBLOCKING, PERSISTENT };

static int world_handler_calls;

static void on_world_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    if (world_handler_calls++ == 0) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(*code, msg, &len);
        printf("note: MPI_COMM_WORLD's error handler was called (%s)\n", msg);
    }
}

/* One allreduce in the chosen form; *req is the persistent request (made on first use). */
static int call(int mode, const float *in, float *out, int count, MPI_Comm comm, MPI_Request *req)
{
    int rc;
    if (mode == BLOCKING) return MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, comm);
    if (mode == NONBLOCKING) {
        MPI_Request r;
        rc = MPI_Iallreduce(in, out, count, MPI_FLOAT, MPI_SUM, comm, &r);
        return rc == MPI_SUCCESS ? MPI_Wait(&r, MPI_STATUS_IGNORE) : rc;
    }
#ifdef ALLREDUCE_INIT
    /* Open MPI frees a request whose MPI_Wait fails, persistent ones too, before it raises
     * the error (ompi_errhandler_request_invoke, 4.1 and 5.0): the handle is then
     * MPI_REQUEST_NULL, and MPI_Start on it raises MPI_ERR_REQUEST on no communicator's
     * handler. The next persistent call initialises a new request on the communicator. */
    if (*req == MPI_REQUEST_NULL) {
        rc = ALLREDUCE_INIT(in, out, count, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, req);
        if (rc != MPI_SUCCESS) return rc;
    }
#endif
    rc = MPI_Start(req);
    return rc == MPI_SUCCESS ? MPI_Wait(req, MPI_STATUS_IGNORE) : rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    double timeout = argc > 1 ? atof(argv[1]) : 2.0;
    const char *form = argc > 2 ? argv[2] : "blocking";
    int mode = !strcmp(form, "nonblocking") ? NONBLOCKING : !strcmp(form, "persistent") ? PERSISTENT : BLOCKING;
    int rank, size, failed = 0, passed = 0, rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (mode == BLOCKING && strcmp(form, "blocking")) {
        if (rank == 0) fprintf(stderr, "usage: timeout_check TIMEOUT [blocking|nonblocking|persistent]\n");
        MPI_Finalize();
        return 2;
    }
#ifndef ALLREDUCE_INIT
    if (mode == PERSISTENT) {
        if (rank == 0) printf("timeout_check: no persistent allreduce in this MPI; 0 passed, 0 failed\n");
        MPI_Finalize();
        return 0;
    }
#endif
    MPI_Comm comm;
    MPI_Errhandler world_handler;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_create_errhandler(on_world_error, &world_handler);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, world_handler);

    /* One good call first, so the failure is mid-stream, not at set-up. */
    int one = 1, sum = 0;
    if (MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS || sum != size) {
        printf("rank %d: warm-up allreduce failed\n", rank);
        failed++;
    } else {
        passed++;
    }

    const int count = 1 << 18; /* 1 MiB of floats: the ring path */
    float *in = malloc(sizeof(float) * count), *out = malloc(sizeof(float) * count);
    for (int i = 0; i < count; i++) in[i] = 1.0f;
    MPI_Request preq = MPI_REQUEST_NULL;
#ifdef ALLREDUCE_INIT
    /* Initialised by every rank before the late one sleeps: the set-up is not what fails. */
    if (mode == PERSISTENT &&
        ALLREDUCE_INIT(in, out, count, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &preq) != MPI_SUCCESS) {
        printf("rank %d: %s failed\n", rank, "persistent allreduce init");
        failed++;
    }
#endif
    if (rank == 1) sleep((unsigned)(timeout * 2 + 1));
    double t0 = MPI_Wtime();
    rc = call(mode, in, out, count, comm, &preq);
    double waited = MPI_Wtime() - t0;
    if (rc == MPI_SUCCESS) {
        printf("rank %d: %s allreduce with a missing peer returned success\n", rank, form);
        failed++;
    } else if (rank != 1 && waited > timeout + 5.0) {
        printf("rank %d: error came after %.1f s, timeout was %.1f s\n", rank, waited, timeout);
        failed++;
    } else {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("rank %d: %s allreduce failed as expected after %.1f s (%s)\n", rank, form, waited, msg);
        passed++;
    }
    /* The broken communicator keeps failing cleanly instead of hanging. */
    if (rank != 1) {
        t0 = MPI_Wtime();
        rc = call(mode, in, out, count, comm, &preq);
        if (rc == MPI_SUCCESS) {
            printf("rank %d: %s call on a failed communicator returned success\n", rank, form);
            failed++;
        } else if (MPI_Wtime() - t0 > 1.0) {
            printf("rank %d: %s call on a failed communicator took %.1f s\n", rank, form, MPI_Wtime() - t0);
            failed++;
        } else {
            passed++;
        }
    }
    if (preq != MPI_REQUEST_NULL && MPI_Request_free(&preq) != MPI_SUCCESS) {
        printf("rank %d: MPI_Request_free of the persistent request failed\n", rank);
        failed++;
    }
    /* The late rank arrives long after the others: a barrier absorbs that wait, which
     * would otherwise exceed the timeout of gpurdma's allreduce below (gpurdma's own
     * barrier is bounded by coll_gpurdma_barrier_timeout instead). It comes before the
     * communicator is freed, so that the late rank's call never writes into landing
     * slots already released; a second one absorbs the late rank's teardown of the
     * broken communicator, which waits (bounded) for its peers' landing slots. */
    MPI_Barrier(MPI_COMM_WORLD);
    free(in);
    free(out);
    MPI_Comm_free(&comm);
    MPI_Barrier(MPI_COMM_WORLD);
    /* MPI_COMM_WORLD still works: the failure stayed on its communicator. */
    if (world_handler_calls) {
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
        printf("note: rank %d: Open MPI 4 raised %d request error(s) on MPI_COMM_WORLD's handler, not the "
               "communicator's\n",
               rank, world_handler_calls);
#else
        printf("rank %d: %d error(s) raised on MPI_COMM_WORLD's handler, not the communicator's\n", rank,
               world_handler_calls);
        failed++;
#endif
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&world_handler);
    int total = 0;
    MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int all_passed = 0;
    MPI_Reduce(&passed, &all_passed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("timeout_check: %d passed, %d failed\n", all_passed, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
