/*
 * What a communicator costs: creating it and its first allreduce, and the memory it
 * keeps. Real codes make communicators by the dozen (PETSc, BLACS row and column
 * communicators, one group per parallelism dimension in ML frameworks).
 *
 *   mpirun -np 4 [--mca coll_gpurdma_priority 100] contrib/comm-setup-bench \
 *       [--comms 50] [--bytes 4096] [--how dup|split] [--cycles N]
 *
 * Each of --comms rounds: a barrier on MPI_COMM_WORLD, then the timed part: the new
 * communicator (MPI_Comm_dup of MPI_COMM_WORLD, or MPI_Comm_split into two halves by
 * rank parity with the key reversed) and one MPI_Allreduce of --bytes (MPI_BYTE
 * counted as MPI_INT32_T elements, MPI_SUM) on it. All of them stay alive until the
 * end, so VmRSS after minus VmRSS before, over --comms, is what one live communicator
 * keeps. Reports, per round, the slowest rank's time; the line shows the median
 * and the quartiles of those (and the median of the creation alone), and the largest
 * RSS growth of any rank, with its private and shared-memory parts (and the heap
 * bytes that rank's malloc handed out meanwhile).
 *
 * --cycles N: then N rounds of create, one allreduce, free, and the RSS, the open file
 * descriptors and the /dev/shm entries before and after them (leaks show as growth).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* VmRSS, and of it the private (RssAnon) and shared-memory (RssShmem) pages, KiB. */
struct rss {
    long total, anon, shmem;
};

static struct rss rss_now(void)
{
    struct rss r = {-1, -1, -1};
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    if (!f) return r;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0) r.total = strtol(line + 6, NULL, 10);
        if (strncmp(line, "RssAnon:", 8) == 0) r.anon = strtol(line + 8, NULL, 10);
        if (strncmp(line, "RssShmem:", 9) == 0) r.shmem = strtol(line + 9, NULL, 10);
    }
    fclose(f);
    return r;
}

/* Bytes the heap has handed out (mallinfo2, glibc 2.33 on; else -1). */
static long heap_bytes(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    const struct mallinfo2 mi = mallinfo2();
    return (long)(mi.uordblks + mi.hblkhd);
#else
    return -1;
#endif
}

static long vm_rss_kib(void)
{
    return rss_now().total;
}

static long entries(const char *dir)
{
    DIR *d = opendir(dir);
    long n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') ++n;
    closedir(d);
    return n;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static MPI_Comm make(int how_split, int rank, int size)
{
    MPI_Comm c;
    if (how_split)
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &c);
    else
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
    return c;
}

int main(int argc, char **argv)
{
    int comms = 50, bytes = 4096, how_split = 0, cycles = 0;
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--comms") && i + 1 < argc)
            comms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--how") && i + 1 < argc)
            how_split = !strcmp(argv[++i], "split");
        else if (!strcmp(argv[i], "--cycles") && i + 1 < argc)
            cycles = atoi(argv[++i]);
        else {
            if (rank == 0)
                fprintf(stderr, "usage: %s [--comms N] [--bytes B] [--how dup|split] [--cycles N]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    if (comms < 1) comms = 1;
    const int count = bytes / 4 > 0 ? bytes / 4 : 1;
    int32_t *in = malloc(sizeof(int32_t) * (size_t)count), *out = malloc(sizeof(int32_t) * (size_t)count);
    MPI_Comm *made = malloc(sizeof(MPI_Comm) * (size_t)comms);
    /* Per round: the whole, and of it the creation alone (the first call is the rest). */
    double *took = malloc(sizeof(double) * 2 * (size_t)comms), *slowest = malloc(sizeof(double) * 2 * (size_t)comms);
    for (int i = 0; i < count; ++i) in[i] = rank + i;
    int failed = 0;

    /* The first communicator of the job may pay for things done once per process. */
    MPI_Comm warm = make(how_split, rank, size);
    MPI_Allreduce(in, out, count, MPI_INT32_T, MPI_SUM, warm);
    MPI_Comm_free(&warm);
    MPI_Barrier(MPI_COMM_WORLD);
    const struct rss rss_before = rss_now();
    const long heap_before = heap_bytes();
    for (int c = 0; c < comms; ++c) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        made[c] = make(how_split, rank, size);
        took[comms + c] = MPI_Wtime() - t0;
        MPI_Allreduce(in, out, count, MPI_INT32_T, MPI_SUM, made[c]);
        took[c] = MPI_Wtime() - t0;
        int csize;
        MPI_Comm_size(made[c], &csize);
        /* Rank r holds r + i: the members of a communicator are known, so is the sum. */
        int64_t want = 0;
        for (int r = 0; r < size; ++r)
            if (!how_split || r % 2 == rank % 2) want += r;
        if (out[count - 1] != (int32_t)(want + (int64_t)csize * (count - 1))) failed = 1;
    }
    const struct rss rss_after = rss_now();
    const long heap_after = heap_bytes();
    MPI_Reduce(took, slowest, 2 * comms, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    /* The rank whose RSS grew most, and how much of that was private and shared memory. */
    struct {
        long growth;
        int rank;
    } mine = {rss_after.total - rss_before.total, rank}, most = {0, 0};
    MPI_Allreduce(&mine, &most, 1, MPI_LONG_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    long parts[3] = {rss_after.anon - rss_before.anon, rss_after.shmem - rss_before.shmem,
                     heap_before < 0 ? -1 : (heap_after - heap_before) / 1024};
    if (most.rank != 0 && rank == most.rank) MPI_Send(parts, 3, MPI_LONG, 0, 0, MPI_COMM_WORLD);
    if (most.rank != 0 && rank == 0) MPI_Recv(parts, 3, MPI_LONG, most.rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(slowest, (size_t)comms, sizeof(double), by_value);
        qsort(slowest + comms, (size_t)comms, sizeof(double), by_value);
        printf("comm-setup: np %d, %d x %s + one %d B allreduce: median %.3f ms (quartiles %.3f %.3f; creation alone %.3f), "
               "RSS per live communicator %.1f KiB (rank %d: %ld KiB for %d, private %ld, shared memory %ld; heap %ld)%s\n",
               size, comms, how_split ? "split" : "dup", bytes, 1e3 * slowest[comms / 2], 1e3 * slowest[comms / 4],
               1e3 * slowest[(3 * comms) / 4], 1e3 * slowest[comms + comms / 2], (double)most.growth / comms, most.rank, most.growth, comms, parts[0],
               parts[1], parts[2], any_failed ? "; WRONG RESULTS" : "");
    }
    for (int c = 0; c < comms; ++c) MPI_Comm_free(&made[c]);

    if (cycles > 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        const long rss0 = vm_rss_kib(), fds0 = entries("/proc/self/fd"), shm0 = entries("/dev/shm");
        for (int c = 0; c < cycles; ++c) {
            MPI_Comm x = make(how_split, rank, size);
            MPI_Allreduce(in, out, count, MPI_INT32_T, MPI_SUM, x);
            MPI_Comm_free(&x);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        long grew[3] = {vm_rss_kib() - rss0, entries("/proc/self/fd") - fds0, entries("/dev/shm") - shm0}, most3[3];
        MPI_Reduce(grew, most3, 3, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("comm-setup: %d create/allreduce/free cycles: RSS grew %ld KiB, file descriptors %ld, "
                   "/dev/shm entries %ld (largest of any rank)\n",
                   cycles, most3[0], most3[1], most3[2]);
    }
    free(in);
    free(out);
    free(made);
    free(took);
    free(slowest);
    MPI_Finalize();
    return any_failed;
}
