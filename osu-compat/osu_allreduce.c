/*
 * osu-compat/osu_allreduce.c
 *
 * MPI_Allreduce latency benchmark whose command line and output are
 * compatible with osu_allreduce from the OSU Micro-Benchmarks (OMB) 7.x,
 * so that tools which parse OMB output can parse ours.  This is an
 * independent implementation; it shares no code with OMB.
 *
 * Build:  mpicc -O2 -Wall -Wextra -o osu_allreduce osu_allreduce.c
 *
 * Output layout (rank 0, stdout), as OMB 7.x prints it:
 *
 *   <empty line>
 *   # OSU MPI Allreduce Latency Test v7.4
 *   # Datatype: MPI_CHAR.
 *   # Size       Avg Latency(us)[   Min Latency(us)   Max Latency(us)  Iterations][          Validation]
 *   1                       1.23 ...
 *
 * "# Size" is left aligned in 10 columns, every other column is right
 * aligned in 20 columns except "Iterations" (12); latencies use 2 decimals.
 * The opt-in --bw column ("Bus BW(GB/s)", 20 wide) is appended last so
 * that every OMB column keeps its position.
 */
#define _GNU_SOURCE 1

#include <mpi.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Constants mirroring OMB 7.x behaviour                               */
/* ------------------------------------------------------------------ */

#define OSUC_BENCH_NAME    "osu_allreduce"
#define OSUC_OMB_VERSION   "7.4" /* OMB release whose format we follow */
#define OSUC_HEADER        "# OSU MPI Allreduce Latency Test v" OSUC_OMB_VERSION

#define OSUC_FIELD_WIDTH   20
#define OSUC_SIZE_WIDTH    10
#define OSUC_ITER_WIDTH    12
#define OSUC_PRECISION     2

#define OSUC_DEF_MIN_SIZE  ((size_t)1)
#define OSUC_DEF_MAX_SIZE  ((size_t)1 << 20)
#define OSUC_LARGE_SIZE    ((size_t)8192) /* sizes above use *_large counts */
#define OSUC_ITERS_SMALL   1000
#define OSUC_SKIP_SMALL    200
#define OSUC_ITERS_LARGE   100
#define OSUC_SKIP_LARGE    10
#define OSUC_VAL_WARMUP    5  /* default extra allreduces per iter with -c */
#define OSUC_VAL_WARMUP_MAX 10
#define OSUC_MEM_LIMIT     ((size_t)512 * 1024 * 1024)
#define OSUC_MEM_LIMIT_MIN ((size_t)1024 * 1024)
#define OSUC_MAX_DTYPES    16
#define OSUC_MAX_PCT       5

/* Period of the validation pattern; values are 1..period. */
#define OSUC_VAL_PERIOD    251u

enum osuc_dtype { OSUC_CHAR, OSUC_INT, OSUC_FLOAT };

enum osuc_parse {
    OSUC_PARSE_OK,
    OSUC_PARSE_HELP,
    OSUC_PARSE_VERSION,
    OSUC_PARSE_BAD_USAGE, /* message + help text, exit 1 */
    OSUC_PARSE_ERROR      /* message only, exit 1 */
};

struct osuc_opts {
    size_t min_size;
    size_t max_size;
    size_t mem_limit;
    int iters;
    int iters_large;
    int skip;
    int skip_large;
    int full;
    int validate;
    int val_warmup;
    int in_place;
    int bw;
    int memcpy_ref;
    int tail;
    int npct;
    int pct[OSUC_MAX_PCT];
    int ndtypes;
    enum osuc_dtype dtypes[OSUC_MAX_DTYPES];
};

static char osuc_msg[512];

static void osuc_set_msg(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void osuc_set_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(osuc_msg, sizeof(osuc_msg), fmt, ap);
    va_end(ap);
}

#define OSUC_MPI(call)                                                         \
    do {                                                                       \
        int osuc_rc_ = (call);                                                 \
        if (MPI_SUCCESS != osuc_rc_) {                                         \
            fprintf(stderr, "%s:%d: %s failed with error %d\n", __FILE__,      \
                    __LINE__, #call, osuc_rc_);                                \
            MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);                           \
        }                                                                      \
    } while (0)

/* ------------------------------------------------------------------ */
/* Help text                                                           */
/* ------------------------------------------------------------------ */

/* One entry per option; '\n' in text starts a continuation line. */
struct osuc_help {
    char shortopt; /* 0: long option only */
    const char *longopt;
    const char *text;
};

static const struct osuc_help osuc_help_table[] = {
    {'h', "help", "print this help"},
    {'v', "version", "print version info"},
    {'f', "full",
     "print full format listing (MIN/MAX latency and\n"
     "ITERATIONS displayed in addition to AVERAGE latency)"},
    {'m', "message-size",
     "[MIN:]MAX - set the minimum and/or the maximum\n"
     "message size to MIN and/or MAX bytes respectively\n"
     "(default 1:1048576). Sizes double from MIN; sizes\n"
     "smaller than one datatype element are skipped.\n"
     "Examples:\n"
     "-m 128      // min = default, max = 128\n"
     "-m 2:128    // min = 2, max = 128\n"
     "-m 2:       // min = 2, max = default"},
    {'i', "iterations",
     "ITER - number of iterations for timing (default\n"
     "1000; 100 for sizes above 8192 bytes; -i sets both)"},
    {'x', "warmup",
     "ITER - set number of warmup iterations to skip\n"
     "before timing (default 200; 10 for sizes above 8192\n"
     "bytes; -x sets both)"},
    {'M', "mem-limit",
     "SIZE - set per process maximum memory consumption\n"
     "to SIZE bytes (default 536870912)"},
    {'d', "accelerator",
     "TYPE - buffer location; only `host' is supported\n"
     "by this build (no device buffers)"},
    {'c', "validation",
     "Enable validation. Disabled by default. Results are\n"
     "checked against locally computed expected values"},
    {'u', "validation-warmup",
     "ITR - set number of extra warmup allreduces per\n"
     "iteration when validation is enabled (default 5,\n"
     "max 10)"},
    {'T', "type",
     "[all,mpi_char,mpi_int,mpi_float] - Set MPI_TYPE.\n"
     "Default:MPI_CHAR. May be given more than once"},
    {'l', "in-place", "Run benchmark with MPI_IN_PLACE support."},
    {'z', "tail-lat",
     "Print tail latencies.\n"
     "-z Outputs P50, P90, P99 percentiles\n"
     "-z<1-99,1-99,..> Comma separated percentiles (max 5)"},
    {0, "bw",
     "osu-compat extension, off by default: add a last\n"
     "column \"Bus BW(GB/s)\" = size * 2*(n-1)/n / avg\n"
     "latency (n = number of ranks, 1 GB = 1e9 bytes)"},
    {0, "memcpy-ref",
     "osu-compat extension, off by default: at the end,\n"
     "rank 0 prints a comment line with its memcpy\n"
     "bandwidth at 16 MiB, or the largest message size if\n"
     "smaller (a reference for bus bandwidth)"},
};

static void osuc_print_help(void)
{
    size_t k;

    fprintf(stdout, "Usage: %s [options]\n", OSUC_BENCH_NAME);
    fprintf(stdout, "Options:\n");
    for (k = 0; k < sizeof(osuc_help_table) / sizeof(osuc_help_table[0]);
         k++) {
        const struct osuc_help *h = &osuc_help_table[k];
        const char *p = h->text;
        const char *nl;
        int first = 1;

        if (h->shortopt) {
            fprintf(stdout, "  -%c, --%-20s", h->shortopt, h->longopt);
        } else {
            fprintf(stdout, "      --%-20s", h->longopt);
        }
        do {
            nl = strchr(p, '\n');
            if (!first) {
                fprintf(stdout, "%28s", "");
            }
            if (nl) {
                fprintf(stdout, "%.*s\n", (int)(nl - p), p);
                p = nl + 1;
            } else {
                fprintf(stdout, "%s\n", p);
            }
            first = 0;
        } while (nl);
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* Option parsing                                                      */
/* ------------------------------------------------------------------ */

/* Parse a non-negative decimal integer that must fill the whole string. */
static int osuc_parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    unsigned long long v;

    if (NULL == s || '\0' == *s || '-' == *s || '+' == *s) {
        return -1;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (0 != errno || '\0' != *end || v > (unsigned long long)SIZE_MAX) {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int osuc_parse_int(const char *s, int minval, int *out)
{
    size_t v;

    if (osuc_parse_size(s, &v) || v > (size_t)INT_MAX || (int)v < minval) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* -m [MIN:]MAX, also "MIN:" and ":MAX" as in OMB. */
static int osuc_parse_msg_size(const char *arg, struct osuc_opts *o)
{
    const char *colon = strchr(arg, ':');
    char left[64];
    size_t len, v;

    if (NULL == colon) {
        if (osuc_parse_size(arg, &v) || 0 == v) {
            return -1;
        }
        o->max_size = v;
        return 0;
    }
    if (strchr(colon + 1, ':')) {
        return -1;
    }
    len = (size_t)(colon - arg);
    if (len >= sizeof(left)) {
        return -1;
    }
    memcpy(left, arg, len);
    left[len] = '\0';
    if (0 == len && '\0' == colon[1]) {
        return -1;
    }
    if (len > 0) {
        if (osuc_parse_size(left, &v) || 0 == v) {
            return -1;
        }
        o->min_size = v;
    }
    if ('\0' != colon[1]) {
        if (osuc_parse_size(colon + 1, &v) || 0 == v) {
            return -1;
        }
        o->max_size = v;
    }
    return 0;
}

static int osuc_add_dtype(struct osuc_opts *o, enum osuc_dtype d)
{
    if (o->ndtypes >= OSUC_MAX_DTYPES) {
        return -1;
    }
    o->dtypes[o->ndtypes++] = d;
    return 0;
}

static int osuc_parse_type(const char *arg, struct osuc_opts *o)
{
    if (0 == strcasecmp(arg, "mpi_char")) {
        return osuc_add_dtype(o, OSUC_CHAR);
    } else if (0 == strcasecmp(arg, "mpi_int")) {
        return osuc_add_dtype(o, OSUC_INT);
    } else if (0 == strcasecmp(arg, "mpi_float")) {
        return osuc_add_dtype(o, OSUC_FLOAT);
    } else if (0 == strcasecmp(arg, "all")) {
        if (osuc_add_dtype(o, OSUC_CHAR) || osuc_add_dtype(o, OSUC_INT) ||
            osuc_add_dtype(o, OSUC_FLOAT)) {
            return -1;
        }
        return 0;
    }
    return -1;
}

static int osuc_parse_percentiles(const char *arg, struct osuc_opts *o)
{
    char buf[128];
    char *tok, *save = NULL;

    o->npct = 0;
    if (NULL == arg) {
        o->pct[0] = 50;
        o->pct[1] = 90;
        o->pct[2] = 99;
        o->npct = 3;
        return 0;
    }
    if (strlen(arg) >= sizeof(buf)) {
        return -1;
    }
    strcpy(buf, arg);
    for (tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int p;
        if (o->npct >= OSUC_MAX_PCT || osuc_parse_int(tok, 0, &p) ||
            p > 100) {
            return -1;
        }
        o->pct[o->npct++] = p;
    }
    return (o->npct > 0) ? 0 : -1;
}

#define OSUC_OPT_BW 1000
#define OSUC_OPT_MEMCPY_REF 1001

static enum osuc_parse osuc_parse_args(int argc, char **argv,
                                       struct osuc_opts *o)
{
    /* Same letters as OMB's non-accelerator osu_allreduce plus -d. */
    static const char optstring[] = "+:hvfm:i:x:M:d:c::u:T:lz::a:G:P:I";
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'v'},
        {"full", no_argument, NULL, 'f'},
        {"message-size", required_argument, NULL, 'm'},
        {"iterations", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'x'},
        {"mem-limit", required_argument, NULL, 'M'},
        {"accelerator", required_argument, NULL, 'd'},
        {"validation", optional_argument, NULL, 'c'},
        {"validation-warmup", required_argument, NULL, 'u'},
        {"type", required_argument, NULL, 'T'},
        {"in-place", no_argument, NULL, 'l'},
        {"tail-lat", optional_argument, NULL, 'z'},
        {"array-size", required_argument, NULL, 'a'},
        {"graph", required_argument, NULL, 'G'},
        {"papi", required_argument, NULL, 'P'},
        {"session", no_argument, NULL, 'I'},
        {"bw", no_argument, NULL, OSUC_OPT_BW},
        {"memcpy-ref", no_argument, NULL, OSUC_OPT_MEMCPY_REF},
        {NULL, 0, NULL, 0},
    };
    int c, v;
    size_t sz;

    memset(o, 0, sizeof(*o));
    o->min_size = OSUC_DEF_MIN_SIZE;
    o->max_size = OSUC_DEF_MAX_SIZE;
    o->mem_limit = OSUC_MEM_LIMIT;
    o->iters = OSUC_ITERS_SMALL;
    o->iters_large = OSUC_ITERS_LARGE;
    o->skip = OSUC_SKIP_SMALL;
    o->skip_large = OSUC_SKIP_LARGE;
    o->val_warmup = OSUC_VAL_WARMUP;

    opterr = 0;
    optind = 1;
    while (-1 != (c = getopt_long(argc, argv, optstring, longopts, NULL))) {
        switch (c) {
            case 'h':
                return OSUC_PARSE_HELP;
            case 'v':
                return OSUC_PARSE_VERSION;
            case 'f':
                o->full = 1;
                break;
            case 'm':
                if (osuc_parse_msg_size(optarg, o)) {
                    osuc_set_msg("Invalid Message Size [-m %s]", optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                break;
            case 'i':
                if (osuc_parse_int(optarg, 1, &v)) {
                    osuc_set_msg("Invalid Number of Iterations [-i %s]",
                                 optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->iters = o->iters_large = v;
                break;
            case 'x':
                if (osuc_parse_int(optarg, 0, &v)) {
                    osuc_set_msg("Invalid Number of Warmup Iterations [-x %s]",
                                 optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->skip = o->skip_large = v;
                break;
            case 'M':
                if (osuc_parse_size(optarg, &sz)) {
                    osuc_set_msg("Invalid Memory Limit [-M %s]", optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->mem_limit = sz;
                break;
            case 'd':
                if (0 != strcasecmp(optarg, "host")) {
                    osuc_set_msg("Error: device buffers (-d %s) are not "
                                 "supported by this build of osu-compat; "
                                 "only '-d host' is accepted",
                                 optarg);
                    return OSUC_PARSE_ERROR;
                }
                break;
            case 'c':
                if (NULL != optarg) {
                    osuc_set_msg("Error: validation logging (-c%s) is not "
                                 "supported by this build of osu-compat; "
                                 "use plain -c",
                                 optarg);
                    return OSUC_PARSE_ERROR;
                }
                o->validate = 1;
                break;
            case 'u':
                if (osuc_parse_int(optarg, 0, &v) ||
                    v > OSUC_VAL_WARMUP_MAX) {
                    osuc_set_msg("Invalid Number of Validation Warmup "
                                 "Iterations (0-%d) [-u %s]",
                                 OSUC_VAL_WARMUP_MAX, optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->val_warmup = v;
                break;
            case 'T':
                if (osuc_parse_type(optarg, o)) {
                    osuc_set_msg("Invalid datatype (use mpi_char, mpi_int, "
                                 "mpi_float or all) [-T %s]",
                                 optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                break;
            case 'l':
                o->in_place = 1;
                break;
            case 'z':
                if (osuc_parse_percentiles(optarg, o)) {
                    osuc_set_msg("Percentiles must be a comma separated list "
                                 "of at most %d values in 0-100 [-z %s]",
                                 OSUC_MAX_PCT, optarg ? optarg : "");
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->tail = 1;
                break;
            case OSUC_OPT_BW:
                o->bw = 1;
                break;
            case OSUC_OPT_MEMCPY_REF:
                o->memcpy_ref = 1;
                break;
            case 'a':
            case 'G':
            case 'P':
            case 'I':
                osuc_set_msg("Error: option -%c is not supported by this "
                             "build of osu-compat",
                             c);
                return OSUC_PARSE_ERROR;
            case ':':
                if (optopt > 0 && optopt < 256) {
                    osuc_set_msg("Option Missing Required Argument [-%c]",
                                 optopt);
                } else {
                    osuc_set_msg("Option Missing Required Argument [%s]",
                                 argv[optind - 1]);
                }
                return OSUC_PARSE_BAD_USAGE;
            default:
                if (optopt > 0 && optopt < 256) {
                    osuc_set_msg("Invalid option [-%c]", optopt);
                } else {
                    osuc_set_msg("Invalid option [%s]", argv[optind - 1]);
                }
                return OSUC_PARSE_BAD_USAGE;
        }
    }
    if (optind < argc) {
        osuc_set_msg("Unexpected argument [%s]", argv[optind]);
        return OSUC_PARSE_BAD_USAGE;
    }
    if (0 == o->ndtypes) {
        o->dtypes[o->ndtypes++] = OSUC_CHAR;
    }
    if (o->mem_limit < OSUC_MEM_LIMIT_MIN) {
        /* OMB clamps silently-with-a-note rather than failing. */
        o->mem_limit = OSUC_MEM_LIMIT_MIN;
        osuc_set_msg("Requested memory limit too low, using [%zu] instead.",
                     OSUC_MEM_LIMIT_MIN);
    }
    return OSUC_PARSE_OK;
}

/* ------------------------------------------------------------------ */
/* Datatype helpers and validation pattern                              */
/* ------------------------------------------------------------------ */

static MPI_Datatype osuc_mpi_type(enum osuc_dtype d)
{
    switch (d) {
        case OSUC_INT:
            return MPI_INT;
        case OSUC_FLOAT:
            return MPI_FLOAT;
        case OSUC_CHAR:
        default:
            return MPI_CHAR;
    }
}

static size_t osuc_type_size(enum osuc_dtype d)
{
    switch (d) {
        case OSUC_INT:
            return sizeof(int);
        case OSUC_FLOAT:
            return sizeof(float);
        case OSUC_CHAR:
        default:
            return 1;
    }
}

/* Fill count elements with the value "1" of the datatype (timing mode). */
static void osuc_fill_ones(void *buf, enum osuc_dtype d, size_t count)
{
    size_t j;

    switch (d) {
        case OSUC_INT:
            for (j = 0; j < count; j++) {
                ((int *)buf)[j] = 1;
            }
            break;
        case OSUC_FLOAT:
            for (j = 0; j < count; j++) {
                ((float *)buf)[j] = 1.0f;
            }
            break;
        case OSUC_CHAR:
        default:
            memset(buf, 1, count);
            break;
    }
}

/*
 * Validation pattern.  Element j of rank r in iteration it holds
 *     v(r, it, j) = f((r + j + it) mod P)
 * with f(x) = x + 1 ("linear") or f(x) = (x == 0) ("indicator").  The
 * reduced value then only depends on k = (j + it) mod P:
 *     S[k] = sum_{r=0}^{n-1} f((r + k) mod P)
 * which is tabulated once per datatype, so checking costs O(1) an element.
 *
 * All values are non-negative, so every partial sum the MPI library forms,
 * in whatever order, is at most the final sum.  P and f are chosen so that
 * the final sum stays exact:
 *  - MPI_FLOAT: linear, P * n < 2^24, every partial sum is an exactly
 *    representable integer.
 *  - MPI_INT: linear, P = 251; the sum is at most 251 * n.
 *  - MPI_CHAR: every sum must stay <= 127.  Open MPI's AVX reduction
 *    component saturates 8-bit signed sums instead of wrapping
 *    (open-mpi/ompi#8045), so data that overflows would give results that
 *    depend on the code path.  The largest linear period whose sums stay
 *    <= 127 is used (P = 64 for 2 ranks); above 127 ranks, an indicator
 *    pattern with P = ceil(n / 127).  The expected byte is still computed
 *    modulo 256 and compared as unsigned char.
 */
struct osuc_val {
    unsigned period;
    int indicator;
    uint64_t *sums; /* S[k], k in [0, period) */
};

static unsigned osuc_val_f(const struct osuc_val *v, unsigned x)
{
    return v->indicator ? (0 == x) : x + 1;
}

/* Fill v->sums for the current period/indicator; returns max S[k]. */
static uint64_t osuc_val_tabulate(struct osuc_val *v, uint64_t n)
{
    uint64_t p = v->period, full = n / p, rem = n % p, cycle = 0, k, r,
             max = 0;

    for (k = 0; k < p; k++) {
        cycle += osuc_val_f(v, (unsigned)k);
    }
    for (k = 0; k < p; k++) {
        uint64_t s = full * cycle;
        for (r = 0; r < rem; r++) {
            s += osuc_val_f(v, (unsigned)((r + k) % p));
        }
        v->sums[k] = s;
        if (s > max) {
            max = s;
        }
    }
    return max;
}

static int osuc_val_init(struct osuc_val *v, enum osuc_dtype d, int nprocs)
{
    uint64_t n = (uint64_t)nprocs;
    unsigned p = OSUC_VAL_PERIOD;

    v->indicator = 0;
    v->sums = NULL;
    if (OSUC_FLOAT == d) {
        uint64_t lim = ((uint64_t)1 << 24) / n;
        if (lim < p) {
            p = (lim > 0) ? (unsigned)lim : 1u;
        }
    }
    if (OSUC_CHAR == d && n > 127) {
        v->indicator = 1;
        p = (unsigned)((n + 126) / 127);
    }
    v->sums = malloc(sizeof(uint64_t) * p);
    if (NULL == v->sums) {
        return -1;
    }
    v->period = p;
    if (OSUC_CHAR == d && !v->indicator) {
        /* Largest linear period (sums only shrink as P shrinks). */
        while (osuc_val_tabulate(v, n) > 127 && v->period > 1) {
            v->period--;
        }
        return 0;
    }
    (void)osuc_val_tabulate(v, n);
    return 0;
}

static void osuc_val_fill(const struct osuc_val *v, void *buf,
                          enum osuc_dtype d, size_t count, int rank,
                          unsigned it)
{
    unsigned p = v->period;
    unsigned k = ((unsigned)rank % p + it % p) % p;
    size_t j;

    for (j = 0; j < count; j++) {
        unsigned x = osuc_val_f(v, k);
        switch (d) {
            case OSUC_INT:
                ((int *)buf)[j] = (int)x;
                break;
            case OSUC_FLOAT:
                ((float *)buf)[j] = (float)x;
                break;
            case OSUC_CHAR:
            default:
                ((unsigned char *)buf)[j] = (unsigned char)x;
                break;
        }
        k = (k + 1 == p) ? 0 : k + 1;
    }
}

/* Returns 1 if any element differs from the expected sum, else 0. */
static int osuc_val_check(const struct osuc_val *v, const void *buf,
                          enum osuc_dtype d, size_t count, unsigned it)
{
    unsigned p = v->period;
    unsigned k = it % p;
    size_t j;

    for (j = 0; j < count; j++) {
        uint64_t s = v->sums[k];
        switch (d) {
            case OSUC_INT:
                if (((const int *)buf)[j] != (int)s) {
                    return 1;
                }
                break;
            case OSUC_FLOAT:
                if (((const float *)buf)[j] != (float)s) {
                    return 1;
                }
                break;
            case OSUC_CHAR:
            default:
                if (((const unsigned char *)buf)[j] !=
                    (unsigned char)(s & 0xffu)) {
                    return 1;
                }
                break;
        }
        k = (k + 1 == p) ? 0 : k + 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

static void osuc_print_columns_header(const struct osuc_opts *o)
{
    int k;

    fprintf(stdout, "%-*s", OSUC_SIZE_WIDTH, "# Size");
    fprintf(stdout, "%*s", OSUC_FIELD_WIDTH, "Avg Latency(us)");
    if (o->full) {
        fprintf(stdout, "%*s", OSUC_FIELD_WIDTH, "Min Latency(us)");
        fprintf(stdout, "%*s", OSUC_FIELD_WIDTH, "Max Latency(us)");
        fprintf(stdout, "%*s", OSUC_ITER_WIDTH, "Iterations");
    }
    if (o->validate) {
        fprintf(stdout, "%*s", OSUC_FIELD_WIDTH, "Validation");
    }
    if (o->tail) {
        for (k = 0; k < o->npct; k++) {
            char col[32];
            snprintf(col, sizeof(col), "P%d Tail Lat(us)", o->pct[k]);
            fprintf(stdout, "%*s", OSUC_FIELD_WIDTH, col);
        }
    }
    if (o->bw) {
        fprintf(stdout, "%*s", OSUC_FIELD_WIDTH, "Bus BW(GB/s)");
    }
    fprintf(stdout, "\n");
    fflush(stdout);
}

static void osuc_print_row(const struct osuc_opts *o, size_t size,
                           double avg, double min, double max, int iters,
                           int errors, const double *tail, int nprocs)
{
    int k;

    fprintf(stdout, "%-*zu", OSUC_SIZE_WIDTH, size);
    fprintf(stdout, "%*.*f", OSUC_FIELD_WIDTH, OSUC_PRECISION, avg);
    if (o->full) {
        fprintf(stdout, "%*.*f%*.*f%*d", OSUC_FIELD_WIDTH, OSUC_PRECISION, min,
                OSUC_FIELD_WIDTH, OSUC_PRECISION, max, OSUC_ITER_WIDTH,
                iters);
    }
    if (o->validate) {
        fprintf(stdout, "%*s", OSUC_FIELD_WIDTH, errors ? "Fail" : "Pass");
    }
    if (o->tail) {
        for (k = 0; k < o->npct; k++) {
            fprintf(stdout, "%*.*f", OSUC_FIELD_WIDTH, OSUC_PRECISION,
                    tail[k]);
        }
    }
    if (o->bw) {
        double busbw = 0.0;
        if (avg > 0.0) {
            /* bytes per microsecond / 1e3 = GB/s (1 GB = 1e9 bytes) */
            busbw = (double)size * 2.0 * (double)(nprocs - 1) /
                    (double)nprocs / avg / 1e3;
        }
        fprintf(stdout, "%*.*f", OSUC_FIELD_WIDTH, OSUC_PRECISION, busbw);
    }
    fprintf(stdout, "\n");
    fflush(stdout);
}

static int osuc_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------------ */
/* Main                                                                */
/* ------------------------------------------------------------------ */

static void *osuc_alloc(size_t bytes)
{
    void *p = NULL;
    long page = sysconf(_SC_PAGESIZE);

    if (page <= 0) {
        page = 4096;
    }
    if (0 == bytes) {
        bytes = 1;
    }
    if (0 != posix_memalign(&p, (size_t)page, bytes)) {
        return NULL;
    }
    return p;
}

int main(int argc, char *argv[])
{
    struct osuc_opts o;
    enum osuc_parse pr;
    int rank = 0, nprocs = 0, t;
    int failed = 0, exit_code = EXIT_SUCCESS;
    size_t failed_size = 0, min_tsize = 1;
    char *sendbuf = NULL, *recvbuf = NULL, *warmbuf = NULL;
    double *lat = NULL, *lat_sum = NULL;
    int max_iters;

    osuc_msg[0] = '\0';
    pr = osuc_parse_args(argc, argv, &o);

    MPI_Init(&argc, &argv);
    OSUC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OSUC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nprocs));

    switch (pr) {
        case OSUC_PARSE_HELP:
            if (0 == rank) {
                osuc_print_help();
            }
            MPI_Finalize();
            return EXIT_SUCCESS;
        case OSUC_PARSE_VERSION:
            if (0 == rank) {
                fprintf(stdout, "%s\n", OSUC_HEADER);
                fflush(stdout);
            }
            MPI_Finalize();
            return EXIT_SUCCESS;
        case OSUC_PARSE_BAD_USAGE:
            if (0 == rank) {
                fprintf(stderr, "%s\n\n", osuc_msg);
                fflush(stderr);
                osuc_print_help();
            }
            MPI_Finalize();
            return EXIT_FAILURE;
        case OSUC_PARSE_ERROR:
            if (0 == rank) {
                fprintf(stderr, "%s\n", osuc_msg);
                fflush(stderr);
            }
            MPI_Finalize();
            return EXIT_FAILURE;
        case OSUC_PARSE_OK:
        default:
            break;
    }
    if (0 == rank && '\0' != osuc_msg[0]) {
        fprintf(stderr, "%s\n", osuc_msg); /* non-fatal notes */
    }

    if (nprocs < 2) {
        if (0 == rank) {
            fprintf(stderr, "This test requires at least two processes\n");
        }
        MPI_Finalize();
        return EXIT_FAILURE;
    }

    if (o.max_size > o.mem_limit) {
        o.max_size = o.mem_limit;
        if (0 == rank) {
            fprintf(stderr,
                    "Warning! Limiting max message size to: %zu. "
                    "Increase -M, --mem-limit for higher message sizes.\n",
                    o.max_size);
        }
    }
    if (o.min_size > o.max_size) {
        if (0 == rank) {
            fprintf(stderr,
                    "Invalid Message Size: minimum %zu exceeds maximum %zu\n",
                    o.min_size, o.max_size);
        }
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    /* MPI counts are int: the largest count used must fit. */
    for (t = 0; t < o.ndtypes; t++) {
        size_t ts = osuc_type_size(o.dtypes[t]);
        if (0 == t || ts < min_tsize) {
            min_tsize = ts;
        }
    }
    if (o.max_size / min_tsize > (size_t)INT_MAX) {
        if (0 == rank) {
            fprintf(stderr,
                    "Error: maximum message size %zu bytes needs an element "
                    "count above INT_MAX (%d) for a %zu-byte datatype\n",
                    o.max_size, INT_MAX, min_tsize);
        }
        MPI_Finalize();
        return EXIT_FAILURE;
    }

    sendbuf = osuc_alloc(o.max_size);
    recvbuf = osuc_alloc(o.max_size);
    if (o.validate && o.val_warmup > 0) {
        warmbuf = osuc_alloc(o.max_size);
    }
    max_iters = (o.iters > o.iters_large) ? o.iters : o.iters_large;
    if (o.tail) {
        lat = malloc(sizeof(double) * (size_t)max_iters);
        lat_sum = malloc(sizeof(double) * (size_t)max_iters);
    }
    if (NULL == sendbuf || NULL == recvbuf ||
        (o.validate && o.val_warmup > 0 && NULL == warmbuf) ||
        (o.tail && (NULL == lat || NULL == lat_sum))) {
        fprintf(stderr, "Could Not Allocate Memory [rank %d]\n", rank);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }
    /* Touch every page before any timing. */
    memset(sendbuf, 0, o.max_size);
    memset(recvbuf, 0, o.max_size);
    if (warmbuf) {
        memset(warmbuf, 0, o.max_size);
    }

    if (0 == rank) {
        fprintf(stdout, "\n%s\n", OSUC_HEADER);
        fflush(stdout);
    }

    for (t = 0; t < o.ndtypes && !failed; t++) {
        enum osuc_dtype d = o.dtypes[t];
        MPI_Datatype mt = osuc_mpi_type(d);
        size_t tsize = osuc_type_size(d);
        char tname[MPI_MAX_OBJECT_NAME];
        int tname_len = 0, mpi_tsize = 0;
        struct osuc_val val = {0, 0, NULL};
        size_t size;

        OSUC_MPI(MPI_Type_size(mt, &mpi_tsize));
        if ((size_t)mpi_tsize != tsize) {
            if (0 == rank) {
                fprintf(stderr, "Error: unexpected MPI datatype size\n");
            }
            MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
        }
        OSUC_MPI(MPI_Type_get_name(mt, tname, &tname_len));
        if (o.validate && osuc_val_init(&val, d, nprocs)) {
            fprintf(stderr, "Could Not Allocate Memory [rank %d]\n", rank);
            MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
        }
        /* Timing-mode data: typed ones to send, zeros to receive (so an
         * in-place run keeps reducing zeros and never overflows). */
        osuc_fill_ones(sendbuf, d, o.max_size / tsize);
        memset(recvbuf, 0, o.max_size);

        if (0 == rank) {
            fprintf(stdout, "# Datatype: %s.\n", tname);
            osuc_print_columns_header(&o);
        }

        for (size = o.min_size; size <= o.max_size;
             size = (size > o.max_size / 2) ? o.max_size + 1 : size * 2) {
            size_t count = size / tsize;
            int large = size > OSUC_LARGE_SIZE;
            int iters = large ? o.iters_large : o.iters;
            int skip = large ? o.skip_large : o.skip;
            void *sbuf = o.in_place ? MPI_IN_PLACE : (void *)sendbuf;
            double timer = 0.0, latency, min_t = 0.0, max_t = 0.0,
                   sum_t = 0.0;
            double tail[OSUC_MAX_PCT] = {0};
            int local_err = 0, errors = 0, i, j;

            if (0 == count) {
                continue; /* smaller than one element */
            }

            OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
            for (i = 0; i < iters + skip; i++) {
                double t0, t1;

                if (o.validate) {
                    osuc_val_fill(&val, o.in_place ? recvbuf : sendbuf, d,
                                  count, rank, (unsigned)i);
                    if (!o.in_place) {
                        memset(recvbuf, 0, count * tsize);
                    }
                    for (j = 0; j < o.val_warmup; j++) {
                        OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
                        OSUC_MPI(MPI_Allreduce(sendbuf, warmbuf, (int)count,
                                               mt, MPI_SUM, MPI_COMM_WORLD));
                    }
                    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
                }

                t0 = MPI_Wtime();
                OSUC_MPI(MPI_Allreduce(sbuf, recvbuf, (int)count, mt, MPI_SUM,
                                       MPI_COMM_WORLD));
                t1 = MPI_Wtime();
                OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));

                if (o.validate) {
                    local_err += osuc_val_check(&val, recvbuf, d, count,
                                                (unsigned)i);
                }
                if (i >= skip) {
                    timer += t1 - t0;
                    if (o.tail) {
                        lat[i - skip] = (t1 - t0) * 1e6;
                    }
                }
            }
            latency = timer * 1e6 / (double)iters;

            OSUC_MPI(MPI_Reduce(&latency, &min_t, 1, MPI_DOUBLE, MPI_MIN, 0,
                                MPI_COMM_WORLD));
            OSUC_MPI(MPI_Reduce(&latency, &max_t, 1, MPI_DOUBLE, MPI_MAX, 0,
                                MPI_COMM_WORLD));
            OSUC_MPI(MPI_Reduce(&latency, &sum_t, 1, MPI_DOUBLE, MPI_SUM, 0,
                                MPI_COMM_WORLD));
            if (o.tail) {
                /* Per-iteration latency averaged over ranks, then sorted. */
                OSUC_MPI(MPI_Reduce(lat, lat_sum, iters, MPI_DOUBLE, MPI_SUM,
                                    0, MPI_COMM_WORLD));
                if (0 == rank) {
                    qsort(lat_sum, (size_t)iters, sizeof(double),
                          osuc_cmp_double);
                    for (j = 0; j < o.npct; j++) {
                        long idx = (long)iters * o.pct[j] / 100 - 1;
                        if (idx < 0) {
                            idx = 0;
                        }
                        if (idx >= iters) {
                            idx = iters - 1;
                        }
                        tail[j] = lat_sum[idx] / nprocs;
                    }
                }
            }
            if (o.validate) {
                OSUC_MPI(MPI_Allreduce(&local_err, &errors, 1, MPI_INT,
                                       MPI_SUM, MPI_COMM_WORLD));
            }
            if (0 == rank) {
                osuc_print_row(&o, size, sum_t / nprocs, min_t, max_t, iters,
                               errors, tail, nprocs);
            }
            OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
            if (0 != errors) {
                failed = 1;
                failed_size = size;
                break;
            }
        }
        free(val.sums);
    }

    if (o.memcpy_ref && 0 == rank && !failed) {
        /* The same buffers, one process copying: what a memory copy costs here, at
         * 16 MiB (the size bus bandwidth is usually quoted at) or the largest size. */
        size_t bytes = o.max_size < ((size_t)16 << 20) ? o.max_size : ((size_t)16 << 20);
        int reps = bytes >= ((size_t)1 << 24) ? 20 : 200;
        double best = 0.0;
        for (int round = 0; round < 3; round++) {
            double t = MPI_Wtime();
            for (int r = 0; r < reps; r++) {
                memcpy(recvbuf, sendbuf, bytes);
                ((volatile char *)sendbuf)[(size_t)r % bytes] ^= 1;
            }
            t = MPI_Wtime() - t;
            if (t > 0 && (double)bytes * reps / t > best) {
                best = (double)bytes * reps / t;
            }
        }
        fprintf(stdout, "# memcpy reference: %zu bytes at %.2f GB/s (rank 0, best of 3 x %d copies)\n",
                bytes, best / 1e9, reps);
        fflush(stdout);
    }

    free(sendbuf);
    free(recvbuf);
    free(warmbuf);
    free(lat);
    free(lat_sum);

    if (failed) {
        if (0 == rank) {
            fprintf(stdout,
                    "DATA VALIDATION ERROR: %s exited with status %d on"
                    " message size %zu.\n",
                    argv[0], EXIT_FAILURE, failed_size);
            fflush(stdout);
        }
        exit_code = EXIT_FAILURE;
    }
    MPI_Finalize();
    return exit_code;
}
