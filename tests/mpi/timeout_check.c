/*
 * A peer that does not arrive: rank 1 sleeps past coll_gpurdma_timeout before its
 * MPI_Allreduce. The others must get an MPI error (MPI_ERRORS_RETURN) within the
 * timeout plus a margin, never hang, and the late rank must fail too (its peers have
 * given up). The message naming stage and peer is checked by the runner script.
 *
 * Usage: timeout_check TIMEOUT_SECONDS (the value given as coll_gpurdma_timeout)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    double timeout = argc > 1 ? atof(argv[1]) : 2.0;
    int rank, size, failed = 0, passed = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    /* One good call first, so the failure is mid-stream, not at set-up. */
    int one = 1, sum = 0;
    if (MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS || sum != size) {
        printf("rank %d: warm-up allreduce failed\n", rank);
        failed++;
    } else {
        passed++;
    }

    const int count = 1 << 18; /* 1 MiB of floats: the ring path */
    float *in = malloc(sizeof(float) * count), *out = malloc(sizeof(float) * count);
    for (int i = 0; i < count; i++) in[i] = 1.0f;
    if (rank == 1) sleep((unsigned)(timeout * 2 + 1));
    double t0 = MPI_Wtime();
    int rc = MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, comm);
    double waited = MPI_Wtime() - t0;
    if (rc == MPI_SUCCESS) {
        printf("rank %d: allreduce with a missing peer returned success\n", rank);
        failed++;
    } else if (rank != 1 && waited > timeout + 5.0) {
        printf("rank %d: error came after %.1f s, timeout was %.1f s\n", rank, waited, timeout);
        failed++;
    } else {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("rank %d: allreduce failed as expected after %.1f s (%s)\n", rank, waited, msg);
        passed++;
    }
    /* The broken communicator keeps failing cleanly instead of hanging. */
    if (rank != 1) {
        rc = MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, comm);
        if (rc == MPI_SUCCESS) {
            printf("rank %d: call on a failed communicator returned success\n", rank);
            failed++;
        } else {
            passed++;
        }
    }
    free(in);
    free(out);
    MPI_Comm_free(&comm);
    /* MPI_COMM_WORLD still works: the failure stayed on its communicator. */
    int total = 0;
    MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int all_passed = 0;
    MPI_Reduce(&passed, &all_passed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("timeout_check: %d passed, %d failed\n", all_passed, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
