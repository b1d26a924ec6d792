/*
 * thread_stress_check: MPI_THREAD_MULTIPLE stress.  T threads, each with C
 * communicators of its own (the first a dup of world, the others dups or parity
 * splits) and its own buffers: threads share nothing but the process.  Each thread
 * runs a deterministic stream of calls (the same on every rank): sizes from 1 element
 * to 1 MiB, several datatype/op pairs of matrix.h, blocking MPI_Allreduce,
 * MPI_Iallreduce with MPI_Wait or an MPI_Test loop, MPI_Iallreduce on all its
 * communicators at once with MPI_Waitall, and persistent init/start/wait/free; normal
 * and in place; and, one call in eleven, MPI_Bcast, MPI_Allgather, MPI_Reduce or
 * MPI_Reduce_scatter_block (MPI_INT, MPI_SUM; root drawn; blocking or MPI_I* + MPI_Wait),
 * so that these run on every thread's communicators beside the allreduces.  Every result is checked element by element against the rank-order
 * reference (and the bytes after the receive buffer).  The run is bounded: every 8
 * calls a thread agrees with its peers (an allreduce on its first communicator)
 * whether SECONDS have passed.
 *
 * concurrent (GPURDMA_EXPECT_USED=1 and 2+ ranks only): two threads of rank 0 call
 * MPI_Allreduce on the same communicator while the other ranks hold back, so the two
 * calls overlap for certain.  That is erroneous in MPI; gpurdma must refuse the
 * later one (an MPI error, nothing done), complete the other with the right result
 * once the others join, and leave the communicator usable.  Not run otherwise: what
 * another component does with it is undefined.
 *
 * GPURDMA_EXPECT_USED=1 also requires gpurdma's MPI_T counters coll_gpurdma_calls and
 * coll_gpurdma_nonblocking_calls to have grown.
 *
 * The communicators are made first, as programs do: under MPI_THREAD_MULTIPLE Open MPI
 * allocates their context ids with MPI_Iallreduce on world, from inside its progress
 * engine, so that is gpurdma's first call on world.  --warm-up first runs one
 * MPI_Allreduce on world (to tell that case apart from the rest).
 *
 * Usage: thread_stress_check [--threads T] [--comms C] [--seconds S] [--seed N] [--print N]
 *                            [--warm-up]
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRAM "thread_stress_check"
#define MAX_THREADS 16
#define MAX_COMMS 4
#define MAX_BYTES (1u << 20)
#define BATCH_MAX_BYTES (64u << 10) /* per communicator in the all-at-once mode */
#define GUARD_BYTES 16
#define GUARD_FILL 0x5A

#include "check_common.h" /* fail, xmalloc, summary (main thread only) */
#include "matrix.h"
#include "pvars.h"

#include "persistent_allreduce.h"

enum { MODE_BLOCKING, MODE_WAIT, MODE_TEST, MODE_ALL_COMMS, MODE_PERSISTENT, MODE_OTHER, NUM_MODES };
static const char *const mode_name[NUM_MODES] = { "MPI_Allreduce", "MPI_Iallreduce+MPI_Wait",
                                                  "MPI_Iallreduce+MPI_Test loop", "MPI_Iallreduce on all comms+MPI_Waitall",
                                                  "persistent init/start/wait/free", "bcast/allgather/reduce/reduce-scatter" };

static bool g_expect_used;
static double g_seconds = 3.0;
static int g_world_size;
/* The (type, op) pairs a stream draws from, chosen in main. */
static const dtype_info *g_pairs_t[16];
static int g_pairs_op[16], g_npairs;
static pthread_mutex_t g_print_lock = PTHREAD_MUTEX_INITIALIZER;
static long long g_printed;

typedef struct tcomm {
    MPI_Comm comm;
    int rank, size;
    char name[32];
} tcomm;

/* One set of buffers (input, reference, library fold, send, receive with guard, scratch). */
typedef struct bufset {
    unsigned char *input, *expected, *lib, *send, *recv, *scratch;
} bufset;

typedef struct worker {
    int id, ncomms;
    tcomm comms[MAX_COMMS];
    bufset big, small[MAX_COMMS];
    long long passed, failed, calls[NUM_MODES], lib_matches;
    pthread_t tid;
} worker;

static void tfail(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tfail(worker *w, const char *fmt, ...)
{
    w->failed++;
    pthread_mutex_lock(&g_print_lock);
    if (g_printed++ < max_printed_failures) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        printf("FAIL [world rank %d thread %d] %s\n", g_world_rank, w->id, msg);
        fflush(stdout);
    }
    pthread_mutex_unlock(&g_print_lock);
}

static void alloc_set(bufset *b, size_t bytes)
{
    b->input = xmalloc(bytes);
    b->expected = xmalloc(bytes);
    b->lib = xmalloc(bytes);
    b->send = xmalloc(bytes);
    b->recv = xmalloc(bytes + GUARD_BYTES);
    b->scratch = xmalloc(bytes);
}

static void free_set(bufset *b)
{
    free(b->input);
    free(b->expected);
    free(b->lib);
    free(b->send);
    free(b->recv);
    free(b->scratch);
}

/* One call's description, drawn from (seed, thread, call number): the same on every rank. */
typedef struct call_spec {
    const dtype_info *t;
    int op, mode, comm;
    size_t count;
    bool in_place;
    uint64_t seed;
} call_spec;

static call_spec draw(const worker *w, long long n)
{
    const uint64_t h = mix64(g_seed ^ mix64((uint64_t)w->id * 0x9E37ull + 1) ^ (uint64_t)n * 0xD1B5ull);
    const unsigned sel = (unsigned)((h >> 8) % 32);
    static const size_t bytes_of[] = { 4096, 16384, 65536, 262144, MAX_BYTES };
    call_spec s;
    s.t = g_pairs_t[h % (uint64_t)g_npairs];
    s.op = g_pairs_op[h % (uint64_t)g_npairs];
    s.comm = (int)(n % w->ncomms);
    s.in_place = (h >> 40) & 1;
    s.seed = mix64(h ^ 0xC0DEull);
    /* Mostly small and medium; 1 MiB once in 32. */
    if (sel < 16)
        s.count = 1 + (h >> 16) % 15;
    else if (sel < 31)
        s.count = bytes_of[(sel - 16) % 4] / s.t->size;
    else
        s.count = MAX_BYTES / s.t->size;
    switch ((h >> 24) % 11) {
    case 10: s.mode = MODE_OTHER; break;
    case 0: case 1: case 2: s.mode = MODE_BLOCKING; break;
    case 3: case 4: s.mode = MODE_WAIT; break;
    case 5: case 6: s.mode = MODE_TEST; break;
    case 7: case 8: s.mode = MODE_ALL_COMMS; break;
    default: s.mode = HAVE_PERSISTENT ? MODE_PERSISTENT : MODE_WAIT; break;
    }
    if (s.mode == MODE_ALL_COMMS && s.count * s.t->size > BATCH_MAX_BYTES)
        s.count = BATCH_MAX_BYTES / s.t->size;
    return s;
}

/* Inputs and reference for spec s on communicator c into buffer set b. */
static void prepare(const call_spec *s, const tcomm *c, bufset *b, void **lib)
{
    const size_t bytes = s->count * s->t->size;
    compute_expected(s->t, s->op, c->size, s->count, s->seed, b->expected, b->scratch);
    *lib = library_expected(s->t, s->op, c->size, s->count, s->seed, b->lib, b->scratch);
    s->t->gen(s->op, c->rank, 0, s->count, s->seed, b->input);
    memset(b->recv, GUARD_FILL, bytes + GUARD_BYTES);
    if (s->in_place)
        memcpy(b->recv, b->input, bytes);
    else
        memcpy(b->send, b->input, bytes);
}

static void verify(worker *w, const call_spec *s, const tcomm *c, const bufset *b, const void *lib, int rc,
                   long long n)
{
    const size_t bytes = s->count * s->t->size;
    size_t first_bad, nlib, nbad;
    char what[256];
    snprintf(what, sizeof what, "call %lld: %s on %s: %s %s count %zu%s", n, mode_name[s->mode], c->name,
             op_name[s->op], s->t->name, s->count, s->in_place ? " MPI_IN_PLACE" : "");
    if (rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, err, &len);
        tfail(w, "%s: returned %d (%s)", what, rc, err);
        return;
    }
    nbad = matrix_compare(s->t, s->count, b->expected, lib, b->recv, &first_bad, &nlib);
    if (nbad) {
        char e[128], g[128];
        s->t->show(b->expected + first_bad * s->t->size, e, sizeof e);
        s->t->show(b->recv + first_bad * s->t->size, g, sizeof g);
        tfail(w, "%s: index %zu expected %s got %s (%zu of %zu wrong)", what, first_bad, e, g, nbad, s->count);
        return;
    }
    if (!bytes_are(b->recv + bytes, GUARD_BYTES, GUARD_FILL)) {
        tfail(w, "%s: bytes written after the receive buffer", what);
        return;
    }
    if (!s->in_place && memcmp(b->send, b->input, bytes) != 0) {
        tfail(w, "%s: send buffer modified", what);
        return;
    }
    w->lib_matches += nlib > 0;
    w->passed++;
}

static int start(const call_spec *s, const tcomm *c, bufset *b, MPI_Request *req)
{
    return MPI_Iallreduce(s->in_place ? MPI_IN_PLACE : b->send, b->recv, (int)s->count, s->t->dt, op_handle(s->op),
                          c->comm, req);
}

/* Element i of rank r's input for an MODE_OTHER call: small, so that sums stay exact. */
static int other_value(uint64_t seed, int r, size_t i)
{
    return (int)((seed + (uint64_t)r * 7919u + i * 31u) % 1000u) - 500;
}

/* MODE_OTHER: one of bcast, allgather, reduce, reduce_scatter_block on c (MPI_INT, MPI_SUM),
 * blocking or nonblocking, each rank's result checked against what it must be. */
static void run_other(worker *w, const call_spec *s, const tcomm *c, long long n)
{
    static const char *const name[] = { "MPI_Bcast", "MPI_Allgather", "MPI_Reduce", "MPI_Reduce_scatter_block" };
    const int which = (int)(s->seed % 4), root = (int)((s->seed >> 8) % (uint64_t)c->size);
    const bool nonblocking = (s->seed >> 16) & 1;
    size_t count = s->count * s->t->size / sizeof(int);
    if (count == 0)
        count = 1;
    if (count * (size_t)c->size * sizeof(int) > MAX_BYTES)
        count = MAX_BYTES / ((size_t)c->size * sizeof(int));
    int *send = (int *)w->big.send, *recv = (int *)w->big.recv;
    const size_t in_elems = which == 3 ? count * (size_t)c->size : count;
    const size_t out_elems = which == 1 ? count * (size_t)c->size : count;
    for (size_t i = 0; i < in_elems; i++)
        send[i] = other_value(s->seed, c->rank, i);
    memset(recv, GUARD_FILL, out_elems * sizeof(int) + GUARD_BYTES);
    if (which == 0 && c->rank == root)
        memcpy(recv, send, count * sizeof(int));
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (which) {
    case 0:
        rc = nonblocking ? MPI_Ibcast(recv, (int)count, MPI_INT, root, c->comm, &req)
                         : MPI_Bcast(recv, (int)count, MPI_INT, root, c->comm);
        break;
    case 1:
        rc = nonblocking ? MPI_Iallgather(send, (int)count, MPI_INT, recv, (int)count, MPI_INT, c->comm, &req)
                         : MPI_Allgather(send, (int)count, MPI_INT, recv, (int)count, MPI_INT, c->comm);
        break;
    case 2:
        rc = nonblocking ? MPI_Ireduce(send, recv, (int)count, MPI_INT, MPI_SUM, root, c->comm, &req)
                         : MPI_Reduce(send, recv, (int)count, MPI_INT, MPI_SUM, root, c->comm);
        break;
    default:
        rc = nonblocking ? MPI_Ireduce_scatter_block(send, recv, (int)count, MPI_INT, MPI_SUM, c->comm, &req)
                         : MPI_Reduce_scatter_block(send, recv, (int)count, MPI_INT, MPI_SUM, c->comm);
        break;
    }
    if (rc == MPI_SUCCESS && nonblocking)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    char what[256];
    snprintf(what, sizeof what, "call %lld: %s%s on %s: count %d root %d", n, nonblocking ? "nonblocking " : "",
             name[which], c->name, (int)count, root);
    if (rc != MPI_SUCCESS) {
        tfail(w, "%s: returned %d", what, rc);
        return;
    }
    const bool checked = which != 2 || c->rank == root; /* reduce: only the root's buffer is defined */
    for (size_t i = 0; checked && i < out_elems; i++) {
        int want = 0;
        if (which == 0)
            want = other_value(s->seed, root, i);
        else if (which == 1)
            want = other_value(s->seed, (int)(i / count), i % count);
        else
            for (int r = 0; r < c->size; r++)
                want += other_value(s->seed, r, which == 3 ? (size_t)c->rank * count + i : i);
        if (recv[i] != want) {
            tfail(w, "%s: index %zu expected %d got %d", what, i, want, recv[i]);
            return;
        }
    }
    if (checked && !bytes_are((unsigned char *)recv + out_elems * sizeof(int), GUARD_BYTES, GUARD_FILL)) {
        tfail(w, "%s: bytes written after the receive buffer", what);
        return;
    }
    w->passed++;
}

static void run_call(worker *w, long long n)
{
    call_spec s = draw(w, n);
    tcomm *c = &w->comms[s.comm];
    MPI_Request req = MPI_REQUEST_NULL;
    void *lib;
    int rc, flag = 0;

    w->calls[s.mode]++;
    if (s.mode == MODE_OTHER) {
        run_other(w, &s, c, n);
        return;
    }
    if (s.mode == MODE_ALL_COMMS) {
        MPI_Request reqs[MAX_COMMS];
        MPI_Status st[MAX_COMMS];
        void *libs[MAX_COMMS];
        int rcs[MAX_COMMS];
        for (int k = 0; k < w->ncomms; k++) {
            prepare(&s, &w->comms[k], &w->small[k], &libs[k]);
            rcs[k] = start(&s, &w->comms[k], &w->small[k], &reqs[k]);
            if (rcs[k] != MPI_SUCCESS)
                reqs[k] = MPI_REQUEST_NULL;
        }
        rc = MPI_Waitall(w->ncomms, reqs, st);
        for (int k = 0; k < w->ncomms; k++) {
            if (rcs[k] == MPI_SUCCESS)
                rcs[k] = rc == MPI_ERR_IN_STATUS ? st[k].MPI_ERROR : rc;
            verify(w, &s, &w->comms[k], &w->small[k], libs[k], rcs[k], n);
        }
        return;
    }
    prepare(&s, c, &w->big, &lib);
    switch (s.mode) {
    case MODE_BLOCKING:
        rc = MPI_Allreduce(s.in_place ? MPI_IN_PLACE : w->big.send, w->big.recv, (int)s.count, s.t->dt,
                           op_handle(s.op), c->comm);
        break;
    case MODE_WAIT:
        rc = start(&s, c, &w->big, &req);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        break;
    case MODE_TEST:
        rc = start(&s, c, &w->big, &req);
        while (rc == MPI_SUCCESS && !flag)
            rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        break;
    default:
#if HAVE_PERSISTENT
        /* Two rounds: new inputs in the same buffers for the second. */
        rc = ALLREDUCE_INIT(s.in_place ? MPI_IN_PLACE : w->big.send, w->big.recv, (int)s.count, s.t->dt,
                            op_handle(s.op), c->comm, MPI_INFO_NULL, &req);
        for (int round = 0; round < 2 && rc == MPI_SUCCESS; round++) {
            if (round == 1) {
                verify(w, &s, c, &w->big, lib, rc, n);
                s.seed = mix64(s.seed + 1);
                prepare(&s, c, &w->big, &lib);
            }
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS)
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        if (req != MPI_REQUEST_NULL)
            MPI_Request_free(&req);
#else
        rc = MPI_ERR_OTHER;
#endif
        break;
    }
    verify(w, &s, c, &w->big, lib, rc, n);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    const double t0 = now();
    for (long long n = 0;; n++) {
        /* Every 8 calls: stop once any rank has run SECONDS (agreed on a dup of world). */
        if (n % 8 == 0) {
            int late = now() - t0 > g_seconds, any = 1;
            const int rc = MPI_Allreduce(&late, &any, 1, MPI_INT, MPI_MAX, w->comms[0].comm);
            if (rc != MPI_SUCCESS) {
                tfail(w, "stop agreement on %s returned %d", w->comms[0].name, rc);
                break;
            }
            if (any)
                break;
        }
        run_call(w, n);
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Two threads of rank 0 on one communicator at once                         */
/* ------------------------------------------------------------------------ */

#define CONC_COUNT 1000

typedef struct conc_thread {
    MPI_Comm comm, signal;
    double delay;
    int rc, out[CONC_COUNT];
    pthread_t tid;
} conc_thread;

static int g_signalled; /* rank 0: the others have been told to join */
static pthread_mutex_t g_signal_lock = PTHREAD_MUTEX_INITIALIZER;

static void signal_others(MPI_Comm signal)
{
    int size, go = 1;
    pthread_mutex_lock(&g_signal_lock);
    if (!g_signalled) {
        g_signalled = 1;
        MPI_Comm_size(signal, &size);
        for (int r = 1; r < size; r++)
            MPI_Send(&go, 1, MPI_INT, r, 0, signal);
    }
    pthread_mutex_unlock(&g_signal_lock);
}

static void *conc_main(void *arg)
{
    conc_thread *c = arg;
    int in[CONC_COUNT];
    if (c->delay > 0) {
        struct timespec ts = { 0, (long)(c->delay * 1e9) };
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < CONC_COUNT; i++)
        in[i] = i;
    c->rc = MPI_Allreduce(in, c->out, CONC_COUNT, MPI_INT, MPI_SUM, c->comm);
    /* The refused call returns at once: now let the others join the one that waits. */
    if (c->rc != MPI_SUCCESS)
        signal_others(c->signal);
    return NULL;
}

static void section_concurrent(void)
{
    MPI_Comm comm, signal;
    int rank, size, in[CONC_COUNT], out[CONC_COUNT], rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &signal);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    for (int i = 0; i < CONC_COUNT; i++)
        in[i] = i;
    /* Set-up first (a collective of its own). */
    MPI_Allreduce(in, out, CONC_COUNT, MPI_INT, MPI_SUM, comm);
    if (rank == 0) {
        conc_thread t[2] = { { .comm = comm, .signal = signal, .delay = 0 },
                             { .comm = comm, .signal = signal, .delay = 0.3 } };
        int errors = 0, good = 0;
        for (int k = 0; k < 2; k++)
            pthread_create(&t[k].tid, NULL, conc_main, &t[k]);
        for (int k = 0; k < 2; k++)
            pthread_join(t[k].tid, NULL);
        /* Neither was refused: the others have not been told; tell them now. */
        signal_others(signal);
        for (int k = 0; k < 2; k++) {
            if (t[k].rc != MPI_SUCCESS) {
                errors++;
                continue;
            }
            bool right = true;
            for (int i = 0; i < CONC_COUNT; i++)
                right &= t[k].out[i] == size * i;
            good += right;
        }
        if (errors == 1 && good == 1)
            g_passed++;
        else
            fail("concurrent: two threads' MPI_Allreduce on one communicator: %d refused, %d right (expected 1 "
                 "and 1)",
                 errors, good);
    } else {
        /* Join when rank 0 says so; after 20 s regardless (a refusal that never came). */
        MPI_Request r;
        int go = 0, flag = 0;
        const double t0 = now();
        MPI_Irecv(&go, 1, MPI_INT, 0, 0, signal, &r);
        while (!flag && now() - t0 < 20.0)
            MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            fail("concurrent: rank 0 did not report a refused call within 20 s");
            rc = MPI_Allreduce(in, out, CONC_COUNT, MPI_INT, MPI_SUM, comm);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Allreduce(in, out, CONC_COUNT, MPI_INT, MPI_SUM, comm);
            if (rc != MPI_SUCCESS)
                fail("concurrent: the late rank's MPI_Allreduce returned %d", rc);
            else
                g_passed++;
        }
    }
    /* Nothing was done by the refused call: the communicator still works. */
    for (int i = 0; i < CONC_COUNT; i++)
        in[i] = rank + i;
    rc = MPI_Allreduce(in, out, CONC_COUNT, MPI_INT, MPI_SUM, comm);
    if (rc != MPI_SUCCESS || out[CONC_COUNT - 1] != size * (CONC_COUNT - 1) + size * (size - 1) / 2)
        fail("concurrent: the communicator does not work afterwards (rc %d)", rc);
    else
        g_passed++;
    MPI_Comm_free(&signal);
    MPI_Comm_free(&comm);
}

/* ------------------------------------------------------------------------ */

static void usage(void)
{
    if (g_world_rank == 0)
        fprintf(stderr, "usage: " PROGRAM " [--threads T] [--comms C] [--seconds S] [--seed N] [--print N] "
                        "[--warm-up]\n");
}

int main(int argc, char **argv)
{
    int provided = 0, nthreads = 4, ncomms = 2, warm_up = 0;
    long long totals[3], calls[NUM_MODES] = { 0 }, lib_matches = 0;
    const char *expect = getenv("GPURDMA_EXPECT_USED");
    static const char *const pvar_names[2] = { "coll_gpurdma_calls", "coll_gpurdma_nonblocking_calls" };
    static worker workers[MAX_THREADS];
    pvars pv;
    double t0;

    MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN); /* check_types probes ops on it */
    g_expect_used = expect && !strcmp(expect, "1");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nthreads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--comms") && i + 1 < argc) {
            ncomms = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            g_seconds = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            g_seed = strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--print") && i + 1 < argc) {
            max_printed_failures = strtoll(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--warm-up")) {
            warm_up = 1;
        } else {
            nthreads = 0;
            break;
        }
    }
    if (nthreads < 1 || nthreads > MAX_THREADS || ncomms < 1 || ncomms > MAX_COMMS || !(g_seconds > 0)) {
        usage();
        MPI_Finalize();
        return 2;
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        fail("MPI_THREAD_MULTIPLE not provided (got %d)", provided);
        check_totals(0, totals);
        return check_finish(totals);
    }
    pvars_watch(&pv, pvar_names, 2);

    init_types();
    check_types(false);
    {
        const struct { MPI_Datatype dt; int op; } want[] = {
            { MPI_INT, OP_SUM },       { MPI_FLOAT, OP_SUM },  { MPI_DOUBLE, OP_MAX }, { MPI_UINT64_T, OP_BXOR },
            { MPI_SHORT, OP_MIN },     { MPI_LONG, OP_PROD },  { MPI_2INT, OP_MINLOC }, { MPI_C_BOOL, OP_LOR },
            { MPI_DOUBLE, OP_SUM },    { MPI_UNSIGNED_CHAR, OP_BAND },
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            const dtype_info *t = find_type(want[i].dt);
            if (t && (t->ops & BIT(want[i].op))) {
                g_pairs_t[g_npairs] = t;
                g_pairs_op[g_npairs++] = want[i].op;
            }
        }
    }

    if (warm_up) {
        int zero = 0, sum;
        MPI_Allreduce(&zero, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    /* Communicators, made by the main thread in one order on every rank. */
    for (int t = 0; t < nthreads; t++) {
        worker *w = &workers[t];
        w->id = t;
        w->ncomms = ncomms;
        for (int k = 0; k < ncomms; k++) {
            tcomm *c = &w->comms[k];
            if (k == 0 || (t + k) % 2 == 0) {
                MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
                snprintf(c->name, sizeof c->name, "t%d.dup%d", t, k);
            } else {
                MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, g_world_size - g_world_rank, &c->comm);
                snprintf(c->name, sizeof c->name, "t%d.split%d", t, k);
            }
            MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
            MPI_Comm_rank(c->comm, &c->rank);
            MPI_Comm_size(c->comm, &c->size);
        }
        alloc_set(&w->big, MAX_BYTES);
        for (int k = 0; k < ncomms; k++)
            alloc_set(&w->small[k], BATCH_MAX_BYTES);
    }

    t0 = MPI_Wtime();
    for (int t = 0; t < nthreads; t++)
        pthread_create(&workers[t].tid, NULL, worker_main, &workers[t]);
    for (int t = 0; t < nthreads; t++) {
        worker *w = &workers[t];
        pthread_join(w->tid, NULL);
        g_passed += w->passed;
        g_failed += w->failed;
        lib_matches += w->lib_matches;
        for (int m = 0; m < NUM_MODES; m++)
            calls[m] += w->calls[m];
        for (int k = 0; k < w->ncomms; k++) {
            MPI_Comm_free(&w->comms[k].comm);
            free_set(&w->small[k]);
        }
        free_set(&w->big);
    }
    if (g_world_rank == 0)
        printf("%d threads x %d communicators, %.1f s: %lld MPI_Allreduce, %lld MPI_Iallreduce+MPI_Wait, %lld "
               "MPI_Iallreduce+MPI_Test, %lld all-comms MPI_Iallreduce batches, %lld persistent, %lld bcast, "
               "allgather, reduce or reduce-scatter (rank 0)\n",
               nthreads, ncomms, MPI_Wtime() - t0, calls[MODE_BLOCKING], calls[MODE_WAIT], calls[MODE_TEST],
               calls[MODE_ALL_COMMS], calls[MODE_PERSISTENT], calls[MODE_OTHER]);

    if (g_expect_used && g_world_size >= 2)
        section_concurrent();

    if (g_expect_used && g_world_size >= 2) {
        const unsigned long long all = pvars_read(&pv, 0), nb = pvars_read(&pv, 1);
        if (!pv.found[0] || !pv.found[1])
            fail("GPURDMA_EXPECT_USED=1 but gpurdma's MPI_T counters are missing");
        else if (all == 0 || nb == 0)
            fail("GPURDMA_EXPECT_USED=1 but gpurdma counted %llu calls, %llu nonblocking", all, nb);
        else
            g_passed++;
        if (g_world_rank == 0)
            printf("gpurdma counted %llu calls, %llu of them nonblocking (rank 0, MPI_T)\n", all, nb);
    }
    pvars_done(&pv);
    MPI_T_finalize();
    check_totals(lib_matches, totals);
    return check_finish(totals);
}
