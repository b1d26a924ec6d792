/*
 * split_nodes_check: a process's logical node is the same in every communicator.
 * Run at 8 ranks with coll_gpurdma_logical_nodes 4 (world: 2 nodes x 4): the split
 * {1,2,5,6} / {0,3,4,7} puts two ranks of each node in each half, so each half is
 * 2 nodes x 2 ranks and takes the hierarchical path (the runner checks the verbose
 * line); before, the logical split was applied to positions in the communicator and
 * each half was one node. Results are checked exactly (integer-valued doubles and
 * wrapping ints) and bit for bit across ranks (random floats).
 */
#define PROGRAM "split_nodes_check"
#include "check_common.h"

#include <stdint.h>
#include <string.h>

static void check_comm(MPI_Comm comm, const char *name)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const size_t counts[] = {1, 7, 1024, 65536 + 5, 1 << 20};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        const size_t n = counts[ci];
        double *d = xmalloc(n * sizeof *d);
        int *v = xmalloc(n * sizeof *v);
        float *f = xmalloc(n * sizeof *f);
        float *all = xmalloc(n * sizeof *f * (size_t)size);
        for (size_t i = 0; i < n; i++) {
            d[i] = (double)((g_world_rank + 1) * (int)(i % 1000));
            v[i] = INT32_MAX - (int)(i % 7) + g_world_rank; /* wraps when summed */
            f[i] = 1.0f / (float)(1 + (g_world_rank * 31 + (int)i) % 97);
        }
        MPI_Allreduce(MPI_IN_PLACE, d, (int)n, MPI_DOUBLE, MPI_SUM, comm);
        MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_INT, MPI_SUM, comm);
        MPI_Allreduce(MPI_IN_PLACE, f, (int)n, MPI_FLOAT, MPI_SUM, comm);
        /* The world ranks in this communicator, for the expected values. */
        int *world = xmalloc((size_t)size * sizeof *world);
        MPI_Allgather(&g_world_rank, 1, MPI_INT, world, 1, MPI_INT, comm);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            double ed = 0;
            uint32_t ev = 0;
            for (int r = 0; r < size; r++) {
                ed += (double)((world[r] + 1) * (int)(i % 1000));
                ev += (uint32_t)(INT32_MAX - (int)(i % 7)) + (uint32_t)world[r];
            }
            if (d[i] != ed || (uint32_t)v[i] != ev) bad++;
        }
        MPI_Allgather(f, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, comm);
        for (int r = 1; r < size; r++)
            if (memcmp(all, all + (size_t)r * n, n * sizeof *f) != 0) bad++;
        if (bad) fail("%s: count %zu: %zu wrong or differing elements", name, n, bad);
        else g_passed++;
        free(d); free(v); free(f); free(all); free(world);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int color = (g_world_rank % 4 == 1 || g_world_rank % 4 == 2) ? 1 : 0;
    MPI_Comm half, dup;
    MPI_Comm_split(MPI_COMM_WORLD, color, g_world_rank, &half);
    MPI_Comm_dup(half, &dup);
    check_comm(half, color ? "split {1,2,5,6}" : "split {0,3,4,7}");
    check_comm(dup, "dup of the split");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    (void)size;
    long long totals[3];
    check_totals(0, totals);
    return check_finish(totals);
}
