/*
 * large_check: MPI_Allreduce of more than 2 GiB per buffer (byte counts and
 * offsets that overflow 32 bits), on the first 2 ranks of MPI_COMM_WORLD.
 *
 *   1. MPI_DOUBLE MPI_SUM, count 268435971: 2 GiB + 4 KiB + 24 bytes per buffer,
 *      separate send and receive buffers
 *   2. MPI_INT MPI_SUM, MPI_IN_PLACE, count 536871942 over the same bytes
 *
 * Element i of rank r is (i % 1000) + r, so every sum is exact; every element is
 * checked, and so are the send buffer (unchanged) and the bytes after the
 * receive buffer (unwritten).  Each participant needs about 4 GiB for its
 * buffers plus what the MPI library allocates; if the memory is not there (a
 * look at MemAvailable first, then malloc) the program fails cleanly.
 *
 * Usage: large_check [--ranks K] [--double-only]
 *   --ranks K      participants (default 2; the other ranks only wait)
 *   --double-only  skip call 2
 */
#define _DEFAULT_SOURCE /* madvise, nanosleep */
#include <mpi.h>

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PROGRAM "large_check"
#define TOTAL_BYTES ((size_t)2 * 1024 * 1024 * 1024 + 4096 + 24)
#define GUARD_BYTES 64
#define GUARD_FILL 0xA5

#include "check_common.h" /* fail, summary */

/* A /proc/meminfo field in KiB, or -1. */
static long long meminfo_kib(const char *key)
{
    char line[256];
    long long v = -1;
    size_t n = strlen(key);
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = strtoll(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Peak resident set size of this process in KiB (VmHWM), or -1. */
static long long peak_rss_kib(void)
{
    char line[256];
    long long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6))
            v = strtoll(line + 6, NULL, 10);
    fclose(f);
    return v;
}

/*
 * 2 MiB-aligned and, where the kernel offers it, backed by transparent huge
 * pages: first-touch page faults are most of this program's run time on some
 * virtual machines.
 */
static void *big_alloc(size_t bytes)
{
    const size_t align = (size_t)2 << 20;
    void *p = aligned_alloc(align, (bytes + align - 1) / align * align);
#ifdef MADV_HUGEPAGE
    if (p)
        (void)madvise(p, (bytes + align - 1) / align * align, MADV_HUGEPAGE);
#endif
    return p;
}

static bool guard_intact(const unsigned char *p)
{
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (p[i] != GUARD_FILL)
            return false;
    return true;
}

/*
 * Wait for every rank without spinning: on an oversubscribed node the ranks
 * that do not take part would otherwise poll in the final MPI_Allreduce and
 * take CPU time from the two that do.
 */
static void quiet_barrier(void)
{
    MPI_Request req;
    int done = 0;
    const struct timespec pause = { 0, 5 * 1000 * 1000 };
    if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        return;
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
        nanosleep(&pause, NULL);
}

static void report_rc(const char *what, int rc)
{
    char err[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(rc, err, &len);
    fail("%s: MPI_Allreduce returned %d (%s)", what, rc, err);
}

/* 1. MPI_DOUBLE MPI_SUM, separate buffers */
static void check_double(MPI_Comm comm, int rank, int n, double *send, unsigned char *recv)
{
    const size_t count = TOTAL_BYTES / sizeof(double);
    const double base = (double)n * (n - 1) / 2;
    double *out = (double *)recv;
    size_t nbad = 0, first = 0, j;
    char what[128];
    double t0 = MPI_Wtime(), t1, t2;
    int rc;

    snprintf(what, sizeof what, "MPI_DOUBLE MPI_SUM count %zu (%zu bytes)", count,
             count * sizeof(double));
    j = 0;
    for (size_t i = 0; i < count; i++) {
        send[i] = (double)j + rank;
        out[i] = -1.0;
        if (++j == 1000)
            j = 0;
    }
    memset(recv + count * sizeof(double), GUARD_FILL, GUARD_BYTES);

    t1 = MPI_Wtime();
    rc = MPI_Allreduce(send, out, (int)count, MPI_DOUBLE, MPI_SUM, comm);
    t2 = MPI_Wtime();
    if (rc != MPI_SUCCESS) {
        report_rc(what, rc);
        return;
    }
    j = 0;
    for (size_t i = 0; i < count; i++) {
        if (out[i] != (double)n * j + base && nbad++ == 0)
            first = i;
        if (++j == 1000)
            j = 0;
    }
    if (nbad) {
        fail("%s: index %zu expected %.17g got %.17g (%zu elements wrong)", what, first,
             (double)n * (first % 1000) + base, out[first], nbad);
        return;
    }
    if (!guard_intact(recv + count * sizeof(double))) {
        fail("%s: bytes written after the receive buffer", what);
        return;
    }
    j = 0;
    for (size_t i = 0; i < count; i++) {
        if (send[i] != (double)j + rank) {
            fail("%s: send buffer modified at index %zu", what, i);
            return;
        }
        if (++j == 1000)
            j = 0;
    }
    g_passed++;
    if (rank == 0)
        printf("%s: fill %.1f s, MPI_Allreduce %.1f s, check %.1f s\n", what, t1 - t0,
               t2 - t1, MPI_Wtime() - t2);
}

/* 2. MPI_INT MPI_SUM, MPI_IN_PLACE over the receive buffer */
static void check_int(MPI_Comm comm, int rank, int n, unsigned char *recv)
{
    const size_t count = TOTAL_BYTES / sizeof(int);
    const int base = n * (n - 1) / 2;
    int *buf = (int *)recv;
    size_t nbad = 0, first = 0;
    int j;
    char what[128];
    double t0 = MPI_Wtime(), t1, t2;
    int rc;

    snprintf(what, sizeof what, "MPI_INT MPI_SUM MPI_IN_PLACE count %zu (%zu bytes)", count,
             count * sizeof(int));
    j = 0;
    for (size_t i = 0; i < count; i++) {
        buf[i] = j + rank;
        if (++j == 1000)
            j = 0;
    }
    memset(recv + count * sizeof(int), GUARD_FILL, GUARD_BYTES);

    t1 = MPI_Wtime();
    rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_INT, MPI_SUM, comm);
    t2 = MPI_Wtime();
    if (rc != MPI_SUCCESS) {
        report_rc(what, rc);
        return;
    }
    j = 0;
    for (size_t i = 0; i < count; i++) {
        if (buf[i] != n * j + base && nbad++ == 0)
            first = i;
        if (++j == 1000)
            j = 0;
    }
    if (nbad) {
        fail("%s: index %zu expected %d got %d (%zu elements wrong)", what, first,
             n * (int)(first % 1000) + base, buf[first], nbad);
        return;
    }
    if (!guard_intact(recv + count * sizeof(int))) {
        fail("%s: bytes written after the receive buffer", what);
        return;
    }
    g_passed++;
    if (rank == 0)
        printf("%s: fill %.1f s, MPI_Allreduce %.1f s, check %.1f s\n", what, t1 - t0,
               t2 - t1, MPI_Wtime() - t2);
}

int main(int argc, char **argv)
{
    int size, nranks = 2, rank = -1, n = 0, ok, all_ok = 0;
    bool double_only = false;
    MPI_Comm comm = MPI_COMM_NULL;
    double *send = NULL;
    unsigned char *recv = NULL;
    long long totals[3];

    _Static_assert(TOTAL_BYTES / sizeof(double) <= INT_MAX, "count fits in int");
    _Static_assert(TOTAL_BYTES / sizeof(int) <= INT_MAX, "count fits in int");

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc) {
            nranks = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--double-only")) {
            double_only = true;
        } else {
            nranks = 0;
        }
        if (nranks < 1) {
            if (g_world_rank == 0)
                fprintf(stderr, "usage: " PROGRAM " [--ranks K] [--double-only]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (nranks > size)
        nranks = size;

    MPI_Comm_split(MPI_COMM_WORLD, g_world_rank < nranks ? 0 : MPI_UNDEFINED, g_world_rank, &comm);
    if (comm != MPI_COMM_NULL) {
        MPI_Comm node;
        int local_participants;
        long long avail = meminfo_kib("MemAvailable");
        /* buffers plus as much again for the library's temporary buffers */
        const long long need_kib = (long long)(2 * (TOTAL_BYTES + GUARD_BYTES) / 1024) * 3 / 2;

        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_size(comm, &n);
        MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
        MPI_Comm_size(node, &local_participants);
        MPI_Comm_free(&node);

        ok = 1;
        if (avail >= 0 && avail < need_kib * local_participants) {
            fail("not enough memory: %d participants on this node need about %lld MiB, "
                 "MemAvailable is %lld MiB", local_participants,
                 need_kib * local_participants / 1024, avail / 1024);
            ok = 0;
        } else {
            send = big_alloc(TOTAL_BYTES);
            recv = big_alloc(TOTAL_BYTES + GUARD_BYTES);
            if (!send || !recv) {
                fail("allocation of 2 x %zu bytes failed", TOTAL_BYTES);
                ok = 0;
            }
        }
        /* everyone goes on only if every participant has its buffers */
        if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
            all_ok = 0;
        if (all_ok) {
            check_double(comm, rank, n, send, recv);
            if (!double_only)
                check_int(comm, rank, n, recv);
            if (rank == 0)
                printf("%d participants, peak RSS of rank 0: %lld MiB\n", n,
                       peak_rss_kib() / 1024);
        } else if (ok) {
            fail("another participant could not allocate its buffers");
        }
        free(send);
        free(recv);
        MPI_Comm_free(&comm);
    }

    quiet_barrier();
    check_totals(0, totals);
    return check_finish(totals);
}
