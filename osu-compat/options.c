/*
 * osu-compat/options.c: the command line (see options.h). Letters, long names and
 * defaults follow OMB 7.x; options OMB has and this build does not are refused.
 */
#define _GNU_SOURCE 1

#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define OSUC_DEF_MIN_SIZE ((size_t)1)
#define OSUC_DEF_MAX_SIZE ((size_t)1 << 20)
#define OSUC_ITERS_SMALL 1000
#define OSUC_SKIP_SMALL 200
#define OSUC_ITERS_LARGE 100
#define OSUC_SKIP_LARGE 10
#define OSUC_VAL_WARMUP 5 /* default extra allreduces per iteration with -c */
#define OSUC_VAL_WARMUP_MAX 10
#define OSUC_MEM_LIMIT ((size_t)512 * 1024 * 1024)
#define OSUC_MEM_LIMIT_MIN ((size_t)1024 * 1024)

/* Long-only options (no letter). */
#define OSUC_OPT_BW 1000
#define OSUC_OPT_MEMCPY_REF 1001

/* Which benchmark has an option: every one, the blocking or the nonblocking ones, those
 * with -l (all but bcast, as OMB) or -k (reduce, as OMB). */
enum osuc_for { OSUC_FOR_BOTH, OSUC_FOR_BLOCKING, OSUC_FOR_NONBLOCKING, OSUC_FOR_IN_PLACE, OSUC_FOR_ROOT };

static int osuc_has(const struct osuc_bench *b, enum osuc_for f)
{
    switch (f) {
        case OSUC_FOR_IN_PLACE: return OSUC_COLL_BCAST != b->coll;
        case OSUC_FOR_ROOT: return OSUC_COLL_REDUCE == b->coll;
        case OSUC_FOR_BOTH: return 1;
        default: return (b->nonblocking ? OSUC_FOR_NONBLOCKING : OSUC_FOR_BLOCKING) == f;
    }
}

static char osuc_msg[512];

const char *osuc_parse_message(void)
{
    return osuc_msg;
}

static void osuc_set_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void osuc_set_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(osuc_msg, sizeof(osuc_msg), fmt, ap);
    va_end(ap);
}

/* One entry per option; '\n' in text starts a continuation line. */
struct osuc_help {
    char shortopt; /* 0: long option only */
    const char *longopt;
    enum osuc_for only;
    const char *text;
};

static const struct osuc_help osuc_help_table[] = {
    {'h', "help", OSUC_FOR_BOTH, "print this help"},
    {'v', "version", OSUC_FOR_BOTH, "print version info"},
    {'f', "full", OSUC_FOR_BLOCKING,
     "print full format listing (MIN/MAX latency and\n"
     "ITERATIONS displayed in addition to AVERAGE latency)"},
    {'f', "full", OSUC_FOR_NONBLOCKING,
     "print full format listing (Coll. Init, MPI_Test,\n"
     "MPI_Wait and MIN/MAX pure communication time)"},
    {'m', "message-size", OSUC_FOR_BOTH,
     "[MIN:]MAX - set the minimum and/or the maximum\n"
     "message size to MIN and/or MAX bytes respectively\n"
     "(default 1:1048576). Sizes double from MIN; sizes\n"
     "smaller than one datatype element are skipped.\n"
     "Examples:\n"
     "-m 128      // min = default, max = 128\n"
     "-m 2:128    // min = 2, max = 128\n"
     "-m 2:       // min = 2, max = default"},
    {'i', "iterations", OSUC_FOR_BOTH,
     "ITER - number of iterations for timing (default\n"
     "1000; 100 for sizes above 8192 bytes; -i sets both)"},
    {'x', "warmup", OSUC_FOR_BOTH,
     "ITER - set number of warmup iterations to skip\n"
     "before timing (default 200; 10 for sizes above 8192\n"
     "bytes; -x sets both)"},
    {'t', "num-test-calls", OSUC_FOR_NONBLOCKING,
     "CALLS - MPI_Test calls spread over the compute\n"
     "phase (default 0: none, as OMB)"},
    {'M', "mem-limit", OSUC_FOR_BOTH,
     "SIZE - set per process maximum memory consumption\n"
     "to SIZE bytes (default 536870912)"},
    {'d', "accelerator", OSUC_FOR_BOTH,
     "TYPE - buffer location; only `host' is supported\n"
     "by this build (no device buffers)"},
    {'c', "validation", OSUC_FOR_BOTH,
     "Enable validation. Disabled by default. Results are\n"
     "checked against locally computed expected values"},
    {'u', "validation-warmup", OSUC_FOR_BOTH,
     "ITR - set number of extra warmup collectives per\n"
     "iteration when validation is enabled (default 5,\n"
     "max 10)"},
    {'T', "type", OSUC_FOR_BOTH,
     "[all,mpi_char,mpi_int,mpi_float] - Set MPI_TYPE.\n"
     "Default:MPI_CHAR. May be given more than once"},
    {'l', "in-place", OSUC_FOR_IN_PLACE, "Run benchmark with MPI_IN_PLACE support."},
    {'k', "root-rank", OSUC_FOR_ROOT,
     "rotate|fixed:RANK - the root: RANK every time\n"
     "(default fixed:0), or rank i mod N in iteration i"},
    {'z', "tail-lat", OSUC_FOR_BOTH,
     "Print tail latencies.\n"
     "-z Outputs P50, P90, P99 percentiles\n"
     "-z<1-99,1-99,..> Comma separated percentiles (max 5)"},
    {0, "bw", OSUC_FOR_BLOCKING,
     "osu-compat extension, off by default: add a last\n"
     "column \"Bus BW(GB/s)\" = size * F / avg latency,\n"
     "F = 2(n-1)/n (allreduce), (n-1)/n (reduce_scatter),\n"
     "n-1 (allgather), 1 (bcast, reduce); n = number of\n"
     "ranks, 1 GB = 1e9 bytes"},
    {0, "memcpy-ref", OSUC_FOR_BLOCKING,
     "osu-compat extension, off by default: at the end,\n"
     "rank 0 prints a comment line with its memcpy\n"
     "bandwidth at 16 MiB, or the largest message size if\n"
     "smaller (a reference for bus bandwidth)"},
};

void osuc_print_help(const struct osuc_bench *b)
{
    size_t k;

    fprintf(stdout, "Usage: %s [options]\n", b->name);
    fprintf(stdout, "Options:\n");
    for (k = 0; k < sizeof(osuc_help_table) / sizeof(osuc_help_table[0]); k++) {
        const struct osuc_help *h = &osuc_help_table[k];
        const char *p = h->text;
        const char *nl;
        int first = 1;

        if (!osuc_has(b, h->only)) continue;
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
        if (osuc_add_dtype(o, OSUC_CHAR) || osuc_add_dtype(o, OSUC_INT) || osuc_add_dtype(o, OSUC_FLOAT)) {
            return -1;
        }
        return 0;
    }
    return -1;
}

/* -k rotate | fixed:RANK (OMB's forms). */
static int osuc_parse_root(const char *arg, struct osuc_opts *o)
{
    if (0 == strcasecmp(arg, "rotate")) {
        o->root = OSUC_ROOT_ROTATE;
        return 0;
    }
    if (0 == strncasecmp(arg, "fixed:", 6)) return osuc_parse_int(arg + 6, 0, &o->root);
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
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int p;
        if (o->npct >= OSUC_MAX_PCT || osuc_parse_int(tok, 0, &p) || p > 100) {
            return -1;
        }
        o->pct[o->npct++] = p;
    }
    return (o->npct > 0) ? 0 : -1;
}

/* Every long option; each benchmark takes those osuc_help_table gives it. */
static const struct option osuc_longopts_all[] = {
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'v'},
    {"full", no_argument, NULL, 'f'},
    {"message-size", required_argument, NULL, 'm'},
    {"iterations", required_argument, NULL, 'i'},
    {"warmup", required_argument, NULL, 'x'},
    {"num-test-calls", required_argument, NULL, 't'},
    {"mem-limit", required_argument, NULL, 'M'},
    {"accelerator", required_argument, NULL, 'd'},
    {"validation", optional_argument, NULL, 'c'},
    {"validation-warmup", required_argument, NULL, 'u'},
    {"type", required_argument, NULL, 'T'},
    {"in-place", no_argument, NULL, 'l'},
    {"tail-lat", optional_argument, NULL, 'z'},
    {"root-rank", required_argument, NULL, 'k'},
    {"ddt", required_argument, NULL, 'D'},
    {"array-size", required_argument, NULL, 'a'},
    {"graph", required_argument, NULL, 'G'},
    {"papi", required_argument, NULL, 'P'},
    {"session", no_argument, NULL, 'I'},
    {"bw", no_argument, NULL, OSUC_OPT_BW},
    {"memcpy-ref", no_argument, NULL, OSUC_OPT_MEMCPY_REF},
};
#define OSUC_NLONG (sizeof(osuc_longopts_all) / sizeof(osuc_longopts_all[0]))

/* Whether b has the long option named name: the refused OMB options (not in the help
 * table) are kept so that they give their own error. */
static int osuc_long_wanted(const struct osuc_bench *b, const char *name)
{
    int listed = 0;
    size_t k;

    for (k = 0; k < sizeof(osuc_help_table) / sizeof(osuc_help_table[0]); k++) {
        if (0 != strcmp(osuc_help_table[k].longopt, name)) continue;
        if (osuc_has(b, osuc_help_table[k].only)) return 1;
        listed = 1;
    }
    return !listed;
}

enum osuc_parse osuc_parse_args(int argc, char **argv, const struct osuc_bench *b, struct osuc_opts *o)
{
    /* OMB's letters for the benchmark's non-accelerator build plus -d: -t for the
     * nonblocking ones, -l for all but bcast, -k for reduce, -D (refused) for bcast and
     * allgather. */
    char optstring[64];
    struct option longopts[OSUC_NLONG + 1];
    size_t k, n = 0;
    int c, v;
    size_t sz;

    snprintf(optstring, sizeof(optstring), "+:hvfm:i:x:%sM:d:c::u:T:%sz::a:G:P:I%s%s", b->nonblocking ? "t:" : "",
             osuc_has(b, OSUC_FOR_IN_PLACE) ? "l" : "", osuc_has(b, OSUC_FOR_ROOT) ? "k:" : "",
             (OSUC_COLL_BCAST == b->coll || OSUC_COLL_ALLGATHER == b->coll) ? "D:" : "");
    for (k = 0; k < OSUC_NLONG; k++) {
        if (osuc_long_wanted(b, osuc_longopts_all[k].name)) longopts[n++] = osuc_longopts_all[k];
    }
    memset(&longopts[n], 0, sizeof(longopts[n]));
    osuc_msg[0] = '\0';
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
            case 'h': return OSUC_PARSE_HELP;
            case 'v': return OSUC_PARSE_VERSION;
            case 'f': o->full = 1; break;
            case 'm':
                if (osuc_parse_msg_size(optarg, o)) {
                    osuc_set_msg("Invalid Message Size [-m %s]", optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                break;
            case 'i':
                if (osuc_parse_int(optarg, 1, &v)) {
                    osuc_set_msg("Invalid Number of Iterations [-i %s]", optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->iters = o->iters_large = v;
                break;
            case 'x':
                if (osuc_parse_int(optarg, 0, &v)) {
                    osuc_set_msg("Invalid Number of Warmup Iterations [-x %s]", optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->skip = o->skip_large = v;
                break;
            case 't':
                if (osuc_parse_int(optarg, 0, &v)) {
                    osuc_set_msg("Invalid Number of Probes [-t %s]", optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->num_probes = v;
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
                    osuc_set_msg(
                        "Error: device buffers (-d %s) are not "
                        "supported by this build of osu-compat; "
                        "only '-d host' is accepted",
                        optarg);
                    return OSUC_PARSE_ERROR;
                }
                break;
            case 'c':
                if (NULL != optarg) {
                    osuc_set_msg(
                        "Error: validation logging (-c%s) is not "
                        "supported by this build of osu-compat; "
                        "use plain -c",
                        optarg);
                    return OSUC_PARSE_ERROR;
                }
                o->validate = 1;
                break;
            case 'u':
                if (osuc_parse_int(optarg, 0, &v) || v > OSUC_VAL_WARMUP_MAX) {
                    osuc_set_msg(
                        "Invalid Number of Validation Warmup "
                        "Iterations (0-%d) [-u %s]",
                        OSUC_VAL_WARMUP_MAX, optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->val_warmup = v;
                break;
            case 'T':
                if (osuc_parse_type(optarg, o)) {
                    osuc_set_msg(
                        "Invalid datatype (use mpi_char, mpi_int, "
                        "mpi_float or all) [-T %s]",
                        optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                break;
            case 'l': o->in_place = 1; break;
            case 'k':
                if (osuc_parse_root(optarg, o)) {
                    osuc_set_msg("Invalid root rank (use rotate or fixed:RANK) [-k %s]", optarg);
                    return OSUC_PARSE_BAD_USAGE;
                }
                break;
            case 'z':
                if (osuc_parse_percentiles(optarg, o)) {
                    osuc_set_msg(
                        "Percentiles must be a comma separated list "
                        "of at most %d values in 0-100 [-z %s]",
                        OSUC_MAX_PCT, optarg ? optarg : "");
                    return OSUC_PARSE_BAD_USAGE;
                }
                o->tail = 1;
                break;
            case OSUC_OPT_BW: o->bw = 1; break;
            case OSUC_OPT_MEMCPY_REF: o->memcpy_ref = 1; break;
            case 'a':
            case 'G':
            case 'P':
            case 'I':
            case 'D':
                osuc_set_msg(
                    "Error: option -%c is not supported by this "
                    "build of osu-compat",
                    c);
                return OSUC_PARSE_ERROR;
            case ':':
                if (optopt > 0 && optopt < 256) {
                    osuc_set_msg("Option Missing Required Argument [-%c]", optopt);
                } else {
                    osuc_set_msg("Option Missing Required Argument [%s]", argv[optind - 1]);
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
        osuc_set_msg("Requested memory limit too low, using [%zu] instead.", OSUC_MEM_LIMIT_MIN);
    }
    return OSUC_PARSE_OK;
}
