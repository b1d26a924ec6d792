/*
 * osu-compat/harness.h: what osu_allreduce and osu_iallreduce do around their timed
 * loops, as OMB does it: start-up and its checks, buffers, the size sweep and its
 * iteration counts, -c's data and warm-ups, statistics over the ranks, the end.
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
    /* Allocated once at the largest size, page-aligned, written before any timing. */
    char *sendbuf, *recvbuf, *warmbuf;
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

/* Before iteration i with -c: fresh data, the extra untimed allreduces, a barrier.
 * Without -c, nothing. */
void osuc_iter_prepare(struct osuc_run *r, size_t count, int i);
/* After iteration i: 1 if -c found a wrong element, else 0. */
int osuc_iter_check(const struct osuc_run *r, size_t count, int i);

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
