/*
 * same_bits_check: at two ranks every correct allreduce computes a op b (IEEE sum and
 * product, and the textbook complex product, give the same bits in either order), so
 * gpurdma's result must equal Open MPI's own op element for element: the previous
 * module's allreduce (a duplicate of the communicator that keeps gpurdma off) and
 * MPI_Reduce_local. Float, double, long double, and the complex types, SUM and PROD
 * (MIN/MAX too), every length 1..67 (vector tails) and longer ones (vector bodies),
 * in place and not, on offset (misaligned) buffers.
 */
#define PROGRAM "same_bits_check"
#include "check_common.h"

#include <complex.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const char *name;
    MPI_Datatype dt;
    size_t size;      /* bytes per element */
    size_t reals;     /* real components per element (2 for complex) */
    int kind;         /* 0 float, 1 double, 2 long double (component type) */
    int complex_type;
} type_case;

static const type_case types[] = {
    {"MPI_FLOAT", MPI_FLOAT, sizeof(float), 1, 0, 0},
    {"MPI_DOUBLE", MPI_DOUBLE, sizeof(double), 1, 1, 0},
    {"MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, sizeof(long double), 1, 2, 0},
    {"MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, sizeof(float _Complex), 2, 0, 1},
    {"MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, sizeof(double _Complex), 2, 1, 1},
    {"MPI_C_LONG_DOUBLE_COMPLEX", MPI_C_LONG_DOUBLE_COMPLEX, sizeof(long double _Complex), 2, 2, 1},
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Values with full mantissas in [-2, 2), so products and sums round. */
static void fill(const type_case *t, int rank, uint64_t seed, size_t count, unsigned char *out)
{
    const size_t n = count * t->reals;
    for (size_t i = 0; i < n; i++) {
        const uint64_t h = mix64(seed ^ mix64((uint64_t)rank * 0x9e3779b97f4a7c15ull + i));
        const double v = ((double)(h >> 11) / 9007199254740992.0) * 4.0 - 2.0;
        if (t->kind == 0) { float f = (float)v; memcpy(out + i * sizeof f, &f, sizeof f); }
        else if (t->kind == 1) { memcpy(out + i * sizeof v, &v, sizeof v); }
        else { long double l = (long double)v * (1.0L + 1e-10L * (long double)(h & 1023));
               memcpy(out + i * sizeof l, &l, sizeof l); }
    }
}

/* Compare component by component (long double padding bytes are not data). */
static size_t mismatches(const type_case *t, const unsigned char *a, const unsigned char *b, size_t count)
{
    /* x87's long double holds 10 bytes of data in its 16; others use all of them. */
    const size_t ld = LDBL_MANT_DIG == 64 ? 10 : sizeof(long double);
    const size_t comp = t->kind == 0 ? sizeof(float) : t->kind == 1 ? sizeof(double) : ld;
    const size_t stride = t->size / t->reals;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        int differs = 0;
        for (size_t c = 0; c < t->reals; c++)
            differs |= memcmp(a + i * t->size + c * stride, b + i * t->size + c * stride, comp) != 0;
        bad += differs;
    }
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (g_world_rank == 0) printf(PROGRAM ": needs exactly 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    /* The reference: the same job's previous module, on a duplicate gpurdma stays off. */
    MPI_Info info;
    MPI_Comm theirs;
    MPI_Info_create(&info);
    MPI_Info_set(info, "ompi_comm_coll_preference", "^gpurdma");
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &theirs);
    MPI_Info_free(&info);

    const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    const char *op_names[] = {"MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX"};
    size_t counts[67 + 4];
    size_t ncounts = 0;
    for (size_t c = 1; c <= 67; c++) counts[ncounts++] = c;
    counts[ncounts++] = 1000;
    counts[ncounts++] = 4099;
    counts[ncounts++] = 65536 + 3;
    counts[ncounts++] = 300000;
    const size_t max_bytes = 300000 * sizeof(long double _Complex) + 64;
    unsigned char *in = xmalloc(max_bytes), *peer = xmalloc(max_bytes), *send = xmalloc(max_bytes + 16);
    unsigned char *ours = xmalloc(max_bytes + 16), *prev = xmalloc(max_bytes), *local = xmalloc(max_bytes);

    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const type_case *t = &types[ti];
        for (int oi = 0; oi < 4; oi++) {
            if (t->complex_type && oi >= 2) continue; /* MIN/MAX are not defined on complex */
            for (size_t ci = 0; ci < ncounts; ci++) {
                const size_t count = counts[ci], bytes = count * t->size;
                const uint64_t seed = mix64(ti * 131 + (uint64_t)oi * 7 + count);
                fill(t, g_world_rank, seed, count, in);
                fill(t, 1 - g_world_rank, seed, count, peer);
                /* Open MPI's own op, locally: ranks 0's operand first, as MPI orders them. */
                memcpy(local, g_world_rank == 0 ? peer : in, bytes);
                MPI_Reduce_local(g_world_rank == 0 ? in : peer, local, (int)count, t->dt, ops[oi]);
                MPI_Allreduce(in, prev, (int)count, t->dt, ops[oi], theirs);
                /* Odd offsets on alternate counts: misaligned for every vector width. */
                const size_t off = (count & 1) ? 4 : 0;
                const int in_place = (count & 2) != 0;
                unsigned char *recv = ours + off;
                if (in_place) memcpy(recv, in, bytes);
                else memcpy(send + off, in, bytes);
                int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : send + off, recv, (int)count, t->dt, ops[oi],
                                       MPI_COMM_WORLD);
                if (rc != MPI_SUCCESS) {
                    fail("%s %s count %zu: MPI_Allreduce returned %d", t->name, op_names[oi], count, rc);
                    continue;
                }
                const size_t bad_prev = mismatches(t, recv, prev, count);
                const size_t bad_local = mismatches(t, recv, local, count);
                if (bad_prev || bad_local)
                    fail("%s %s count %zu%s: %zu elements differ from the previous module's allreduce, %zu from "
                         "MPI_Reduce_local",
                         t->name, op_names[oi], count, in_place ? " in place" : "", bad_prev, bad_local);
                else
                    g_passed++;
            }
        }
    }
    free(in); free(peer); free(send); free(ours); free(prev); free(local);
    MPI_Comm_free(&theirs);
    long long totals[3];
    check_totals(0, totals);
    return check_finish(totals);
}
