/*
 * barrier_check: MPI_Barrier, MPI_Ibarrier and the persistent barrier (MPI_Barrier_init;
 * Open MPI 4.1: MPIX_Barrier_init) as an application sees them, whichever component
 * serves them.
 *
 * A barrier's one promise is checked directly: no rank leaves before the last one has
 * entered. In each round one rank (another each round) sleeps before it enters; every
 * rank reads CLOCK_MONOTONIC as it enters and as it leaves (a nonblocking or persistent
 * one: after its MPI_Wait), and over the communicator max(enter) <= min(leave) must hold.
 * The ranks must share one clock: run it on one machine (the namespace cluster's hosts
 * share its kernel).
 *
 * Communicators: world, a dup, an odd/even split, all ranks in reverse order, and
 * MPI_COMM_SELF. Forms: blocking; nonblocking one at a time, and several outstanding
 * with an MPI_Iallreduce between them (its result checked); persistent, started three
 * times. A fresh communicator's first call is a nonblocking one (before any set-up).
 *
 * --expect-used (or GPURDMA_EXPECT_USED=1): gpurdma's MPI_T counter
 * coll_gpurdma_barrier_calls must grow by exactly the number of blocking barriers made
 * on MPI_COMM_WORLD in a block of them, and its allreduce counter (coll_gpurdma_calls)
 * not at all there. --expect-declined: that counter must stay 0 (coll_gpurdma_barrier_enable 0).
 *
 * --late-s S: last, the last rank of world sleeps S seconds before one more MPI_Barrier
 * on world, which must succeed on every rank (run with coll_gpurdma_timeout below S: a
 * barrier's wait is bounded by coll_gpurdma_barrier_timeout instead).
 *
 * Usage: barrier_check [--expect-used] [--expect-declined] [--delay-us N] [--late-s S]
 */
#include <mpi.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "barrier_check"
#include "check_common.h"
#include "persistent_allreduce.h"
#include "pvars.h"

#if HAVE_PERSISTENT
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define BARRIER_INIT MPI_Barrier_init
#else
#define BARRIER_INIT MPIX_Barrier_init
#endif
#endif

static long delay_us = 5000;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum form { BLOCKING, NONBLOCKING, PERSISTENT };
static const char *const form_names[] = {"MPI_Barrier", "MPI_Ibarrier", "persistent barrier"};

/* One round: rank `late` sleeps first; returns after checking the promise. req: the
 * persistent request (PERSISTENT). */
static void round_checked(MPI_Comm comm, const char *name, enum form form, int late, MPI_Request *req)
{
    int rank, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    if (rank == late) usleep((useconds_t)delay_us);
    const double enter = now_s();
    if (form == BLOCKING) {
        rc = MPI_Barrier(comm);
    } else if (form == NONBLOCKING) {
        MPI_Request r;
        rc = MPI_Ibarrier(comm, &r);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Start(req);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(req, MPI_STATUS_IGNORE);
    }
    const double leave = now_s();
    if (rc != MPI_SUCCESS) {
        fail("%s on %s: returned %d", form_names[form], name, rc);
        return;
    }
    /* max(enter) and max(-leave) = -min(leave). */
    double mine[2] = {enter, -leave}, all[2];
    MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, comm);
    if (all[0] > -all[1])
        fail("%s on %s (late rank %d): a rank left %.1f us before the last entered", form_names[form], name, late,
             1e6 * (all[0] + all[1]));
    else
        g_passed++;
}

/* Several ibarriers outstanding with an iallreduce between them, completed together. */
static void batch_checked(MPI_Comm comm, const char *name)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Request r[5];
    MPI_Status st[5]; /* not MPI_STATUSES_IGNORE: MPICH's header makes GCC warn of it */
    int in = rank + 1, out = -1, rc = MPI_SUCCESS;
    for (int i = 0; i < 5; i++) r[i] = MPI_REQUEST_NULL;
    for (int i = 0; i < 5 && rc == MPI_SUCCESS; i++)
        rc = i == 2 ? MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, comm, &r[i]) : MPI_Ibarrier(comm, &r[i]);
    if (rc == MPI_SUCCESS) rc = MPI_Waitall(5, r, st);
    if (rc != MPI_SUCCESS) fail("4 MPI_Ibarrier and an MPI_Iallreduce on %s: returned %d", name, rc);
    else if (out != size * (size + 1) / 2)
        fail("MPI_Iallreduce between MPI_Ibarrier calls on %s: %d, expected %d", name, out, size * (size + 1) / 2);
    else g_passed++;
}

static void check_comm(MPI_Comm comm, const char *name)
{
    int size;
    MPI_Comm_size(comm, &size);
    /* First: nonblocking, before any blocking call could have set the communicator up. */
    for (int late = 0; late < size && late < 4; late++) round_checked(comm, name, NONBLOCKING, late, NULL);
    for (int late = 0; late < size && late < 4; late++) round_checked(comm, name, BLOCKING, late, NULL);
    for (int late = size - 1; late >= 0 && late >= size - 4; late--)
        round_checked(comm, name, NONBLOCKING, late, NULL);
    batch_checked(comm, name);
#if HAVE_PERSISTENT
    MPI_Request req;
    if (BARRIER_INIT(comm, MPI_INFO_NULL, &req) != MPI_SUCCESS) {
        fail("persistent barrier on %s: init failed", name);
        return;
    }
    for (int k = 0; k < 3; k++) round_checked(comm, name, PERSISTENT, (k + 1) % size, &req);
    MPI_Request_free(&req);
#endif
}

int main(int argc, char **argv)
{
    bool expect_used = getenv("GPURDMA_EXPECT_USED") && atoi(getenv("GPURDMA_EXPECT_USED"));
    bool expect_declined = false;
    double late_s = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--expect-used")) expect_used = true;
        else if (!strcmp(argv[i], "--expect-declined")) expect_declined = true;
        else if (!strcmp(argv[i], "--delay-us") && i + 1 < argc) delay_us = atol(argv[++i]);
        else if (!strcmp(argv[i], "--late-s") && i + 1 < argc) late_s = atof(argv[++i]);
    }
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    static const char *const names[] = {"coll_gpurdma_barrier_calls", "coll_gpurdma_calls"};
    pvars all, block;
    pvars_watch(&all, names, 2);

    MPI_Comm dup, split, reversed;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, g_world_rank, &split);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - g_world_rank, &reversed);
    check_comm(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    check_comm(dup, "a dup of world");
    check_comm(split, "the odd/even split");
    check_comm(reversed, "world in reverse order");
    check_comm(MPI_COMM_SELF, "MPI_COMM_SELF");

    /* A block of blocking barriers on world, set up by now: each counted once, as a barrier. */
    enum { BLOCK = 50 };
    pvars_watch(&block, names, 2);
    for (int i = 0; i < BLOCK; i++) MPI_Barrier(MPI_COMM_WORLD);
    const unsigned long long barriers = pvars_read(&block, 0), allreduces = pvars_read(&block, 1);
    const bool counted = block.found[0];
    pvars_done(&block);
    const unsigned long long total = pvars_read(&all, 0);
    pvars_done(&all);
    if (expect_used) {
        if (!counted) fail("--expect-used: gpurdma's counter coll_gpurdma_barrier_calls is not there");
        else if (barriers != BLOCK || allreduces != 0)
            fail("--expect-used: %d MPI_Barrier on world counted as %llu barriers and %llu allreduces "
                 "(expected %d and 0)",
                 BLOCK, barriers, allreduces, BLOCK);
        else g_passed++;
    }
    if (expect_declined) {
        if (total != 0) fail("--expect-declined: coll_gpurdma_barrier_calls grew by %llu", total);
        else g_passed++;
    }

    if (late_s > 0) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        if (g_world_rank == size - 1) usleep((useconds_t)(late_s * 1e6));
        const int rc = MPI_Barrier(MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) fail("MPI_Barrier with the last rank %.1f s late: returned %d", late_s, rc);
        else g_passed++;
    }

    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
    MPI_Comm_free(&reversed);
    long long totals[3];
    check_totals(0, totals);
    MPI_T_finalize();
    return check_finish(totals);
}
