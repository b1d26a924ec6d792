/*
 * check_common.h: results bookkeeping shared by the MPI test programs.
 *
 * Include it after defining PROGRAM (the program's name, a string literal, used
 * in messages).  Everything here is static: each program gets its own copy.
 */
#ifndef GPURDMA_TESTS_MPI_CHECK_COMMON_H
#define GPURDMA_TESTS_MPI_CHECK_COMMON_H

#include <mpi.h>

#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef PROGRAM
#error "define PROGRAM before including check_common.h"
#endif

/* This process's rank in MPI_COMM_WORLD; the program sets it after MPI_Init. */
static int g_world_rank;

/* Checks passed and failed on this rank. */
static long long g_passed, g_failed;

/* How many failures each rank prints in detail (a program may change it). */
static long long max_printed_failures = 5;

/* Record a failure; the first max_printed_failures on each rank are printed. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void fail(const char *fmt, ...)
{
    if (g_failed++ < max_printed_failures) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        printf("FAIL [world rank %d] %s\n", g_world_rank, msg);
        fflush(stdout);
    }
}

/* malloc that never returns NULL: out of memory aborts the job (not a verdict). */
static __attribute__((unused)) void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, PROGRAM ": out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* Resident set size in KiB, from /proc/self/statm (-1 if unavailable). */
static __attribute__((unused)) long rss_kib(void)
{
    long size, resident;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Open file descriptors: entries of /proc/self/fd, not counting the one that
 * reads the directory (-1 if unavailable). */
static __attribute__((unused)) long open_fds(void)
{
    long n = 0;
    struct dirent *d;
    DIR *dir = opendir("/proc/self/fd");
    if (!dir)
        return -1;
    while ((d = readdir(dir)) != NULL)
        if (d->d_name[0] != '.')
            n++;
    closedir(dir);
    return n - 1;
}

/* Sum {passed, failed, extra} over MPI_COMM_WORLD into totals; on error, this
 * rank's own counts with one more failure. */
static void check_totals(long long extra, long long totals[3])
{
    long long local[3] = { g_passed, g_failed, extra };
    if (MPI_Allreduce(local, totals, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) !=
        MPI_SUCCESS) {
        totals[0] = g_passed;
        totals[1] = g_failed + 1;
        totals[2] = extra;
    }
}

/* Rank 0 prints "PROGRAM: N passed, M failed"; then MPI_Finalize.  Returns the
 * exit status: 1 if any check failed anywhere, else 0. */
static int check_finish(const long long totals[3])
{
    if (g_world_rank == 0)
        printf(PROGRAM ": %lld passed, %lld failed\n", totals[0], totals[1]);
    MPI_Finalize();
    return totals[1] ? 1 : 0;
}

#endif /* GPURDMA_TESTS_MPI_CHECK_COMMON_H */
