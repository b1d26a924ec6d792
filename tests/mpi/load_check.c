/*
 * load_check: many allreduces must not grow memory or file descriptors.
 *
 * SMALL calls of one 8-byte element (MPI_INT64_T SUM), then LARGE calls of 16 MiB
 * (MPI_INT SUM of 4 Mi elements), on MPI_COMM_WORLD. Every result is checked: each
 * call changes its inputs (the small value, and one element of the large buffer that
 * moves every call), so a stale or partial result fails. Each rank samples VmRSS
 * (/proc/self/status) and its open descriptors (/proc/self/fd) after the first tenth
 * of each phase (after call 1 for short runs) and at its end; any descriptor growth, or RSS growth over RSS_MIB
 * (default 8), fails. Rank 0 prints the samples and the rate. After the first call (set-up done) no
 * gpurdma shared-memory name of this job may be left in /dev/shm: segments are unlinked once every
 * peer has attached them, so a crash leaves nothing behind.
 *
 * Usage: load_check [SMALL [LARGE [RSS_MIB]]]   (defaults 100000 500 8)
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROGRAM "load_check"
#include "check_common.h" /* summary, rss_kib, open_fds */

#define LARGE_COUNT (4 << 20) /* ints: 16 MiB */

static int rank, size, failed, printed;

/* Entries of /dev/shm named gpurdma* that carry one of the job's pids ("-PID-"). */
static int job_segments(const int *pids, int n)
{
    int found = 0;
    struct dirent *d;
    DIR *dir = opendir("/dev/shm");
    if (!dir) return 0;
    while ((d = readdir(dir)) != NULL) {
        if (strncmp(d->d_name, "gpurdma", 7) != 0) continue;
        for (int r = 0; r < n; r++) {
            char tag[32];
            snprintf(tag, sizeof tag, "-%d-", pids[r]);
            if (strstr(d->d_name, tag)) {
                printf("FAIL [world rank %d] /dev/shm/%s is still there after set-up\n", rank, d->d_name);
                found++;
                break;
            }
        }
    }
    closedir(dir);
    return found;
}

static void report(const char *fmt, long long call, long long idx, long long got, long long want)
{
    failed++;
    if (printed++ < 5) {
        printf("FAIL [world rank %d] ", rank);
        printf(fmt, call, idx, got, want);
        printf("\n");
    }
}

/* Samples every rank's RSS and descriptors; returns nonzero if this phase leaked. */
static int compare(const char *phase, long rss0, long fd0, long rss1, long fd1, long rss_limit_kib, double secs,
                   long long calls)
{
    long mine[4] = { rss0, fd0, rss1, fd1 }, all[4 * 1024];
    int n = size > 1024 ? 1024 : size;
    MPI_Gather(mine, 4, MPI_LONG, rank < n ? all : NULL, 4, MPI_LONG, 0, MPI_COMM_WORLD);
    int bad = (fd1 != fd0) || (rss1 - rss0 > rss_limit_kib) || rss0 < 0 || fd0 < 0;
    if (rank == 0) {
        long max_rss = 0, max_fd = 0;
        for (int r = 0; r < n; r++) {
            if (all[4 * r + 2] - all[4 * r] > max_rss) max_rss = all[4 * r + 2] - all[4 * r];
            if (all[4 * r + 3] - all[4 * r + 1] > max_fd) max_fd = all[4 * r + 3] - all[4 * r + 1];
        }
        printf("load_check %s: %lld calls in %.1f s (%.1f us/call); largest growth from the first tenth to the end: "
               "RSS %+ld KiB, fds %+ld\n", phase, calls, secs, secs * 1e6 / (double)(calls ? calls : 1), max_rss,
               max_fd);
        for (int r = 0; r < n; r++)
            printf("  rank %d: VmRSS %ld -> %ld KiB, fds %ld -> %ld\n", r, all[4 * r], all[4 * r + 2],
                   all[4 * r + 1], all[4 * r + 3]);
        fflush(stdout);
    }
    if (bad) printf("FAIL [world rank %d] %s: RSS %ld -> %ld KiB (limit +%ld), fds %ld -> %ld\n", rank, phase, rss0,
                    rss1, rss_limit_kib, fd0, fd1);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    g_world_rank = rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const long long small = argc > 1 ? atoll(argv[1]) : 100000;
    const long long large = argc > 2 ? atoll(argv[2]) : 500;
    const long rss_limit_kib = (argc > 3 ? atol(argv[3]) : 8) * 1024;
    int passed = 0;
    int *pids = malloc(sizeof(int) * (size_t)size), me = (int)getpid();
    MPI_Allgather(&me, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);

    /* Phase 1: 8-byte allreduces. */
    long rss0 = -1, fd0 = -1;
    double t0 = MPI_Wtime();
    for (long long c = 0; c < small; c++) {
        if (c == (small >= 20 ? small / 10 : 1)) {
            rss0 = rss_kib();
            fd0 = open_fds();
        }
        int64_t in = c * 1000003LL + rank, out = -1;
        int rc = MPI_Allreduce(&in, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        const int64_t want = c * 1000003LL * size + (int64_t)size * (size - 1) / 2;
        if (rc != MPI_SUCCESS) report("small call %lld: error %lld (%lld, want %lld)", c, rc, out, want);
        else if (out != want) report("small call %lld: element %lld is %lld, expected %lld", c, 0, out, want);
        if (c == 0) {
            MPI_Barrier(MPI_COMM_WORLD); /* every rank is past set-up */
            if (job_segments(pids, size)) failed++;
            else passed++;
        }
    }
    double secs = MPI_Wtime() - t0;
    if (small > 0) {
        if (compare("8-byte", rss0, fd0, rss_kib(), open_fds(), rss_limit_kib, secs, small)) failed++;
        else passed++;
    }

    /* Phase 2: 16 MiB allreduces. */
    if (large > 0) {
        int *in = malloc(sizeof(int) * LARGE_COUNT), *out = malloc(sizeof(int) * LARGE_COUNT);
        if (!in || !out) {
            printf("FAIL [world rank %d] cannot allocate 2 x 16 MiB\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int i = 0; i < LARGE_COUNT; i++) in[i] = i % 1000 + rank;
        const int base_sum = size * (size - 1) / 2;
        long long prev = -1;
        t0 = MPI_Wtime();
        for (long long c = 0; c < large; c++) {
            if (c == (large >= 20 ? large / 10 : 1)) {
                rss0 = rss_kib();
                fd0 = open_fds();
            }
            /* One element per call carries the call number. */
            if (prev >= 0) in[prev] = (int)(prev % 1000) + rank;
            const long long p = (c * 4099 + 17) % LARGE_COUNT;
            in[p] = (int)(p % 1000) + rank + (int)(c % 100000) + 1;
            prev = p;
            int rc = MPI_Allreduce(in, out, LARGE_COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            if (rc != MPI_SUCCESS) {
                report("large call %lld: error %lld (%lld, %lld)", c, rc, 0, 0);
                continue;
            }
            for (long long i = 0; i < LARGE_COUNT; i++) {
                long long want = (long long)size * (i % 1000) + base_sum;
                if (i == p) want += (long long)size * ((c % 100000) + 1);
                if (out[i] != want) {
                    report("large call %lld: element %lld is %lld, expected %lld", c, i, out[i], want);
                    break;
                }
            }
        }
        secs = MPI_Wtime() - t0;
        if (compare("16 MiB", rss0, fd0, rss_kib(), open_fds(), rss_limit_kib, secs, large)) failed++;
        else passed++;
        free(in);
        free(out);
    }

    free(pids);
    g_passed = passed;
    g_failed = failed;
    long long totals[3];
    check_totals(0, totals);
    return check_finish(totals); /* MPI_Finalize */
}
