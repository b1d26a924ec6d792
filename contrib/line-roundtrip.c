/*
 * The physical floor of a small allreduce on one node: how long one cache line takes to
 * go from one core to another and back. Two processes (as two MPI ranks are), pinned to
 * two CPUs, take turns writing a counter into a line of their own that the other one
 * polls: every round trip moves each line once.
 *
 *   contrib/line-roundtrip [CPU_A CPU_B [ROUND_TRIPS]]     (default 0 1 2000000)
 *
 * Prints the round trip and its half (one line handed over once) in nanoseconds.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

int main(int argc, char **argv)
{
    const int cpu_a = argc > 2 ? atoi(argv[1]) : 0, cpu_b = argc > 2 ? atoi(argv[2]) : 1;
    const uint64_t trips = argc > 3 ? strtoull(argv[3], NULL, 10) : 2000000;
    if (cpu_a == cpu_b || trips < 10) {
        fprintf(stderr, "usage: %s [CPU_A CPU_B [ROUND_TRIPS]]: two different CPUs, 10 round trips or more\n",
                argv[0]);
        return 2;
    }
    /* Two lines 128 bytes apart (not adjacent-line prefetch partners), shared by both processes. */
    char *area = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    volatile uint64_t *ping = (volatile uint64_t *)area, *pong = (volatile uint64_t *)(area + 128);
    const pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (pin(child == 0 ? cpu_b : cpu_a) != 0) {
        perror("sched_setaffinity");
        return 1;
    }
    if (child == 0) {
        for (uint64_t i = 1; i <= trips; ++i) {
            while (*ping != i) {
            }
            *pong = i;
        }
        return 0;
    }
    /* A warm-up tenth, then the timed trips. */
    const uint64_t warm = trips / 10;
    double t0 = 0;
    for (uint64_t i = 1; i <= trips; ++i) {
        if (i == warm + 1) t0 = now_s();
        *ping = i;
        while (*pong != i) {
        }
    }
    const double ns = (now_s() - t0) / (double)(trips - warm) * 1e9;
    int status = 0;
    waitpid(child, &status, 0);
    printf("CPUs %d and %d: cache-line round trip %.1f ns, one hand-over %.1f ns\n", cpu_a, cpu_b, ns, ns / 2);
    return 0;
}
