/*
 * osu-compat/report.c: column headers and rows (see report.h). The opt-in --bw column
 * comes last so that every OMB column keeps its position.
 */
#include "report.h"

#include <stdio.h>

#define OSUC_FIELD_WIDTH 20
#define OSUC_SIZE_WIDTH 10
#define OSUC_ITER_WIDTH 12
#define OSUC_PRECISION 2

static void osuc_col(const char *name)
{
    fprintf(stdout, "%*s", OSUC_FIELD_WIDTH, name);
}

static void osuc_val(double v)
{
    fprintf(stdout, "%*.*f", OSUC_FIELD_WIDTH, OSUC_PRECISION, v);
}

void osuc_print_preamble(const struct osuc_bench *b)
{
    fprintf(stdout, "\n%s\n", b->header);
    if (b->nonblocking) fprintf(stdout, "# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\n");
    fflush(stdout);
}

void osuc_print_columns_header(const struct osuc_bench *b, const struct osuc_opts *o)
{
    int k;

    fprintf(stdout, "%-*s", OSUC_SIZE_WIDTH, "# Size");
    if (b->nonblocking) {
        osuc_col("Overall(us)");
        osuc_col("Compute(us)");
        if (o->full) {
            osuc_col("Coll. Init(us)");
            osuc_col("MPI_Test(us)");
            osuc_col("MPI_Wait(us)");
        }
        osuc_col("Pure Comm.(us)");
        if (o->full) {
            osuc_col("Min Comm.(us)");
            osuc_col("Max Comm.(us)");
        }
        osuc_col("Overlap(%)");
    } else {
        osuc_col("Avg Latency(us)");
        if (o->full) {
            osuc_col("Min Latency(us)");
            osuc_col("Max Latency(us)");
            fprintf(stdout, "%*s", OSUC_ITER_WIDTH, "Iterations");
        }
    }
    if (o->validate) osuc_col("Validation");
    if (o->tail) {
        for (k = 0; k < o->npct; k++) {
            char col[32];
            snprintf(col, sizeof(col), "P%d Tail Lat(us)", o->pct[k]);
            osuc_col(col);
        }
    }
    if (o->bw) osuc_col("Bus BW(GB/s)");
    fprintf(stdout, "\n");
    fflush(stdout);
}

/* The columns both benchmarks end with. */
static void osuc_print_row_end(const struct osuc_opts *o, int errors, const double *tail)
{
    int k;

    if (o->validate) osuc_col(errors ? "Fail" : "Pass");
    if (o->tail) {
        for (k = 0; k < o->npct; k++) osuc_val(tail[k]);
    }
}

void osuc_print_latency_row(const struct osuc_opts *o, size_t size, struct osuc_stat lat, int iters, int errors,
                            const double *tail, double busbw_factor)
{
    fprintf(stdout, "%-*zu", OSUC_SIZE_WIDTH, size);
    osuc_val(lat.avg);
    if (o->full) {
        osuc_val(lat.min);
        osuc_val(lat.max);
        fprintf(stdout, "%*d", OSUC_ITER_WIDTH, iters);
    }
    osuc_print_row_end(o, errors, tail);
    if (o->bw) {
        double busbw = 0.0;
        /* bytes per microsecond / 1e3 = GB/s (1 GB = 1e9 bytes) */
        if (lat.avg > 0.0) busbw = (double)size * busbw_factor / lat.avg / 1e3;
        osuc_val(busbw);
    }
    fprintf(stdout, "\n");
    fflush(stdout);
}

void osuc_print_overlap_row(const struct osuc_opts *o, size_t size, const struct osuc_overlap_row *r, int errors,
                            const double *tail)
{
    fprintf(stdout, "%-*zu", OSUC_SIZE_WIDTH, size);
    osuc_val(r->overall);
    osuc_val(r->compute);
    if (o->full) {
        osuc_val(r->init);
        osuc_val(r->test);
        osuc_val(r->wait);
    }
    osuc_val(r->pure.avg);
    if (o->full) {
        osuc_val(r->pure.min);
        osuc_val(r->pure.max);
    }
    osuc_val(r->overlap);
    osuc_print_row_end(o, errors, tail);
    fprintf(stdout, "\n");
    fflush(stdout);
}
