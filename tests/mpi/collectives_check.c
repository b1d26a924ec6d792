/*
 * collectives_check: correctness of MPI_Reduce_scatter_block, MPI_Reduce_scatter,
 * MPI_Allgather, MPI_Bcast and MPI_Reduce (and MPI_Allreduce beside them) as an
 * application sees them, whichever component serves the calls: blocking, nonblocking
 * (MPI_I*) and persistent (MPI_*_init; Open MPI 4.1: MPIX_*_init from <mpi-ext.h>).
 *
 * The reductions run over matrix.h's datatype x op matrix (every predefined type with
 * every op the standard defines for it, MAXLOC/MINLOC pairs, integer wrap-around,
 * bitwise ops on integers and MPI_BYTE); inputs come from (seed, case, rank, index)
 * and the reference is the rank-order fold computed locally, so a result is compared
 * exactly (reduce-scatter: this rank's segment of it).  Bcast and allgather move
 * MPI_BYTE, MPI_INT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_2INT, MPI_DOUBLE_INT and
 * MPI_LONG_DOUBLE_INT.  Every call also checks that the send buffer is unchanged and
 * that nothing within 64 bytes before or after the receive buffer is written (and, for
 * MPI_Reduce, that non-roots may pass a NULL receive buffer).
 *
 * Sections:
 *   blocking    per communicator (world, dup, odd/even split, the same split with
 *               reversed key, all ranks but the last in reverse order): every type x
 *               op (world) or the representative types (others) at counts 0 1 3 1000
 *               1001, large counts 70000 and 300000 (many 256 KiB chunks) for one op
 *               of the representative types; reduce-scatter with equal counts,
 *               unequal ones with zeros, and all to the last rank; bcast and reduce at
 *               every root; MPI_IN_PLACE for reduce (root), reduce-scatter(_block),
 *               allgather (and allreduce)
 *   nonblocking batches of every collective (and MPI_Iallreduce) outstanding together,
 *               per communicator and across all of them at once, completed by
 *               MPI_Waitall, MPI_Waitany, an MPI_Testall loop or MPI_Wait backwards
 *   persistent  the same batches as persistent requests: init, 3 rounds of new inputs
 *               (MPI_Startall, MPI_Start forwards, MPI_Start backwards), free
 *
 * Where MPI says every rank gets the same result (allgather, bcast, allreduce) each
 * rank compares with the same exact reference, so the bits agree everywhere; a hash
 * of every such result is also compared over the communicator.
 *
 * gpurdma's MPI_T counters (GPURDMA_EXPECT_USED=1 or --expect-used): for each of
 * reduce_scatter_block, reduce_scatter, allgather, bcast, reduce, the counter
 * coll_gpurdma_<name>_calls (or gpurdma_<name>_calls) must have grown on every rank;
 * a counter the component does not have yet is skipped with a note, unless
 * GPURDMA_REQUIRE_COLL_PVARS=1 (or --require-pvars) makes that a failure.
 * reduce_scatter_block's calls may be counted under reduce_scatter.
 *
 * Usage: collectives_check [--quick] [--lite] [--rep-only] [--strict] [--seed N] [--print N] [--verbose]
 *                          [--only SECTION,...] [--expect-used] [--require-pvars] [--trace]
 *                          [--no-mpich-workaround] [--expect-declined COLL,...]
 *   --expect-declined: with --expect-used, these collectives' counters must stay 0 (the
 *   component's coll_gpurdma_<coll>_enable 0 sends them to the previous module).
 */
#include <mpi.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM "collectives_check"
#define GUARD_BYTES 64
#define GUARD_FILL 0x5A
#define STALE_FILL 0xA5 /* a bcast receiver's buffer before the call */

#include "check_common.h"
#include "comm_cases.h"
#include "matrix.h"
#include "persistent_coll.h"
#include "pvars.h"

static long long g_lib_matches;
static bool g_quick, g_lite, g_rep_only, g_verbose, g_trace; /* --trace: print every blocking call before it */

/* ------------------------------------------------------------------------ */
/* Communicators                                                             */
/* ------------------------------------------------------------------------ */

typedef struct comm_case {
    char name[48];
    MPI_Comm comm;
    int rank, size;
    bool all_types; /* the whole matrix; else the T_REP types */
    bool huge;      /* the largest count too */
    bool owned;
} comm_case;

#define MAX_COMMS 6
static comm_case comms[MAX_COMMS];
static int ncomms;

static void add_comm(const char *name, MPI_Comm c, bool all_types, bool huge, bool owned)
{
    comm_case *cc = &comms[ncomms++];
    cc->comm = c;
    cc->all_types = all_types;
    cc->huge = huge;
    cc->owned = owned;
    describe_comm(c, name, cc->name, sizeof cc->name, &cc->rank, &cc->size);
}

static void create_comms(void)
{
    int rank, size;
    MPI_Comm c;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    add_comm("world", MPI_COMM_WORLD, !g_rep_only, true, false); /* --rep-only: the representative types */
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    add_comm("dup", c, false, false, true);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c);
    add_comm("split_parity", c, false, false, true);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &c);
    add_comm("split_parity_reversed", c, false, false, true);
    c = create_reversed_subset();
    add_comm("create_group_reversed", c, false, false, true);
}

static void free_comms(void)
{
    for (int i = 0; i < ncomms; i++)
        if (comms[i].owned && comms[i].comm != MPI_COMM_NULL)
            MPI_Comm_free(&comms[i].comm);
}

/* ------------------------------------------------------------------------ */
/* One collective call: buffers, reference, start, check                     */
/* ------------------------------------------------------------------------ */

enum { C_RSB, C_RS, C_AG, C_BC, C_RED, C_AR, NCOLL };
static const char *const coll_name[NCOLL] = { "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather",
                                              "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce" };
static const char *const coll_short[NCOLL] = { "reduce_scatter_block", "reduce_scatter", "allgather", "bcast",
                                               "reduce", "allreduce" };
static long long g_calls[NCOLL]; /* started on this rank, all forms */

/* Reduce-scatter recvcounts patterns (count n). */
enum { RS_EQUAL, RS_UNEQUAL, RS_ONE, NUM_RS };
static const char *const rs_pattern_name[NUM_RS] = { "equal", "unequal with zeros", "all to the last rank" };

enum { M_BLOCKING, M_NONBLOCKING, M_PERSISTENT };
static const char *const mode_name[3] = { "", " (nonblocking)", " (persistent)" };

typedef struct ccase {
    int coll, comm_idx, op, root, pattern, mode;
    const comm_case *cc;
    const dtype_info *t;
    size_t count; /* RSB: per rank; RS: see rs_counts; AG: per rank; others: the vector */
    bool in_place;
    int *recvcounts; /* RS */
    size_t seg_first, seg_n; /* this rank's part of the reduction (RS, RSB) */
    size_t send_n, recv_n;   /* elements in the send and receive buffers */
    unsigned char *sendbuf, *recvbase, *recvbuf, *input, *expected, *lib, *scratch;
    bool recv_null;          /* reduce at a non-root: NULL receive buffer */
    bool lib_used;
    bool failed_call;
    MPI_Request req;
    uint64_t seed;
} ccase;

static int data_op(const dtype_info *t)
{
    int op = 0;
    while (op < NUM_OPS && !(t->ops & BIT(op)))
        op++;
    return op < NUM_OPS ? op : OP_BXOR;
}

static bool is_reduction(int coll) { return coll == C_RSB || coll == C_RS || coll == C_RED || coll == C_AR; }

static void rs_counts(int pattern, int size, size_t n, int *rc)
{
    for (int r = 0; r < size; r++) {
        switch (pattern) {
        case RS_EQUAL: rc[r] = (int)n; break;
        case RS_UNEQUAL: rc[r] = (r % 3 == 1) ? 0 : (int)(n + (size_t)r * (n / 3 + 1)); break;
        default: rc[r] = (r == size - 1) ? (int)n * size : 0; break;
        }
    }
}

static void describe(const ccase *c, char *what, size_t len)
{
    int n = snprintf(what, len, "%s%s comm %s rank %d: ", coll_name[c->coll], mode_name[c->mode], c->cc->name,
                     c->cc->rank);
    if (is_reduction(c->coll))
        n += snprintf(what + n, len - (size_t)n, "%s ", op_name[c->op]);
    n += snprintf(what + n, len - (size_t)n, "%s count %zu", c->t->name, c->count);
    if (c->coll == C_RS)
        n += snprintf(what + n, len - (size_t)n, " (%s)", rs_pattern_name[c->pattern]);
    if (c->coll == C_BC || c->coll == C_RED)
        n += snprintf(what + n, len - (size_t)n, " root %d", c->root);
    if (c->in_place)
        snprintf(what + n, len - (size_t)n, " MPI_IN_PLACE");
}

/* expected[0..n) = fold over ranks of input[first..first+n), in rank order; with the
 * library's own op (MPI_Reduce_local) when `lib`. */
static void fold_segment(const dtype_info *t, int op, int size, size_t first, size_t n, uint64_t seed, void *out,
                         void *scratch, bool lib)
{
    t->gen(op, 0, first, n, seed, out);
    for (int r = 1; r < size; r++) {
        t->gen(op, r, first, n, seed, scratch);
        if (lib)
            MPI_Reduce_local(scratch, out, (int)n, t->dt, op_handle(op));
        else
            t->fold(op, out, scratch, n);
    }
}

/* Sizes, buffers (kept for the case's life: persistent requests reuse them). */
static void case_alloc(ccase *c)
{
    const int P = c->cc->size, me = c->cc->rank;
    const size_t es = c->t->size;
    c->recvcounts = NULL;
    c->seg_first = 0;
    c->seg_n = 0;
    c->recv_null = false;
    switch (c->coll) {
    case C_RSB:
        c->send_n = c->count * (size_t)P;
        c->recv_n = c->in_place ? c->send_n : c->count;
        c->seg_first = c->count * (size_t)me;
        c->seg_n = c->count;
        break;
    case C_RS: {
        size_t total = 0;
        c->recvcounts = xmalloc((size_t)P * sizeof(int));
        rs_counts(c->pattern, P, c->count, c->recvcounts);
        for (int r = 0; r < P; r++) {
            if (r == me)
                c->seg_first = total;
            total += (size_t)c->recvcounts[r];
        }
        c->seg_n = (size_t)c->recvcounts[me];
        c->send_n = total;
        c->recv_n = c->in_place ? total : c->seg_n;
        break;
    }
    case C_AG:
        c->send_n = c->count;
        c->recv_n = c->count * (size_t)P;
        break;
    case C_BC:
        c->send_n = 0;
        c->recv_n = c->count;
        break;
    case C_RED:
        c->send_n = c->count;
        c->recv_n = me == c->root ? c->count : 0;
        c->recv_null = me != c->root;
        c->seg_n = me == c->root ? c->count : 0;
        if (me != c->root)
            c->in_place = false; /* MPI_IN_PLACE is the root's only */
        break;
    default: /* C_AR */
        c->send_n = c->count;
        c->recv_n = c->count;
        c->seg_n = c->count;
        break;
    }
    {
        const size_t in_n = c->send_n > c->recv_n ? c->send_n : c->recv_n;
        c->input = xmalloc(in_n * es);
        c->sendbuf = xmalloc(c->send_n * es);
        c->recvbase = xmalloc(2 * GUARD_BYTES + c->recv_n * es);
        c->recvbuf = c->recvbase + GUARD_BYTES;
        c->expected = xmalloc(c->recv_n * es);
        c->lib = xmalloc(c->recv_n * es);
        c->scratch = xmalloc(c->recv_n * es);
    }
}

static void case_free(ccase *c)
{
    free(c->recvcounts);
    free(c->input);
    free(c->sendbuf);
    free(c->recvbase);
    free(c->expected);
    free(c->lib);
    free(c->scratch);
}

/* Inputs and the reference for round `round`; the buffers filled for the call. */
static void case_prepare(ccase *c, int round)
{
    const dtype_info *t = c->t;
    const size_t es = t->size;
    const int P = c->cc->size, me = c->cc->rank;
    const uint64_t seed = mix64(c->seed ^ (uint64_t)round * 0x51ED27ull);
    const int gop = is_reduction(c->coll) ? c->op : data_op(t);

    memset(c->recvbase, GUARD_FILL, 2 * GUARD_BYTES + c->recv_n * es);
    c->lib_used = false;
    c->failed_call = false;
    switch (c->coll) {
    case C_RSB:
    case C_RS:
    case C_RED:
    case C_AR:
        t->gen(gop, me, 0, c->send_n, seed, c->input);
        if (c->in_place)
            memcpy(c->recvbuf, c->input, c->send_n * es);
        else
            memcpy(c->sendbuf, c->input, c->send_n * es);
        if (c->seg_n) {
            fold_segment(t, gop, P, c->seg_first, c->seg_n, seed, c->expected, c->scratch, false);
            if (!g_strict && (t->lib_deviates & BIT(gop))) {
                fold_segment(t, gop, P, c->seg_first, c->seg_n, seed, c->lib, c->scratch, true);
                c->lib_used = true;
            }
        }
        break;
    case C_AG:
        t->gen(gop, me, 0, c->count, seed, c->input);
        for (int r = 0; r < P; r++)
            t->gen(gop, r, 0, c->count, seed, c->expected + (size_t)r * c->count * es);
        if (c->in_place)
            memcpy(c->recvbuf + (size_t)me * c->count * es, c->input, c->count * es);
        else
            memcpy(c->sendbuf, c->input, c->count * es);
        break;
    case C_BC:
        t->gen(gop, c->root, 0, c->count, seed, c->expected);
        if (me == c->root)
            memcpy(c->recvbuf, c->expected, c->count * es);
        else
            memset(c->recvbuf, STALE_FILL, c->count * es);
        break;
    }
}

static void *sendptr(const ccase *c) { return c->in_place ? MPI_IN_PLACE : (void *)c->sendbuf; }
static void *recvptr(const ccase *c) { return c->recv_null ? NULL : (void *)c->recvbuf; }

static int case_blocking(ccase *c)
{
    const MPI_Op op = op_handle(c->op);
    const MPI_Datatype dt = c->t->dt;
    const int n = (int)c->count;
    switch (c->coll) {
    case C_RSB: return MPI_Reduce_scatter_block(sendptr(c), recvptr(c), n, dt, op, c->cc->comm);
    case C_RS: return MPI_Reduce_scatter(sendptr(c), recvptr(c), c->recvcounts, dt, op, c->cc->comm);
    case C_AG: return MPI_Allgather(sendptr(c), n, dt, recvptr(c), n, dt, c->cc->comm);
    case C_BC: return MPI_Bcast(c->recvbuf, n, dt, c->root, c->cc->comm);
    case C_RED: return MPI_Reduce(sendptr(c), recvptr(c), n, dt, op, c->root, c->cc->comm);
    default: return MPI_Allreduce(sendptr(c), recvptr(c), n, dt, op, c->cc->comm);
    }
}

static int case_istart(ccase *c)
{
    const MPI_Op op = op_handle(c->op);
    const MPI_Datatype dt = c->t->dt;
    const int n = (int)c->count;
    MPI_Request *q = &c->req;
    switch (c->coll) {
    case C_RSB: return MPI_Ireduce_scatter_block(sendptr(c), recvptr(c), n, dt, op, c->cc->comm, q);
    case C_RS: return MPI_Ireduce_scatter(sendptr(c), recvptr(c), c->recvcounts, dt, op, c->cc->comm, q);
    case C_AG: return MPI_Iallgather(sendptr(c), n, dt, recvptr(c), n, dt, c->cc->comm, q);
    case C_BC: return MPI_Ibcast(c->recvbuf, n, dt, c->root, c->cc->comm, q);
    case C_RED: return MPI_Ireduce(sendptr(c), recvptr(c), n, dt, op, c->root, c->cc->comm, q);
    default: return MPI_Iallreduce(sendptr(c), recvptr(c), n, dt, op, c->cc->comm, q);
    }
}

#if HAVE_PERSISTENT
static int case_pinit(ccase *c)
{
    const MPI_Op op = op_handle(c->op);
    const MPI_Datatype dt = c->t->dt;
    const int n = (int)c->count;
    const MPI_Comm comm = c->cc->comm;
    MPI_Request *q = &c->req;
    switch (c->coll) {
    case C_RSB: return REDUCE_SCATTER_BLOCK_INIT(sendptr(c), recvptr(c), n, dt, op, comm, MPI_INFO_NULL, q);
    case C_RS: return REDUCE_SCATTER_INIT(sendptr(c), recvptr(c), c->recvcounts, dt, op, comm, MPI_INFO_NULL, q);
    case C_AG: return ALLGATHER_INIT(sendptr(c), n, dt, recvptr(c), n, dt, comm, MPI_INFO_NULL, q);
    case C_BC: return BCAST_INIT(c->recvbuf, n, dt, c->root, comm, MPI_INFO_NULL, q);
    case C_RED: return REDUCE_INIT(sendptr(c), recvptr(c), n, dt, op, c->root, comm, MPI_INFO_NULL, q);
    default: return ALLREDUCE_INIT(sendptr(c), recvptr(c), n, dt, op, comm, MPI_INFO_NULL, q);
    }
}
#endif

static void call_failed(ccase *c, const char *fn, int rc)
{
    char what[320], err[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, err, &len);
    describe(c, what, sizeof what);
    fail("%s: %s returned %d (%s)", what, fn, rc, err);
    c->failed_call = true;
}

/* Check the result of a completed call; returns a hash of what every rank of the
 * communicator must hold alike (0 where results differ by rank). */
static uint64_t case_check(ccase *c)
{
    const dtype_info *t = c->t;
    const size_t es = t->size;
    char what[320];
    const unsigned char *got;
    size_t n;

    if (c->failed_call)
        return 0;
    describe(c, what, sizeof what);
    switch (c->coll) {
    case C_RSB:
    case C_RS: got = c->recvbuf; n = c->seg_n; break; /* in place too: the first seg_n elements */
    case C_AG: got = c->recvbuf; n = c->recv_n; break;
    case C_BC: got = c->recvbuf; n = c->count; break;
    case C_RED: got = c->recvbuf; n = c->seg_n; break; /* 0 at non-roots */
    default: got = c->recvbuf; n = c->count; break;
    }
    {
        size_t first_bad, nlib;
        const size_t nbad =
            matrix_compare(t, n, c->expected, c->lib_used ? c->lib : NULL, got, &first_bad, &nlib);
        if (nbad) {
            char e[128], g[128];
            t->show(c->expected + first_bad * es, e, sizeof e);
            t->show(got + first_bad * es, g, sizeof g);
            fail("%s: index %zu expected %s got %s (%zu of %zu elements wrong)", what, first_bad, e, g, nbad, n);
            return 0;
        }
        if (nlib)
            g_lib_matches++;
    }
    if (!bytes_are(c->recvbase, GUARD_BYTES, GUARD_FILL) ||
        !bytes_are(c->recvbuf + c->recv_n * es, GUARD_BYTES, GUARD_FILL)) {
        fail("%s: bytes written outside the receive buffer", what);
        return 0;
    }
    if (c->send_n && !c->in_place &&
        memcmp(c->sendbuf, c->input, c->send_n * es) != 0) {
        fail("%s: send buffer modified", what);
        return 0;
    }
    g_passed++;
    /* padding bytes (pairs, long double) may differ: hash types without padding only */
    if ((c->coll == C_AG || c->coll == C_BC || c->coll == C_AR) && (t->flags & T_BITWISE))
        return hash_bytes(HASH_INIT, got, n * es) | 1;
    return 0;
}

/* MPICH 4.0.2 (Debian 12) crashes in its own MPI_Reduce with MPI_IN_PLACE at a root
 * other than 0 from about 4 KiB on (SIGSEGV in the non-roots; reduce_scatter_gather).
 * Under MPICH such a call goes to root 0 instead, with a note, unless
 * --no-mpich-workaround (for an MPICH without the bug, or an interposer that serves
 * MPI_Reduce itself). */
static bool g_mpich_workaround =
#ifdef MPICH_VERSION
    true;
#else
    false;
#endif
static long long g_mpich_rerooted;

/* MPICH 4.0.2 also aborts in MPI_Reduce_scatter with MPI_IN_PLACE and unequal counts
 * at large counts (a memcpy between overlapping ranges of the receive buffer: "memcpy
 * argument memory ranges overlap"); under the workaround those take equal counts. */
static int effective_pattern(int coll, const dtype_info *t, size_t count, int pattern, bool in_place)
{
    if (g_mpich_workaround && coll == C_RS && in_place && pattern != RS_EQUAL && count * t->size >= 2048) {
        g_mpich_rerooted++;
        return RS_EQUAL;
    }
    return pattern;
}

static int effective_root(int coll, const dtype_info *t, size_t count, int root, bool in_place)
{
    if (g_mpich_workaround && coll == C_RED && in_place && root != 0 && count * t->size >= 2048) {
        g_mpich_rerooted++;
        return 0;
    }
    return root;
}

static void init_case(ccase *c, int coll, int comm_idx, const dtype_info *t, int op, size_t count, int root,
                      int pattern, bool in_place, int mode, int salt)
{
    root = effective_root(coll, t, count, root, in_place);
    pattern = effective_pattern(coll, t, count, pattern, in_place);
    memset(c, 0, sizeof *c);
    c->coll = coll;
    c->comm_idx = comm_idx;
    c->cc = &comms[comm_idx];
    c->t = t;
    c->op = op;
    c->count = count;
    c->root = root;
    c->pattern = pattern;
    c->in_place = in_place;
    c->mode = mode;
    c->seed = case_seed(comm_idx, t, op, count, salt ^ (coll << 8) ^ (root << 12) ^ (pattern << 20) ^ (in_place << 24));
    c->req = MPI_REQUEST_NULL;
    case_alloc(c);
}

/* Compare a hash over the communicator; fail if any rank differs. */
static void compare_hash(const ccase *c, uint64_t h)
{
    /* ranks without a hash (a failed check there, already reported) count for neither */
    uint64_t mm[2] = { h ? h : UINT64_MAX, ~h }, res[2];
    if (MPI_Allreduce(mm, res, 2, MPI_UINT64_T, MPI_MIN, c->cc->comm) != MPI_SUCCESS) {
        fail("comm %s: comparing result hashes failed", c->cc->name);
        return;
    }
    if (h && (res[0] != h || ~res[1] != h)) {
        char what[320];
        describe(c, what, sizeof what);
        fail("%s: ranks hold different results (hash %016" PRIx64 " here, min %016" PRIx64 " max %016" PRIx64 ")",
             what, h, res[0], ~res[1]);
    }
}

/* One blocking call, checked; results that must agree are compared by hash. */
static void run_blocking(int coll, int comm_idx, const dtype_info *t, int op, size_t count, int root, int pattern,
                         bool in_place)
{
    ccase c;
    int rc;
    uint64_t h;
    init_case(&c, coll, comm_idx, t, op, count, root, pattern, in_place, M_BLOCKING, 0);
    case_prepare(&c, 0);
    g_calls[coll]++;
    if (g_trace) {
        char what[320];
        describe(&c, what, sizeof what);
        printf("call %s\n", what);
        fflush(stdout);
    }
    rc = case_blocking(&c);
    if (rc != MPI_SUCCESS)
        call_failed(&c, coll_name[coll], rc);
    h = case_check(&c);
    /* A hash compare costs an allreduce: for the large and the first calls only. */
    if ((coll == C_AG || coll == C_BC) && (count >= 1000 || root == 0))
        compare_hash(&c, c.failed_call ? 0 : h);
    case_free(&c);
}

/* ------------------------------------------------------------------------ */
/* Section: blocking                                                         */
/* ------------------------------------------------------------------------ */

static const size_t small_counts[] = { 0, 1, 3, 1000, 1001 };
#define NSMALL (sizeof small_counts / sizeof small_counts[0])
#define LARGE_COUNT 70000
#define HUGE_COUNT 300000

/* The types bcast and allgather move. */
static const dtype_info *move_types[8];
static int nmove;

static void init_move_types(void)
{
    const MPI_Datatype dts[] = { MPI_BYTE, MPI_INT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_2INT, MPI_DOUBLE_INT,
                                 MPI_LONG_DOUBLE_INT };
    nmove = 0;
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        const dtype_info *t = find_type(dts[i]);
        if (t)
            move_types[nmove++] = t;
    }
}

/* A large count of a move type: MPI_BYTE, MPI_INT and MPI_DOUBLE. */
static bool move_type_large(const dtype_info *t)
{
    return t->dt == MPI_BYTE || t->dt == MPI_INT || t->dt == MPI_DOUBLE;
}

static void blocking_reductions(int ci)
{
    const comm_case *cc = &comms[ci];
    const int P = cc->size;
    long long k = 0;
    for (int ti = 0; ti < ntypes; ti++) {
        const dtype_info *t = &types[ti];
        const bool rep = t->flags & T_REP;
        if (!cc->all_types && !rep)
            continue;
        for (int op = 0; op < NUM_OPS; op++) {
            if (!(t->ops & BIT(op)))
                continue;
            /* --lite: the type's first op and one of MAX, BXOR, LOR, MINLOC */
            if (g_lite && op != data_op(t) && op != OP_MAX && op != OP_BXOR && op != OP_LOR && op != OP_MINLOC)
                continue;
            for (size_t i = 0; i < NSMALL; i++) {
                const size_t count = small_counts[i];
                k++;
                if (g_lite && (count == 3 || count == 1000))
                    continue;
                if (!cc->all_types && count != 1 && count != 1001 && !(count == 0 && op == data_op(t)))
                    continue;
                /* Every root and pattern for the representative types; one, varied, for the rest. */
                for (int in_place = 0; in_place <= 1; in_place++) {
                    run_blocking(C_RSB, ci, t, op, count, 0, 0, in_place);
                    for (int p = 0; p < NUM_RS; p++)
                        if (rep || p == (int)(k % NUM_RS))
                            run_blocking(C_RS, ci, t, op, count, 0, p, in_place);
                    for (int root = 0; root < P; root++)
                        if ((rep && !g_quick) || root == (int)(k % P))
                            run_blocking(C_RED, ci, t, op, count, root, 0, in_place);
                }
            }
            if (!rep || op != data_op(t))
                continue;
            /* Large counts: chunking and pipelining, one op per representative type. */
            for (int big = 0; big < 2; big++) {
                const size_t count = big ? HUGE_COUNT : LARGE_COUNT;
                if (big && (!cc->huge || g_quick || t->size > 8))
                    continue;
                for (int in_place = 0; in_place <= 1; in_place++) {
                    run_blocking(C_RSB, ci, t, op, count / (size_t)P, 0, 0, in_place);
                    run_blocking(C_RS, ci, t, op, count / (size_t)P, 0, in_place ? RS_ONE : RS_UNEQUAL, in_place);
                    run_blocking(C_RED, ci, t, op, count, P - 1, 0, in_place);
                    if (!g_quick && !big)
                        run_blocking(C_RED, ci, t, op, count, P / 2, 0, !in_place);
                }
            }
        }
    }
}

static void blocking_moves(int ci)
{
    const comm_case *cc = &comms[ci];
    const int P = cc->size;
    for (int mi = 0; mi < nmove; mi++) {
        const dtype_info *t = move_types[mi];
        if (g_lite && t->dt != MPI_BYTE && t->dt != MPI_INT && t->dt != MPI_LONG_DOUBLE_INT)
            continue;
        for (size_t i = 0; i < NSMALL + 2; i++) {
            const size_t count = i < NSMALL ? small_counts[i] : i == NSMALL ? LARGE_COUNT : HUGE_COUNT;
            if (g_lite && (count == 3 || count == 1000))
                continue;
            if (count == HUGE_COUNT && (!cc->huge || g_quick || !move_type_large(t)))
                continue;
            if (count == LARGE_COUNT && !cc->all_types && !move_type_large(t))
                continue;
            for (int in_place = 0; in_place <= 1; in_place++)
                run_blocking(C_AG, ci, t, 0, count >= LARGE_COUNT ? count / (size_t)P : count, 0, 0, in_place);
            for (int root = 0; root < P; root++)
                run_blocking(C_BC, ci, t, 0, count, root, 0, false);
        }
    }
}

/* --lite (the namespace cluster, where every message costs about 1 ms): world and the
 * split with reversed key order only. */
static bool lite_skips(int ci)
{
    return g_lite && (ci == 1 || ci == 2 || ci == 4);
}

static void section_blocking(void)
{
    for (int ci = 0; ci < ncomms; ci++) {
        const double t0 = MPI_Wtime();
        const long long n0 = g_passed + g_failed;
        /* A rank outside a communicator waits here, in a barrier, not in a later
         * collective that may time out (gpurdma's coll_gpurdma_timeout). */
        MPI_Barrier(MPI_COMM_WORLD);
        if (comms[ci].comm == MPI_COMM_NULL || lite_skips(ci))
            continue;
        blocking_reductions(ci);
        blocking_moves(ci);
        if (g_verbose && g_world_rank == 0)
            printf("  blocking %-28s %6lld checks %7.2f s\n", comms[ci].name, g_passed + g_failed - n0,
                   MPI_Wtime() - t0);
    }
}

/* ------------------------------------------------------------------------ */
/* Sections: nonblocking and persistent batches                              */
/* ------------------------------------------------------------------------ */

#define MAX_BATCH 64
/* (not MPI_STATUSES_IGNORE: gcc's -Wstringop-overflow misreads MPICH's prototypes) */
static MPI_Status g_statuses[MAX_BATCH];

/* A batch on communicator ci (or on every communicator, ci < 0): every collective
 * (and MPI_Iallreduce) on the representative type t and a move type, at `count`,
 * normal and in place, roots and patterns varied by `salt`. */
static int build_batch(ccase *b, int ci, const dtype_info *t, const dtype_info *mt, size_t count, int mode, int salt)
{
    int n = 0;
    for (int c = 0; c < ncomms; c++) {
        const comm_case *cc;
        int P, op;
        if ((ci >= 0 && c != ci) || comms[c].comm == MPI_COMM_NULL)
            continue;
        cc = &comms[c];
        P = cc->size;
        op = data_op(t);
        /* a second op where the type has one: MAX, BXOR, LXOR, MINLOC, PROD */
        int op2 = op;
        for (int o = NUM_OPS - 1; o >= 0; o--)
            if ((t->ops & BIT(o)) && o != op && ((salt + o) % 3 == 0)) {
                op2 = o;
                break;
            }
        if (n + 11 > MAX_BATCH)
            break;
        init_case(&b[n++], C_RSB, c, t, op, count, 0, 0, false, mode, salt);
        init_case(&b[n++], C_AR, c, t, op2, count, 0, 0, false, mode, salt);
        init_case(&b[n++], C_RS, c, t, op2, count, 0, salt % NUM_RS, false, mode, salt);
        /* MPICH 4.0.2's persistent allgather moves the blocks of the first start only
         * (later starts leave other ranks' blocks stale): left out under the workaround. */
        const bool ag = !(g_mpich_workaround && mode == M_PERSISTENT);
        if (ag)
            init_case(&b[n++], C_AG, c, mt, 0, count, 0, 0, false, mode, salt);
        init_case(&b[n++], C_BC, c, mt, 0, count * 2 + 1, salt % P, 0, false, mode, salt);
        init_case(&b[n++], C_RED, c, t, op, count, (salt + 1) % P, 0, false, mode, salt);
        init_case(&b[n++], C_AR, c, t, op, count, 0, 0, true, mode, salt);
        init_case(&b[n++], C_RSB, c, t, op2, count, 0, 0, true, mode, salt + 1);
        init_case(&b[n++], C_RS, c, t, op, count, 0, (salt + 1) % NUM_RS, true, mode, salt);
        if (ag)
            init_case(&b[n++], C_AG, c, mt, 0, count, 0, 0, true, mode, salt + 1);
        init_case(&b[n++], C_RED, c, t, op2, count, (salt + 2) % P, 0, true, mode, salt);
    }
    return n;
}

/* Complete every request of the batch by `method`. */
static void complete_batch(ccase *b, int n, int method)
{
    MPI_Request reqs[MAX_BATCH];
    int rc = MPI_SUCCESS, idx, flag;
    for (int i = 0; i < n; i++)
        reqs[i] = b[i].req;
    switch (method % 4) {
    case 0: rc = MPI_Waitall(n, reqs, g_statuses); break;
    case 1:
        for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
            rc = MPI_Waitany(n, reqs, &idx, MPI_STATUS_IGNORE);
        break;
    case 2:
        do
            rc = MPI_Testall(n, reqs, &flag, g_statuses);
        while (rc == MPI_SUCCESS && !flag);
        break;
    default:
        for (int i = n - 1; i >= 0 && rc == MPI_SUCCESS; i--)
            rc = MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
        break;
    }
    for (int i = 0; i < n; i++)
        if (b[i].mode == M_NONBLOCKING)
            b[i].req = reqs[i];
    if (rc != MPI_SUCCESS) {
        fail("completing a batch of %d requests on comm %s failed (rc %d)", n, b[0].cc->name, rc);
        for (int i = 0; i < n; i++)
            b[i].failed_call = true;
    }
}

static void check_batch(ccase *b, int n)
{
    for (int i = 0; i < n; i++) {
        const uint64_t h = case_check(&b[i]);
        if (b[i].coll == C_AG || b[i].coll == C_BC || b[i].coll == C_AR)
            compare_hash(&b[i], b[i].failed_call ? 0 : h);
    }
}

static void free_batch(ccase *b, int n)
{
    for (int i = 0; i < n; i++)
        case_free(&b[i]);
}

static void nonblocking_batch(int ci, const dtype_info *t, const dtype_info *mt, size_t count, int salt)
{
    static ccase b[MAX_BATCH];
    const int n = build_batch(b, ci, t, mt, count, M_NONBLOCKING, salt);
    for (int i = 0; i < n; i++) {
        int rc;
        case_prepare(&b[i], 0);
        g_calls[b[i].coll]++;
        rc = case_istart(&b[i]);
        if (rc != MPI_SUCCESS) {
            call_failed(&b[i], "the nonblocking call", rc);
            b[i].req = MPI_REQUEST_NULL;
        }
    }
    complete_batch(b, n, salt);
    check_batch(b, n);
    free_batch(b, n);
}

#if HAVE_PERSISTENT
static void persistent_batch(int ci, const dtype_info *t, const dtype_info *mt, size_t count, int salt)
{
    static ccase b[MAX_BATCH];
    MPI_Request reqs[MAX_BATCH];
    const int n = build_batch(b, ci, t, mt, count, M_PERSISTENT, salt);
    const int rounds = g_quick ? 2 : 3;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        int rc = case_pinit(&b[i]);
        if (rc != MPI_SUCCESS) {
            call_failed(&b[i], "the persistent init", rc);
            ok = false;
        }
        reqs[i] = b[i].req;
    }
    for (int round = 0; ok && round < rounds; round++) {
        int rc = MPI_SUCCESS;
        for (int i = 0; i < n; i++) {
            case_prepare(&b[i], round);
            g_calls[b[i].coll]++;
        }
        switch (round % 3) {
        case 0: rc = MPI_Startall(n, reqs); break;
        case 1:
            for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
                rc = MPI_Start(&reqs[i]);
            break;
        default:
            for (int i = n - 1; i >= 0 && rc == MPI_SUCCESS; i--)
                rc = MPI_Start(&reqs[i]);
            break;
        }
        if (rc != MPI_SUCCESS) {
            fail("starting %d persistent requests on comm %s failed (rc %d)", n, b[0].cc->name, rc);
            ok = false;
            break;
        }
        rc = MPI_Waitall(n, reqs, g_statuses);
        if (rc != MPI_SUCCESS) {
            fail("MPI_Waitall on %d persistent requests on comm %s failed (rc %d)", n, b[0].cc->name, rc);
            ok = false;
            break;
        }
        check_batch(b, n);
    }
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&reqs[i]);
    free_batch(b, n);
}
#endif

/* Representative reducible types and their move-type partners for the batches. */
static void batch_types(const dtype_info **rt, const dtype_info **mt, int *n)
{
    const MPI_Datatype red[] = { MPI_INT, MPI_DOUBLE, MPI_UINT64_T, MPI_BYTE, MPI_DOUBLE_INT, MPI_LONG_DOUBLE,
                                 MPI_C_BOOL, MPI_INT8_T };
    int k = 0;
    for (size_t i = 0; i < sizeof red / sizeof red[0]; i++) {
        const dtype_info *t = find_type(red[i]);
        if (!t || !t->ops)
            continue;
        rt[k] = t;
        mt[k] = move_types[k % nmove];
        k++;
    }
    *n = k;
}

static void section_batches(int mode)
{
    const dtype_info *rt[8], *mt[8];
    int nt, salt = 0;
    const size_t counts_full[] = { 1, 1001, LARGE_COUNT / 4 + 3 };
    const size_t ncounts = g_quick ? 2 : 3;
    batch_types(rt, mt, &nt);
    for (int ci = -1; ci < ncomms; ci++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (ci >= 0 && (comms[ci].comm == MPI_COMM_NULL || lite_skips(ci)))
            continue;
        for (int ti = 0; ti < nt; ti++) {
            /* the cross-communicator batch and the others: every type; large count on world */
            for (size_t k = 0; k < ncounts; k++) {
                if (k == 2 && ci != 0)
                    continue;
                if (ci > 0 && g_quick && ti % 2)
                    continue;
                salt++;
                if (mode == M_NONBLOCKING)
                    nonblocking_batch(ci, rt[ti], mt[ti], counts_full[k], salt);
#if HAVE_PERSISTENT
                else
                    persistent_batch(ci, rt[ti], mt[ti], counts_full[k], salt);
#endif
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* gpurdma's MPI_T counters                                                  */
/* ------------------------------------------------------------------------ */

/* For reduce_scatter_block, reduce_scatter, allgather, bcast, reduce: the integrator's
 * name and the brief's alternative. */
static const char *const g_pvar_names[2][5] = {
    { "coll_gpurdma_reduce_scatter_block_calls", "coll_gpurdma_reduce_scatter_calls", "coll_gpurdma_allgather_calls",
      "coll_gpurdma_bcast_calls", "coll_gpurdma_reduce_calls" },
    { "gpurdma_reduce_scatter_block_calls", "gpurdma_reduce_scatter_calls", "gpurdma_allgather_calls",
      "gpurdma_bcast_calls", "gpurdma_reduce_calls" },
};
static pvars g_pvars[2];

static const char *g_declined; /* --expect-declined: collectives gpurdma must not have served */

static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    if (!list)
        return false;
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
            return true;
    return false;
}

static bool declined(const char *name)
{
    return in_list(g_declined, name);
}

static void check_counters(bool expect_used, bool require)
{
    /* per collective: found anywhere (1/0), growth */
    long long mine[5][2], all_min[5][2], all_max[5][2];
    for (int k = 0; k < 5; k++) {
        const bool f0 = g_pvars[0].found[k], f1 = g_pvars[1].found[k];
        mine[k][0] = f0 || f1;
        mine[k][1] = (long long)(f0 ? pvars_read(&g_pvars[0], k) : f1 ? pvars_read(&g_pvars[1], k) : 0);
    }
    MPI_Allreduce(mine, all_min, 10, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine, all_max, 10, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (g_world_rank == 0) {
        char line[512];
        int n = snprintf(line, sizeof line, "gpurdma MPI_T counters (min..max over ranks):");
        for (int k = 0; k < 5; k++)
            n += snprintf(line + n, sizeof line - (size_t)n, " %s %s", coll_short[k],
                          all_max[k][0] ? "" : "missing");
        (void)n;
        printf("%s\n", line);
        for (int k = 0; k < 5; k++)
            if (all_max[k][0])
                printf("  %-22s %lld..%lld calls (this program started %lld on rank 0)\n", coll_short[k],
                       all_min[k][1], all_max[k][1], g_calls[k]);
    }
    if (!expect_used)
        return;
    for (int k = 0; k < 5; k++) {
        /* reduce_scatter_block's calls may count as reduce_scatter's */
        const bool alias = k == C_RSB && !all_max[k][0] && all_max[C_RS][0];
        if (!all_min[k][0] && !alias) {
            if (require)
                fail("GPURDMA_REQUIRE_COLL_PVARS=1: gpurdma's MPI_T counter coll_gpurdma_%s_calls is missing%s",
                     coll_short[k], all_max[k][0] ? " on some ranks" : "");
            else if (g_world_rank == 0)
                printf("note: gpurdma's MPI_T counter coll_gpurdma_%s_calls does not exist (yet): not checked "
                       "(GPURDMA_REQUIRE_COLL_PVARS=1 to fail)\n",
                       coll_short[k]);
            continue;
        }
        if (alias)
            continue;
        if (declined(coll_short[k])) {
            /* Switched off (coll_gpurdma_<coll>_enable 0): every call went to the previous module. */
            if (mine[k][1] != 0)
                fail("--expect-declined: gpurdma counted %lld %s calls on this rank", mine[k][1], coll_name[k]);
            else
                g_passed++;
            continue;
        }
        if (g_calls[k] && mine[k][1] == 0)
            fail("GPURDMA_EXPECT_USED=1: gpurdma's counter for %s is 0 on this rank after %lld calls", coll_name[k],
                 g_calls[k]);
        else
            g_passed++;
    }
}

/* ------------------------------------------------------------------------ */

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

static bool env_is_1(const char *name)
{
    const char *v = getenv(name);
    return v && !strcmp(v, "1");
}

int main(int argc, char **argv)
{
    int provided;
    long long totals[3];
    bool expect_used = env_is_1("GPURDMA_EXPECT_USED"), require = env_is_1("GPURDMA_REQUIRE_COLL_PVARS");
    double t0, t1;

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            g_quick = true;
        } else if (!strcmp(argv[i], "--verbose")) {
            g_verbose = true;
        } else if (!strcmp(argv[i], "--strict")) {
            g_strict = true;
        } else if (!strcmp(argv[i], "--no-mpich-workaround")) {
            g_mpich_workaround = false;
        } else if (!strcmp(argv[i], "--lite")) {
            g_lite = g_quick = g_rep_only = true;
        } else if (!strcmp(argv[i], "--rep-only")) {
            g_rep_only = true;
        } else if (!strcmp(argv[i], "--trace")) {
            g_trace = true;
        } else if (!strcmp(argv[i], "--expect-used")) {
            expect_used = true;
        } else if (!strcmp(argv[i], "--require-pvars")) {
            require = true;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            g_seed = strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--print") && i + 1 < argc) {
            max_printed_failures = strtoll(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--expect-declined") && i + 1 < argc) {
            g_declined = argv[++i];
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            g_only = argv[++i];
        } else {
            if (g_world_rank == 0)
                fprintf(stderr, "usage: " PROGRAM " [--quick] [--lite] [--rep-only] [--strict] [--seed N] [--print N] [--verbose] "
                                "[--only blocking,nonblocking,persistent] [--expect-used] [--require-pvars] [--trace] "
                                "[--no-mpich-workaround]\n");
            MPI_T_finalize();
            MPI_Finalize();
            return 2;
        }
    }
    if (require)
        expect_used = true;

    init_types();
    check_types(g_verbose);
    init_move_types();
    create_comms();
    pvars_watch(&g_pvars[0], g_pvar_names[0], 5);
    pvars_watch(&g_pvars[1], g_pvar_names[1], 5);

    t0 = MPI_Wtime();
#define SECTION(name, call)                                                                                  \
    do {                                                                                                     \
        if (!selected(name))                                                                                 \
            break;                                                                                           \
        call;                                                                                                \
        t1 = MPI_Wtime();                                                                                    \
        if (g_verbose && g_world_rank == 0)                                                                  \
            printf("%-12s %7.2f s (rank 0: %lld passed, %lld failed)\n", name, t1 - t0, g_passed, g_failed); \
        t0 = t1;                                                                                             \
    } while (0)
    SECTION("blocking", section_blocking());
    SECTION("nonblocking", section_batches(M_NONBLOCKING));
#if HAVE_PERSISTENT
    SECTION("persistent", section_batches(M_PERSISTENT));
#else
    if (g_world_rank == 0 && selected("persistent"))
        printf("note: this MPI has no persistent collectives: persistent section skipped\n");
#endif
#undef SECTION

    MPI_Barrier(MPI_COMM_WORLD);
    free_comms();
    check_counters(expect_used, require);
    pvars_done(&g_pvars[1]);
    pvars_done(&g_pvars[0]);
    MPI_T_finalize();
    check_totals(g_lib_matches, totals);
    if (g_world_rank == 0) {
        long long calls[NCOLL], sum[NCOLL];
        memcpy(calls, g_calls, sizeof calls);
        (void)sum;
        printf("calls on rank 0: reduce_scatter_block %lld, reduce_scatter %lld, allgather %lld, bcast %lld, "
               "reduce %lld, allreduce %lld; persistent API: %s\n",
               calls[C_RSB], calls[C_RS], calls[C_AG], calls[C_BC], calls[C_RED], calls[C_AR], PERSISTENT_API);
        if (g_mpich_rerooted)
            printf("note: MPICH: %lld in-place calls changed: MPI_Reduce at a root other than 0 went to root 0, "
                   "MPI_Reduce_scatter with unequal counts took equal ones (MPICH 4.0.2 crashes there; "
                   "--no-mpich-workaround to run them)\n",
                   g_mpich_rerooted);
        if (totals[2])
            printf("note: %lld passed checks matched the library's own non-standard op, not the standard\n",
                   totals[2]);
    }
    return check_finish(totals);
}
