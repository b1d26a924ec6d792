/*
 * allreduce_check: correctness of MPI_Allreduce for every predefined C datatype
 * and every reduction op that the MPI standard defines for it.
 *
 * Every rank fills its input deterministically from (seed, case, rank, index) and
 * computes the expected result locally by folding all ranks' inputs in rank order
 * with plain C semantics.  Inputs are chosen so that the exact result does not
 * depend on the reduction order (integer arithmetic wraps modulo 2^N; floating
 * sums and products are exact), so results are compared bit for bit (floating
 * point: by value and sign; padding bytes are ignored).
 *
 * Besides the value, each call also checks that the send buffer is left alone and
 * that nothing is written outside the count elements of the receive buffer.
 *
 * Sections:
 *   matrix     type x op x count x {normal, MPI_IN_PLACE} on several communicators
 *   large      ~4 MiB messages for a few (type, op) pairs on MPI_COMM_WORLD
 *   bitident   float/double SUM/PROD of random inputs: every rank must get the
 *              same bits, within the forward error bound of the exact result
 *   unaligned  send/recv buffers at byte offsets 1..7 (MPI_INT, MPI_DOUBLE SUM)
 *
 * Usage: allreduce_check [--quick] [--strict] [--seed N] [--print N] [--verbose]
 */
#include <mpi.h>

#include <complex.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>

#define PROGRAM "allreduce_check"
#define GUARD_BYTES 64          /* checked before and after every receive buffer */
#define GUARD_FILL 0x5A
#define LARGE_MESSAGE_BYTES (4u << 20)
#define BITIDENT_MAX_BYTES (8u << 20)

#include "check_common.h" /* fail, xmalloc, summary; --print N sets max_printed_failures */

/* ------------------------------------------------------------------------ */
/* Results bookkeeping                                                       */
/* ------------------------------------------------------------------------ */

static long long g_lib_matches; /* results accepted as the library's own (non-standard) op */

static void pass(void) { g_passed++; }

/*
 * Work buffers, kept between calls and grown as needed: fresh multi-MiB
 * allocations for every call would spend much of the run in page faults.
 */
enum { B_EXPECTED, B_INPUT, B_GOT, B_LIB, B_SEND, B_RECV, B_ROOT, NUM_BUFS };
static void *g_buf[NUM_BUFS];
static size_t g_buf_size[NUM_BUFS];

static void *buf(int slot, size_t bytes)
{
    if (g_buf_size[slot] < bytes || !g_buf[slot]) {
        free(g_buf[slot]);
        g_buf[slot] = xmalloc(bytes);
        g_buf_size[slot] = bytes;
    }
    return g_buf[slot];
}

static void free_bufs(void)
{
    for (int i = 0; i < NUM_BUFS; i++) {
        free(g_buf[i]);
        g_buf[i] = NULL;
        g_buf_size[i] = 0;
    }
}

#include "comm_cases.h" /* describe_comm, create_reversed_subset */
#include "matrix.h"     /* types, ops, inputs, reference fold */

/* ------------------------------------------------------------------------ */
/* Communicators                                                             */
/* ------------------------------------------------------------------------ */

typedef struct comm_case {
    char name[48];
    MPI_Comm comm; /* MPI_COMM_NULL on ranks outside it */
    int rank, size;
    bool all_types; /* whole matrix; else the T_REP types only, fewer counts */
    bool large;     /* counts above REP_ONLY_ABOVE too */
    bool owned;     /* free at the end */
} comm_case;

#define MAX_COMMS 8
static comm_case comms[MAX_COMMS];
static int ncomms;

static void add_comm(const char *name, MPI_Comm c, bool all_types, bool large, bool owned)
{
    comm_case *cc = &comms[ncomms++];
    cc->comm = c;
    cc->all_types = all_types;
    cc->large = large;
    cc->owned = owned;
    describe_comm(c, name, cc->name, sizeof cc->name, &cc->rank, &cc->size);
}

static void create_comms(void)
{
    int rank, size;
    MPI_Comm c;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Every type on world and self, the representative ones on the others;
     * the largest matrix count on world, self and the reversed subset. */
    add_comm("world", MPI_COMM_WORLD, true, true, false);

    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    add_comm("dup", c, false, false, true);

    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c);
    add_comm("split_parity", c, false, false, true);

    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &c);
    add_comm("split_parity_reversed", c, false, false, true);

    c = create_reversed_subset();
    add_comm("create_group_reversed", c, false, true, true);

    add_comm("self", MPI_COMM_SELF, true, true, false);
}

static void free_comms(void)
{
    for (int i = 0; i < ncomms; i++)
        if (comms[i].owned && comms[i].comm != MPI_COMM_NULL)
            MPI_Comm_free(&comms[i].comm);
}

/* ------------------------------------------------------------------------ */
/* One checked MPI_Allreduce                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Run one MPI_Allreduce on `cc` and check it.  `input` is this rank's input and
 * `expected` the reduction, both aligned; send_off/recv_off displace the buffers
 * handed to MPI from malloc's alignment by that many bytes.
 */
static void check_call(const comm_case *cc, const dtype_info *t, int op, size_t count,
                       bool in_place, size_t send_off, size_t recv_off, const void *input,
                       const void *expected, const void *lib_expected, void *got)
{
    const size_t bytes = count * t->size;
    unsigned char *sendbuf = NULL;
    unsigned char *recvbase = buf(B_RECV, GUARD_BYTES + recv_off + bytes + GUARD_BYTES);
    unsigned char *recvbuf = recvbase + GUARD_BYTES + recv_off;
    char what[256], e_str[128], g_str[128];
    int rc;

    snprintf(what, sizeof what, "comm %s rank %d: %s %s count %zu%s", cc->name, cc->rank,
             op_name[op], t->name, count, in_place ? " MPI_IN_PLACE" : "");
    if (send_off || recv_off)
        snprintf(what + strlen(what), sizeof what - strlen(what),
                 " sendbuf+%zu recvbuf+%zu", send_off, recv_off);

    memset(recvbase, GUARD_FILL, GUARD_BYTES + recv_off + bytes + GUARD_BYTES);
    if (in_place) {
        memcpy(recvbuf, input, bytes);
    } else {
        sendbuf = (unsigned char *)buf(B_SEND, send_off + bytes) + send_off;
        memcpy(sendbuf, input, bytes);
    }

    rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, t->dt,
                       op_handle(op), cc->comm);
    if (rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, err, &len);
        fail("%s: MPI_Allreduce returned %d (%s)", what, rc, err);
        return;
    }

    memcpy(got, recvbuf, bytes);
    {
        size_t first_bad, nlib;
        const size_t nbad = matrix_compare(t, count, expected, lib_expected, got, &first_bad, &nlib);
        if (nlib && !nbad)
            g_lib_matches++;
        if (nbad) {
            const size_t i = first_bad;
            t->show((const unsigned char *)expected + i * t->size, e_str, sizeof e_str);
            t->show((const unsigned char *)got + i * t->size, g_str, sizeof g_str);
            fail("%s: index %zu expected %s got %s (%zu of %zu elements wrong)", what, i,
                 e_str, g_str, nbad, count);
            return;
        }
    }
    if (!bytes_are(recvbase, GUARD_BYTES + recv_off, GUARD_FILL) ||
        !bytes_are(recvbuf + bytes, GUARD_BYTES, GUARD_FILL)) {
        fail("%s: bytes written outside the receive buffer", what);
        return;
    }
    if (!in_place && memcmp(sendbuf, input, bytes) != 0) {
        fail("%s: send buffer modified", what);
        return;
    }
    pass();
}

/* Expected value once, then the call in normal and in-place mode. */
static void run_case(int comm_idx, const dtype_info *t, int op, size_t count)
{
    const comm_case *cc = &comms[comm_idx];
    const size_t bytes = count * t->size;
    const uint64_t seed = case_seed(comm_idx, t, op, count, 0);
    void *expected = buf(B_EXPECTED, bytes), *input = buf(B_INPUT, bytes);
    void *got = buf(B_GOT, bytes);
    void *lib_expected = library_expected(t, op, cc->size, count, seed, buf(B_LIB, bytes), got);

    compute_expected(t, op, cc->size, count, seed, expected, got);
    t->gen(op, cc->rank, 0, count, seed, input);
    check_call(cc, t, op, count, false, 0, 0, input, expected, lib_expected, got);
    check_call(cc, t, op, count, true, 0, 0, input, expected, lib_expected, got);
}

/* ------------------------------------------------------------------------ */
/* Sections                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Counts.  On world and self every (type, op) runs at every count up to 4097;
 * on the other communicators the T_REP types (one per element size and kind)
 * run at the counts marked `all`.  Above 4097 (chunking and pipelining, not
 * the op kernels) only the T_REP types with their first op run, on the
 * communicators that have `large`.
 * Every call runs twice: normal and MPI_IN_PLACE.
 */
static const struct { size_t count; bool all; } counts_full[] = {
    { 0, true }, { 1, true }, { 2, false }, { 3, true }, { 7, false }, { 31, true },
    { 1000, true }, { 4097, true }, { 65537, true },
};
static const struct { size_t count; bool all; } counts_quick[] = {
    { 0, true }, { 1, true }, { 3, true }, { 31, true }, { 1000, true },
};
#define REP_ONLY_ABOVE 4097

static int first_op(unsigned ops)
{
    int op = 0;
    while (op < NUM_OPS && !(ops & BIT(op)))
        op++;
    return op;
}

static void section_matrix(bool quick, bool verbose)
{
    const size_t ncounts = quick ? sizeof counts_quick / sizeof counts_quick[0]
                                 : sizeof counts_full / sizeof counts_full[0];
    for (int c = 0; c < ncomms; c++) {
        const comm_case *cc = &comms[c];
        const double t0 = MPI_Wtime();
        const long long calls0 = g_passed + g_failed;
        if (cc->comm == MPI_COMM_NULL)
            continue;
        for (int ti = 0; ti < ntypes; ti++) {
            const dtype_info *t = &types[ti];
            const bool rep = t->flags & T_REP;
            if (!cc->all_types && !rep)
                continue;
            for (int op = 0; op < NUM_OPS; op++) {
                if (!(t->ops & BIT(op)))
                    continue;
                for (size_t k = 0; k < ncounts; k++) {
                    size_t count = quick ? counts_quick[k].count : counts_full[k].count;
                    bool all = quick ? counts_quick[k].all : counts_full[k].all;
                    if (count > REP_ONLY_ABOVE &&
                        (!rep || !cc->large || op != first_op(t->ops)))
                        continue;
                    if (!cc->all_types && !all)
                        continue;
                    run_case(c, t, op, count);
                }
            }
        }
        if (verbose && g_world_rank == 0)
            printf("  %-34s %6lld calls %7.2f s\n", cc->name, g_passed + g_failed - calls0,
                   MPI_Wtime() - t0);
    }
}

/* ~4 MiB messages on MPI_COMM_WORLD (comms[0]) for a few (type, op) pairs. */
static void section_large(void)
{
    const struct { MPI_Datatype dt; int op; } pairs[] = {
        { MPI_FLOAT, OP_SUM }, { MPI_INT, OP_SUM }, { MPI_DOUBLE, OP_MAX }, { MPI_CHAR, OP_SUM },
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const dtype_info *t = find_type(pairs[i].dt);
        if (!t || !(t->ops & BIT(pairs[i].op)))
            continue;
        run_case(0, t, pairs[i].op, LARGE_MESSAGE_BYTES / t->size);
    }
}

/*
 * Bit identity: float/double SUM/PROD of random inputs, which are not exact, so
 * the result depends on the reduction order.  Every rank must get the same bits
 * (compared with rank 0's via MPI_Bcast), and the result must lie within the
 * forward error bound of any summation/multiplication order:
 *   SUM:  |got - exact| <= (n-1) * u * sum|x_r| (+ slack),  PROD: <= 2n u |exact|.
 */
#define DEFINE_BITIDENT_GEN(tag, T)                                                     \
    static void bitident_gen_##tag(int op, int rank, size_t first, size_t n,            \
                                   uint64_t seed, void *out)                            \
    {                                                                                   \
        const uint64_t base = rank_base(seed, rank);                                    \
        T *o = out;                                                                     \
        for (size_t i = 0; i < n; i++) {                                                \
            uint64_t h = elem_hash(base, first + i), r = rehash(h);                     \
            double m = 1.0 + (double)(r >> 11) * 0x1p-53; /* [1, 2) */                  \
            if (op == OP_SUM) /* [-1, 1], exponents down to 2^-24 */                    \
                o[i] = (T)(((h & 1) ? -m : m) * pow2(-1 - (int)((h >> 1) % 24)));       \
            else /* +-[0.5, 2) */                                                       \
                o[i] = (T)(((h & 1) ? -m : m) * pow2(-(int)((h >> 1) % 2)));            \
        }                                                                               \
    }                                                                                   \
    static long double bitident_get_##tag(const void *p, size_t i)                      \
    {                                                                                   \
        return ((const T *)p)[i];                                                       \
    }
DEFINE_BITIDENT_GEN(float, float)
DEFINE_BITIDENT_GEN(double, double)

/* Reference values and error bounds are checked on at most this many elements. */
#define BITIDENT_SAMPLES 8192

static void bitident_case(const comm_case *cc, bool is_double, int op, size_t count,
                          bool in_place)
{
    const size_t esize = is_double ? sizeof(double) : sizeof(float);
    const size_t bytes = count * esize;
    const uint64_t seed = mix64(g_seed ^ 0xB17B17ull ^ (uint64_t)op * 31 ^ count ^ is_double);
    const long double u = is_double ? DBL_EPSILON / 2 : FLT_EPSILON / 2; /* unit roundoff */
    const long double tiny = is_double ? DBL_MIN : FLT_MIN;
    const size_t nsamples = count < BITIDENT_SAMPLES ? count : BITIDENT_SAMPLES;
    void (*gen)(int, int, size_t, size_t, uint64_t, void *) =
        is_double ? bitident_gen_double : bitident_gen_float;
    long double (*get)(const void *, size_t) =
        is_double ? bitident_get_double : bitident_get_float;
    unsigned char *mine = buf(B_GOT, bytes), *in = buf(B_INPUT, bytes);
    unsigned char *root = buf(B_ROOT, bytes);
    char what[160];
    int rc;

    snprintf(what, sizeof what, "bitident comm %s rank %d: %s %s count %zu%s", cc->name,
             cc->rank, op_name[op], is_double ? "MPI_DOUBLE" : "MPI_FLOAT", count,
             in_place ? " MPI_IN_PLACE" : "");

    gen(op, cc->rank, 0, count, seed, in);
    if (in_place)
        memcpy(mine, in, bytes);
    rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : in, mine, (int)count,
                       is_double ? MPI_DOUBLE : MPI_FLOAT, op_handle(op), cc->comm);
    if (rc != MPI_SUCCESS) {
        fail("%s: MPI_Allreduce returned %d", what, rc);
        memset(mine, 0, bytes); /* still join the broadcast below */
    }
    if (cc->rank == 0)
        memcpy(root, mine, bytes);
    MPI_Bcast(root, (int)bytes, MPI_BYTE, 0, cc->comm);
    if (rc != MPI_SUCCESS)
        return;

    /* 1. every rank has rank 0's bits */
    if (memcmp(mine, root, bytes) != 0) {
        size_t i = 0, ndiff = 0;
        for (size_t j = count; j-- > 0;)
            if (memcmp(mine + j * esize, root + j * esize, esize) != 0) {
                i = j;
                ndiff++;
            }
        fail("%s: index %zu: rank 0 got %La, this rank got %La (%zu of %zu differ)", what, i,
             get(root, i), get(mine, i), ndiff, count);
        return;
    }
    /* 2. within the forward error bound of the exact result (sampled elements):
     *    SUM |got - exact| <= n u sum|x_r|,  PROD |got - exact| <= 2 n u |exact| */
    for (size_t k = 0; k < nsamples; k++) {
        /* spread over [0, count - 1], both ends included */
        const size_t i = nsamples == count ? k : k * (count - 1) / (nsamples - 1);
        long double exact = op == OP_SUM ? 0.0L : 1.0L, mag = 0.0L, bound, got;
        unsigned char x[sizeof(double)];
        for (int r = 0; r < cc->size; r++) {
            long double v;
            gen(op, r, i, 1, seed, x);
            v = get(x, 0);
            exact = op == OP_SUM ? exact + v : exact * v;
            mag += fabsl(v);
        }
        got = get(mine, i);
        bound = op == OP_SUM ? cc->size * u * mag : 2 * cc->size * u * fabsl(exact);
        if (!(fabsl(got - exact) <= bound + tiny)) {
            fail("%s: index %zu: got %La, exact %La: outside the error bound %Lg", what, i,
                 got, exact, bound);
            return;
        }
    }
    pass();
}

/* SUM at 1, 1000, 100003 and ~8 MiB; PROD up to 100003; MPI_IN_PLACE for SUM
 * at 1000 and 100003. */
static void section_bitident(bool quick)
{
    const size_t counts[] = { 1, 1000, 100003, 0 /* ~8 MiB, per type */ };
    const size_t ncounts = quick ? 2 : 4;
    for (int is_double = 0; is_double <= 1; is_double++)
        for (int op = OP_SUM; op <= OP_PROD; op++)
            for (size_t k = 0; k < ncounts; k++) {
                size_t count = counts[k] ? counts[k]
                                         : BITIDENT_MAX_BYTES / (is_double ? 8 : 4);
                if (op == OP_PROD && !counts[k])
                    continue;
                bitident_case(&comms[0], is_double, op, count, false);
                if (op == OP_SUM && (count == 1000 || count == 100003))
                    bitident_case(&comms[0], is_double, op, count, true);
            }
}

/* Send and receive buffers at byte offsets 1..7 from malloc's alignment. */
static void section_unaligned(bool quick)
{
    const MPI_Datatype dts[] = { MPI_INT, MPI_DOUBLE };
    const size_t counts[] = { 1, 31, 4097, 65537 };
    const size_t ncounts = quick ? 3 : 4;
    const comm_case *cc = &comms[0];
    for (size_t d = 0; d < 2; d++) {
        const dtype_info *t = find_type(dts[d]);
        for (size_t k = 0; k < ncounts; k++) {
            const size_t count = counts[k], bytes = count * t->size;
            const uint64_t seed = case_seed(0, t, OP_SUM, count, 99);
            void *expected = buf(B_EXPECTED, bytes), *input = buf(B_INPUT, bytes);
            void *got = buf(B_GOT, bytes);
            compute_expected(t, OP_SUM, cc->size, count, seed, expected, got);
            t->gen(OP_SUM, cc->rank, 0, count, seed, input);
            for (size_t off = 1; off <= 7; off++) {
                check_call(cc, t, OP_SUM, count, false, off, 8 - off, input, expected, NULL,
                           got);
                check_call(cc, t, OP_SUM, count, true, 0, off, input, expected, NULL, got);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */

static double cpu_seconds(void)
{
    return (double)clock() / CLOCKS_PER_SEC;
}

static void usage(void)
{
    if (g_world_rank == 0)
        fprintf(stderr,
                "usage: " PROGRAM " [--quick] [--strict] [--seed N] [--print N] [--verbose]\n");
}

int main(int argc, char **argv)
{
    bool quick = false, verbose = false;
    double t0, t1;
    long long totals[3];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

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
        } else {
            usage();
            MPI_Finalize();
            return 2;
        }
    }

    init_types();
    check_types(verbose);
    create_comms();

    t0 = MPI_Wtime();
#define SECTION(name, call)                                                             \
    do {                                                                                \
        double c0 = cpu_seconds();                                                      \
        call;                                                                           \
        t1 = MPI_Wtime();                                                               \
        if (verbose && g_world_rank == 0)                                               \
            printf("%-10s %7.2f s wall, %6.2f s cpu (rank 0: %lld passed, %lld failed)\n", \
                   name, t1 - t0, cpu_seconds() - c0, g_passed, g_failed);              \
        t0 = t1;                                                                        \
    } while (0)
    SECTION("matrix", section_matrix(quick, verbose));
    if (!quick)
        SECTION("large", section_large());
    SECTION("bitident", section_bitident(quick));
    SECTION("unaligned", section_unaligned(quick));
#undef SECTION

    free_comms();
    free_bufs();

    check_totals(g_lib_matches, totals);
    if (g_world_rank == 0 && totals[2])
        printf("note: %lld passed checks matched the library's own non-standard op "
               "(see the notes above), not the standard\n", totals[2]);
    return check_finish(totals);
}
