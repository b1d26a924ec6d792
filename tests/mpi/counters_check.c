/*
 * Repeated calls on the same buffers do no set-up, registration or allocation work:
 * read gpurdma's counters through MPI_T (coll_gpurdma_calls, _setups,
 * _registrations, _shm_segments) before and after 1000 allreduces of the same
 * buffers, and the heap in use (mallinfo2) around them.
 *
 * Usage: counters_check [bytes]   (default 1 MiB of floats)
 */
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM "counters_check"
#include "check_common.h"

enum { CALLS, SETUPS, REGISTRATIONS, SEGMENTS, NCOUNTERS };
static const char *names[NCOUNTERS] = {"coll_gpurdma_calls", "coll_gpurdma_setups", "coll_gpurdma_registrations",
                                       "coll_gpurdma_shm_segments"};

static MPI_T_pvar_session session;
static MPI_T_pvar_handle handles[NCOUNTERS];

static int find_pvars(void)
{
    int n = 0;
    MPI_T_pvar_get_num(&n);
    int found = 0;
    for (int i = 0; i < n; i++) {
        char name[256], desc[1024];
        int name_len = sizeof name, desc_len = sizeof desc, verbosity, var_class, bind, readonly, continuous, atomic;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        if (MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &type, &enumtype, desc, &desc_len, &bind,
                                &readonly, &continuous, &atomic) != MPI_SUCCESS)
            continue;
        for (int c = 0; c < NCOUNTERS; c++) {
            if (strcmp(name, names[c]) != 0) continue;
            int count = 0;
            if (MPI_T_pvar_handle_alloc(session, i, NULL, &handles[c], &count) == MPI_SUCCESS && count == 1) found++;
        }
    }
    return found;
}

static void read_all(unsigned long long *v)
{
    for (int c = 0; c < NCOUNTERS; c++) MPI_T_pvar_read(session, handles[c], &v[c]);
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    g_world_rank = rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (1u << 20);
    const int count = (int)(bytes / sizeof(float));
    const int calls = 1000;

    MPI_T_pvar_session_create(&session);
    int found = find_pvars();
    if (found != NCOUNTERS) {
        fail("found %d of %d gpurdma MPI_T counters", found, NCOUNTERS);
    }

    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    float *in = xmalloc(sizeof(float) * (size_t)count), *out = xmalloc(sizeof(float) * (size_t)count);
    for (int i = 0; i < count; i++) in[i] = (float)(rank + 1);
    /* The first call sets the communicator up. */
    MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, comm);

    unsigned long long before[NCOUNTERS] = {0}, after[NCOUNTERS] = {0};
    read_all(before);
    const size_t heap_before = mallinfo2().uordblks;
    int wrong = 0;
    const float want = (float)size * (float)(size + 1) / 2.0f;
    for (int k = 0; k < calls; k++) {
        MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, comm);
        if (out[0] != want || out[count - 1] != want) wrong++;
    }
    const size_t heap_after = mallinfo2().uordblks;
    read_all(after);

    if (wrong) fail("%d of %d results wrong", wrong, calls);
    else g_passed++;
    if (after[CALLS] - before[CALLS] != (unsigned long long)calls)
        fail("gpurdma counted %llu calls for %d (not gpurdma's?)", after[CALLS] - before[CALLS], calls);
    else
        g_passed++;
    for (int c = SETUPS; c < NCOUNTERS; c++) {
        if (after[c] != before[c])
            fail("%s went from %llu to %llu during repeated calls", names[c], before[c], after[c]);
        else
            g_passed++;
    }
    /* Open MPI itself allocates nothing per call either; allow a little slack for it. */
    const long long growth = (long long)heap_after - (long long)heap_before;
    if (growth > 32 * 1024) fail("heap in use grew by %lld bytes over %d calls", growth, calls);
    else g_passed++;
    if (rank == 0)
        printf("counters over %d calls of %zu bytes: calls +%llu, setups %llu, registrations %llu, shared segments "
               "%llu (unchanged); heap in use %+lld bytes\n",
               calls, bytes, after[CALLS] - before[CALLS], after[SETUPS], after[REGISTRATIONS], after[SEGMENTS],
               growth);
    free(in);
    free(out);
    MPI_Comm_free(&comm);
    for (int c = 0; c < NCOUNTERS; c++)
        if (found == NCOUNTERS) MPI_T_pvar_handle_free(session, &handles[c]);
    MPI_T_pvar_session_free(&session);
    /* Before MPI_Finalize: that unloads the component whose variables these are. */
    MPI_T_finalize();
    long long totals[3];
    check_totals(0, totals);
    return check_finish(totals); /* MPI_Finalize */
}
