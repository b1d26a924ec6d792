/*
 * osu-compat/options.h: the command line of the osu-compat benchmarks, OMB 7.x's
 * letters and defaults, with each benchmark's own options.
 */
#ifndef OSUC_OPTIONS_H
#define OSUC_OPTIONS_H

#include <stddef.h>

#include "pattern.h"

#define OSUC_OMB_VERSION "7.4" /* OMB release whose format we follow */
#define OSUC_LARGE_SIZE ((size_t)8192) /* sizes above use the *_large counts */
#define OSUC_MAX_DTYPES 16
#define OSUC_MAX_PCT 5

/* The collective a benchmark measures: its buffers, -c's data and checks, its options
 * (-l for all but bcast, -k for reduce). */
enum osuc_coll {
    OSUC_COLL_ALLREDUCE = 0,
    OSUC_COLL_REDUCE_SCATTER, /* the message (size bytes) divided among the ranks, as OMB */
    OSUC_COLL_ALLGATHER, /* size bytes from each rank; receive buffer size x ranks */
    OSUC_COLL_BCAST, /* root 0, as OMB */
    OSUC_COLL_REDUCE /* root 0, or -k */
};

/* What sets one benchmark apart on the command line and in its first lines. */
struct osuc_bench {
    const char *name; /* "osu_allreduce" */
    const char *header; /* "# OSU MPI Allreduce Latency Test v7.4" */
    int nonblocking; /* 1: -t (MPI_Test calls); 0: --bw, --memcpy-ref */
    enum osuc_coll coll;
};

#define OSUC_ROOT_ROTATE (-1) /* -k rotate: the root of iteration i is i mod ranks */

enum osuc_parse {
    OSUC_PARSE_OK,
    OSUC_PARSE_HELP,
    OSUC_PARSE_VERSION,
    OSUC_PARSE_BAD_USAGE, /* message + help text, exit 1 */
    OSUC_PARSE_ERROR /* message only, exit 1 */
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
    int root; /* -k: the root (0, OMB's default) or OSUC_ROOT_ROTATE */
    int bw;
    int memcpy_ref;
    int num_probes; /* -t: MPI_Test calls during the compute phase (0: none, OMB's default) */
    int tail;
    int npct;
    int pct[OSUC_MAX_PCT];
    int ndtypes;
    enum osuc_dtype dtypes[OSUC_MAX_DTYPES];
};

enum osuc_parse osuc_parse_args(int argc, char **argv, const struct osuc_bench *b, struct osuc_opts *o);
/* The message of the last parse: the error, or a note to print (empty if none). */
const char *osuc_parse_message(void);
void osuc_print_help(const struct osuc_bench *b);

#endif
