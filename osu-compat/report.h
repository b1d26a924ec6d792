/*
 * osu-compat/report.h: what rank 0 prints, in OMB 7.x's layout. "# Size" and the size
 * are left-aligned in 10 columns; every other column is right-aligned in 20, except
 * "Iterations" (12); times in microseconds with 2 decimals.
 */
#ifndef OSUC_REPORT_H
#define OSUC_REPORT_H

#include <stddef.h>

#include "options.h"

/* One quantity over the ranks: the mean of the ranks' values, their min and max. */
struct osuc_stat {
    double avg, min, max;
};

/* One row of osu_iallreduce, every time averaged over the ranks (us). */
struct osuc_overlap_row {
    double overall; /* start, compute, wait: Init + Compute + Test + Wait */
    double compute; /* the compute phase without its MPI_Test calls */
    double init; /* the MPI_Iallreduce call */
    double test; /* the MPI_Test calls in the compute phase */
    double wait; /* the MPI_Wait call */
    struct osuc_stat pure; /* MPI_Iallreduce + MPI_Wait with nothing between */
    double overlap; /* percent */
};

/* The lines before the first datatype. */
void osuc_print_preamble(const struct osuc_bench *b);
void osuc_print_columns_header(const struct osuc_bench *b, const struct osuc_opts *o);
/* errors: -c's result; tail: the -z percentiles (o->npct values); busbw_factor: --bw's
 * bytes on the bus per message byte (osuc_busbw_factor). */
void osuc_print_latency_row(const struct osuc_opts *o, size_t size, struct osuc_stat lat, int iters, int errors,
                            const double *tail, double busbw_factor);
void osuc_print_overlap_row(const struct osuc_opts *o, size_t size, const struct osuc_overlap_row *r, int errors,
                            const double *tail);

#endif
