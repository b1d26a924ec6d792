/*
 * nonblocking_check: MPI_Iallreduce and persistent allreduce (MPI_Allreduce_init, or
 * MPIX_Allreduce_init from Open MPI 4.1's pcollreq extension) over allreduce_check's
 * datatype x op matrix (matrix.h).  Every result is checked element by element
 * against the rank-order reference, the bytes around the receive buffer and the send
 * buffer must be left alone, and a hash of every result must be the same on every
 * rank of its communicator.
 *
 * Sections:
 *   matrix      type x op x count x {normal, MPI_IN_PLACE} per communicator, BATCH
 *               requests outstanding at once, completed in turn by MPI_Waitall,
 *               MPI_Waitany, MPI_Testall and MPI_Testsome loops, MPI_Wait in reverse
 *               and in random (per rank) order, MPI_Test round robin
 *   persistent  the same matrix: init once per batch, ROUNDS x (new inputs in the
 *               same buffers, MPI_Startall / MPI_Start forwards / backwards, complete
 *               as above), MPI_Request_free
 *   comms       requests on four communicators outstanding at once
 *   ordering    MPI_Iallreduce and a persistent start mixed with blocking
 *               MPI_Allreduce on the same or another communicator (some ranks wait
 *               before the blocking call, some after); again with a user-defined op
 *               (the previous module's request) before gpurdma's blocking call
 *   free        MPI_Request_free of an active MPI_Iallreduce (alone, and one of
 *               three); the buffer after a later blocking allreduce and a barrier
 *   bitident    random float/double SUM (order-dependent): the same bits on every
 *               rank, within the error bound of the exact sum
 *
 * Each communicator gets one blocking MPI_Allreduce as it is made: gpurdma sets a
 * communicator up in its first blocking collective and hands on nonblocking and
 * persistent calls made before it (intercomm_check covers those).
 *
 * GPURDMA_EXPECT_USED=1 (set by the runner with gpurdma on): gpurdma must have taken
 * the calls (MPI_T counters coll_gpurdma_nonblocking_calls and
 * coll_gpurdma_persistent_calls above zero), MPI_Request_free of an active request
 * must succeed and the freed request be complete once a later call on its
 * communicator returns, and a blocking call must complete the nonblocking ones started
 * before it.  Without it these are notes: MPI 3.1 (5.12) makes freeing a nonblocking
 * collective's request erroneous, and Open MPI's libnbc refuses it (MPI_ERR_REQUEST).
 *
 * Usage: nonblocking_check [--quick] [--strict] [--seed N] [--print N] [--verbose]
 *                          [--batch N] [--rounds N] [--only SECTION,...]
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM "nonblocking_check"
#define GUARD_BYTES 64 /* checked before and after every receive buffer */
#define GUARD_FILL 0x5A
#define MAX_BATCH 64

#include "check_common.h" /* fail, xmalloc, summary */
#include "comm_cases.h"   /* describe_comm, create_reversed_subset */
#include "matrix.h"       /* types, ops, inputs, reference fold */
#include "pvars.h"

#include "persistent_allreduce.h"

static bool g_expect_used;          /* GPURDMA_EXPECT_USED=1 */
static long long g_lib_matches;     /* results accepted as the library's own op */
static long long g_nb_issued;       /* MPI_Iallreduce calls (predefined ops) started */
static long long g_p_issued;        /* persistent starts */
static int g_batch = 16, g_rounds = 3;
static unsigned g_batches;          /* picks each batch's completion method */

/* ------------------------------------------------------------------------ */
/* Communicators                                                             */
/* ------------------------------------------------------------------------ */

typedef struct comm_case {
    char name[48];
    MPI_Comm comm; /* MPI_COMM_NULL on ranks outside it */
    int rank, size;
    bool all_types; /* whole matrix; else the T_REP types only */
    bool owned;
    uint64_t hash; /* of every result on it since the last compare */
} comm_case;

enum { C_WORLD, C_DUP, C_SPLIT, C_REVERSED, C_SELF, C_DUP2, NUM_COMMS };
static comm_case comms[NUM_COMMS];

static void set_comm(int i, const char *name, MPI_Comm c, bool all_types, bool owned)
{
    comm_case *cc = &comms[i];
    cc->comm = c;
    cc->all_types = all_types;
    cc->owned = owned;
    cc->hash = HASH_INIT;
    describe_comm(c, name, cc->name, sizeof cc->name, &cc->rank, &cc->size);
}

static void create_comms(void)
{
    int rank, size;
    MPI_Comm c;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    set_comm(C_WORLD, "world", MPI_COMM_WORLD, true, false);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set_comm(C_DUP, "dup", c, false, true);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &c);
    set_comm(C_SPLIT, "split_parity_reversed", c, false, true);
    c = create_reversed_subset();
    set_comm(C_REVERSED, "create_group_reversed", c, false, true);
    set_comm(C_SELF, "self", MPI_COMM_SELF, false, false);
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set_comm(C_DUP2, "dup2", c, false, true);
    /* gpurdma sets a communicator up in its first blocking collective and hands on the
     * nonblocking and persistent calls made before it (intercomm_check tests those): a
     * blocking call first, so that the strict checks below are gpurdma's. */
    for (int i = 0; i < NUM_COMMS; i++) {
        int one = 1;
        if (comms[i].comm != MPI_COMM_NULL &&
            MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, comms[i].comm) != MPI_SUCCESS)
            fail("comm %s: the first blocking allreduce failed", comms[i].name);
    }
}

static void free_comms(void)
{
    for (int i = 0; i < NUM_COMMS; i++)
        if (comms[i].owned && comms[i].comm != MPI_COMM_NULL)
            MPI_Comm_free(&comms[i].comm);
}

/* Every rank of each communicator must have hashed the same result bits. */
static void compare_hashes(const char *section)
{
    for (int i = 0; i < NUM_COMMS; i++) {
        comm_case *cc = &comms[i];
        uint64_t lo = 0, hi = 0;
        if (cc->comm == MPI_COMM_NULL)
            continue;
        if (MPI_Allreduce(&cc->hash, &lo, 1, MPI_UINT64_T, MPI_MIN, cc->comm) != MPI_SUCCESS ||
            MPI_Allreduce(&cc->hash, &hi, 1, MPI_UINT64_T, MPI_MAX, cc->comm) != MPI_SUCCESS)
            fail("%s: comm %s: hash exchange failed", section, cc->name);
        else if (lo != hi)
            fail("%s: comm %s: results differ between ranks (hash %016" PRIx64 " on rank %d, min %016" PRIx64
                 " max %016" PRIx64 ")",
                 section, cc->name, cc->hash, cc->rank, lo, hi);
        else
            g_passed++;
        cc->hash = HASH_INIT;
    }
}

/* ------------------------------------------------------------------------ */
/* A case: one request's buffers, reference and verdict                      */
/* ------------------------------------------------------------------------ */

typedef struct nb_case {
    comm_case *cc;
    const dtype_info *t;
    int op;
    size_t count;
    bool in_place;
    int salt;       /* the round: new inputs, same buffers */
    int slot;       /* buffers: one set per position in a batch */
    void *lib;      /* the library's own fold where it deviates, else NULL */
    unsigned char *send, *recv;
    int rc;         /* of the start call, then of the completion */
    bool persistent;
    int method;     /* how it was completed, -1: by a blocking call or MPI_Wait */
    bool user_op;   /* the call gets g_user_sum (same result as MPI_SUM on MPI_INT) */
} nb_case;

/* Ways to complete a batch (complete() below). */
enum { M_WAITALL, M_WAITANY, M_TESTALL, M_TESTSOME, M_WAIT_REVERSE, M_WAIT_RANDOM, M_TEST_EACH, NUM_METHODS };
static const char *const method_name[NUM_METHODS] = {
    "MPI_Waitall", "MPI_Waitany", "MPI_Testall loop", "MPI_Testsome loop",
    "MPI_Wait in reverse order", "MPI_Wait in random order", "MPI_Test round robin",
};

enum { S_INPUT, S_EXPECTED, S_LIB, S_SEND, S_RECV, NUM_S };
static void *g_slot[MAX_BATCH][NUM_S];
static size_t g_slot_size[MAX_BATCH][NUM_S];
static void *g_scratch;
static size_t g_scratch_size;

/* Grown as needed, never moved while the size fits: persistent requests keep theirs. */
static void *slot_buf(int slot, int kind, size_t bytes)
{
    if (g_slot_size[slot][kind] < bytes || !g_slot[slot][kind]) {
        free(g_slot[slot][kind]);
        g_slot[slot][kind] = xmalloc(bytes);
        g_slot_size[slot][kind] = bytes;
    }
    return g_slot[slot][kind];
}

static void *scratch(size_t bytes)
{
    if (g_scratch_size < bytes || !g_scratch) {
        free(g_scratch);
        g_scratch = xmalloc(bytes);
        g_scratch_size = bytes;
    }
    return g_scratch;
}

static void free_bufs(void)
{
    for (int s = 0; s < MAX_BATCH; s++)
        for (int k = 0; k < NUM_S; k++)
            free(g_slot[s][k]);
    free(g_scratch);
}

static void describe(const nb_case *c, char *what, size_t len)
{
    snprintf(what, len, "%s comm %s rank %d: %s %s count %zu%s round %d%s%s",
             c->persistent ? PERSISTENT_API : "MPI_Iallreduce", c->cc->name, c->cc->rank, op_name[c->op],
             c->t->name, c->count, c->in_place ? " MPI_IN_PLACE" : "", c->salt, c->method >= 0 ? ", by " : "",
             c->method >= 0 ? method_name[c->method] : "");
}

/* Inputs of round c->salt into the case's buffers (the same addresses every round),
 * the reference, and guard bytes around the receive buffer. */
static void prepare(nb_case *c)
{
    const size_t bytes = c->count * c->t->size;
    const uint64_t seed = case_seed((int)(c->cc - comms), c->t, c->op, c->count, c->salt);
    void *input = slot_buf(c->slot, S_INPUT, bytes), *expected = slot_buf(c->slot, S_EXPECTED, bytes);
    unsigned char *recvbase = slot_buf(c->slot, S_RECV, GUARD_BYTES + bytes + GUARD_BYTES);
    void *tmp = scratch(bytes);

    compute_expected(c->t, c->op, c->cc->size, c->count, seed, expected, tmp);
    c->lib = library_expected(c->t, c->op, c->cc->size, c->count, seed, slot_buf(c->slot, S_LIB, bytes), tmp);
    c->t->gen(c->op, c->cc->rank, 0, c->count, seed, input);
    memset(recvbase, GUARD_FILL, GUARD_BYTES + bytes + GUARD_BYTES);
    c->recv = recvbase + GUARD_BYTES;
    c->send = NULL;
    if (c->in_place) {
        memcpy(c->recv, input, bytes);
    } else {
        c->send = slot_buf(c->slot, S_SEND, bytes);
        memcpy(c->send, input, bytes);
    }
    c->rc = MPI_SUCCESS;
    c->method = -1;
}

static void report_rc(const nb_case *c, const char *call, int rc)
{
    char what[256], err[MPI_MAX_ERROR_STRING];
    int len = 0;
    describe(c, what, sizeof what);
    MPI_Error_string(rc, err, &len);
    fail("%s: %s returned %d (%s)", what, call, rc, err);
}

/* Check a completed case and fold its result into its communicator's hash. */
static void check_case(nb_case *c)
{
    const size_t bytes = c->count * c->t->size;
    const void *input = g_slot[c->slot][S_INPUT], *expected = g_slot[c->slot][S_EXPECTED];
    char what[256], e_str[128], g_str[128];
    size_t first_bad, nlib, nbad;

    if (c->rc != MPI_SUCCESS) {
        report_rc(c, "completion", c->rc);
        return;
    }
    describe(c, what, sizeof what);
    nbad = matrix_compare(c->t, c->count, expected, c->lib, c->recv, &first_bad, &nlib);
    if (nbad) {
        c->t->show((const unsigned char *)expected + first_bad * c->t->size, e_str, sizeof e_str);
        c->t->show(c->recv + first_bad * c->t->size, g_str, sizeof g_str);
        fail("%s: index %zu expected %s got %s (%zu of %zu elements wrong)", what, first_bad, e_str, g_str, nbad,
             c->count);
        return;
    }
    if (nlib)
        g_lib_matches++;
    if (!bytes_are(c->recv - GUARD_BYTES, GUARD_BYTES, GUARD_FILL) ||
        !bytes_are(c->recv + bytes, GUARD_BYTES, GUARD_FILL)) {
        fail("%s: bytes written outside the receive buffer", what);
        return;
    }
    if (!c->in_place && memcmp(c->send, input, bytes) != 0) {
        fail("%s: send buffer modified", what);
        return;
    }
    /* Padding bytes (long double, value-index pairs) are not part of the result. */
    if (c->t->flags & T_BITWISE)
        c->cc->hash = hash_bytes(c->cc->hash, c->recv, bytes);
    g_passed++;
}

/* A user-defined op: the component hands such calls to the previous module (libnbc). */
static MPI_Op g_user_sum;

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int *a = in;
    int *b = inout;
    (void)dt;
    for (int i = 0; i < *len; i++)
        b[i] = (int)((unsigned)b[i] + (unsigned)a[i]); /* wraps, as the reference does */
}

static int start_nonblocking(nb_case *c, MPI_Request *req)
{
    c->persistent = false;
    c->rc = MPI_Iallreduce(c->in_place ? MPI_IN_PLACE : c->send, c->recv, (int)c->count, c->t->dt,
                           c->user_op ? g_user_sum : op_handle(c->op), c->cc->comm, req);
    if (c->rc != MPI_SUCCESS) {
        report_rc(c, "MPI_Iallreduce", c->rc);
        *req = MPI_REQUEST_NULL;
        return c->rc;
    }
    if (!c->user_op)
        g_nb_issued++;
    return MPI_SUCCESS;
}

#if HAVE_PERSISTENT
static int init_persistent(nb_case *c, MPI_Request *req)
{
    c->persistent = true;
    c->rc = ALLREDUCE_INIT(c->in_place ? MPI_IN_PLACE : c->send, c->recv, (int)c->count, c->t->dt,
                           op_handle(c->op), c->cc->comm, MPI_INFO_NULL, req);
    if (c->rc != MPI_SUCCESS) {
        report_rc(c, PERSISTENT_API, c->rc);
        *req = MPI_REQUEST_NULL;
    }
    return c->rc;
}
#endif

/* ------------------------------------------------------------------------ */
/* Completion, in one of several ways                                        */
/* ------------------------------------------------------------------------ */


/* A permutation of 0..n-1 that differs between ranks and batches. */
static void shuffle(int *idx, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        idx[i] = i;
    for (int i = n - 1; i > 0; i--) {
        seed = mix64(seed);
        const int j = (int)(seed % (uint64_t)(i + 1));
        const int tmp = idx[i];
        idx[i] = idx[j];
        idx[j] = tmp;
    }
}

/* Complete every active request of reqs[0..n) (null and inactive ones are allowed);
 * record each error in cases[i].rc. */
static void complete(nb_case *cases, MPI_Request *reqs, int n, int method)
{
    MPI_Status st[MAX_BATCH];
    int idx[MAX_BATCH], rc, flag = 0, outcount, done = 0;

    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL)
            cases[i].method = method;

    switch (method) {
    case M_WAITALL:
        rc = MPI_Waitall(n, reqs, st);
        if (rc == MPI_ERR_IN_STATUS) {
            for (int i = 0; i < n; i++)
                if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING)
                    cases[i].rc = st[i].MPI_ERROR;
        } else if (rc != MPI_SUCCESS) {
            for (int i = 0; i < n; i++)
                cases[i].rc = rc;
        }
        return;
    case M_WAITANY:
        for (int k = 0; k < n; k++) {
            int i = MPI_UNDEFINED;
            MPI_Status s;
            rc = MPI_Waitany(n, reqs, &i, &s);
            if (i == MPI_UNDEFINED) {
                if (rc != MPI_SUCCESS)
                    for (int j = 0; j < n; j++)
                        cases[j].rc = rc;
                break;
            }
            if (rc != MPI_SUCCESS)
                cases[i].rc = rc;
        }
        return;
    case M_TESTALL:
        while (!flag) {
            rc = MPI_Testall(n, reqs, &flag, st);
            if (rc == MPI_ERR_IN_STATUS) {
                for (int i = 0; i < n; i++)
                    if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING)
                        cases[i].rc = st[i].MPI_ERROR;
                break;
            } else if (rc != MPI_SUCCESS) {
                for (int i = 0; i < n; i++)
                    cases[i].rc = rc;
                break;
            }
        }
        return;
    case M_TESTSOME:
        for (;;) {
            rc = MPI_Testsome(n, reqs, &outcount, idx, st);
            if (outcount == MPI_UNDEFINED)
                return;
            for (int k = 0; k < outcount; k++)
                if (rc == MPI_ERR_IN_STATUS && st[k].MPI_ERROR != MPI_SUCCESS)
                    cases[idx[k]].rc = st[k].MPI_ERROR;
            if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
                for (int i = 0; i < n; i++)
                    cases[i].rc = rc;
                return;
            }
        }
    case M_WAIT_REVERSE:
    case M_WAIT_RANDOM:
        if (method == M_WAIT_RANDOM)
            shuffle(idx, n, mix64(g_seed ^ (uint64_t)g_world_rank * 977 ^ g_batches));
        for (int k = 0; k < n; k++) {
            const int i = method == M_WAIT_REVERSE ? n - 1 - k : idx[k];
            rc = MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                cases[i].rc = rc;
        }
        return;
    default: /* M_TEST_EACH: one MPI_Test per request per pass, random order */
        shuffle(idx, n, mix64(g_seed ^ (uint64_t)g_world_rank * 131 ^ g_batches));
        {
            bool finished[MAX_BATCH] = { false };
            while (done < n) {
                for (int k = 0; k < n; k++) {
                    const int i = idx[k];
                    if (finished[i])
                        continue;
                    rc = MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
                    if (rc != MPI_SUCCESS)
                        cases[i].rc = rc;
                    if (flag || rc != MPI_SUCCESS) {
                        finished[i] = true;
                        done++;
                    }
                }
            }
        }
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* Case lists                                                                */
/* ------------------------------------------------------------------------ */

/* Counts: `all` on every communicator, else world only; `big` only for the T_REP
 * types with their first op, on world and dup. */
typedef struct { size_t count; bool all, big; } count_spec;
static const count_spec counts_full[] = {
    { 0, true, false }, { 1, true, false }, { 7, false, false }, { 1000, true, false }, { 65537, true, true },
};
/* --quick: each (type, op) once per communicator, at one of these counts in turn,
 * normal and in place in turn. */
static const count_spec counts_quick[] = {
    { 1, true, false }, { 1000, true, false }, { 7, true, false },
};

static int first_op(unsigned ops)
{
    int op = 0;
    while (op < NUM_OPS && !(ops & BIT(op)))
        op++;
    return op;
}

/* The matrix on one communicator, in the same order on every rank. */
static int matrix_cases(int ci, bool quick, nb_case **out)
{
    comm_case *cc = &comms[ci];
    const count_spec *counts = quick ? counts_quick : counts_full;
    const size_t ncounts = quick ? sizeof counts_quick / sizeof *counts_quick
                                 : sizeof counts_full / sizeof *counts_full;
    int n = 0, cap = 256, pair = 0;
    nb_case *list = xmalloc(sizeof *list * (size_t)cap);
    for (int ti = 0; ti < ntypes; ti++) {
        const dtype_info *t = &types[ti];
        const bool rep = t->flags & T_REP;
        if (!cc->all_types && !rep)
            continue;
        for (int op = 0; op < NUM_OPS; op++) {
            if (!(t->ops & BIT(op)))
                continue;
            pair++;
            for (size_t k = 0; k < ncounts; k++) {
                if (quick && k != (size_t)pair % ncounts)
                    continue;
                if (counts[k].big && (!rep || op != first_op(t->ops) || (ci != C_WORLD && ci != C_DUP)))
                    continue;
                if (!counts[k].all && ci != C_WORLD)
                    continue;
                for (int ip = 0; ip <= 1; ip++) {
                    if (quick && ip != (pair / 3) % 2)
                        continue;
                    if (n == cap) {
                        cap *= 2;
                        nb_case *bigger = xmalloc(sizeof *list * (size_t)cap);
                        memcpy(bigger, list, sizeof *list * (size_t)n);
                        free(list);
                        list = bigger;
                    }
                    nb_case c = { .cc = cc, .t = t, .op = op, .count = counts[k].count, .in_place = ip };
                    list[n++] = c;
                }
            }
        }
    }
    *out = list;
    return n;
}

/* ------------------------------------------------------------------------ */
/* Sections                                                                  */
/* ------------------------------------------------------------------------ */

/* Start a batch of MPI_Iallreduce, complete it in this batch's way, check. */
static void run_nonblocking_batch(nb_case *batch, int n)
{
    MPI_Request reqs[MAX_BATCH];
    for (int i = 0; i < n; i++) {
        batch[i].slot = i;
        prepare(&batch[i]);
    }
    for (int i = 0; i < n; i++)
        start_nonblocking(&batch[i], &reqs[i]);
    complete(batch, reqs, n, (int)(g_batches++ % NUM_METHODS));
    for (int i = 0; i < n; i++)
        check_case(&batch[i]);
}

static void section_matrix(bool quick)
{
    for (int ci = 0; ci < NUM_COMMS; ci++) {
        nb_case *list;
        int n;
        if (comms[ci].comm == MPI_COMM_NULL || ci == C_DUP2)
            continue;
        n = matrix_cases(ci, quick, &list);
        for (int at = 0; at < n; at += g_batch)
            run_nonblocking_batch(list + at, n - at < g_batch ? n - at : g_batch);
        free(list);
    }
    compare_hashes("matrix");
}

#if HAVE_PERSISTENT
/* Init a batch once; each round new inputs in the same buffers, a start in one of
 * three ways (the same on every rank), completion, check; then free. */
static void run_persistent_batch(nb_case *batch, int n)
{
    MPI_Request reqs[MAX_BATCH];
    for (int i = 0; i < n; i++) {
        batch[i].slot = i;
        batch[i].salt = 0;
        prepare(&batch[i]);
        init_persistent(&batch[i], &reqs[i]);
    }
    for (int round = 0; round < g_rounds; round++) {
        int started[MAX_BATCH] = { 0 };
        if (round > 0)
            for (int i = 0; i < n; i++) {
                batch[i].salt = round;
                prepare(&batch[i]);
            }
        if (round % 3 == 0) {
            int k = 0, rc;
            MPI_Request active[MAX_BATCH];
            for (int i = 0; i < n; i++)
                if (reqs[i] != MPI_REQUEST_NULL)
                    active[k++] = reqs[i];
            rc = MPI_Startall(k, active);
            if (rc != MPI_SUCCESS) {
                report_rc(&batch[0], "MPI_Startall", rc);
                for (int i = 0; i < n; i++)
                    batch[i].rc = rc;
            }
            for (int i = 0; i < n; i++)
                started[i] = rc == MPI_SUCCESS && reqs[i] != MPI_REQUEST_NULL;
        } else {
            for (int k = 0; k < n; k++) {
                const int i = round % 3 == 1 ? k : n - 1 - k;
                if (reqs[i] == MPI_REQUEST_NULL)
                    continue;
                batch[i].rc = MPI_Start(&reqs[i]);
                if (batch[i].rc != MPI_SUCCESS)
                    report_rc(&batch[i], "MPI_Start", batch[i].rc);
                started[i] = batch[i].rc == MPI_SUCCESS;
            }
        }
        for (int i = 0; i < n; i++)
            if (started[i])
                g_p_issued++;
        complete(batch, reqs, n, (int)(g_batches++ % NUM_METHODS));
        for (int i = 0; i < n; i++)
            if (started[i])
                check_case(&batch[i]);
    }
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL) {
            const int rc = MPI_Request_free(&reqs[i]);
            if (rc != MPI_SUCCESS)
                report_rc(&batch[i], "MPI_Request_free (inactive)", rc);
        }
}
#endif

static void section_persistent(bool quick)
{
#if HAVE_PERSISTENT
    for (int ci = 0; ci < NUM_COMMS; ci++) {
        nb_case *list;
        int n;
        if (comms[ci].comm == MPI_COMM_NULL || ci == C_DUP2)
            continue;
        n = matrix_cases(ci, quick, &list);
        for (int at = 0; at < n; at += g_batch)
            run_persistent_batch(list + at, n - at < g_batch ? n - at : g_batch);
        free(list);
    }
    compare_hashes("persistent");
#else
    (void)quick;
    if (g_world_rank == 0)
        printf("note: no persistent allreduce in this MPI (neither MPI_Allreduce_init nor MPIX_Allreduce_init)\n");
#endif
}

/* Requests on four communicators at once (every rank is in each, or in one of the
 * two parity halves): the representative types, round robin over the comms. */
static void section_comms(bool quick)
{
    const int use[4] = { C_WORLD, C_DUP, C_DUP2, C_SPLIT };
    const size_t counts[4] = { 1, 1000, 4097, 65537 };
    const int total = quick ? 64 : 160;
    nb_case *list = xmalloc(sizeof *list * (size_t)total);
    int reps[64], nreps = 0, n = 0;
    for (int ti = 0; ti < ntypes && nreps < 64; ti++)
        if (types[ti].flags & T_REP)
            reps[nreps++] = ti;
    for (int k = 0; k < total; k++) {
        const dtype_info *t = &types[reps[(k / 4) % nreps]];
        nb_case c = { .cc = &comms[use[k % 4]], .t = t, .op = first_op(t->ops),
                      .count = counts[(k / 3) % 4], .in_place = (k / 5) % 2 };
        /* Big messages on a quarter of the cases only. */
        if (c.count == 65537 && k % 8 >= 2)
            c.count = 31;
        list[n++] = c;
    }
    for (int at = 0; at < n; at += g_batch)
        run_nonblocking_batch(list + at, n - at < g_batch ? n - at : g_batch);
#if HAVE_PERSISTENT
    /* Persistent requests on several communicators, started together. */
    run_persistent_batch(list, n < g_batch ? n : g_batch);
#endif
    free(list);
    compare_hashes("comms");
}

/* Nonblocking and persistent calls mixed with blocking MPI_Allreduce.  In MPI's order
 * on every rank: I1, I2, B (blocking), [P start], I3, all on one communicator, or B on
 * another every other time.  Even ranks wait for I1 before B, odd ranks only after, so
 * B must drive I1 along (MPI's progress rule).  With user_op, I1 has a user-defined op:
 * the previous module's request, progressed while gpurdma's blocking call waits. */
static void section_ordering(bool quick, bool user_op)
{
    comm_case *cc = &comms[C_DUP];
    const int iters = quick ? 12 : 30;
    const dtype_info *ti = find_type(MPI_INT), *tf = find_type(MPI_FLOAT), *td = find_type(MPI_DOUBLE),
                     *tu = find_type(MPI_UINT64_T);
    nb_case c[5];
    MPI_Request reqs[5];
    enum { I1, I2, B, P, I3 };
    if (!ti || !tf || !td || !tu) {
        fail("ordering: a basic type is missing from the matrix");
        return;
    }
    memset(c, 0, sizeof c);
    c[I1] = (nb_case){ .cc = cc, .t = ti, .op = OP_SUM, .count = 1000, .slot = 0, .user_op = user_op };
    c[I2] = (nb_case){ .cc = cc, .t = td, .op = OP_MAX, .count = 7, .slot = 1 };
    c[B] = (nb_case){ .cc = cc, .t = tf, .op = OP_SUM, .count = 4097, .slot = 2 };
    c[P] = (nb_case){ .cc = cc, .t = ti, .op = OP_BXOR, .count = 1000, .slot = 3 };
    c[I3] = (nb_case){ .cc = cc, .t = tu, .op = OP_BXOR, .count = 31, .in_place = true, .slot = 4 };
    reqs[P] = MPI_REQUEST_NULL;
#if HAVE_PERSISTENT
    prepare(&c[P]);
    init_persistent(&c[P], &reqs[P]);
#endif
    for (int it = 0; it < iters; it++) {
        int flag = 1;
        c[I2].count = it % 4 == 0 ? 65537 : 7;
        c[B].cc = &comms[it % 2 ? C_DUP2 : C_DUP];
        for (int i = 0; i < 5; i++) {
            c[i].salt = it;
            prepare(&c[i]);
        }
        start_nonblocking(&c[I1], &reqs[I1]);
        start_nonblocking(&c[I2], &reqs[I2]);
        if (cc->rank % 2 == 0)
            c[I1].rc = MPI_Wait(&reqs[I1], MPI_STATUS_IGNORE);
        c[B].rc = MPI_Allreduce(c[B].send, c[B].recv, (int)c[B].count, MPI_FLOAT, MPI_SUM, c[B].cc->comm);
        c[B].persistent = false;
        check_case(&c[B]);
        /* gpurdma runs a communicator's calls in start order: the blocking call has
         * completed the ones started before it. */
        if (g_expect_used && cc->size > 1 && c[B].cc == cc && !user_op) {
            MPI_Request before[2] = { reqs[I1], reqs[I2] };
            MPI_Status st[2];
            const int rc = MPI_Testall(2, before, &flag, st);
            if (rc == MPI_ERR_IN_STATUS) {
                c[I1].rc = st[0].MPI_ERROR;
                c[I2].rc = st[1].MPI_ERROR;
            } else if (rc != MPI_SUCCESS) {
                c[I1].rc = c[I2].rc = rc;
            }
            if (!flag && rc == MPI_SUCCESS)
                fail("ordering iteration %d: MPI_Iallreduce started before a blocking MPI_Allreduce on %s is "
                     "not complete when that returns",
                     it, cc->name);
            reqs[I1] = before[0];
            reqs[I2] = before[1];
        }
#if HAVE_PERSISTENT
        c[P].rc = MPI_Start(&reqs[P]);
        if (c[P].rc != MPI_SUCCESS)
            report_rc(&c[P], "MPI_Start", c[P].rc);
        else
            g_p_issued++;
#endif
        start_nonblocking(&c[I3], &reqs[I3]);
        {
            /* The rest: I1 (odd ranks), I2, P, I3 */
            nb_case rest[4] = { c[I1], c[I2], c[P], c[I3] };
            MPI_Request rreqs[4] = { reqs[I1], reqs[I2], reqs[P], reqs[I3] };
            complete(rest, rreqs, 4, (int)(g_batches++ % NUM_METHODS));
            c[I1].rc = rest[0].rc;
            c[I2].rc = rest[1].rc;
            c[P].rc = rest[2].rc;
            c[I3].rc = rest[3].rc;
            reqs[P] = rreqs[2];
        }
        /* In one order on every rank: the hash depends on it. */
        check_case(&c[I1]);
        check_case(&c[I2]);
#if HAVE_PERSISTENT
        check_case(&c[P]);
#endif
        check_case(&c[I3]);
    }
#if HAVE_PERSISTENT
    if (reqs[P] != MPI_REQUEST_NULL)
        MPI_Request_free(&reqs[P]);
#endif
    compare_hashes(user_op ? "ordering, user op" : "ordering");
}

/* Wait until `c`'s result has arrived (a freed request: nothing else says so),
 * driving MPI's progress, at most `limit` seconds. */
static void await_result(nb_case *c, double limit)
{
    const void *expected = g_slot[c->slot][S_EXPECTED];
    const double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < limit && memcmp(c->recv, expected, c->count * c->t->size) != 0) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->cc->comm, &flag, MPI_STATUS_IGNORE);
    }
}

/* Free an active request; returns true if freed.  Refusal is a note unless gpurdma
 * must be taking the call. */
static bool free_active(nb_case *c, MPI_Request *req, const char *where)
{
    static bool noted;
    const int rc = MPI_Request_free(req);
    if (rc == MPI_SUCCESS && *req == MPI_REQUEST_NULL)
        return true;
    if (g_expect_used && c->cc->size > 1) {
        report_rc(c, "MPI_Request_free of an active request", rc);
    } else if (!noted && g_world_rank == 0) {
        char err[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, err, &len);
        printf("note: %s: MPI_Request_free of an active MPI_Iallreduce refused (%s); waited instead "
               "(erroneous in MPI 3.1, 5.12; defined by gpurdma)\n",
               where, err);
        noted = true;
    }
    c->rc = MPI_Wait(req, MPI_STATUS_IGNORE);
    return false;
}

static void section_free(void)
{
    comm_case *cc = &comms[C_DUP];
    const size_t counts[3] = { 1, 4097, 65537 };
    const dtype_info *ti = find_type(MPI_INT);
    int one = 1, sum = 0;
    for (int k = 0; k < 3; k++) {
        /* Alone: free, then a blocking allreduce and a barrier on the same communicator. */
        nb_case c = { .cc = cc, .t = ti, .op = OP_SUM, .count = counts[k], .slot = 0, .salt = 100 + k };
        MPI_Request req;
        bool freed;
        prepare(&c);
        if (start_nonblocking(&c, &req) != MPI_SUCCESS)
            continue;
        freed = free_active(&c, &req, "alone");
        if (MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, cc->comm) != MPI_SUCCESS || sum != cc->size)
            fail("free: the allreduce after a freed request on %s: %d, expected %d", cc->name, sum, cc->size);
        MPI_Barrier(cc->comm);
        /* gpurdma completes a freed request before the next call on its communicator;
         * otherwise nothing says when it ends: wait for the data. */
        if (freed && !(g_expect_used && cc->size > 1))
            await_result(&c, 30.0);
        check_case(&c);

        /* One of three: free the middle one, wait for the others. */
        nb_case three[3];
        MPI_Request reqs[3];
        for (int i = 0; i < 3; i++) {
            three[i] = (nb_case){ .cc = cc, .t = ti, .op = OP_SUM, .count = counts[(k + i) % 3], .slot = 1 + i,
                                  .salt = 200 + 10 * k + i, .in_place = i == 2 };
            prepare(&three[i]);
            start_nonblocking(&three[i], &reqs[i]);
        }
        freed = reqs[1] != MPI_REQUEST_NULL && free_active(&three[1], &reqs[1], "one of three");
        {
            nb_case ends[2] = { three[0], three[2] };
            MPI_Request ereqs[2] = { reqs[0], reqs[2] };
            complete(ends, ereqs, 2, (int)(g_batches++ % NUM_METHODS));
            three[0].rc = ends[0].rc;
            three[2].rc = ends[1].rc;
        }
        /* In start order, the third's completion implies the second's (gpurdma). */
        if (freed && !(g_expect_used && cc->size > 1)) {
            MPI_Barrier(cc->comm);
            await_result(&three[1], 30.0);
        }
        for (int i = 0; i < 3; i++)
            check_case(&three[i]);
    }
    compare_hashes("free");
}

/*
 * Bit identity of order-dependent results: random float/double SUM, nonblocking and
 * persistent, normal and in place.  Every rank must get the same bits, and sampled
 * elements must lie within the forward error bound (n-1) u sum|x_r| of the exact sum.
 */
static double bitident_value(uint64_t seed, int rank, size_t i)
{
    const uint64_t h = elem_hash(rank_base(seed, rank), i), r = rehash(h);
    const double m = 1.0 + (double)(r >> 11) * 0x1p-53; /* [1, 2) */
    return ((h & 1) ? -m : m) * pow2(-1 - (int)((h >> 1) % 24));
}

static void bitident_case(bool is_double, size_t count, bool in_place, bool persistent, int salt)
{
    comm_case *cc = &comms[C_WORLD];
    const size_t esize = is_double ? sizeof(double) : sizeof(float), bytes = count * esize;
    const uint64_t seed = mix64(g_seed ^ 0xB17B17ull ^ count ^ (uint64_t)is_double << 40 ^ (uint64_t)salt << 20);
    const long double u = is_double ? DBL_EPSILON / 2 : FLT_EPSILON / 2;
    const MPI_Datatype dt = is_double ? MPI_DOUBLE : MPI_FLOAT;
    unsigned char *in = slot_buf(0, S_INPUT, bytes), *out = slot_buf(0, S_RECV, bytes);
    uint64_t h, lo = 0, hi = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    char what[160];
    int rc;

    snprintf(what, sizeof what, "bitident %s %s count %zu%s", persistent ? PERSISTENT_API : "MPI_Iallreduce",
             is_double ? "MPI_DOUBLE" : "MPI_FLOAT", count, in_place ? " MPI_IN_PLACE" : "");
    for (size_t i = 0; i < count; i++) {
        const double v = bitident_value(seed, cc->rank, i);
        if (is_double)
            memcpy(in + i * esize, &v, esize);
        else {
            const float f = (float)v;
            memcpy(in + i * esize, &f, esize);
        }
    }
    if (in_place)
        memcpy(out, in, bytes);
#if HAVE_PERSISTENT
    if (persistent) {
        rc = ALLREDUCE_INIT(in_place ? MPI_IN_PLACE : in, out, (int)count, dt, MPI_SUM, cc->comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS)
                g_p_issued++;
        }
    } else
#endif
    {
        rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : in, out, (int)count, dt, MPI_SUM, cc->comm, &req);
        if (rc == MPI_SUCCESS)
            g_nb_issued++;
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (persistent && req != MPI_REQUEST_NULL)
        MPI_Request_free(&req);
    if (rc != MPI_SUCCESS) {
        fail("%s: returned %d", what, rc);
        memset(out, 0, bytes); /* still join the hash exchange */
    }
    h = hash_bytes(HASH_INIT, out, bytes);
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, cc->comm);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, cc->comm);
    if (rc != MPI_SUCCESS)
        return;
    if (lo != hi) {
        fail("%s: results differ between ranks (hash %016" PRIx64 " here, min %016" PRIx64 " max %016" PRIx64 ")",
             what, h, lo, hi);
        return;
    }
    for (size_t k = 0; k < 64 && k < count; k++) {
        const size_t i = count <= 64 ? k : k * (count - 1) / 63;
        long double exact = 0, mag = 0, got;
        for (int r = 0; r < cc->size; r++) {
            const double v = bitident_value(seed, r, i);
            const long double x = is_double ? (long double)v : (long double)(float)v;
            exact += x;
            mag += fabsl(x);
        }
        if (is_double) {
            double g;
            memcpy(&g, out + i * esize, esize);
            got = g;
        } else {
            float g;
            memcpy(&g, out + i * esize, esize);
            got = g;
        }
        if (!(fabsl(got - exact) <= cc->size * u * mag + (is_double ? DBL_MIN : FLT_MIN))) {
            fail("%s: index %zu: got %La, exact %La: outside the error bound", what, i, got, exact);
            return;
        }
    }
    g_passed++;
}

static void section_bitident(bool quick)
{
    const size_t counts[2] = { 1000, 100003 };
    for (int is_double = 0; is_double <= 1; is_double++)
        for (size_t k = 0; k < (quick ? 1u : 2u); k++)
            for (int mode = 0; mode < 4; mode++)
                bitident_case(is_double, counts[k], mode & 1, mode & 2, (int)k * 4 + mode);
}

/* ------------------------------------------------------------------------ */

/* gpurdma's MPI_T counters, watched from the start: with GPURDMA_EXPECT_USED=1 they
 * must show the calls. */
static pvars g_pvars;
static const char *const g_pvar_names[2] = { "coll_gpurdma_nonblocking_calls", "coll_gpurdma_persistent_calls" };

static void check_counters(void)
{
    const unsigned long long nb = pvars_read(&g_pvars, 0), p = pvars_read(&g_pvars, 1);
    const bool have_nb = g_pvars.found[0], have_p = g_pvars.found[1];
    long long mine[4] = { (long long)nb, (long long)p, g_nb_issued, g_p_issued }, sum[4];
    if (MPI_Allreduce(mine, sum, 4, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fail("summing the counters over MPI_COMM_WORLD failed");
        memcpy(sum, mine, sizeof sum);
    }
    if (g_world_rank == 0)
        printf("gpurdma counted %lld MPI_Iallreduce (of %lld started) and %lld persistent starts (of %lld), all "
               "ranks (MPI_T counters%s)\n",
               sum[0], sum[2], sum[1], sum[3], have_nb && have_p ? "" : " missing");
    if (!g_expect_used)
        return;
    if (!have_nb || !have_p)
        fail("GPURDMA_EXPECT_USED=1 but MPI_T counter coll_gpurdma_%s_calls is missing",
             have_nb ? "persistent" : "nonblocking");
    else if (g_nb_issued && nb == 0)
        fail("GPURDMA_EXPECT_USED=1 but coll_gpurdma_nonblocking_calls is 0 after %lld MPI_Iallreduce", g_nb_issued);
    else if (HAVE_PERSISTENT && g_p_issued && p == 0)
        fail("GPURDMA_EXPECT_USED=1 but coll_gpurdma_persistent_calls is 0 after %lld starts", g_p_issued);
    else
        g_passed++;
}

static void usage(void)
{
    if (g_world_rank == 0)
        fprintf(stderr, "usage: " PROGRAM " [--quick] [--strict] [--seed N] [--print N] [--verbose] [--batch N] "
                        "[--rounds N] [--only SECTION,...]\n");
}

/* --only: the sections to run (all by default). */
static const char *g_only;

static bool selected(const char *name)
{
    size_t n = strlen(name);
    if (!g_only)
        return true;
    for (const char *p = g_only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == g_only || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    bool quick = false, verbose = false;
    int provided;
    long long totals[3];
    const char *expect = getenv("GPURDMA_EXPECT_USED");
    double t0, t1;

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    g_expect_used = expect && !strcmp(expect, "1");

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = true;
        } else if (!strcmp(argv[i], "--verbose")) {
            verbose = true;
        } else if (!strcmp(argv[i], "--strict")) {
            g_strict = true;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            g_seed = strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--print") && i + 1 < argc) {
            max_printed_failures = strtoll(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            g_batch = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            g_rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            g_only = argv[++i];
        } else {
            usage();
            MPI_T_finalize();
            MPI_Finalize();
            return 2;
        }
    }
    if (g_batch < 1 || g_batch > MAX_BATCH || g_rounds < 1) {
        usage();
        MPI_T_finalize();
        MPI_Finalize();
        return 2;
    }
    if (quick && g_rounds > 2)
        g_rounds = 2;

    init_types();
    check_types(verbose);
    create_comms();
    MPI_Op_create(user_sum, 1, &g_user_sum);
    pvars_watch(&g_pvars, g_pvar_names, 2);

    t0 = MPI_Wtime();
#define SECTION(name, call)                                                                                   \
    do {                                                                                                      \
        if (!selected(name))                                                                                  \
            break;                                                                                            \
        call;                                                                                                 \
        t1 = MPI_Wtime();                                                                                     \
        if (verbose && g_world_rank == 0)                                                                     \
            printf("%-10s %7.2f s (rank 0: %lld passed, %lld failed)\n", name, t1 - t0, g_passed, g_failed);  \
        t0 = t1;                                                                                              \
    } while (0)
    SECTION("matrix", section_matrix(quick));
    SECTION("persistent", section_persistent(quick));
    SECTION("comms", section_comms(quick));
    SECTION("ordering", section_ordering(quick, false));
    SECTION("ordering+", section_ordering(quick, true));
    SECTION("free", section_free());
    SECTION("bitident", section_bitident(quick));
#undef SECTION
    if (g_world_rank == 0)
        printf("persistent API: %s; %d requests per batch, %d persistent rounds\n", PERSISTENT_API, g_batch,
               g_rounds);

    MPI_Op_free(&g_user_sum);
    free_comms();
    free_bufs();
    check_counters();
    pvars_done(&g_pvars);
    MPI_T_finalize();
    check_totals(g_lib_matches, totals);
    if (g_world_rank == 0 && totals[2])
        printf("note: %lld passed checks matched the library's own non-standard op, not the standard\n", totals[2]);
    return check_finish(totals);
}
