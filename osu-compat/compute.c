/*
 * osu-compat/compute.c: the compute phase (see compute.h). Only the kernel's own run
 * time counts towards the target (a preempted rank does not cut its compute short
 * by the time it was away between two runs of the kernel), as OMB counts it.
 */
#include "compute.h"

#include "harness.h"

/* A kernel of a few microseconds touching about 2.5 KiB: it keeps the core busy
 * without competing with the allreduce for memory bandwidth. */
#define OSUC_DIM 25

static float osuc_m[OSUC_DIM][OSUC_DIM], osuc_x[OSUC_DIM], osuc_y[OSUC_DIM];
static volatile float osuc_sink; /* keeps the kernel from being optimised away */

static void osuc_kernel(void)
{
    static int ready;
    int i, j;

    if (!ready) {
        for (i = 0; i < OSUC_DIM; i++) {
            osuc_x[i] = osuc_y[i] = 1.0f;
            for (j = 0; j < OSUC_DIM; j++) osuc_m[i][j] = 2.0f;
        }
        ready = 1;
    }
    for (i = 0; i < OSUC_DIM; i++) {
        for (j = 0; j < OSUC_DIM; j++) osuc_x[i] += osuc_m[i][j] * osuc_m[j][i] + osuc_y[j];
    }
    osuc_sink = osuc_x[0];
}

static void osuc_compute_for(double seconds)
{
    double elapsed = 0.0;

    while (elapsed < seconds) {
        double t0 = MPI_Wtime();
        osuc_kernel();
        elapsed += MPI_Wtime() - t0;
    }
}

double osuc_compute(double seconds, int probes, MPI_Request *req)
{
    double test_time = 0.0;
    int k;

    if (0 == probes) {
        osuc_compute_for(seconds);
        return 0.0;
    }
    for (k = 0; k < probes; k++) {
        int flag = 0;
        double t0;

        osuc_compute_for(seconds / probes);
        t0 = MPI_Wtime();
        OSUC_MPI(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
        test_time += MPI_Wtime() - t0;
    }
    return test_time;
}
