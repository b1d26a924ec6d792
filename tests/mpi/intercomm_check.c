/*
 * intercomm_check: communicators made where Open MPI runs collectives from inside its
 * progress, and nonblocking calls on communicators that gpurdma has not set up yet.
 *
 * Open MPI agrees on a new communicator's context id with nonblocking collectives
 * (MPI_Iallreduce, and MPI_Ireduce on an intercommunicator's local group) that it
 * starts from request callbacks inside opal_progress. A collective component that
 * waits on its peers there (a blocking set-up exchange) never returns under
 * MPI_THREAD_MULTIPLE: its nested wait sleeps behind the outer one. This program makes
 * such communicators, and starts nonblocking and persistent calls of every collective
 * gpurdma takes on communicators before and after their first blocking call, with
 * another communicator's request in flight (and, with --thread multiple, waited on by
 * another thread). Every result is checked.
 *
 * Usage: intercomm_check [--thread single|multiple] [--rounds N]
 * GPURDMA_EXPECT_USED=1: gpurdma's MPI_T counters must show nonblocking calls.
 * Needs at least 2 ranks.
 */
#define PROGRAM "intercomm_check"
#include "check_common.h"
#include "persistent_allreduce.h"
#include "pvars.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define N_LARGE (1 << 16) /* elements of the call left in flight */

static int g_world_size;

/* Each rank's input for element i of call `tag` (small integers: sums are exact). */
static int input(int rank, int i, int tag)
{
    return (rank + 1) * 3 + i % 7 + tag;
}

/* The sum of input(r, i, tag) over the world ranks in `ranks` (n of them). */
static int expected_sum(const int *ranks, int n, int i, int tag)
{
    int s = 0;
    for (int k = 0; k < n; k++) s += input(ranks[k], i, tag);
    return s;
}

/* The world ranks of comm's group (its remote group if remote is true). */
static int *world_ranks(MPI_Comm comm, bool remote, int *n)
{
    MPI_Group g, world;
    if (remote) MPI_Comm_remote_group(comm, &g);
    else MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_size(g, n);
    int *mine = xmalloc(sizeof(int) * (size_t)*n), *out = xmalloc(sizeof(int) * (size_t)*n);
    for (int k = 0; k < *n; k++) mine[k] = k;
    MPI_Group_translate_ranks(g, *n, mine, world, out);
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    free(mine);
    return out;
}

static void check_ints(const char *what, const int *got, int n, const int *ranks, int nranks, int tag)
{
    for (int i = 0; i < n; i++) {
        const int want = expected_sum(ranks, nranks, i, tag);
        if (got[i] != want) {
            fail("%s: element %d is %d, expected %d", what, i, got[i], want);
            return;
        }
    }
    g_passed++;
}

/* A blocking allreduce of `n` ints on comm, checked (on an intercommunicator the sum is
 * the remote group's). */
static void allreduce_checked(const char *what, MPI_Comm comm, int n, int tag)
{
    int inter = 0, nranks;
    MPI_Comm_test_inter(comm, &inter);
    int *ranks = world_ranks(comm, inter != 0, &nranks);
    int *in = xmalloc(sizeof(int) * (size_t)n), *out = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) in[i] = input(g_world_rank, i, tag);
    if (MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS) fail("%s: MPI_Allreduce failed", what);
    else check_ints(what, out, n, ranks, nranks, tag);
    free(in);
    free(out);
    free(ranks);
}

/* ---- the communicators of the reproduction: intercommunicators made and duplicated ---- */

static void section_intercomm(void)
{
    MPI_Comm local, inter, dup, idup, merged;
    const int color = g_world_rank % 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, g_world_rank, &local);
    /* The other group's leader: world rank 1 for the even group, 0 for the odd one. */
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color ? 0 : 1, 7, &inter);
    /* The hang of the report: the context id of the copy is agreed by MPI_Ireduce on the
     * intercommunicator's local group, from inside progress. */
    MPI_Comm_dup(inter, &dup);
    allreduce_checked("allreduce on a dup of an intercommunicator", dup, 5, 1);
    MPI_Request req;
    MPI_Comm_idup(inter, &idup, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    allreduce_checked("allreduce on an idup of an intercommunicator", idup, 5, 2);
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
    {
        MPI_Comm idup_info;
        MPI_Comm_idup_with_info(inter, MPI_INFO_NULL, &idup_info, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        allreduce_checked("allreduce on an idup_with_info of an intercommunicator", idup_info, 5, 3);
        MPI_Comm_free(&idup_info);
    }
#endif
    /* The local group, and the merged intracommunicator: gpurdma's after their first call. */
    allreduce_checked("allreduce on the local group", local, 1000, 4);
    MPI_Intercomm_merge(inter, color, &merged);
    allreduce_checked("allreduce on the merged intercommunicator", merged, 1000, 5);
    /* A copy of the copy, with its parent now set up. */
    MPI_Comm dup2;
    MPI_Comm_dup(dup, &dup2);
    allreduce_checked("allreduce on a dup of a dup", dup2, 5, 6);
    MPI_Comm_free(&dup2);
    MPI_Comm_free(&merged);
    MPI_Comm_free(&idup);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
}

/* ---- nonblocking calls of every collective gpurdma takes, on one communicator ---- */

typedef struct nb_calls {
    int n; /* elements per rank */
    int tag;
    int *in, *allreduce, *reduce, *bcast, *allgather, *rsb;
    MPI_Request req[5];
} nb_calls;

static void nb_start(nb_calls *c, MPI_Comm comm, int n, int tag)
{
    int size;
    MPI_Comm_size(comm, &size);
    c->n = n;
    c->tag = tag;
    c->in = xmalloc(sizeof(int) * (size_t)n * (size_t)size);
    c->allreduce = xmalloc(sizeof(int) * (size_t)n);
    c->reduce = xmalloc(sizeof(int) * (size_t)n);
    c->bcast = xmalloc(sizeof(int) * (size_t)n);
    c->allgather = xmalloc(sizeof(int) * (size_t)n * (size_t)size);
    c->rsb = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n * size; i++) c->in[i] = input(g_world_rank, i, tag);
    for (int i = 0; i < n; i++) c->bcast[i] = input(g_world_rank, i, tag);
    MPI_Iallreduce(c->in, c->allreduce, n, MPI_INT, MPI_SUM, comm, &c->req[0]);
    MPI_Ireduce(c->in, c->reduce, n, MPI_INT, MPI_SUM, 0, comm, &c->req[1]);
    MPI_Ibcast(c->bcast, n, MPI_INT, 0, comm, &c->req[2]);
    MPI_Iallgather(c->in, n, MPI_INT, c->allgather, n, MPI_INT, comm, &c->req[3]);
    MPI_Ireduce_scatter_block(c->in, c->rsb, n, MPI_INT, MPI_SUM, comm, &c->req[4]);
}

static void nb_finish(nb_calls *c, MPI_Comm comm, const char *what)
{
    char name[160];
    if (MPI_Waitall(5, c->req, MPI_STATUSES_IGNORE) != MPI_SUCCESS) fail("%s: MPI_Waitall failed", what);
    int rank, nranks;
    MPI_Comm_rank(comm, &rank);
    int *ranks = world_ranks(comm, false, &nranks);
    snprintf(name, sizeof name, "%s: MPI_Iallreduce", what);
    check_ints(name, c->allreduce, c->n, ranks, nranks, c->tag);
    if (rank == 0) {
        snprintf(name, sizeof name, "%s: MPI_Ireduce", what);
        check_ints(name, c->reduce, c->n, ranks, nranks, c->tag);
    }
    bool ok = true;
    for (int i = 0; i < c->n && ok; i++) ok = c->bcast[i] == input(ranks[0], i, c->tag);
    if (!ok) fail("%s: MPI_Ibcast: not the root's data", what);
    else g_passed++;
    ok = true;
    for (int r = 0; r < nranks && ok; r++)
        for (int i = 0; i < c->n && ok; i++) ok = c->allgather[r * c->n + i] == input(ranks[r], i, c->tag);
    if (!ok) fail("%s: MPI_Iallgather: a block differs", what);
    else g_passed++;
    ok = true;
    for (int i = 0; i < c->n && ok; i++) {
        int want = 0;
        for (int r = 0; r < nranks; r++) want += input(ranks[r], rank * c->n + i, c->tag);
        ok = c->rsb[i] == want;
    }
    if (!ok) fail("%s: MPI_Ireduce_scatter_block: wrong block", what);
    else g_passed++;
    free(ranks);
    free(c->in);
    free(c->allreduce);
    free(c->reduce);
    free(c->bcast);
    free(c->allgather);
    free(c->rsb);
}

/* ---- a fresh communicator's nonblocking calls while another's are in flight ---- */

typedef struct waiter {
    MPI_Request *req;
    int rc;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->rc = MPI_Wait(w->req, MPI_STATUS_IGNORE);
    return NULL;
}

static void section_fresh(bool threads, int rounds)
{
    for (int round = 0; round < rounds; round++) {
        const int tag = 10 + round * 10;
        /* A: set up by a blocking call, then a large nonblocking call left in flight. */
        MPI_Comm a;
        MPI_Comm_dup(MPI_COMM_WORLD, &a);
        allreduce_checked("allreduce setting up a communicator", a, 8, tag);
        int *in = xmalloc(sizeof(int) * N_LARGE), *out = xmalloc(sizeof(int) * N_LARGE);
        for (int i = 0; i < N_LARGE; i++) in[i] = input(g_world_rank, i, tag + 1);
        MPI_Request big;
        MPI_Iallreduce(in, out, N_LARGE, MPI_INT, MPI_SUM, a, &big);
        pthread_t thread;
        waiter w = {&big, MPI_SUCCESS};
        if (threads && pthread_create(&thread, NULL, wait_thread, &w) != 0) {
            fail("pthread_create failed");
            threads = false;
        }
        /* B and C made now (their context ids agreed by nonblocking collectives on
         * MPI_COMM_WORLD, from progress, while A's call is in flight or waited on). */
        MPI_Comm b, c;
        MPI_Comm_dup(MPI_COMM_WORLD, &b);
        MPI_Request creq;
        MPI_Comm_idup(MPI_COMM_WORLD, &c, &creq);
        MPI_Wait(&creq, MPI_STATUS_IGNORE);
        /* Their first calls are nonblocking: before any set-up. */
        nb_calls before_b, before_c;
        nb_start(&before_b, b, 3, tag + 2);
        nb_start(&before_c, c, 3, tag + 3);
        nb_finish(&before_c, c, "a fresh idup, nonblocking first");
        nb_finish(&before_b, b, "a fresh dup, nonblocking first");
        /* Then blocking (the set-up), then nonblocking again: gpurdma's now. */
        allreduce_checked("allreduce after nonblocking calls on a fresh communicator", b, 8, tag + 4);
        nb_calls after_b;
        nb_start(&after_b, b, 257, tag + 5);
        nb_finish(&after_b, b, "nonblocking calls after the set-up");
#if HAVE_PERSISTENT
        /* Persistent requests made before the set-up and after it, each started twice. */
        int pin[4], pout[2][4];
        MPI_Request p[2];
        for (int i = 0; i < 4; i++) pin[i] = input(g_world_rank, i, tag + 6);
        ALLREDUCE_INIT(pin, pout[0], 4, MPI_INT, MPI_SUM, c, MPI_INFO_NULL, &p[0]);
        allreduce_checked("allreduce setting up an idup", c, 8, tag + 7);
        ALLREDUCE_INIT(pin, pout[1], 4, MPI_INT, MPI_SUM, c, MPI_INFO_NULL, &p[1]);
        int pranks_n;
        int *pranks = world_ranks(c, false, &pranks_n);
        for (int start = 0; start < 2; start++) {
            MPI_Startall(2, p);
            MPI_Waitall(2, p, MPI_STATUSES_IGNORE);
            check_ints("persistent allreduce made before the set-up", pout[0], 4, pranks, pranks_n, tag + 6);
            check_ints("persistent allreduce made after the set-up", pout[1], 4, pranks, pranks_n, tag + 6);
        }
        free(pranks);
        MPI_Request_free(&p[0]);
        MPI_Request_free(&p[1]);
#endif
        if (threads) {
            pthread_join(thread, NULL);
            if (w.rc != MPI_SUCCESS) fail("MPI_Wait in another thread failed");
        } else {
            MPI_Wait(&big, MPI_STATUS_IGNORE);
        }
        int nranks;
        int *ranks = world_ranks(a, false, &nranks);
        check_ints("the large call in flight meanwhile", out, N_LARGE, ranks, nranks, tag + 1);
        free(ranks);
        free(in);
        free(out);
        MPI_Comm_free(&c);
        MPI_Comm_free(&b);
        MPI_Comm_free(&a);
    }
}

static pvars g_pvars;
static const char *const g_pvar_names[1] = {"coll_gpurdma_nonblocking_calls"};

int main(int argc, char **argv)
{
    int want = MPI_THREAD_MULTIPLE, provided = 0, rounds = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--thread") && i + 1 < argc) {
            ++i;
            want = !strcmp(argv[i], "single") ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE;
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: " PROGRAM " [--thread single|multiple] [--rounds N]\n");
            return 2;
        }
    }
    MPI_T_init_thread(want, &provided);
    MPI_Init_thread(&argc, &argv, want, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
    if (g_world_size < 2) {
        if (g_world_rank == 0) fprintf(stderr, PROGRAM ": needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    const bool threads = provided == MPI_THREAD_MULTIPLE;
    if (g_world_rank == 0)
        printf(PROGRAM ": %d ranks, thread level %s\n", g_world_size, threads ? "MPI_THREAD_MULTIPLE" : "single");
    pvars_watch(&g_pvars, g_pvar_names, 1);
    section_intercomm();
    section_fresh(threads, rounds);
    const char *expect = getenv("GPURDMA_EXPECT_USED");
    if (expect && atoi(expect) == 1) {
        long long mine = (long long)pvars_read(&g_pvars, 0), sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (!g_pvars.found[0])
            fail("GPURDMA_EXPECT_USED=1 but MPI_T counter coll_gpurdma_nonblocking_calls is missing");
        else if (sum == 0) fail("GPURDMA_EXPECT_USED=1 but gpurdma took no MPI_Iallreduce after a set-up");
        else g_passed++;
        if (g_world_rank == 0) printf("gpurdma counted %lld MPI_Iallreduce, all ranks\n", sum);
    }
    pvars_done(&g_pvars);
    MPI_T_finalize();
    long long totals[3];
    check_totals(0, totals);
    return check_finish(totals);
}
