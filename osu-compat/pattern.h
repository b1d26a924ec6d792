/*
 * osu-compat/pattern.h: the datatypes the benchmarks reduce (OMB's -T) and the data
 * pattern -c checks results against.
 */
#ifndef OSUC_PATTERN_H
#define OSUC_PATTERN_H

#include <mpi.h>

#include <stddef.h>
#include <stdint.h>

enum osuc_dtype { OSUC_CHAR, OSUC_INT, OSUC_FLOAT };

MPI_Datatype osuc_mpi_type(enum osuc_dtype d);
size_t osuc_type_size(enum osuc_dtype d);

/* count elements of the value 1 (timing mode: the sums never overflow). */
void osuc_fill_ones(void *buf, enum osuc_dtype d, size_t count);

/*
 * Validation pattern. Element j of rank r in iteration it holds
 *     v(r, it, j) = f((r + j + it) mod P)
 * with f(x) = x + 1 ("linear") or f(x) = (x == 0) ("indicator"). The reduced value
 * then only depends on k = (j + it) mod P:
 *     S[k] = sum_{r=0}^{n-1} f((r + k) mod P)
 * which is tabulated once per datatype, so checking costs O(1) an element.
 *
 * All values are non-negative, so every partial sum the MPI library forms, in
 * whatever order, is at most the final sum. P and f are chosen so that the final sum
 * stays exact:
 *  - MPI_FLOAT: linear, P * n < 2^24, every partial sum is an exactly representable
 *    integer.
 *  - MPI_INT: linear, P = 251; the sum is at most 251 * n.
 *  - MPI_CHAR: every sum must stay <= 127. Open MPI's AVX reduction component
 *    saturates 8-bit signed sums instead of wrapping (open-mpi/ompi#8045), so data
 *    that overflows would give results that depend on the code path. The largest
 *    linear period whose sums stay <= 127 is used (P = 64 for 2 ranks); above 127
 *    ranks, an indicator pattern with P = ceil(n / 127). The expected byte is still
 *    computed modulo 256 and compared as unsigned char.
 */
struct osuc_val {
    unsigned period;
    int indicator;
    uint64_t *sums; /* S[k], k in [0, period) */
};

/* 0, or -1 when out of memory. Free v->sums when done. */
int osuc_val_init(struct osuc_val *v, enum osuc_dtype d, int nprocs);
void osuc_val_fill(const struct osuc_val *v, void *buf, enum osuc_dtype d, size_t count, int rank, unsigned it);
/* 1 if any element differs from the expected sum, else 0. */
int osuc_val_check(const struct osuc_val *v, const void *buf, enum osuc_dtype d, size_t count, unsigned it);

/*
 * The pattern of the collectives that move data without reducing it (allgather,
 * bcast): element j of the block rank r contributes in iteration it holds
 *     b(r, it, j) = 1 + (7r + 3it + j) mod 251,
 * never 0 (what the receive buffers are cleared to), exact in every datatype, and
 * different between neighbouring ranks' blocks.
 */
void osuc_block_fill(void *buf, enum osuc_dtype d, size_t count, int rank, unsigned it);
/* 1 if any element differs from b(rank, it, j), else 0. */
int osuc_block_check(const void *buf, enum osuc_dtype d, size_t count, int rank, unsigned it);

#endif
