/*
 * osu-compat/harness.c: the parts of a run the benchmarks share (see harness.h).
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

/* The size limits: -1 to go on, else the exit code. Allgather's receive buffer holds
 * every rank's message, so its limit is the memory limit / ranks (as OMB's). */
static int osuc_check_sizes(struct osuc_opts *o, const struct osuc_bench *b, int rank, int nprocs)
{
    size_t min_tsize = 1, per = OSUC_COLL_ALLGATHER == b->coll ? (size_t)nprocs : 1;
    int t;

    if (o->max_size > o->mem_limit / per) {
        o->max_size = o->mem_limit / per;
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
    if (rc < 0) rc = osuc_check_sizes(o, b, r->rank, r->nprocs);
    if (rc < 0 && o->root >= r->nprocs) {
        if (0 == r->rank) fprintf(stderr, "Root rank('-k') cannot be more than number of processes\n");
        rc = EXIT_FAILURE;
    }
    if (rc >= 0) {
        MPI_Finalize();
        return rc;
    }

    r->recv_bytes = o->max_size * (OSUC_COLL_ALLGATHER == b->coll ? (size_t)r->nprocs : 1);
    r->sendbuf = osuc_alloc(o->max_size);
    r->recvbuf = osuc_alloc(r->recv_bytes);
    if (o->validate && o->val_warmup > 0) r->warmbuf = osuc_alloc(r->recv_bytes);
    if (OSUC_COLL_REDUCE_SCATTER == b->coll) r->recvcounts = calloc((size_t)r->nprocs, sizeof(int));
    max_iters = (o->iters > o->iters_large) ? o->iters : o->iters_large;
    if (o->tail) {
        r->lat = malloc(sizeof(double) * (size_t)max_iters);
        r->lat_sum = malloc(sizeof(double) * (size_t)max_iters);
    }
    if (NULL == r->sendbuf || NULL == r->recvbuf || (o->validate && o->val_warmup > 0 && NULL == r->warmbuf) ||
        (o->tail && (NULL == r->lat || NULL == r->lat_sum)) ||
        (OSUC_COLL_REDUCE_SCATTER == b->coll && NULL == r->recvcounts)) {
        fprintf(stderr, "Could Not Allocate Memory [rank %d]\n", r->rank);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }
    /* Touch every page before any timing. */
    memset(r->sendbuf, 0, o->max_size);
    memset(r->recvbuf, 0, r->recv_bytes);
    if (r->warmbuf) memset(r->warmbuf, 0, r->recv_bytes);

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
    memset(r->recvbuf, 0, r->recv_bytes);

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

int osuc_root(const struct osuc_run *r, int i)
{
    return OSUC_ROOT_ROTATE == r->o.root ? i % r->nprocs : r->o.root;
}

void osuc_split_counts(struct osuc_run *r, size_t count)
{
    size_t n = (size_t)r->nprocs, portion = count / n, rem = count % n, q;

    r->recv_offset = 0;
    for (q = 0; q < n; q++) {
        r->recvcounts[q] = (int)(count < n ? (q < count) : portion + (q < rem));
        if (q < (size_t)r->rank) r->recv_offset += (size_t)r->recvcounts[q];
    }
}

double osuc_busbw_factor(const struct osuc_run *r)
{
    double n = (double)r->nprocs;

    switch (r->bench->coll) {
        case OSUC_COLL_ALLREDUCE: return 2.0 * (n - 1.0) / n;
        case OSUC_COLL_REDUCE_SCATTER: return (n - 1.0) / n;
        case OSUC_COLL_ALLGATHER: return n - 1.0;
        case OSUC_COLL_BCAST:
        case OSUC_COLL_REDUCE:
        default: return 1.0;
    }
}

/* One untimed call of the benchmark's collective, into r->warmbuf. */
static void osuc_warmup_call(struct osuc_run *r, size_t count)
{
    int n = (int)count;

    switch (r->bench->coll) {
        case OSUC_COLL_REDUCE_SCATTER:
            OSUC_MPI(MPI_Reduce_scatter(r->sendbuf, r->warmbuf, r->recvcounts, r->mpi_type, MPI_SUM, MPI_COMM_WORLD));
            break;
        case OSUC_COLL_ALLGATHER:
            OSUC_MPI(MPI_Allgather(r->sendbuf, n, r->mpi_type, r->warmbuf, n, r->mpi_type, MPI_COMM_WORLD));
            break;
        case OSUC_COLL_BCAST: OSUC_MPI(MPI_Bcast(r->warmbuf, n, r->mpi_type, r->root, MPI_COMM_WORLD)); break;
        case OSUC_COLL_REDUCE:
            OSUC_MPI(MPI_Reduce(r->sendbuf, r->warmbuf, n, r->mpi_type, MPI_SUM, r->root, MPI_COMM_WORLD));
            break;
        case OSUC_COLL_ALLREDUCE:
        default:
            if (r->bench->nonblocking) {
                MPI_Request req;
                OSUC_MPI(MPI_Iallreduce(r->sendbuf, r->warmbuf, n, r->mpi_type, MPI_SUM, MPI_COMM_WORLD, &req));
                OSUC_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
            } else {
                OSUC_MPI(MPI_Allreduce(r->sendbuf, r->warmbuf, n, r->mpi_type, MPI_SUM, MPI_COMM_WORLD));
            }
            break;
    }
}

void osuc_iter_prepare(struct osuc_run *r, size_t count, int i)
{
    size_t bytes = count * r->tsize;
    int j;

    if (!r->o.validate) return;
    switch (r->bench->coll) {
        case OSUC_COLL_BCAST:
            /* The root's data; everyone else's buffer cleared (the data are never 0). */
            if (r->rank == r->root) {
                osuc_block_fill(r->sendbuf, r->dtype, count, r->root, (unsigned)i);
            } else {
                memset(r->sendbuf, 0, bytes);
            }
            break;
        case OSUC_COLL_ALLGATHER: {
            char *own = r->recvbuf + (size_t)r->rank * bytes;
            memset(r->recvbuf, 0, bytes * (size_t)r->nprocs);
            osuc_block_fill(r->o.in_place ? own : r->sendbuf, r->dtype, count, r->rank, (unsigned)i);
            break;
        }
        case OSUC_COLL_ALLREDUCE:
        case OSUC_COLL_REDUCE_SCATTER:
        case OSUC_COLL_REDUCE:
        default:
            osuc_val_fill(&r->val, r->o.in_place ? r->recvbuf : r->sendbuf, r->dtype, count, r->rank, (unsigned)i);
            if (!r->o.in_place) memset(r->recvbuf, 0, bytes);
            break;
    }
    /* The extra warm-ups use the benchmark's own call, into a buffer of their own. */
    for (j = 0; j < r->o.val_warmup; j++) {
        OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
        osuc_warmup_call(r, count);
    }
    OSUC_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int osuc_iter_check(const struct osuc_run *r, size_t count, int i)
{
    size_t bytes = count * r->tsize;
    int q;

    if (!r->o.validate) return 0;
    switch (r->bench->coll) {
        case OSUC_COLL_BCAST: return osuc_block_check(r->sendbuf, r->dtype, count, r->root, (unsigned)i);
        case OSUC_COLL_ALLGATHER:
            for (q = 0; q < r->nprocs; q++) {
                if (osuc_block_check(r->recvbuf + (size_t)q * bytes, r->dtype, count, q, (unsigned)i)) return 1;
            }
            return 0;
        case OSUC_COLL_REDUCE_SCATTER:
            /* This rank's part of the sum: elements recv_offset.. of the whole. */
            if (0 == r->recvcounts[r->rank]) return 0;
            return osuc_val_check(&r->val, r->recvbuf, r->dtype, (size_t)r->recvcounts[r->rank],
                                  (unsigned)i + (unsigned)r->recv_offset);
        case OSUC_COLL_REDUCE:
            if (r->rank != r->root) return 0;
            return osuc_val_check(&r->val, r->recvbuf, r->dtype, count, (unsigned)i);
        case OSUC_COLL_ALLREDUCE:
        default: return osuc_val_check(&r->val, r->recvbuf, r->dtype, count, (unsigned)i);
    }
}

int osuc_report_latency(struct osuc_run *r, size_t size, double timer, int iters, int local_err)
{
    double tail[OSUC_MAX_PCT] = {0};
    struct osuc_stat lat = osuc_over_ranks(r, timer * 1e6 / (double)iters);
    int errors;

    osuc_tail(r, iters, tail);
    errors = osuc_errors_over_ranks(r, local_err);
    if (0 == r->rank) osuc_print_latency_row(&r->o, size, lat, iters, errors, tail, osuc_busbw_factor(r));
    return errors;
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
    free(r->recvcounts);
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
