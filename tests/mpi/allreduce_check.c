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
static bool g_strict;           /* --strict: no allowance for the library's own op */

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
    };
    ntypes = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        /* Some names are aliases of one handle (Open MPI: MPI_C_FLOAT_COMPLEX and
         * MPI_C_COMPLEX, MPI_LONG_LONG and MPI_LONG_LONG_INT): test it once. */
        bool dup = false;
        for (int j = 0; j < ntypes; j++)
            dup |= types[j].dt == table[i].dt;
        if (!dup)
            types[ntypes++] = table[i];
    }
}

static const dtype_info *find_type(MPI_Datatype dt)
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
    snprintf(cc->name, sizeof cc->name, "%s", name);
    cc->comm = c;
    cc->all_types = all_types;
    cc->large = large;
    cc->owned = owned;
    cc->rank = -1;
    cc->size = 0;
    if (c != MPI_COMM_NULL) {
        MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        MPI_Comm_rank(c, &cc->rank);
        MPI_Comm_size(c, &cc->size);
        snprintf(cc->name, sizeof cc->name, "%s(size %d)", name, cc->size);
    }
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

    /* All ranks but the last, in reverse order. */
    c = MPI_COMM_NULL;
    if (size >= 2 && rank < size - 1) {
        MPI_Group wg, g;
        int *ranks = xmalloc((size_t)size * sizeof *ranks);
        for (int i = 0; i < size - 1; i++)
            ranks[i] = size - 2 - i;
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_incl(wg, size - 1, ranks, &g);
        MPI_Comm_create_group(MPI_COMM_WORLD, g, 7, &c);
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
        free(ranks);
    }
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

static uint64_t g_seed = 20240601;

static uint64_t case_seed(int comm_idx, const dtype_info *t, int op, size_t count, int salt)
{
    uint64_t s = mix64(g_seed);
    s = mix64(s ^ (uint64_t)comm_idx);
    s = mix64(s ^ (uint64_t)(t - types) * 131);
    s = mix64(s ^ (uint64_t)op * 7919);
    s = mix64(s ^ (uint64_t)count);
    return mix64(s ^ (uint64_t)salt);
}

/* expected = input(0) op input(1) op ... op input(size-1), folded in rank order. */
static void compute_expected(const dtype_info *t, int op, int size, size_t count,
                             uint64_t seed, void *expected, void *scratch)
{
    t->gen(op, 0, 0, count, seed, expected);
    for (int r = 1; r < size; r++) {
        t->gen(op, r, 0, count, seed, scratch);
        t->fold(op, expected, scratch, count);
    }
}

/* The same fold with the library's own op, where that deviates (else NULL). */
static void *library_expected(const dtype_info *t, int op, int size, size_t count,
                              uint64_t seed, void *scratch)
{
    void *lib;
    if (g_strict || !(t->lib_deviates & BIT(op)))
        return NULL;
    lib = buf(B_LIB, count * t->size);
    t->gen(op, 0, 0, count, seed, lib);
    for (int r = 1; r < size; r++) {
        t->gen(op, r, 0, count, seed, scratch);
        MPI_Reduce_local(scratch, lib, (int)count, t->dt, op_handle(op));
    }
    return lib;
}

static bool bytes_are(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

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
    if (!(t->flags & T_BITWISE) || memcmp(got, expected, bytes) != 0) {
        size_t first_bad = SIZE_MAX, nbad = 0, nlib = 0;
        for (size_t i = 0; i < count; i++) {
            const size_t at = i * t->size;
            const unsigned char *g = (const unsigned char *)got + at;
            if (t->same((const unsigned char *)expected + at, g))
                continue;
            if (lib_expected && t->same((const unsigned char *)lib_expected + at, g)) {
                nlib++;
                continue;
            }
            if (first_bad == SIZE_MAX)
                first_bad = i;
            nbad++;
        }
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
    void *lib_expected = library_expected(t, op, cc->size, count, seed, got);

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
