/*
 * lifecycle_check: communicator set-up and tear-down must not leak.
 *
 * Each cycle: MPI_Comm_dup(MPI_COMM_WORLD) -> MPI_Allreduce (MPI_INT MPI_SUM of
 * 4096 ints, then of 1 int, both checked) -> MPI_Comm_free.  Every rank samples
 * its resident set size (/proc/self/statm) and its number of open file
 * descriptors (entries of /proc/self/fd) after the baseline cycle (100, or half
 * the cycles when there are fewer than 200) and after the last one.  It fails if
 * the descriptors grew at all on any rank, the RSS grew by more than 8 MiB, or a
 * gpurdma name of this process is left in /dev/shm after the last cycle.
 *
 * --leave K: then K more dups, each named "left to MPI_Finalize <k>" and used once (a
 * checked allreduce), that the program never frees (as IMB leaves its communicators):
 * MPI_Finalize must release gpurdma's state of each (its verbose "freed after" line).
 *
 * Usage: lifecycle_check [--cycles N | N] [--leave K]      (default 10000, 0)
 */
#define _POSIX_C_SOURCE 200809L /* opendir, sysconf */
#include <mpi.h>

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROGRAM "lifecycle_check"
#define BIG_COUNT 4096
#define RSS_LIMIT_KIB (8 * 1024)

#include "check_common.h" /* fail, summary, rss_kib, open_fds */

/* One cycle: dup, two checked allreduces, free. */
static void cycle(int c, int size, int *in, int *out)
{
    MPI_Comm comm;
    int rc, one_in, one_out = -1;
    const long long tri = (long long)size * (size - 1) / 2;

    rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (rc != MPI_SUCCESS) {
        fail("cycle %d: MPI_Comm_dup returned %d", c, rc);
        return;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    /* element i of rank r: 7r + i + c; the sum is 7 n(n-1)/2 + n (i + c) */
    for (int i = 0; i < BIG_COUNT; i++) {
        in[i] = 7 * g_world_rank + i + c;
        out[i] = -1;
    }
    rc = MPI_Allreduce(in, out, BIG_COUNT, MPI_INT, MPI_SUM, comm);
    if (rc != MPI_SUCCESS) {
        fail("cycle %d: MPI_Allreduce(count %d) returned %d", c, BIG_COUNT, rc);
    } else {
        int bad = -1;
        for (int i = 0; i < BIG_COUNT && bad < 0; i++)
            if (out[i] != (int)(7 * tri + (long long)size * (i + c)))
                bad = i;
        if (bad >= 0)
            fail("cycle %d: MPI_INT MPI_SUM count %d: index %d expected %lld got %d", c,
                 BIG_COUNT, bad, 7 * tri + (long long)size * (bad + c), out[bad]);
        else
            g_passed++;
    }

    one_in = g_world_rank + c;
    rc = MPI_Allreduce(&one_in, &one_out, 1, MPI_INT, MPI_SUM, comm);
    if (rc != MPI_SUCCESS)
        fail("cycle %d: MPI_Allreduce(count 1) returned %d", c, rc);
    else if (one_out != (int)(tri + (long long)size * c))
        fail("cycle %d: MPI_INT MPI_SUM count 1: expected %lld got %d", c,
             tri + (long long)size * c, one_out);
    else
        g_passed++;

    rc = MPI_Comm_free(&comm);
    if (rc != MPI_SUCCESS || comm != MPI_COMM_NULL)
        fail("cycle %d: MPI_Comm_free returned %d", c, rc);
}

/* Names in /dev/shm that gpurdma made for this process (/gpurdma-<uid>-<pid>-...): none
 * once every communicator is set up or freed (-1: /dev/shm unreadable, counted as none). */
static long shm_names_of_this_process(void)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "gpurdma-%u-%d-", (unsigned)getuid(), (int)getpid());
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    long n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    int size, cycles = 10000, baseline;
    long rss0 = -1, fds0 = -1, rss1, fds1;
    long mine[4], *all = NULL;
    long long totals[3];
    int *in, *out;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int leave = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        const char *v = argv[i];
        int *into = &cycles;
        if (!strcmp(argv[i], "--cycles") && i + 1 < argc)
            v = argv[++i];
        else if (!strcmp(argv[i], "--leave") && i + 1 < argc)
            v = argv[++i], into = &leave;
        *into = (int)strtol(v, &end, 0);
        if (*end || cycles < 1 || leave < 0) {
            if (g_world_rank == 0)
                fprintf(stderr, "usage: " PROGRAM " [--cycles N | N] [--leave K]\n");
            MPI_Finalize();
            return 2;
        }
    }
    baseline = cycles >= 200 ? 100 : (cycles + 1) / 2;

    in = malloc(BIG_COUNT * sizeof *in);
    out = malloc(BIG_COUNT * sizeof *out);
    if (!in || !out) {
        fprintf(stderr, PROGRAM ": out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    for (int c = 1; c <= cycles; c++) {
        cycle(c, size, in, out);
        if (c == baseline) {
            rss0 = rss_kib();
            fds0 = open_fds();
        }
    }
    rss1 = rss_kib();
    fds1 = open_fds();

    /* resource check, per rank; rank 0 prints everyone's numbers */
    if (rss0 < 0 || rss1 < 0 || fds0 < 0 || fds1 < 0) {
        fail("cannot read /proc/self/statm or /proc/self/fd");
    } else {
        bool ok = true;
        if (fds1 != fds0) {
            fail("open file descriptors %ld after cycle %d, %ld after cycle %d", fds0,
                 baseline, fds1, cycles);
            ok = false;
        }
        const long names = shm_names_of_this_process();
        if (names != 0) {
            fail("%ld gpurdma names of this process left in /dev/shm after cycle %d", names, cycles);
            ok = false;
        }
        if (rss1 - rss0 > RSS_LIMIT_KIB) {
            fail("RSS grew by %ld KiB (limit %d KiB): %ld KiB after cycle %d, %ld KiB after "
                 "cycle %d", rss1 - rss0, RSS_LIMIT_KIB, rss0, baseline, rss1, cycles);
            ok = false;
        }
        if (ok)
            g_passed++;
    }
    mine[0] = fds0;
    mine[1] = fds1;
    mine[2] = rss0;
    mine[3] = rss1;
    if (g_world_rank == 0)
        all = malloc((size_t)size * sizeof mine);
    if (MPI_Gather(mine, 4, MPI_LONG, all, 4, MPI_LONG, 0, MPI_COMM_WORLD) == MPI_SUCCESS &&
        g_world_rank == 0 && all) {
        long max_drss = 0, max_dfds = 0;
        for (int r = 0; r < size; r++) {
            long dfds = all[4 * r + 1] - all[4 * r], drss = all[4 * r + 3] - all[4 * r + 2];
            if (r == 0 || dfds > max_dfds)
                max_dfds = dfds;
            if (r == 0 || drss > max_drss)
                max_drss = drss;
        }
        printf("%d cycles, from cycle %d to %d: largest growth over %d ranks: "
               "%ld fds, %ld KiB RSS\n",
               cycles, baseline, cycles, size, max_dfds, max_drss);
        for (int r = 0; r < size && (max_dfds != 0 || max_drss > RSS_LIMIT_KIB); r++)
            printf("  rank %d: fds %ld -> %ld, RSS %ld -> %ld KiB\n", r, all[4 * r],
                   all[4 * r + 1], all[4 * r + 2], all[4 * r + 3]);
    }
    free(all);
    for (int k = 0; k < leave; k++) {
        MPI_Comm left;
        char name[64];
        int one = 1, sum = 0;
        if (MPI_Comm_dup(MPI_COMM_WORLD, &left) != MPI_SUCCESS) {
            fail("MPI_Comm_dup for the communicator left to MPI_Finalize %d", k);
            break;
        }
        snprintf(name, sizeof name, "left to MPI_Finalize %d", k);
        MPI_Comm_set_name(left, name);
        MPI_Comm_set_errhandler(left, MPI_ERRORS_RETURN);
        if (MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, left) != MPI_SUCCESS || sum != size)
            fail("%s: allreduce gave %d, expected %d", name, sum, size);
        else
            g_passed++;
    }
    free(in);
    free(out);

    check_totals(0, totals);
    return check_finish(totals);
}
