/*
 * fallback_check: MPI_Allreduce calls that a collective component has to hand on
 * to another implementation must still give the right answer:
 *
 *   - a user-defined commutative op (integer sum, MPI_Op_create(commute = 1))
 *   - a user-defined NON-commutative op: 2x2 integer matrix product on a
 *     contiguous type of 4 ints; the result must be M_0 * M_1 * ... * M_{n-1}
 *     in rank order
 *   - derived datatypes: MPI_Type_contiguous(3, MPI_INT), MPI_Type_vector
 *     (non-contiguous), MPI_Type_create_resized (holes between elements),
 *     MPI_Type_dup(MPI_DOUBLE).  Holes must not be written.
 *     The standard allows predefined ops only on the predefined types it lists
 *     (MPI-3.1 5.9.2; derived types with predefined ops are an MPI_Accumulate
 *     feature), and Open MPI rejects MPI_SUM on them with MPI_ERR_OP, so these
 *     use user-defined sum/max ops that read the layout from the datatype.
 *   - predefined ops on predefined types a component may not map:
 *     MPI_CXX_DOUBLE_COMPLEX (MPI_SUM), and the Fortran MPI_INTEGER (MPI_SUM) and
 *     MPI_DOUBLE_PRECISION (MPI_MAX), where the library has them
 *   - an inter-communicator (two halves of MPI_COMM_WORLD): each group gets the
 *     reduction of the OTHER group's data, in that group's rank order; all the
 *     cases above run there, plus predefined ops (MPI_INT MPI_SUM, MPI_DOUBLE
 *     MPI_MAX), which on intra-communicators are a control
 *
 * Every case runs on MPI_COMM_WORLD and on a reversed-order split of it, normal
 * and MPI_IN_PLACE, and (normal only: MPI_IN_PLACE is not allowed there) on the
 * inter-communicator.
 *
 * Usage: fallback_check [--quick] [--seed N]
 */
#include <mpi.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM "fallback_check"
#define GUARD_BYTES 64
#define FILL 0xEE /* holes, guards */

#include "check_common.h" /* fail, xmalloc, summary */

static uint64_t g_seed = 7;

static inline uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ------------------------------------------------------------------------ */
/* Cases: a datatype layout and an op                                        */
/* ------------------------------------------------------------------------ */

enum { K_SUM, K_MAX, K_MATMUL };

#define MAX_CELLS 8
typedef struct test_case {
    const char *name;
    MPI_Datatype dt;
    MPI_Op op;
    int kind;                /* K_*: what the op computes */
    bool is_double;          /* base type of the cells: double, else int */
    bool no_overflow;        /* integer inputs small enough that sums cannot overflow */
    size_t extent;           /* bytes per element of dt */
    int ncells;              /* base values per element */
    size_t cell[MAX_CELLS];  /* their byte offsets; the rest of the extent is holes */
} test_case;

static test_case cases[16];
static int ncases;
static MPI_Datatype owned_types[8];
static int nowned;
static MPI_Op op_user_sum, op_user_max_nc, op_matmul;
static long long g_user_op_unknown_type; /* user op called with a datatype we never used */

/* 2x2 matrices of int, row-major { m00, m01, m10, m11 }; c = a * b, wrapping. */
static void mat_mul(const int *a, const int *b, int *c)
{
    unsigned r[4];
    r[0] = (unsigned)a[0] * (unsigned)b[0] + (unsigned)a[1] * (unsigned)b[2];
    r[1] = (unsigned)a[0] * (unsigned)b[1] + (unsigned)a[1] * (unsigned)b[3];
    r[2] = (unsigned)a[2] * (unsigned)b[0] + (unsigned)a[3] * (unsigned)b[2];
    r[3] = (unsigned)a[2] * (unsigned)b[1] + (unsigned)a[3] * (unsigned)b[3];
    memcpy(c, r, sizeof r);
}

/*
 * out = left op right for `count` elements in tc's layout (out may alias either);
 * only the cells are read and written.  Integer sums wrap.
 */
static void apply(const test_case *tc, int kind, size_t count, const unsigned char *left,
                  const unsigned char *right, unsigned char *out)
{
    for (size_t e = 0; e < count; e++) {
        const size_t base = e * tc->extent;
        if (kind == K_MATMUL) {
            int x[4], y[4];
            for (int c = 0; c < 4; c++) {
                memcpy(&x[c], left + base + tc->cell[c], sizeof(int));
                memcpy(&y[c], right + base + tc->cell[c], sizeof(int));
            }
            mat_mul(x, y, x);
            for (int c = 0; c < 4; c++)
                memcpy(out + base + tc->cell[c], &x[c], sizeof(int));
            continue;
        }
        for (int c = 0; c < tc->ncells; c++) {
            const size_t at = base + tc->cell[c];
            if (tc->is_double) {
                double x, y;
                memcpy(&x, left + at, sizeof x);
                memcpy(&y, right + at, sizeof y);
                x = kind == K_MAX ? (x > y ? x : y) : x + y;
                memcpy(out + at, &x, sizeof x);
            } else {
                int x, y;
                unsigned r;
                memcpy(&x, left + at, sizeof x);
                memcpy(&y, right + at, sizeof y);
                r = kind == K_MAX ? (unsigned)(x > y ? x : y) : (unsigned)x + (unsigned)y;
                memcpy(out + at, &r, sizeof r);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* User-defined ops: MPI calls them with inout = in op inout, "in" being the  */
/* lower-ranked operand.  The layout comes from the datatype argument.        */
/* ------------------------------------------------------------------------ */

static const test_case *case_of(MPI_Datatype dt)
{
    for (int i = 0; i < ncases; i++)
        if (cases[i].dt == dt)
            return &cases[i];
    return NULL;
}

static void user_op(int kind, void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const test_case *tc = case_of(*dt);
    if (!tc) {
        g_user_op_unknown_type++;
        return;
    }
    apply(tc, kind, (size_t)*len, in, inout, inout);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    user_op(K_SUM, in, inout, len, dt);
}

static void user_max(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    user_op(K_MAX, in, inout, len, dt);
}

static void user_matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    user_op(K_MATMUL, in, inout, len, dt);
}

static MPI_Datatype commit(MPI_Datatype t)
{
    MPI_Type_commit(&t);
    owned_types[nowned++] = t;
    return t;
}

static void add_case(const char *name, MPI_Datatype dt, MPI_Op op, int kind, bool is_double,
                     int ncells, const size_t *cell)
{
    test_case *c = &cases[ncases++];
    MPI_Aint lb, extent;
    MPI_Type_get_extent(dt, &lb, &extent);
    c->name = name;
    c->dt = dt;
    c->op = op;
    c->kind = kind;
    c->is_double = is_double;
    c->extent = (size_t)extent;
    c->ncells = ncells;
    c->no_overflow = false;
    memcpy(c->cell, cell, (size_t)ncells * sizeof *cell);
}

/* Can this predefined type be reduced with op here, and is it laid out as a C
 * type of csize bytes?  (Fortran types exist only if the library has Fortran.) */
static bool usable(MPI_Datatype dt, size_t csize, MPI_Op op)
{
    int size = 0;
    unsigned char in[16] = { 0 }, inout[16] = { 0 };
    if (MPI_Type_size(dt, &size) != MPI_SUCCESS || size != (int)csize)
        return false;
    return MPI_Reduce_local(in, inout, 1, dt, op) == MPI_SUCCESS;
}

static void create_cases(void)
{
    MPI_Datatype t;
    static const size_t one[] = { 0 };
    static const size_t mat[] = { 0, 4, 8, 12 };
    static const size_t three[] = { 0, 4, 8 };
    /* vector(4 blocks of 2 ints, stride 3): ints 0,1, 3,4, 6,7, 9,10 (extent 11 ints) */
    static const size_t vec[] = { 0, 4, 12, 16, 24, 28, 36, 40 };

    MPI_Op_create(user_sum, 1, &op_user_sum);
    MPI_Op_create(user_max, 0, &op_user_max_nc); /* commutative, but declared not to be */
    MPI_Op_create(user_matmul, 0, &op_matmul);

    add_case("MPI_INT, MPI_SUM", MPI_INT, MPI_SUM, K_SUM, false, 1, one);
    add_case("MPI_DOUBLE, MPI_MAX", MPI_DOUBLE, MPI_MAX, K_MAX, true, 1, one);
    /* MPI_INT with a user op: case_of(MPI_INT) finds the layout of the entry above */
    add_case("MPI_INT, user commutative sum", MPI_INT, op_user_sum, K_SUM, false, 1, one);

    MPI_Type_contiguous(4, MPI_INT, &t);
    add_case("contiguous(4, MPI_INT), user non-commutative 2x2 matrix product", commit(t),
             op_matmul, K_MATMUL, false, 4, mat);

    MPI_Type_contiguous(3, MPI_INT, &t);
    add_case("contiguous(3, MPI_INT), user sum", commit(t), op_user_sum, K_SUM, false, 3,
             three);

    MPI_Type_vector(4, 2, 3, MPI_INT, &t);
    t = commit(t);
    add_case("vector(4, 2, stride 3, MPI_INT), user sum", t, op_user_sum, K_SUM, false, 8, vec);
    add_case("vector(4, 2, stride 3, MPI_INT), user max declared non-commutative", t,
             op_user_max_nc, K_MAX, false, 8, vec);

    MPI_Type_create_resized(MPI_DOUBLE, 0, 16, &t);
    add_case("resized(MPI_DOUBLE, extent 16), user sum", commit(t), op_user_sum, K_SUM, true,
             1, one);

    MPI_Type_dup(MPI_DOUBLE, &t);
    owned_types[nowned++] = t; /* a duplicate of a committed type is committed */
    add_case("dup(MPI_DOUBLE), user sum", t, op_user_sum, K_SUM, true, 1, one);

    /*
     * Predefined ops reach a collective component with a datatype it may not map
     * only through predefined types it does not know: here MPI_CXX_DOUBLE_COMPLEX
     * (gpurdma maps C's complex types, not C++'s), whose sum is the sum of its two
     * doubles. Then the Fortran ones, which C code may use and gpurdma maps where
     * they have the C sizes (Fortran INTEGER has no defined overflow: small inputs).
     */
    static const size_t complex_parts[] = { 0, sizeof(double) };
    if (usable(MPI_CXX_DOUBLE_COMPLEX, 2 * sizeof(double), MPI_SUM))
        add_case("MPI_CXX_DOUBLE_COMPLEX, MPI_SUM", MPI_CXX_DOUBLE_COMPLEX, MPI_SUM, K_SUM,
                 true, 2, complex_parts);
    else if (g_world_rank == 0)
        printf("note: MPI_CXX_DOUBLE_COMPLEX is not usable here: case skipped\n");
    if (usable(MPI_INTEGER, sizeof(int), MPI_SUM)) {
        add_case("MPI_INTEGER (Fortran), MPI_SUM", MPI_INTEGER, MPI_SUM, K_SUM, false, 1, one);
        cases[ncases - 1].no_overflow = true;
    } else if (g_world_rank == 0) {
        printf("note: MPI_INTEGER is not usable as a 4-byte int here: case skipped\n");
    }
    if (usable(MPI_DOUBLE_PRECISION, sizeof(double), MPI_MAX))
        add_case("MPI_DOUBLE_PRECISION (Fortran), MPI_MAX", MPI_DOUBLE_PRECISION, MPI_MAX, K_MAX,
                 true, 1, one);
    else if (g_world_rank == 0)
        printf("note: MPI_DOUBLE_PRECISION is not usable as a double here: case skipped\n");
}

static void free_cases(void)
{
    for (int i = 0; i < nowned; i++)
        MPI_Type_free(&owned_types[i]);
    MPI_Op_free(&op_user_sum);
    MPI_Op_free(&op_user_max_nc);
    MPI_Op_free(&op_matmul);
}

/* ------------------------------------------------------------------------ */
/* Inputs and expected results                                               */
/* ------------------------------------------------------------------------ */

/* Value of cell c of element e of the input of `who` (group and rank). */
static int input_int(const test_case *tc, uint64_t seed, int who, size_t e, int c)
{
    uint64_t h = mix64(seed ^ mix64((uint64_t)who * 1000003u + (uint64_t)e * MAX_CELLS + c));
    if (tc->kind == K_MATMUL) /* entries in [-3, 3]: products of such do not commute */
        return (int)(h % 7) - 3;
    if (tc->kind == K_MAX)
        return (h & 0x300) ? (int)(h % 9) - 4 : (int)(uint32_t)(h >> 32); /* ties, extremes */
    if (tc->no_overflow)
        return (int)(h % 2001) - 1000;
    return (int)(uint32_t)(h >> 32); /* sums wrap */
}

static double input_double(uint64_t seed, int who, size_t e, int c)
{
    uint64_t h = mix64(seed ^ mix64((uint64_t)who * 1000003u + (uint64_t)e * MAX_CELLS + c));
    return (double)((int)(h % 201) - 100); /* exact sums */
}

/* Fill an element buffer with the input of `who`; holes get FILL. */
static void fill(const test_case *tc, uint64_t seed, int who, size_t count, unsigned char *b)
{
    memset(b, FILL, count * tc->extent);
    for (size_t e = 0; e < count; e++)
        for (int c = 0; c < tc->ncells; c++) {
            unsigned char *p = b + e * tc->extent + tc->cell[c];
            if (tc->is_double) {
                double v = input_double(seed, who, e, c);
                memcpy(p, &v, sizeof v);
            } else {
                int v = input_int(tc, seed, who, e, c);
                memcpy(p, &v, sizeof v);
            }
        }
}

/* ------------------------------------------------------------------------ */
/* One checked call                                                          */
/* ------------------------------------------------------------------------ */

typedef struct comm_case {
    const char *name;
    MPI_Comm comm;
    bool inter;
    int rank, size;     /* in the local group */
    int group;          /* inter: 0 or 1; intra: 0 */
    int remote_size;    /* inter: size of the other group */
} comm_case;

static void show_cell(const test_case *tc, const unsigned char *p, char *s, size_t n)
{
    if (tc->is_double) {
        double v;
        memcpy(&v, p, sizeof v);
        snprintf(s, n, "%.17g", v);
    } else {
        int v;
        memcpy(&v, p, sizeof v);
        snprintf(s, n, "%d", v);
    }
}

static void check(const comm_case *cc, const test_case *tc, size_t count, bool in_place,
                  uint64_t seed)
{
    const size_t bytes = count * tc->extent;
    /* whose data is reduced: intra: every rank of the comm; inter: the other group */
    const int src_group = cc->inter ? 1 - cc->group : 0;
    const int nsrc = cc->inter ? cc->remote_size : cc->size;
    const int me = cc->group * 65536 + cc->rank;
    unsigned char *input = xmalloc(bytes), *expected = xmalloc(bytes), *tmp = xmalloc(bytes);
    unsigned char *sendbuf = xmalloc(bytes);
    unsigned char *recvbase = xmalloc(bytes + 2 * GUARD_BYTES), *recvbuf = recvbase + GUARD_BYTES;
    char what[256];
    int rc;

    snprintf(what, sizeof what, "comm %s (size %d) rank %d: %s count %zu%s", cc->name,
             cc->size, cc->rank, tc->name, count, in_place ? " MPI_IN_PLACE" : "");

    fill(tc, seed, src_group * 65536 + 0, count, expected);
    for (int r = 1; r < nsrc; r++) {
        fill(tc, seed, src_group * 65536 + r, count, tmp);
        apply(tc, tc->kind, count, expected, tmp, expected); /* rank order */
    }
    fill(tc, seed, me, count, input);

    memset(recvbase, FILL, bytes + 2 * GUARD_BYTES);
    if (in_place) {
        memcpy(recvbuf, input, bytes);
    } else {
        memcpy(sendbuf, input, bytes);
    }
    rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, tc->dt, tc->op,
                       cc->comm);
    if (rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, err, &len);
        fail("%s: MPI_Allreduce returned %d (%s)", what, rc, err);
        goto out;
    }

    /* values, then holes (must keep FILL: only the type map may be written) */
    {
        size_t nbad = 0, bad_e = 0;
        int bad_c = 0;
        for (size_t e = 0; e < count; e++)
            for (int c = 0; c < tc->ncells; c++) {
                size_t at = e * tc->extent + tc->cell[c];
                if (memcmp(recvbuf + at, expected + at, tc->is_double ? 8 : 4) != 0 &&
                    nbad++ == 0) {
                    bad_e = e;
                    bad_c = c;
                }
            }
        if (nbad) {
            size_t at = bad_e * tc->extent + tc->cell[bad_c];
            char es[64], gs[64];
            show_cell(tc, expected + at, es, sizeof es);
            show_cell(tc, recvbuf + at, gs, sizeof gs);
            fail("%s: element %zu cell %d expected %s got %s (%zu cells wrong)", what, bad_e,
                 bad_c, es, gs, nbad);
            goto out;
        }
    }
    for (size_t e = 0; e < count; e++)
        for (size_t b = 0; b < tc->extent; b++) {
            bool in_map = false;
            for (int c = 0; c < tc->ncells; c++)
                in_map |= b >= tc->cell[c] && b < tc->cell[c] + (tc->is_double ? 8 : 4);
            if (!in_map && recvbuf[e * tc->extent + b] != FILL) {
                fail("%s: hole byte %zu of element %zu was written", what, b, e);
                goto out;
            }
        }
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (recvbase[i] != FILL || recvbuf[bytes + i] != FILL) {
            fail("%s: bytes written outside the receive buffer", what);
            goto out;
        }
    if (!in_place && memcmp(sendbuf, input, bytes) != 0) {
        fail("%s: send buffer modified", what);
        goto out;
    }
    if (g_user_op_unknown_type) {
        fail("%s: user op called with an unknown datatype (%lld times)", what,
             g_user_op_unknown_type);
        g_user_op_unknown_type = 0;
        goto out;
    }
    g_passed++;
out:
    free(input);
    free(expected);
    free(tmp);
    free(sendbuf);
    free(recvbase);
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    bool quick = false;
    int wrank, wsize;
    comm_case comms[3];
    int ncomms = 0;
    MPI_Comm rev, half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    static const size_t counts_full[] = { 1, 2, 17, 1000, 20000 };
    static const size_t counts_quick[] = { 1, 17, 1000 };
    long long totals[3];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    g_world_rank = wrank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = true;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            g_seed = strtoull(argv[++i], NULL, 0);
        } else {
            if (wrank == 0)
                fprintf(stderr, "usage: " PROGRAM " [--quick] [--seed N]\n");
            MPI_Finalize();
            return 2;
        }
    }

    create_cases();

    comms[ncomms++] = (comm_case){ "world", MPI_COMM_WORLD, false, wrank, wsize, 0, 0 };
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev);
    comms[ncomms] = (comm_case){ "world_reversed", rev, false, 0, 0, 0, 0 };
    MPI_Comm_rank(rev, &comms[ncomms].rank);
    MPI_Comm_size(rev, &comms[ncomms].size);
    ncomms++;
    if (wsize >= 2) {
        /* lower half (group 0) and upper half (group 1); leaders are their rank 0s */
        const int lo = wsize / 2, group = wrank < lo ? 0 : 1;
        MPI_Comm_split(MPI_COMM_WORLD, group, wrank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, group == 0 ? lo : 0, 99, &inter);
        comms[ncomms] = (comm_case){ "intercomm", inter, true, 0, 0, group, 0 };
        MPI_Comm_rank(inter, &comms[ncomms].rank);
        MPI_Comm_size(inter, &comms[ncomms].size);
        MPI_Comm_remote_size(inter, &comms[ncomms].remote_size);
        ncomms++;
    } else if (wrank == 0) {
        printf("note: 1 process: the inter-communicator cases are skipped\n");
    }
    for (int i = 0; i < ncomms; i++)
        MPI_Comm_set_errhandler(comms[i].comm, MPI_ERRORS_RETURN);

    {
        const size_t *counts = quick ? counts_quick : counts_full;
        const size_t ncounts = quick ? sizeof counts_quick / sizeof *counts_quick
                                     : sizeof counts_full / sizeof *counts_full;
        for (int c = 0; c < ncomms; c++)
            for (int t = 0; t < ncases; t++)
                for (size_t k = 0; k < ncounts; k++) {
                    uint64_t seed = mix64(g_seed ^ mix64((uint64_t)(c * 100 + t) * 1000 + k));
                    check(&comms[c], &cases[t], counts[k], false, seed);
                    if (!comms[c].inter)
                        check(&comms[c], &cases[t], counts[k], true, seed);
                }
    }

    if (inter != MPI_COMM_NULL)
        MPI_Comm_free(&inter);
    if (half != MPI_COMM_NULL)
        MPI_Comm_free(&half);
    MPI_Comm_free(&rev);
    free_cases();

    check_totals(0, totals);
    return check_finish(totals);
}
