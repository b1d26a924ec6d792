/*
 * osu-compat/harness.h: what the osu-compat benchmarks do around their timed loops, as
 * OMB does it: start-up and its checks, buffers (sized for the benchmark's collective),
 * the size sweep and its iteration counts, -c's data, warm-ups and checks for each
 * collective, statistics over the ranks, the end.
 */
#ifndef OSUC_HARNESS_H
#define OSUC_HARNESS_H

#include <mpi.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "options.h"
#include "pattern.h"
#include "report.h"

#define OSUC_MPI(call)                                                                                \
    do {                                                                                              \
        int osuc_rc_ = (call);                                                                        \
        if (MPI_SUCCESS != osuc_rc_) {                                                                \
            fprintf(stderr, "%s:%d: %s failed with error %d\n", __FILE__, __LINE__, #call, osuc_rc_); \
            MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);                                                  \
        }                                                                                             \
    } while (0)

struct osuc_run {
    const struct osuc_bench *bench;
    struct osuc_opts o;
    int rank, nprocs;
    /* Allocated once at the largest size, page-aligned, written before any timing:
     * sendbuf max_size bytes (bcast's one buffer), recvbuf and warmbuf recv_bytes
     * (max_size, or max_size x ranks for allgather). */
    char *sendbuf, *recvbuf, *warmbuf;
    size_t recv_bytes;
    /* The root of reduce and bcast in the current iteration (osuc_root). */
    int root;
    /* reduce_scatter's split of the current size (osuc_split_counts): each rank's count
     * and this rank's first element in the whole message. */
    int *recvcounts;
    size_t recv_offset;
    double *lat, *lat_sum; /* per-iteration times (us) for -z */
    /* The datatype being swept. */
    enum osuc_dtype dtype;
    MPI_Datatype mpi_type;
    size_t tsize;
    struct osuc_val val;
};

/* MPI_Init, options and their checks, buffers, the preamble. Returns -1 to go on, or
 * the exit code once MPI is finalised (help, version, bad usage, too few ranks). */
int osuc_run_init(struct osuc_run *r, const struct osuc_bench *b, int *argc, char ***argv);
/* Every datatype of -T, every size from min doubling to max (those smaller than one
 * element skipped): one_size measures and prints one, returning -c's failures (the
 * same on every rank). Stops at the first failing size and returns it, else 0. */
size_t osuc_run_sweep(struct osuc_run *r, int (*one_size)(struct osuc_run *r, size_t size));
/* OMB's counts: iters and warm-up, the large ones above 8 KiB. */
void osuc_counts(const struct osuc_opts *o, size_t size, int *iters, int *skip);
void *osuc_sendbuf(const struct osuc_run *r);

/* The root of iteration i: -k's fixed rank (0 by default), or i mod ranks (-k rotate). */
int osuc_root(const struct osuc_run *r, int i);
/* reduce_scatter: OMB's split of count elements into r->recvcounts (count / ranks each,
 * the remainder one more each from rank 0; one each to the first count ranks when
 * count < ranks) and r->recv_offset. */
void osuc_split_counts(struct osuc_run *r, size_t count);
/* --bw's factor: bytes on the bus per byte of message size, NCCL's convention. */
double osuc_busbw_factor(const struct osuc_run *r);

/* Before iteration i with -c: fresh data (count elements per rank; the whole message
 * for reduce_scatter), the extra untimed calls of the benchmark's collective into a
 * buffer of their own, a barrier. Reduce and bcast use r->root, reduce_scatter
 * r->recvcounts. Without -c, nothing. */
void osuc_iter_prepare(struct osuc_run *r, size_t count, int i);
/* After iteration i: 1 if -c found a wrong element on this rank, else 0. */
int osuc_iter_check(const struct osuc_run *r, size_t count, int i);

/* The end of one size of a latency benchmark: each rank's average (timer seconds over
 * iters) over the ranks, -z's percentiles, -c's errors over the ranks, rank 0's row.
 * Returns the errors (on every rank). */
int osuc_report_latency(struct osuc_run *r, size_t size, double timer, int iters, int local_err);

/* A rank's value over all ranks (complete on rank 0 only). */
struct osuc_stat osuc_over_ranks(const struct osuc_run *r, double v);
/* -z: the percentiles of r->lat[0..iters) averaged over the ranks (rank 0). */
void osuc_tail(struct osuc_run *r, int iters, double *tail);
/* -c: the failures of every rank (on every rank); 0 without -c. */
int osuc_errors_over_ranks(const struct osuc_run *r, int local);

/* Frees, prints OMB's validation error if failed_size != 0, finalises MPI; returns the
 * exit code. */
int osuc_run_finish(struct osuc_run *r, size_t failed_size, const char *argv0);

#endif
