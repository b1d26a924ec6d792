/*
 * osu-compat/pattern.c: datatypes and the validation pattern (see pattern.h).
 */
#include "pattern.h"

#include <stdlib.h>
#include <string.h>

/* Period of the validation pattern; values are 1..period. */
#define OSUC_VAL_PERIOD 251u

MPI_Datatype osuc_mpi_type(enum osuc_dtype d)
{
    switch (d) {
        case OSUC_INT: return MPI_INT;
        case OSUC_FLOAT: return MPI_FLOAT;
        case OSUC_CHAR:
        default: return MPI_CHAR;
    }
}

size_t osuc_type_size(enum osuc_dtype d)
{
    switch (d) {
        case OSUC_INT: return sizeof(int);
        case OSUC_FLOAT: return sizeof(float);
        case OSUC_CHAR:
        default: return 1;
    }
}

void osuc_fill_ones(void *buf, enum osuc_dtype d, size_t count)
{
    size_t j;

    switch (d) {
        case OSUC_INT:
            for (j = 0; j < count; j++) ((int *)buf)[j] = 1;
            break;
        case OSUC_FLOAT:
            for (j = 0; j < count; j++) ((float *)buf)[j] = 1.0f;
            break;
        case OSUC_CHAR:
        default: memset(buf, 1, count); break;
    }
}

static unsigned osuc_val_f(const struct osuc_val *v, unsigned x)
{
    return v->indicator ? (0 == x) : x + 1;
}

/* Fill v->sums for the current period/indicator; returns max S[k]. */
static uint64_t osuc_val_tabulate(struct osuc_val *v, uint64_t n)
{
    uint64_t p = v->period, full = n / p, rem = n % p, cycle = 0, k, r, max = 0;

    for (k = 0; k < p; k++) cycle += osuc_val_f(v, (unsigned)k);
    for (k = 0; k < p; k++) {
        uint64_t s = full * cycle;
        for (r = 0; r < rem; r++) s += osuc_val_f(v, (unsigned)((r + k) % p));
        v->sums[k] = s;
        if (s > max) max = s;
    }
    return max;
}

int osuc_val_init(struct osuc_val *v, enum osuc_dtype d, int nprocs)
{
    uint64_t n = (uint64_t)nprocs;
    unsigned p = OSUC_VAL_PERIOD;

    v->indicator = 0;
    v->sums = NULL;
    if (OSUC_FLOAT == d) {
        uint64_t lim = ((uint64_t)1 << 24) / n;
        if (lim < p) p = (lim > 0) ? (unsigned)lim : 1u;
    }
    if (OSUC_CHAR == d && n > 127) {
        v->indicator = 1;
        p = (unsigned)((n + 126) / 127);
    }
    v->sums = malloc(sizeof(uint64_t) * p);
    if (NULL == v->sums) return -1;
    v->period = p;
    if (OSUC_CHAR == d && !v->indicator) {
        /* Largest linear period (sums only shrink as P shrinks). */
        while (osuc_val_tabulate(v, n) > 127 && v->period > 1) v->period--;
        return 0;
    }
    (void)osuc_val_tabulate(v, n);
    return 0;
}

void osuc_val_fill(const struct osuc_val *v, void *buf, enum osuc_dtype d, size_t count, int rank, unsigned it)
{
    unsigned p = v->period;
    unsigned k = ((unsigned)rank % p + it % p) % p;
    size_t j;

    for (j = 0; j < count; j++) {
        unsigned x = osuc_val_f(v, k);
        switch (d) {
            case OSUC_INT: ((int *)buf)[j] = (int)x; break;
            case OSUC_FLOAT: ((float *)buf)[j] = (float)x; break;
            case OSUC_CHAR:
            default: ((unsigned char *)buf)[j] = (unsigned char)x; break;
        }
        k = (k + 1 == p) ? 0 : k + 1;
    }
}

int osuc_val_check(const struct osuc_val *v, const void *buf, enum osuc_dtype d, size_t count, unsigned it)
{
    unsigned p = v->period;
    unsigned k = it % p;
    size_t j;

    for (j = 0; j < count; j++) {
        uint64_t s = v->sums[k];
        switch (d) {
            case OSUC_INT:
                if (((const int *)buf)[j] != (int)s) return 1;
                break;
            case OSUC_FLOAT:
                if (((const float *)buf)[j] != (float)s) return 1;
                break;
            case OSUC_CHAR:
            default:
                if (((const unsigned char *)buf)[j] != (unsigned char)(s & 0xffu)) return 1;
                break;
        }
        k = (k + 1 == p) ? 0 : k + 1;
    }
    return 0;
}

#define OSUC_BLOCK_PERIOD 251u

static unsigned osuc_block_first(int rank, unsigned it)
{
    return ((unsigned)rank % OSUC_BLOCK_PERIOD * 7u + it % OSUC_BLOCK_PERIOD * 3u) % OSUC_BLOCK_PERIOD;
}

void osuc_block_fill(void *buf, enum osuc_dtype d, size_t count, int rank, unsigned it)
{
    unsigned k = osuc_block_first(rank, it);
    size_t j;

    for (j = 0; j < count; j++) {
        switch (d) {
            case OSUC_INT: ((int *)buf)[j] = (int)(k + 1); break;
            case OSUC_FLOAT: ((float *)buf)[j] = (float)(k + 1); break;
            case OSUC_CHAR:
            default: ((unsigned char *)buf)[j] = (unsigned char)(k + 1); break;
        }
        k = (k + 1 == OSUC_BLOCK_PERIOD) ? 0 : k + 1;
    }
}

int osuc_block_check(const void *buf, enum osuc_dtype d, size_t count, int rank, unsigned it)
{
    unsigned k = osuc_block_first(rank, it);
    size_t j;

    for (j = 0; j < count; j++) {
        switch (d) {
            case OSUC_INT:
                if (((const int *)buf)[j] != (int)(k + 1)) return 1;
                break;
            case OSUC_FLOAT:
                if (((const float *)buf)[j] != (float)(k + 1)) return 1;
                break;
            case OSUC_CHAR:
            default:
                if (((const unsigned char *)buf)[j] != (unsigned char)(k + 1)) return 1;
                break;
        }
        k = (k + 1 == OSUC_BLOCK_PERIOD) ? 0 : k + 1;
    }
    return 0;
}
