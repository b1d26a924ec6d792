/*
 * osu-compat/harness.c: the parts of a run both benchmarks share (see harness.h).
 */
#include "harness.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

static void *osuc_alloc(size_t bytes)
{
    void *p = NULL;
    long page = sysconf(_SC_PAGESIZE);

    if (page <= 0) page = 4096;
    if (0 == bytes) bytes = 1;
    if (0 != posix_memalign(&p, (size_t)page, bytes)) return NULL;
    return p;
}

/* What a parse result means before any benchmark work: -1 to go on, else exit code. */
static int osuc_parse_outcome(const struct osuc_bench *b, enum osuc_parse pr, int rank)
{
    const char *msg = osuc_parse_message();

    switch (pr) {
        case OSUC_PARSE_HELP:
            if (0 == rank) osuc_print_help(b);
            return EXIT_SUCCESS;
        case OSUC_PARSE_VERSION:
            if (0 == rank) {
                fprintf(stdout, "%s\n", b->header);
                fflush(stdout);
            }
            return EXIT_SUCCESS;
        case OSUC_PARSE_BAD_USAGE:
            if (0 == rank) {
                fprintf(stderr, "%s\n\n", msg);
                fflush(stderr);
                osuc_print_help(b);
            }
            return EXIT_FAILURE;
        case OSUC_PARSE_ERROR:
            if (0 == rank) {
                fprintf(stderr, "%s\n", msg);
                fflush(stderr);
            }
            return EXIT_FAILURE;
        case OSUC_PARSE_OK:
        default:
            if (0 == rank && '\0' != msg[0]) fprintf(stderr, "%s\n", msg); /* non-fatal notes */
            return -1;
    }
}

/* The size limits: -1 to go on, else the exit code. */
static int osuc_check_sizes(struct osuc_opts *o, int rank)
{
    size_t min_tsize = 1;
    int t;

    if (o->max_size > o->mem_limit) {
        o->max_size = o->mem_limit;
        if (0 == rank) {
            fprintf(stderr,
                    "Warning! Limiting max message size to: %zu. "
                    "Increase -M, --mem-limit for higher message sizes.\n",
                    o->max_size);
        }
    }
    if (o->min_size > o->max_size) {
        if (0 == rank) {
            fprintf(stderr, "Invalid Message Size: minimum %zu exceeds maximum %zu\n", o->min_size, o->max_size);
        }
        return EXIT_FAILURE;
    }
    /* MPI counts are int: the largest count used must fit. */
    for (t = 0; t < o->ndtypes; t++) {
        size_t ts = osuc_type_size(o->dtypes[t]);
        if (0 == t || ts < min_tsize) min_tsize = ts;
    }
    if (o->max_size / min_tsize > (size_t)INT_MAX) {
        if (0 == rank) {
            fprintf(stderr,
                    "Error: maximum message size %zu bytes needs an element "
                    "count above INT_MAX (%d) for a %zu-byte datatype\n",
                    o->max_size, INT_MAX, min_tsize);
        }
        return EXIT_FAILURE;
    }
    return -1;
}

int osuc_run_init(struct osuc_run *r, const struct osuc_bench *b, int *argc, char ***argv)
{
    enum osuc_parse pr;
    struct osuc_opts *o = &r->o;
    int rc, max_iters;

    memset(r, 0, sizeof(*r));
    r->bench = b;
    pr = osuc_parse_args(*argc, *argv, b, o);

    MPI_Init(argc, argv);
    OSUC_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &r->rank));
    OSUC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &r->nprocs));

    rc = osuc_parse_outcome(b, pr, r->rank);
    if (rc < 0 && r->nprocs < 2) {
        if (0 == r->rank) fprintf(stderr, "This test requires at least two processes\n");
        rc = EXIT_FAILURE;
    }
    if (rc < 0) rc = osuc_check_sizes(o, r->rank);
    if (rc >= 0) {
        MPI_Finalize();
        return rc;
    }

    r->sendbuf = osuc_alloc(o->max_size);
    r->recvbuf = osuc_alloc(o->max_size);
    if (o->validate && o->val_warmup > 0) r->warmbuf = osuc_alloc(o->max_size);
    max_iters = (o->iters > o->iters_large) ? o->iters : o->iters_large;
    if (o->tail) {
        r->lat = malloc(sizeof(double) * (size_t)max_iters);
        r->lat_sum = malloc(sizeof(double) * (size_t)max_iters);
    }
    if (NULL == r->sendbuf || NULL == r->recvbuf || (o->validate && o->val_warmup > 0 && NULL == r->warmbuf) ||
        (o->tail && (NULL == r->lat || NULL == r->lat_sum))) {
        fprintf(stderr, "Could Not Allocate Memory [rank %d]\n", r->rank);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }
    /* Touch every page before any timing. */
    memset(r->sendbuf, 0, o->max_size);
    memset(r->recvbuf, 0, o->max_size);
    if (r->warmbuf) memset(r->warmbuf, 0, o->max_size);

    if (0 == r->rank) osuc_print_preamble(b);
    return -1;
}

/* Datatype t of -T: its timing data, -c's table, its "# Datatype" and column lines. */
static void osuc_run_type(struct osuc_run *r, int t)
{
    char tname[MPI_MAX_OBJECT_NAME];
    int tname_len = 0, mpi_tsize = 0;

    r->dtype = r->o.dtypes[t];
    r->mpi_type = osuc_mpi_type(r->dtype);
    r->tsize = osuc_type_size(r->dtype);
    OSUC_MPI(MPI_Type_size(r->mpi_type, &mpi_tsize));
    if ((size_t)mpi_tsize != r->tsize) {
        if (0 == r->rank) fprintf(stderr, "Error: unexpected MPI datatype size\n");
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }
    OSUC_MPI(MPI_Type_get_name(r->mpi_type, tname, &tname_len));
    r->val.sums = NULL;
    if (r->o.validate && osuc_val_init(&r->val, r->dtype, r->nprocs)) {
        fprintf(stderr, "Could Not Allocate Memory [rank %d]\n", r->rank);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }
    /* Timing-mode data: typed ones to send, zeros to receive (so an in-place run keeps
     * reducing zeros and never overflows). */
    osuc_fill_ones(r->sendbuf, r->dtype, r->o.max_size / r->tsize);
    memset(r->recvbuf, 0, r->o.max_size);

    if (0 == r->rank) {
        fprintf(stdout, "# Datatype: %s.\n", tname);
        osuc_print_columns_header(r->bench, &r->o);
    }
}

size_t osuc_run_sweep(struct osuc_run *r, int (*one_size)(struct osuc_run *r, size_t size))
{
    const struct osuc_opts *o = &r->o;
    size_t failed_size = 0, size;
    int t;

    for (t = 0; t < o->ndtypes && 0 == failed_size; t++) {
        osuc_run_type(r, t);
        /* Doubling, without overflowing past max. */
        for (size = o->min_size; size <= o->max_size; size = (size > o->max_size / 2) ? o->max_size + 1 : size * 2) {
            if (0 == size / r->tsize) continue; /* smaller than one element */
            if (0 != one_size(r, size)) {
                failed_size = size;
                break;
            }
        }
        free(r->val.sums);
        r->val.sums = NULL;
    }
    return failed_size;
}

void osuc_counts(const struct osuc_opts *o, size_t size, int *iters, int *skip)
{
    int large = size > OSUC_LARGE_SIZE;

    *iters = large ? o->iters_large : o->iters;
    *skip = large ? o->skip_large : o->skip;
}

void *osuc_sendbuf(const struct osuc_run *r)
{
    return r->o.in_place ? MPI_IN_PLACE : (void *)r->sendbuf;
}

void osuc_iter_prepare(struct osuc_run *r, size_t count, int i)
{
    int j;

    if (!r->o.validate) return;
    osuc_val_fill(&r->val, r->o.in_place ? r->recvbuf : r->sendbuf, r->dtype, count, r->rank, (unsigned)i);
    if (!r->o.in_place) memset(r->recvbuf, 0, count * r->tsize);
    /* The extra warm-ups use the benchmark's own call, into a buffer of their own. */
    for (j = 0; j < r->o.val_warmup; j++) {
        OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (r->bench->nonblocking) {
            MPI_Request req;
            OSUC_MPI(MPI_Iallreduce(r->sendbuf, r->warmbuf, (int)count, r->mpi_type, MPI_SUM, MPI_COMM_WORLD, &req));
            OSUC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        } else {
            OSUC_MPI(MPI_Allreduce(r->sendbuf, r->warmbuf, (int)count, r->mpi_type, MPI_SUM, MPI_COMM_WORLD));
        }
    }
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int osuc_iter_check(const struct osuc_run *r, size_t count, int i)
{
    return r->o.validate ? osuc_val_check(&r->val, r->recvbuf, r->dtype, count, (unsigned)i) : 0;
}

struct osuc_stat osuc_over_ranks(const struct osuc_run *r, double v)
{
    struct osuc_stat s = {0.0, 0.0, 0.0};
    double sum = 0.0;

    OSUC_MPI(MPI_Reduce(&v, &s.min, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD));
    OSUC_MPI(MPI_Reduce(&v, &s.max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    OSUC_MPI(MPI_Reduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    s.avg = sum / r->nprocs;
    return s;
}

static int osuc_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void osuc_tail(struct osuc_run *r, int iters, double *tail)
{
    int j;

    if (!r->o.tail) return;
    /* Per-iteration time averaged over ranks, then sorted. */
    OSUC_MPI(MPI_Reduce(r->lat, r->lat_sum, iters, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    if (0 != r->rank) return;
    qsort(r->lat_sum, (size_t)iters, sizeof(double), osuc_cmp_double);
    for (j = 0; j < r->o.npct; j++) {
        long idx = (long)iters * r->o.pct[j] / 100 - 1;
        if (idx < 0) idx = 0;
        if (idx >= iters) idx = iters - 1;
        tail[j] = r->lat_sum[idx] / r->nprocs;
    }
}

int osuc_errors_over_ranks(const struct osuc_run *r, int local)
{
    int errors = 0;

    if (!r->o.validate) return 0;
    OSUC_MPI(MPI_Allreduce(&local, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    return errors;
}

int osuc_run_finish(struct osuc_run *r, size_t failed_size, const char *argv0)
{
    int exit_code = EXIT_SUCCESS;

    free(r->sendbuf);
    free(r->recvbuf);
    free(r->warmbuf);
    free(r->lat);
    free(r->lat_sum);
    if (0 != failed_size) {
        if (0 == r->rank) {
            fprintf(stdout,
                    "DATA VALIDATION ERROR: %s exited with status %d on"
                    " message size %zu.\n",
                    argv0, EXIT_FAILURE, failed_size);
            fflush(stdout);
        }
        exit_code = EXIT_FAILURE;
    }
    MPI_Finalize();
    return exit_code;
}
