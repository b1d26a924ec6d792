/*
 * How fast is a single-copy read from another process (CMA, process_vm_readv) on
 * this machine, against memcpy? It decides whether a single-copy node allreduce can
 * pay: each rank would read half of its peer's input and half of its peer's result
 * this way instead of copying through shared memory (docs/PERFORMANCE.md).
 *
 *   cc -O2 -o cma-bandwidth contrib/cma-bandwidth.c && ./cma-bandwidth [bytes]
 *
 * A forked child holds the buffer; the parent reads all of it in pieces of several
 * sizes into a scratch buffer (best of 5 rounds each). Exits 1 if CMA is refused
 * (Yama ptrace scope, container seccomp).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const size_t total = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)16 << 20;
    const size_t pieces[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
    char *buf = malloc(total), *dst = malloc(total);
    if (!buf || !dst) return 2;
    memset(buf, 1, total);
    memset(dst, 0, total);
    const pid_t child = fork();
    if (child == 0) {
        pause();  /* holds buf until killed */
        return 0;
    }
    int rc = 0;
    for (size_t p = 0; p < sizeof pieces / sizeof pieces[0] && rc == 0; ++p) {
        const size_t piece = pieces[p] < total ? pieces[p] : total;
        double best = 1e30;
        for (int round = 0; round < 5 && rc == 0; ++round) {
            const double t0 = now();
            for (size_t off = 0; off < total; off += piece) {
                const size_t n = total - off < piece ? total - off : piece;
                struct iovec local = {dst + off, n}, remote = {buf + off, n};
                if (process_vm_readv(child, &local, 1, &remote, 1, 0) != (ssize_t)n) {
                    perror("process_vm_readv");
                    rc = 1;
                    break;
                }
            }
            const double t = now() - t0;
            if (t < best) best = t;
        }
        if (rc == 0) printf("CMA   %zu bytes in pieces of %7zu: %.3f ms, %.2f GB/s\n", total, piece, best * 1e3,
                            (double)total / best / 1e9);
    }
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
        const double t0 = now();
        memcpy(dst, buf, total);
        const double t = now() - t0;
        if (t < best) best = t;
    }
    printf("memcpy %zu bytes: %.3f ms, %.2f GB/s\n", total, best * 1e3, (double)total / best / 1e9);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return rc;
}
