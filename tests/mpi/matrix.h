/*
 * matrix.h: the datatype x op matrix of the MPI tests, shared by allreduce_check
 * (blocking), nonblocking_check (MPI_Iallreduce, persistent) and thread_stress_check.
 *
 * For every predefined C datatype and every op the MPI standard defines for it: a
 * deterministic input per (case seed, rank, element), a reference that folds all
 * ranks' inputs in rank order with C semantics, and an element comparison.  Inputs
 * are chosen so that the exact result does not depend on the reduction order, so a
 * correct allreduce matches the reference bit for bit (floating point: by value and
 * sign; padding bytes ignored).  See README.md, "allreduce_check", for the inputs.
 *
 * Include after check_common.h (fail, xmalloc, g_world_rank).  Call init_types()
 * then check_types() after MPI_Init; the table is read-only afterwards, so threads
 * may share it.
 */
#ifndef GPURDMA_TESTS_MPI_MATRIX_H
#define GPURDMA_TESTS_MPI_MATRIX_H

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
#include <wchar.h>

#ifndef GPURDMA_TESTS_MPI_CHECK_COMMON_H
#error "include check_common.h before matrix.h"
#endif

/* --strict: no allowance for the library's own (non-standard) op. */
static bool g_strict;

/* ------------------------------------------------------------------------ */
/* Deterministic pseudo-random input                                         */
/* ------------------------------------------------------------------------ */

static inline uint64_t mix64(uint64_t x) /* splitmix64 finaliser */
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Per-rank stream base of a test case, then one hash per element index. */
static inline uint64_t rank_base(uint64_t case_seed, int rank)
{
    return mix64(case_seed ^ mix64(0x1234567ull + (uint64_t)rank));
}

static inline uint64_t elem_hash(uint64_t base, size_t index)
{
    return mix64(base ^ ((uint64_t)index * 0xD1B54A32D192ED03ull));
}

/* More bits from one element hash, cheaper than another mix64. */
static inline uint64_t rehash(uint64_t h)
{
    h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

enum {
    OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_LAND, OP_LOR, OP_LXOR,
    OP_BAND, OP_BOR, OP_BXOR, OP_MAXLOC, OP_MINLOC, NUM_OPS
};

static const char *const op_name[NUM_OPS] = {
    "MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX", "MPI_LAND", "MPI_LOR", "MPI_LXOR",
    "MPI_BAND", "MPI_BOR", "MPI_BXOR", "MPI_MAXLOC", "MPI_MINLOC"
};

static MPI_Op op_handle(int op)
{
    switch (op) {
    case OP_SUM: return MPI_SUM;
    case OP_PROD: return MPI_PROD;
    case OP_MIN: return MPI_MIN;
    case OP_MAX: return MPI_MAX;
    case OP_LAND: return MPI_LAND;
    case OP_LOR: return MPI_LOR;
    case OP_LXOR: return MPI_LXOR;
    case OP_BAND: return MPI_BAND;
    case OP_BOR: return MPI_BOR;
    case OP_BXOR: return MPI_BXOR;
    case OP_MAXLOC: return MPI_MAXLOC;
    default: return MPI_MINLOC;
    }
}

#define BIT(op) (1u << (op))
#define OPS_ARITH   (BIT(OP_SUM) | BIT(OP_PROD) | BIT(OP_MIN) | BIT(OP_MAX))
#define OPS_LOGICAL (BIT(OP_LAND) | BIT(OP_LOR) | BIT(OP_LXOR))
#define OPS_BITWISE (BIT(OP_BAND) | BIT(OP_BOR) | BIT(OP_BXOR))
#define OPS_COMPLEX (BIT(OP_SUM) | BIT(OP_PROD))
#define OPS_LOC     (BIT(OP_MAXLOC) | BIT(OP_MINLOC))
/* MPI standard, "C integer" group: all of arithmetic, logical and bitwise. */
#define OPS_INT     (OPS_ARITH | OPS_LOGICAL | OPS_BITWISE)
/* "Multi-language types" (MPI_AINT, MPI_OFFSET, MPI_COUNT): no logical ops. */
#define OPS_MULTI   (OPS_ARITH | OPS_BITWISE)

/* ------------------------------------------------------------------------ */
/* Input patterns, shared by all types of a kind                             */
/* ------------------------------------------------------------------------ */

/* Probability (in 16ths) that a logical-op input is zero, by index % 4, so that
 * LAND and LOR both see all-true, mixed and all-false columns. */
static const unsigned zero_in_16[4] = { 0, 1, 4, 12 };

/*
 * Integer input as a two's-complement bit pattern (the low `bits` bits count).
 *   SUM:  random, near the maximum (sums overflow), small, near the minimum
 *   PROD: odd/random values, -1, the maximum, small factors: products overflow
 *   MIN/MAX: random, extremes, and small values so that ranks tie
 *   logical: 0, 1, 2, -1, the top bit alone, 0x100 (nonzero, low byte zero)
 *   BAND/BOR: bits biased to one/zero so the results are not all 0 / all 1
 */
static inline uint64_t int_input(int op, uint64_t h, size_t index, int bits, bool is_signed)
{
    const uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    const uint64_t vmax = is_signed ? mask >> 1 : mask;
    const uint64_t vmin = is_signed ? vmax + 1 : 0; /* bit pattern of the minimum */
    const uint64_t topbit = 1ull << (bits - 1);
    const unsigned sel = (unsigned)(h & 0xff);
    const uint64_t r = rehash(h); /* more random bits */

    switch (op) {
    case OP_SUM:
        switch (sel % 4) {
        case 0: return r;
        case 1: return vmax - r % 4;
        case 2: return (uint64_t)((int64_t)(r % 7) - 3);
        default: return vmin + r % 4;
        }
    case OP_PROD:
        switch (sel % 8) {
        case 0: return r | 1;
        case 1: return ~0ull;
        case 2: return vmax;
        case 3: return (sel & 0xf0) == 0 ? 0 : r; /* an occasional zero */
        default: return 2 + r % 4;
        }
    case OP_MIN:
    case OP_MAX:
        switch (sel % 8) {
        case 0: return vmin;
        case 1: return vmax;
        case 2: case 3: case 4: return (uint64_t)((int64_t)(r % 5) - 2);
        default: return r;
        }
    case OP_LAND:
    case OP_LOR:
    case OP_LXOR:
        if ((sel & 15) < zero_in_16[index % 4])
            return 0;
        switch (r % 5) {
        case 0: return 1;
        case 1: return 2;
        case 2: return ~0ull;
        case 3: return topbit;
        default: return bits > 8 ? 0x100 : 0x80;
        }
    case OP_BAND: return r | h;
    case OP_BOR: return r & h;
    default: return r; /* BXOR */
    }
}

/* Floating inputs: a description that each type turns into its own value. */
enum { FPK_EXACT, FPK_FINE, FPK_DENORM, FPK_HUGE, FPK_INF };
typedef struct { int kind; double v; int k; } fp_pick;

/* 2^e for -64 <= e <= 63, exactly, without libm. */
static inline double pow2(int e)
{
    return e >= 0 ? (double)(1ull << e) : 1.0 / (double)(1ull << -e);
}

/*
 *   SUM:  integers in [-64, 64], some plus 0.5 (all partial sums exact); long double
 *         adds k * 2^-48 to some, below double precision of the total
 *   PROD: 1, -1, 2, 0.5, -2, -0.5 (products are +-2^k: exact)
 *   MIN/MAX: small integers (ties), random values of varied exponent, subnormals,
 *         +-MAX, +-infinity, and (long double) 1 + k*epsilon.  Never -0.0 or NaN.
 */
static inline fp_pick float_pick(int op, uint64_t h)
{
    fp_pick p = { FPK_EXACT, 0.0, 0 };
    const unsigned sel = (unsigned)(h & 0xff);
    const uint64_t r = rehash(h);

    if (op == OP_SUM) {
        p.v = (double)((int64_t)(r % 129) - 64) + ((sel & 3) == 0 ? 0.5 : 0.0);
        if ((sel & 0x1c) == 0) {
            p.kind = FPK_FINE;
            p.k = (int)((r >> 32) % 4);
        }
    } else if (op == OP_PROD) {
        static const double factor[8] = { 1, -1, 1, -1, 2, 0.5, -2, -0.5 };
        p.v = factor[sel % 8];
    } else { /* MIN, MAX, and the value field of MAXLOC/MINLOC */
        switch (sel % 32) {
        case 0: p.kind = FPK_DENORM; p.k = (int)(r % 7) - 3; break;
        case 1: p.kind = FPK_HUGE; p.k = (r & 1) ? 1 : -1; break;
        case 2: p.kind = FPK_INF; p.k = (r & 1) ? 1 : -1; break;
        case 3: p.kind = FPK_FINE; p.v = (r & 1) ? 1.0 : -1.0; p.k = (int)((r >> 1) % 4); break;
        default:
            if (sel % 32 < 16) {
                p.v = (double)((int)(r % 9) - 4);
            } else {
                double m = (double)(r >> 11) * 0x1p-53; /* [0, 1) */
                int e = (int)((r >> 3) % 41) - 20;
                p.v = ((r & 1) ? -m : m) * pow2(e);
                if (p.v == 0.0)
                    p.v = 1.0; /* never -0.0 */
            }
        }
    }
    return p;
}

/*
 * Complex inputs:
 *   SUM:  integer real and imaginary parts
 *   PROD: units 1, -1, i, -i or (1+i), (1-i), 2, 0.5, -2: every product is a unit
 *         times 2^k times (1+i)^{0,1}, so every partial product is exact.
 */
static void complex_pick(int op, uint64_t h, double *re, double *im)
{
    const uint64_t r = rehash(h);
    if (op == OP_SUM) {
        *re = (double)((int64_t)(r % 129) - 64);
        *im = (double)((int64_t)((r >> 20) % 129) - 64);
    } else {
        static const double tab[9][2] = {
            { 1, 0 }, { -1, 0 }, { 0, 1 }, { 0, -1 },
            { 1, 1 }, { 1, -1 }, { 2, 0 }, { 0.5, 0 }, { -2, 0 }
        };
        unsigned i = (h & 1) ? (unsigned)(r % 4) : 4 + (unsigned)(r % 5);
        *re = tab[i][0];
        *im = tab[i][1];
    }
}

/* MAXLOC/MINLOC index: the rank for even elements; for odd ones 1000 - 3*rank,
 * which falls with the rank, so ties must pick the highest rank's index there
 * (the standard says the smallest index wins, not the lowest rank). */
static inline int loc_index(int rank, size_t index)
{
    return (index % 2 == 0) ? rank : 1000 - 3 * rank;
}

/* Floating equality: same value and sign, or both NaN. */
#define FP_SAME(a, b) (((a) == (b) && !signbit(a) == !signbit(b)) || (isnan(a) && isnan(b)))
/* Same, but +0 equals -0: the sign of a zero in a complex product depends on the
 * order of evaluation ((i * i) * -1 vs i * (i * -1) differ in the imaginary zero). */
#define FP_EQUAL(a, b) ((a) == (b) || (isnan(a) && isnan(b)))

/* ------------------------------------------------------------------------ */
/* Per-type helpers                                                          */
/* ------------------------------------------------------------------------ */

/* gen: fill n elements of `rank`'s input, starting at element `first`. */
typedef void gen_fn(int op, int rank, size_t first, size_t n, uint64_t case_seed, void *out);
/* fold: acc[i] = acc[i] op in[i], standard C semantics. */
typedef void fold_fn(int op, void *acc, const void *in, size_t n);
/* same: do two elements match (value fields only, padding ignored)? */
typedef bool same_fn(const void *a, const void *b);
/* show: print one element. */
typedef void show_fn(const void *elem, char *buf, size_t len);

/*
 * Integers.  SUM and PROD are computed in uint64_t and stored through the
 * unsigned type of the same width (wrap-around modulo 2^N); the bit pattern is
 * copied with memcpy so that signed types never see an out-of-range conversion.
 * SGN: whether T is signed (it orders MIN/MAX and shapes the inputs).
 */
#define DEFINE_INT_TYPE(tag, T, UT, SGN)                                                \
    static void gen_##tag(int op, int rank, size_t first, size_t n, uint64_t seed,      \
                          void *out)                                                    \
    {                                                                                   \
        const uint64_t base = rank_base(seed, rank);                                    \
        const bool sgn = (SGN);                                                         \
        T *o = out;                                                                     \
        for (size_t i = 0; i < n; i++) {                                                \
            UT u = (UT)int_input(op, elem_hash(base, first + i), first + i,             \
                                 (int)(sizeof(T) * CHAR_BIT), sgn);                     \
            memcpy(&o[i], &u, sizeof u);                                                \
        }                                                                               \
    }                                                                                   \
    static void fold_##tag(int op, void *accv, const void *inv, size_t n)               \
    {                                                                                   \
        T *acc = accv;                                                                  \
        const T *in = inv;                                                              \
        for (size_t i = 0; i < n; i++) {                                                \
            const T a = acc[i], b = in[i];                                              \
            const UT ua = (UT)a, ub = (UT)b;                                            \
            UT u;                                                                       \
            switch (op) {                                                               \
            case OP_SUM:  u = (UT)((uint64_t)ua + (uint64_t)ub); break;                 \
            case OP_PROD: u = (UT)((uint64_t)ua * (uint64_t)ub); break;                 \
            case OP_MIN:  u = (UT)(a < b ? a : b); break;                               \
            case OP_MAX:  u = (UT)(a > b ? a : b); break;                               \
            case OP_LAND: u = (UT)(a && b); break;                                      \
            case OP_LOR:  u = (UT)(a || b); break;                                      \
            case OP_LXOR: u = (UT)(!a != !b); break;                                    \
            case OP_BAND: u = (UT)(ua & ub); break;                                     \
            case OP_BOR:  u = (UT)(ua | ub); break;                                     \
            default:      u = (UT)(ua ^ ub); break;                                     \
            }                                                                           \
            memcpy(&acc[i], &u, sizeof u);                                              \
        }                                                                               \
    }                                                                                   \
    static bool same_##tag(const void *a, const void *b)                                \
    {                                                                                   \
        return memcmp(a, b, sizeof(T)) == 0;                                            \
    }                                                                                   \
    static void show_##tag(const void *e, char *buf, size_t len)                        \
    {                                                                                   \
        T v;                                                                            \
        UT u;                                                                           \
        memcpy(&v, e, sizeof v);                                                        \
        memcpy(&u, e, sizeof u);                                                        \
        if (SGN)                                                                        \
            snprintf(buf, len, "%jd (0x%jx)", (intmax_t)v, (uintmax_t)u);               \
        else                                                                            \
            snprintf(buf, len, "%ju (0x%jx)", (uintmax_t)v, (uintmax_t)u);              \
    }

_Static_assert(sizeof(MPI_Aint) == sizeof(uint64_t), "MPI_Aint is 64-bit");
_Static_assert(sizeof(MPI_Offset) == sizeof(uint64_t), "MPI_Offset is 64-bit");
_Static_assert(sizeof(MPI_Count) == sizeof(uint64_t), "MPI_Count is 64-bit");
_Static_assert(sizeof(wchar_t) == sizeof(uint32_t), "wchar_t is 32-bit");

DEFINE_INT_TYPE(char, char, unsigned char, CHAR_MIN < 0)
DEFINE_INT_TYPE(schar, signed char, unsigned char, true)
DEFINE_INT_TYPE(uchar, unsigned char, unsigned char, false)
DEFINE_INT_TYPE(wchar, wchar_t, uint32_t, WCHAR_MIN < 0)
DEFINE_INT_TYPE(short, short, unsigned short, true)
DEFINE_INT_TYPE(ushort, unsigned short, unsigned short, false)
DEFINE_INT_TYPE(int, int, unsigned, true)
DEFINE_INT_TYPE(uint, unsigned, unsigned, false)
DEFINE_INT_TYPE(long, long, unsigned long, true)
DEFINE_INT_TYPE(ulong, unsigned long, unsigned long, false)
DEFINE_INT_TYPE(llong, long long, unsigned long long, true)
DEFINE_INT_TYPE(ullong, unsigned long long, unsigned long long, false)
DEFINE_INT_TYPE(int8, int8_t, uint8_t, true)
DEFINE_INT_TYPE(int16, int16_t, uint16_t, true)
DEFINE_INT_TYPE(int32, int32_t, uint32_t, true)
DEFINE_INT_TYPE(int64, int64_t, uint64_t, true)
DEFINE_INT_TYPE(uint8, uint8_t, uint8_t, false)
DEFINE_INT_TYPE(uint16, uint16_t, uint16_t, false)
DEFINE_INT_TYPE(uint32, uint32_t, uint32_t, false)
DEFINE_INT_TYPE(uint64, uint64_t, uint64_t, false)
DEFINE_INT_TYPE(aint, MPI_Aint, uint64_t, true)
DEFINE_INT_TYPE(offset, MPI_Offset, uint64_t, true)
DEFINE_INT_TYPE(count, MPI_Count, uint64_t, true)
DEFINE_INT_TYPE(byte, unsigned char, unsigned char, false) /* MPI_BYTE: bitwise ops only */

/* C _Bool: inputs are 0/1 only (other bytes are not valid _Bool values). */
static void gen_bool(int op, int rank, size_t first, size_t n, uint64_t seed, void *out)
{
    const uint64_t base = rank_base(seed, rank);
    bool *o = out;
    (void)op;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = elem_hash(base, first + i);
        o[i] = (h & 15) >= zero_in_16[(first + i) % 4];
    }
}

static void fold_bool(int op, void *accv, const void *inv, size_t n)
{
    bool *acc = accv;
    const bool *in = inv;
    for (size_t i = 0; i < n; i++) {
        switch (op) {
        case OP_LAND: acc[i] = acc[i] && in[i]; break;
        case OP_LOR: acc[i] = acc[i] || in[i]; break;
        default: acc[i] = acc[i] != in[i]; break;
        }
    }
}

static bool same_bool(const void *a, const void *b) { return memcmp(a, b, sizeof(bool)) == 0; }

static void show_bool(const void *e, char *buf, size_t len)
{
    snprintf(buf, len, "byte 0x%02x", *(const unsigned char *)e);
}

/*
 * Real floating types.  FINE is the step below the precision of double that only
 * long double can hold (0 for float and double).
 */
#define DEFINE_FLOAT_TYPE(tag, T, TRUE_MIN, MAXV, FINE, FMT, CAST)                      \
    static T make_##tag(fp_pick p, int op)                                              \
    {                                                                                   \
        switch (p.kind) {                                                               \
        case FPK_FINE:                                                                  \
            /* SUM: k * 2^-48 relative to 1; MIN/MAX: k * epsilon */                    \
            return (T)p.v + (T)p.k * (FINE) * (op == OP_SUM ? (T)32768 : (T)1);         \
        case FPK_DENORM: return (T)p.k * (TRUE_MIN);                                    \
        case FPK_HUGE: return p.k > 0 ? (MAXV) : -(MAXV);                               \
        case FPK_INF: return p.k > 0 ? (T)INFINITY : -(T)INFINITY;                      \
        default: return (T)p.v;                                                         \
        }                                                                               \
    }                                                                                   \
    static void gen_##tag(int op, int rank, size_t first, size_t n, uint64_t seed,      \
                          void *out)                                                    \
    {                                                                                   \
        const uint64_t base = rank_base(seed, rank);                                    \
        T *o = out;                                                                     \
        for (size_t i = 0; i < n; i++)                                                  \
            o[i] = make_##tag(float_pick(op, elem_hash(base, first + i)), op);          \
    }                                                                                   \
    static void fold_##tag(int op, void *accv, const void *inv, size_t n)               \
    {                                                                                   \
        T *acc = accv;                                                                  \
        const T *in = inv;                                                              \
        for (size_t i = 0; i < n; i++) {                                                \
            const T a = acc[i], b = in[i];                                              \
            switch (op) {                                                               \
            case OP_SUM: acc[i] = a + b; break;                                         \
            case OP_PROD: acc[i] = a * b; break;                                        \
            case OP_MIN: acc[i] = a < b ? a : b; break;                                 \
            default: acc[i] = a > b ? a : b; break;                                     \
            }                                                                           \
        }                                                                               \
    }                                                                                   \
    static bool same_##tag(const void *a, const void *b)                                \
    {                                                                                   \
        T x, y;                                                                         \
        memcpy(&x, a, sizeof x);                                                        \
        memcpy(&y, b, sizeof y);                                                        \
        return FP_SAME(x, y);                                                           \
    }                                                                                   \
    static void show_##tag(const void *e, char *buf, size_t len)                        \
    {                                                                                   \
        T x;                                                                            \
        memcpy(&x, e, sizeof x);                                                        \
        snprintf(buf, len, FMT, (CAST)x, (CAST)x);                                      \
    }

DEFINE_FLOAT_TYPE(float, float, FLT_TRUE_MIN, FLT_MAX, 0.0f, "%.9g (%a)", double)
DEFINE_FLOAT_TYPE(double, double, DBL_TRUE_MIN, DBL_MAX, 0.0, "%.17g (%a)", double)
#if LDBL_MANT_DIG >= 64
#define LDBL_FINE LDBL_EPSILON
#else
#define LDBL_FINE 0.0L
#endif
DEFINE_FLOAT_TYPE(ldouble, long double, LDBL_TRUE_MIN, LDBL_MAX, LDBL_FINE, "%.21Lg (%La)",
                  long double)

/* Complex types: R is the real component type. */
#define DEFINE_COMPLEX_TYPE(tag, T, R, FMT, CAST)                                       \
    static void gen_##tag(int op, int rank, size_t first, size_t n, uint64_t seed,      \
                          void *out)                                                    \
    {                                                                                   \
        const uint64_t base = rank_base(seed, rank);                                    \
        R *o = out; /* C11 6.2.5: a complex is laid out as R[2] */                      \
        for (size_t i = 0; i < n; i++) {                                                \
            double re, im;                                                              \
            complex_pick(op, elem_hash(base, first + i), &re, &im);                     \
            o[2 * i] = (R)re;                                                           \
            o[2 * i + 1] = (R)im;                                                       \
        }                                                                               \
    }                                                                                   \
    static void fold_##tag(int op, void *accv, const void *inv, size_t n)               \
    {                                                                                   \
        T *acc = accv;                                                                  \
        const T *in = inv;                                                              \
        for (size_t i = 0; i < n; i++)                                                  \
            acc[i] = op == OP_SUM ? acc[i] + in[i] : acc[i] * in[i];                    \
    }                                                                                   \
    static bool same_##tag(const void *a, const void *b)                                \
    {                                                                                   \
        R x[2], y[2];                                                                   \
        memcpy(x, a, sizeof x);                                                         \
        memcpy(y, b, sizeof y);                                                         \
        return FP_EQUAL(x[0], y[0]) && FP_EQUAL(x[1], y[1]);                            \
    }                                                                                   \
    static void show_##tag(const void *e, char *buf, size_t len)                        \
    {                                                                                   \
        R x[2];                                                                         \
        memcpy(x, e, sizeof x);                                                         \
        snprintf(buf, len, "(" FMT ", " FMT ")", (CAST)x[0], (CAST)x[1]);              \
    }

DEFINE_COMPLEX_TYPE(cfloat, float _Complex, float, "%.9g", double)
DEFINE_COMPLEX_TYPE(cdouble, double _Complex, double, "%.17g", double)
DEFINE_COMPLEX_TYPE(cldouble, long double _Complex, long double, "%.21Lg", long double)

/*
 * Value-index pairs for MAXLOC/MINLOC.  Values come mostly from a small set so
 * that several ranks tie; EPS adds values that differ only in the type's last bit.
 */
#define DEFINE_PAIR_TYPE(tag, VT, BIGV, EPS, FMT, CAST)                                 \
    typedef struct { VT v; int k; } pair_##tag;                                         \
    static void gen_##tag(int op, int rank, size_t first, size_t n, uint64_t seed,      \
                          void *out)                                                    \
    {                                                                                   \
        const uint64_t base = rank_base(seed, rank);                                    \
        pair_##tag *o = out;                                                            \
        (void)op;                                                                       \
        memset(out, 0, n * sizeof *o); /* defined padding bytes */                      \
        for (size_t i = 0; i < n; i++) {                                                \
            uint64_t h = elem_hash(base, first + i);                                    \
            unsigned sel = (unsigned)(h % 16);                                          \
            VT small = (VT)((int)((h >> 8) % 7) - 3);                                   \
            if (sel < 12)                                                               \
                o[i].v = small;                                                         \
            else if (sel < 14)                                                          \
                o[i].v = (VT)(small + (VT)((h >> 16) % 3) * (EPS));                     \
            else                                                                        \
                o[i].v = sel == 14 ? (BIGV) : -(BIGV);                                  \
            o[i].k = loc_index(rank, first + i);                                        \
        }                                                                               \
    }                                                                                   \
    static void fold_##tag(int op, void *accv, const void *inv, size_t n)               \
    {                                                                                   \
        pair_##tag *acc = accv;                                                         \
        const pair_##tag *in = inv;                                                     \
        for (size_t i = 0; i < n; i++) {                                                \
            const VT a = acc[i].v, b = in[i].v;                                         \
            bool better = op == OP_MAXLOC ? b > a : b < a;                              \
            if (better) {                                                               \
                acc[i].v = b;                                                           \
                acc[i].k = in[i].k;                                                     \
            } else if (a == b && in[i].k < acc[i].k) {                                  \
                acc[i].k = in[i].k;                                                     \
            }                                                                           \
        }                                                                               \
    }                                                                                   \
    static bool same_##tag(const void *a, const void *b)                                \
    {                                                                                   \
        pair_##tag x, y;                                                                \
        memcpy(&x, a, sizeof x);                                                        \
        memcpy(&y, b, sizeof y);                                                        \
        return x.v == y.v && x.k == y.k;                                                \
    }                                                                                   \
    static void show_##tag(const void *e, char *buf, size_t len)                        \
    {                                                                                   \
        pair_##tag x;                                                                   \
        memcpy(&x, e, sizeof x);                                                        \
        snprintf(buf, len, "(" FMT ", %d)", (CAST)x.v, x.k);                            \
    }

DEFINE_PAIR_TYPE(float_int, float, FLT_MAX, FLT_EPSILON, "%.9g", double)
DEFINE_PAIR_TYPE(double_int, double, DBL_MAX, DBL_EPSILON, "%.17g", double)
DEFINE_PAIR_TYPE(long_int, long, LONG_MAX, 0, "%ld", long)
DEFINE_PAIR_TYPE(2int, int, INT_MAX, 0, "%d", int)
DEFINE_PAIR_TYPE(short_int, short, SHRT_MAX, 0, "%d", int)
DEFINE_PAIR_TYPE(ldouble_int, long double, LDBL_MAX, LDBL_EPSILON, "%.21Lg", long double)

/* ------------------------------------------------------------------------ */
/* The datatype table                                                        */
/* ------------------------------------------------------------------------ */

typedef struct dtype_info {
    const char *name;
    MPI_Datatype dt;
    size_t size;     /* sizeof the C type = extent expected from MPI */
    unsigned ops;    /* BIT(op) for each op the standard defines */
    unsigned flags;  /* T_* */
    unsigned lib_deviates; /* ops for which the library's own MPI_Reduce_local is not standard */
    gen_fn *gen;
    fold_fn *fold;
    same_fn *same;
    show_fn *show;
} dtype_info;

/* flags */
#define T_PROBE 1u   /* not in the standard's op groups: test the ops the library accepts */
#define T_BITWISE 2u /* no padding bytes: equal bytes imply equal values (fast compare) */
#define T_REP 4u     /* representative of its size and kind: also run on every
                      * communicator and at counts above 4097 */
#define T_FORTRAN 8u /* a Fortran type, tested where the MPI has it at this C type's size */

#define T_ENTRY(mpi, tag, ctype, ops, flags) \
    { #mpi, mpi, sizeof(ctype), ops, flags, 0, gen_##tag, fold_##tag, same_##tag, show_##tag }

/* Filled in main(): MPI handles need not be constant expressions. */
static dtype_info types[64];
static int ntypes;

static void init_types(void)
{
    const dtype_info table[] = {
        /* MPI_CHAR and MPI_WCHAR are character types; the standard defines no
         * reduction on them.  Open MPI accepts some: those are tested. */
        T_ENTRY(MPI_CHAR, char, char, OPS_INT, T_PROBE | T_BITWISE),
        T_ENTRY(MPI_WCHAR, wchar, wchar_t, OPS_INT, T_PROBE | T_BITWISE),
        T_ENTRY(MPI_SIGNED_CHAR, schar, signed char, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_UNSIGNED_CHAR, uchar, unsigned char, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_SHORT, short, short, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_UNSIGNED_SHORT, ushort, unsigned short, OPS_INT, T_BITWISE | T_REP),
        T_ENTRY(MPI_INT, int, int, OPS_INT, T_BITWISE | T_REP),
        T_ENTRY(MPI_UNSIGNED, uint, unsigned, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_LONG, long, long, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_UNSIGNED_LONG, ulong, unsigned long, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_LONG_LONG, llong, long long, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_LONG_LONG_INT, llong, long long, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_UNSIGNED_LONG_LONG, ullong, unsigned long long, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_INT8_T, int8, int8_t, OPS_INT, T_BITWISE | T_REP),
        T_ENTRY(MPI_INT16_T, int16, int16_t, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_INT32_T, int32, int32_t, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_INT64_T, int64, int64_t, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_UINT8_T, uint8, uint8_t, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_UINT16_T, uint16, uint16_t, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_UINT32_T, uint32, uint32_t, OPS_INT, T_BITWISE),
        T_ENTRY(MPI_UINT64_T, uint64, uint64_t, OPS_INT, T_BITWISE | T_REP),
        T_ENTRY(MPI_AINT, aint, MPI_Aint, OPS_MULTI, T_BITWISE),
        T_ENTRY(MPI_OFFSET, offset, MPI_Offset, OPS_MULTI, T_BITWISE),
        T_ENTRY(MPI_COUNT, count, MPI_Count, OPS_MULTI, T_BITWISE),
        T_ENTRY(MPI_C_BOOL, bool, bool, OPS_LOGICAL, T_BITWISE | T_REP),
        T_ENTRY(MPI_BYTE, byte, unsigned char, OPS_BITWISE, T_BITWISE | T_REP),
        T_ENTRY(MPI_FLOAT, float, float, OPS_ARITH, T_BITWISE | T_REP),
        T_ENTRY(MPI_DOUBLE, double, double, OPS_ARITH, T_BITWISE | T_REP),
        T_ENTRY(MPI_LONG_DOUBLE, ldouble, long double, OPS_ARITH, T_REP),
        T_ENTRY(MPI_C_FLOAT_COMPLEX, cfloat, float _Complex, OPS_COMPLEX, T_BITWISE),
        T_ENTRY(MPI_C_COMPLEX, cfloat, float _Complex, OPS_COMPLEX, T_BITWISE),
        T_ENTRY(MPI_C_DOUBLE_COMPLEX, cdouble, double _Complex, OPS_COMPLEX,
                T_BITWISE | T_REP),
        T_ENTRY(MPI_C_LONG_DOUBLE_COMPLEX, cldouble, long double _Complex, OPS_COMPLEX, 0),
        T_ENTRY(MPI_FLOAT_INT, float_int, pair_float_int, OPS_LOC, 0),
        T_ENTRY(MPI_DOUBLE_INT, double_int, pair_double_int, OPS_LOC, T_REP),
        T_ENTRY(MPI_LONG_INT, long_int, pair_long_int, OPS_LOC, 0),
        T_ENTRY(MPI_2INT, 2int, pair_2int, OPS_LOC, T_BITWISE | T_REP),
        T_ENTRY(MPI_SHORT_INT, short_int, pair_short_int, OPS_LOC, 0),
        T_ENTRY(MPI_LONG_DOUBLE_INT, ldouble_int, pair_ldouble_int, OPS_LOC, T_REP),
        /* Fortran's numeric types, as C programs may name them (the standard's op
         * groups: Fortran integer, floating point, complex). */
        T_ENTRY(MPI_INTEGER, int, int, OPS_MULTI, T_FORTRAN | T_BITWISE),
        T_ENTRY(MPI_INTEGER8, int64, int64_t, OPS_MULTI, T_FORTRAN | T_BITWISE),
        T_ENTRY(MPI_REAL, float, float, OPS_ARITH, T_FORTRAN | T_BITWISE),
        T_ENTRY(MPI_DOUBLE_PRECISION, double, double, OPS_ARITH, T_FORTRAN | T_BITWISE),
        T_ENTRY(MPI_DOUBLE_COMPLEX, cdouble, double _Complex, OPS_COMPLEX,
                T_FORTRAN | T_BITWISE),
        T_ENTRY(MPI_2INTEGER, 2int, pair_2int, OPS_LOC, T_FORTRAN | T_BITWISE),
    };
    ntypes = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        /* Some names are aliases of one handle (Open MPI: MPI_C_FLOAT_COMPLEX and
         * MPI_C_COMPLEX, MPI_LONG_LONG and MPI_LONG_LONG_INT): test it once. */
        bool dup = false;
        for (int j = 0; j < ntypes; j++)
            dup |= types[j].dt == table[i].dt;
        if (table[i].flags & T_FORTRAN) {
            /* An MPI built without Fortran, or with other default kinds: not
             * testable as this C type. */
            int size = 0;
            if (table[i].dt == MPI_DATATYPE_NULL ||
                MPI_Type_size(table[i].dt, &size) != MPI_SUCCESS ||
                (size_t)size != table[i].size)
                continue;
        }
        if (!dup)
            types[ntypes++] = table[i];
    }
}

static __attribute__((unused)) const dtype_info *find_type(MPI_Datatype dt)
{
    for (int i = 0; i < ntypes; i++)
        if (types[i].dt == dt)
            return &types[i];
    return NULL;
}

/*
 * Does the library's own op (MPI_Reduce_local, no collective involved) follow the
 * standard for (t, op)?  Where it does not (e.g. Open MPI 4.1.4: MPI_MIN/MPI_MAX
 * on MPI_UNSIGNED_LONG compare signed, on MPI_OFFSET unsigned), MPI_Allreduce
 * results that equal the library's own fold are accepted (unless --strict) and
 * counted; a note names each such pair.
 */
#define PROBE_COUNT 4096
static void probe_library_op(dtype_info *t, int op)
{
    const size_t bytes = PROBE_COUNT * t->size;
    unsigned char *a = xmalloc(bytes), *b = xmalloc(bytes), *lib = xmalloc(bytes);
    const uint64_t seed = mix64(0xC0FFEEull ^ (uint64_t)op);

    t->gen(op, 0, 0, PROBE_COUNT, seed, a);
    t->gen(op, 1, 0, PROBE_COUNT, seed, b);
    memcpy(lib, a, bytes);
    if (MPI_Reduce_local(b, lib, PROBE_COUNT, t->dt, op_handle(op)) != MPI_SUCCESS) {
        fail("MPI_Reduce_local(%s, %s) failed", op_name[op], t->name);
    } else {
        t->fold(op, a, b, PROBE_COUNT); /* a = a op b, the standard's answer */
        for (size_t i = 0; i < PROBE_COUNT; i++) {
            if (!t->same(a + i * t->size, lib + i * t->size)) {
                char x[128], y[128], e[128], g[128];
                unsigned char x0[64];
                t->gen(op, 0, i, 1, seed, x0); /* a was overwritten: regenerate */
                t->show(x0, x, sizeof x);
                t->show(b + i * t->size, y, sizeof y);
                t->show(a + i * t->size, e, sizeof e);
                t->show(lib + i * t->size, g, sizeof g);
                t->lib_deviates |= BIT(op);
                if (g_world_rank == 0)
                    printf("note: library op deviates from the standard: %s on %s "
                           "(MPI_Reduce_local, count %d): element %zu: %s op %s gives %s, "
                           "standard %s%s\n",
                           op_name[op], t->name, PROBE_COUNT, i, x, y, g, e,
                           g_strict ? "" : " (results equal to the library's own are "
                                           "accepted; --strict to fail them)");
                break;
            }
        }
    }
    free(a);
    free(b);
    free(lib);
}

/* Check MPI's idea of each type against the C type; drop mismatches.  For the
 * probe types, drop the ops the library rejects (on MPI_COMM_SELF). */
static void check_types(bool verbose)
{
    int keep = 0;
    for (int i = 0; i < ntypes; i++) {
        dtype_info *t = &types[i];
        int size;
        MPI_Aint lb, extent;
        MPI_Type_size(t->dt, &size);
        MPI_Type_get_extent(t->dt, &lb, &extent);
        if (lb != 0 || (size_t)extent != t->size) {
            fail("type %s: MPI lb %ld extent %ld, C sizeof %zu: type not tested", t->name,
                 (long)lb, (long)extent, t->size);
            continue;
        }
        if (t->flags & T_PROBE) {
            unsigned accepted = 0;
            unsigned char in[64] = { 0 }, out[64];
            char list[256] = "";
            for (int op = 0; op < NUM_OPS; op++) {
                if (!(t->ops & BIT(op)))
                    continue;
                if (MPI_Allreduce(in, out, 1, t->dt, op_handle(op), MPI_COMM_SELF) ==
                    MPI_SUCCESS) {
                    accepted |= BIT(op);
                    strcat(list, " ");
                    strcat(list, op_name[op] + 4);
                }
            }
            if (verbose && g_world_rank == 0)
                printf("note: %s is not reducible per the MPI standard; the library "
                       "accepts:%s\n", t->name, accepted ? list : " none");
            t->ops = accepted;
        }
        for (int op = 0; op < NUM_OPS; op++)
            if (t->ops & BIT(op))
                probe_library_op(t, op);
        types[keep++] = *t;
    }
    ntypes = keep;
}


/* --seed N: every input derives from it. */
static uint64_t g_seed = 20240601;

static __attribute__((unused)) uint64_t case_seed(int comm_idx, const dtype_info *t, int op, size_t count, int salt)
{
    uint64_t s = mix64(g_seed);
    s = mix64(s ^ (uint64_t)comm_idx);
    s = mix64(s ^ (uint64_t)(t - types) * 131);
    s = mix64(s ^ (uint64_t)op * 7919);
    s = mix64(s ^ (uint64_t)count);
    return mix64(s ^ (uint64_t)salt);
}

/* expected = input(0) op input(1) op ... op input(size-1), folded in rank order. */
static __attribute__((unused)) void compute_expected(const dtype_info *t, int op, int size, size_t count,
                             uint64_t seed, void *expected, void *scratch)
{
    t->gen(op, 0, 0, count, seed, expected);
    for (int r = 1; r < size; r++) {
        t->gen(op, r, 0, count, seed, scratch);
        t->fold(op, expected, scratch, count);
    }
}

/* The same fold with the library's own op into `lib`, where that deviates from the
 * standard (else NULL: nothing written). */
static __attribute__((unused)) void *library_expected(const dtype_info *t, int op, int size,
                                                      size_t count, uint64_t seed, void *lib,
                                                      void *scratch)
{
    if (g_strict || !(t->lib_deviates & BIT(op)))
        return NULL;
    t->gen(op, 0, 0, count, seed, lib);
    for (int r = 1; r < size; r++) {
        t->gen(op, r, 0, count, seed, scratch);
        MPI_Reduce_local(scratch, lib, (int)count, t->dt, op_handle(op));
    }
    return lib;
}

static __attribute__((unused)) bool bytes_are(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}


/*
 * Compare `count` elements of `got` with `expected` (and, where not NULL, with the
 * library's own fold `lib`).  Returns how many elements match neither; *first_bad
 * is the first of them, *nlib how many matched only `lib`.
 */
static __attribute__((unused)) size_t matrix_compare(const dtype_info *t, size_t count,
                                                     const void *expected, const void *lib,
                                                     const void *got, size_t *first_bad,
                                                     size_t *nlib)
{
    size_t nbad = 0;
    *first_bad = SIZE_MAX;
    *nlib = 0;
    if ((t->flags & T_BITWISE) && memcmp(got, expected, count * t->size) == 0)
        return 0;
    for (size_t i = 0; i < count; i++) {
        const size_t at = i * t->size;
        const unsigned char *g = (const unsigned char *)got + at;
        if (t->same((const unsigned char *)expected + at, g))
            continue;
        if (lib && t->same((const unsigned char *)lib + at, g)) {
            ++*nlib;
            continue;
        }
        if (*first_bad == SIZE_MAX)
            *first_bad = i;
        nbad++;
    }
    return nbad;
}

/* FNV-1a over a result: ranks compare it to show they got the same bits. */
static inline uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}
#define HASH_INIT 0xCBF29CE484222325ull

#endif /* GPURDMA_TESTS_MPI_MATRIX_H */
