/*
 * device_check: MPI_Allreduce, MPI_Iallreduce + MPI_Wait and persistent allreduce
 * (MPI_Allreduce_init, or Open MPI 4.1's MPIX_Allreduce_init where present) on GPU
 * device buffers under mpirun.
 *
 * The CUDA driver is loaded at run time (dlopen("libcuda.so.1"), never linked: on a
 * machine without a GPU the stand-in tests/gpu/fake_cuda.cpp is found through
 * LD_LIBRARY_PATH). Each rank retains device 0's primary context (--device-per-rank:
 * device local rank % device count), cuMemAlloc's a send and a receive buffer, and
 * moves data only with cuMemcpyHtoD/DtoH (a GPU's memory is not host-addressable).
 *
 *   matrix  allreduce_check's types and inputs (matrix.h): every predefined C type (and
 *           the Fortran ones the MPI has at C sizes) with every op the standard
 *           defines for it; 1 element and an odd count of several KiB; blocking (in
 *           place and not), nonblocking, persistent (two starts, new inputs)
 *   sizes   SUM float, SUM int, MAX double, BXOR uint8 from 1 element to --max-bytes
 *           (powers of 4 and odd counts beside them: several chunks, unequal slices),
 *           blocking (in place and not), nonblocking and persistent
 * --quick: the representative types (T_REP) at the odd count, blocking and one other
 * kind; the float sweep only.
 *
 * matrix.h's inputs make every exact result independent of the order of the ranks, so
 * each result must equal the host reference (folded in rank order) element for
 * element, the 64 bytes before and after it in the receive allocation and the send
 * buffer must be untouched, and (types without padding) the digest of each type's
 * results, and of each size sweep's, must be the same on every rank (MPI_Allgather).
 *
 * --expect-device: gpurdma must have taken the device path on every rank that passes
 * GPU memory (its MPI_T counter coll_gpurdma_device_calls above zero), so a run in which
 * the previous module took the calls, or gpurdma staged every one through host memory,
 * fails.
 *
 * --host-ranks a,b: these world ranks pass host memory to every call while the others
 * pass GPU memory (a node whose ranks mix them agrees per call and stages it); every
 * result is checked the same way.
 *
 * Exit status: 0 if every check passed, 1 on any failure (each named), 77 with a SKIP
 * line when a rank finds no CUDA driver or device.
 *
 * --other-vendor-ranks a,b: on these world ranks the receive buffer is the other GPU
 * vendor's (a HIP allocation in a CUDA process, or the reverse; both runtimes loaded):
 * the calls that are not in place pass buffers of both vendors, the others only the
 * other vendor's. gpurdma stages them through host memory with that runtime's copies,
 * and the rank's node peers stage with it; every result is checked the same way.
 *
 * --blocking-only: MPI_Allreduce alone (under the MPICH interposer, which takes no other
 * call: MPICH's own MPI_Iallreduce is not what is checked).
 *
 * Usage: device_check [--quick] [--max-bytes N] [--device-per-rank] [--expect-device]
 *                     [--host-ranks a,b] [--other-vendor-ranks a,b] [--blocking-only]
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM "device_check"
#define GUARD_BYTES 64 /* before and after every result: must keep GUARD_FILL */
#define GUARD_FILL 0x5A

#include "check_common.h" /* fail, xmalloc, check_totals, check_finish */
#include "matrix.h"       /* types, ops, inputs, reference fold */
#include "pvars.h"

#include "persistent_allreduce.h"

#include "gpu_driver.h" /* cu, gpu_open, gpu_must: the driver, loaded at run time */

/* ------------------------------------------------------------------ one case */

typedef enum { KIND_BLOCKING, KIND_NONBLOCKING, KIND_PERSISTENT } call_kind;
static const char *const kind_name[] = { "MPI_Allreduce", "MPI_Iallreduce", "persistent" };

static MPI_Comm g_comm;
static int g_size;
static size_t g_max_bytes = 4u << 20;
/* Device: the send buffer, and the receive buffer GUARD_BYTES into its allocation with
 * as many after it. Host: the same shapes, for inputs, the reference and results. */
static devptr g_dsend, g_drecv_base, g_drecv;
static unsigned char *g_in, *g_expected, *g_out, *g_scratch;
static long long g_device_buffer_calls;
/* --host-ranks: this rank passes host memory where the others pass GPU memory (its
 * node agrees per call and stages), so the "device" pointers are malloc'd here. */
static bool g_host_buffers;
/* --other-vendor-ranks: this rank's receive allocation (g_room bytes at g_drecv_base) is
 * the other vendor's runtime's (g_other), the send buffer cu's. */
static bool g_other_recv;
static cuda_api g_other;
static size_t g_room;

/* The runtime that owns p: the other vendor's for the receive allocation of such a rank. */
static const cuda_api *owner(devptr p)
{
    return g_other_recv && p >= g_drecv_base && p < g_drecv_base + g_room ? &g_other : &cu;
}

static void to_buffer(devptr dst, const void *src, size_t bytes, const char *what)
{
    if (g_host_buffers)
        memcpy((void *)(uintptr_t)dst, src, bytes);
    else
        gpu_must(owner(dst)->htod(dst, src, bytes), what);
}

static void from_buffer(void *dst, devptr src, size_t bytes, const char *what)
{
    if (g_host_buffers)
        memcpy(dst, (const void *)(uintptr_t)src, bytes);
    else
        gpu_must(owner(src)->dtoh(dst, src, bytes), what);
}

static devptr buffer_alloc(const cuda_api *api, size_t bytes, const char *what)
{
    devptr p = 0;
    if (g_host_buffers)
        p = (devptr)(uintptr_t)xmalloc(bytes);
    else
        gpu_must(api->mem_alloc(&p, bytes), what);
    return p;
}

static void buffer_free(devptr p)
{
    if (g_host_buffers)
        free((void *)(uintptr_t)p);
    else
        gpu_must(owner(p)->mem_free(p), "cuMemFree");
}

/* The other vendor's runtime beside cu (whose handles are kept): HIP's beside CUDA's, or
 * CUDA's beside HIP's. */
static bool other_vendor_open(int local_rank, char *why, size_t why_size)
{
    const cuda_api mine = cu;
    cu = (cuda_api){ 0 };
    const bool ok = mine.hip ? cuda_driver_open(false, local_rank, why, why_size)
                             : hip_open(false, local_rank, why, why_size);
    g_other = cu;
    cu = mine;
    return ok;
}
static bool g_quick;
/* --blocking-only: the MPI's gpurdma takes MPI_Allreduce alone (the MPICH interposer);
 * its nonblocking and persistent calls are the MPI's own, not checked here. */
static bool g_blocking_only;
static uint64_t g_digest = HASH_INIT; /* of the results since the last check_digests */
static long long g_digested;

/* Stages this rank's input on the device (in the receive buffer if in place), fills
 * the rest of the receive allocation with GUARD_FILL, and computes the reference. */
static void prepare(const dtype_info *t, int op, size_t count, bool in_place, uint64_t seed)
{
    const size_t bytes = count * t->size;
    memset(g_scratch, GUARD_FILL, bytes + 2 * GUARD_BYTES);
    to_buffer(g_drecv_base, g_scratch, bytes + 2 * GUARD_BYTES, "cuMemcpyHtoD (guard)");
    t->gen(op, g_world_rank, 0, count, seed, g_in);
    to_buffer(in_place ? g_drecv : g_dsend, g_in, bytes, "cuMemcpyHtoD (input)");
    compute_expected(t, op, g_size, count, seed, g_expected, g_scratch);
}

/* After verify's or declined_case's result check (g_out holds the receive allocation):
 * the guards around the result, and the send buffer (unless in place) as prepared. */
static bool guards_and_send_kept(const char *what, size_t bytes, bool in_place)
{
    if (!bytes_are(g_out, GUARD_BYTES, GUARD_FILL) || !bytes_are(g_out + GUARD_BYTES + bytes, GUARD_BYTES, GUARD_FILL)) {
        fail("%s: bytes written outside the receive buffer", what);
        return false;
    }
    if (!in_place) {
        from_buffer(g_scratch, g_dsend, bytes, "cuMemcpyDtoH (send)");
        if (memcmp(g_scratch, g_in, bytes) != 0) {
            fail("%s: send buffer modified", what);
            return false;
        }
    }
    return true;
}

/* The result against the reference, the guards and the send buffer; (types without
 * padding) into the digest. */
static void verify(const char *what, const dtype_info *t, size_t count, bool in_place)
{
    const size_t bytes = count * t->size;
    from_buffer(g_out, g_drecv_base, bytes + 2 * GUARD_BYTES, "cuMemcpyDtoH (result)");
    const unsigned char *got = g_out + GUARD_BYTES;
    size_t first_bad, nlib;
    bool ok = false;
    const size_t nbad = matrix_compare(t, count, g_expected, NULL, got, &first_bad, &nlib);
    if (nbad) {
        char e_str[128], g_str[128];
        t->show(g_expected + first_bad * t->size, e_str, sizeof e_str);
        t->show(got + first_bad * t->size, g_str, sizeof g_str);
        fail("%s: index %zu expected %s got %s (%zu of %zu elements wrong)", what, first_bad, e_str, g_str, nbad,
             count);
    } else {
        ok = guards_and_send_kept(what, bytes, in_place);
    }
    /* Padding bytes (long double, value-index pairs) are not part of the result. */
    if (t->flags & T_BITWISE) {
        g_digest = hash_bytes(g_digest, got, bytes);
        g_digested++;
    }
    if (ok)
        g_passed++;
}

/* The digest of this group's results (one type, or one size sweep) must be the same
 * on every rank: one MPI_Allgather per group, not per call, which across hosts would
 * cost more than the call checked. */
static void check_digests(const char *group)
{
    uint64_t *all = xmalloc((size_t)g_size * sizeof *all);
    if (MPI_Allgather(&g_digest, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, g_comm) != MPI_SUCCESS) {
        fail("%s: MPI_Allgather of the result digests failed", group);
    } else {
        int other = -1;
        for (int r = 0; r < g_size && other < 0; r++)
            if (all[r] != g_digest)
                other = r;
        if (other >= 0)
            fail("%s: the bits of the results differ from rank %d's (digest of %lld results: %016llx here, "
                 "%016llx there)",
                 group, other, g_digested, (unsigned long long)g_digest, (unsigned long long)all[other]);
        else if (g_digested)
            g_passed++;
    }
    free(all);
    g_digest = HASH_INIT;
    g_digested = 0;
}

static void describe(char *what, size_t n, call_kind kind, const dtype_info *t, int op, size_t count,
                     bool in_place, int round)
{
    snprintf(what, n, "%s %s %s count %zu%s%s", kind_name[kind], op_name[op], t->name, count,
             in_place ? " in place" : "", round ? " (second start)" : "");
}

static bool call_ok(int rc, const char *what, const char *call)
{
    if (rc == MPI_SUCCESS)
        return true;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fail("%s: %s returned %d (%s)", what, call, rc, msg);
    return false;
}

static void run_case(call_kind kind, const dtype_info *t, int op, size_t count, bool in_place, int salt)
{
    if (g_blocking_only && kind != KIND_BLOCKING)
        return;
    char what[200];
    const uint64_t seed = case_seed(0, t, op, count, salt);
    const void *send = in_place ? MPI_IN_PLACE : (const void *)(uintptr_t)g_dsend;
    void *recv = (void *)(uintptr_t)g_drecv;
    MPI_Request req;
    describe(what, sizeof what, kind, t, op, count, in_place, 0);
    if (kind == KIND_BLOCKING) {
        prepare(t, op, count, in_place, seed);
        g_device_buffer_calls++;
        if (call_ok(MPI_Allreduce(send, recv, (int)count, t->dt, op_handle(op), g_comm), what, "MPI_Allreduce"))
            verify(what, t, count, in_place);
    } else if (kind == KIND_NONBLOCKING) {
        prepare(t, op, count, in_place, seed);
        g_device_buffer_calls++;
        if (call_ok(MPI_Iallreduce(send, recv, (int)count, t->dt, op_handle(op), g_comm, &req), what,
                    "MPI_Iallreduce") &&
            call_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), what, "MPI_Wait"))
            verify(what, t, count, in_place);
    } else {
#if HAVE_PERSISTENT
        if (!call_ok(ALLREDUCE_INIT(send, recv, (int)count, t->dt, op_handle(op), g_comm, MPI_INFO_NULL, &req),
                     what, "MPI_Allreduce_init"))
            return;
        for (int round = 0; round < 2; round++) { /* new inputs in the same buffers */
            describe(what, sizeof what, kind, t, op, count, in_place, round);
            prepare(t, op, count, in_place, seed + (uint64_t)round);
            g_device_buffer_calls++;
            if (!call_ok(MPI_Start(&req), what, "MPI_Start") ||
                !call_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), what, "MPI_Wait"))
                break;
            verify(what, t, count, in_place);
        }
        call_ok(MPI_Request_free(&req), what, "MPI_Request_free");
#endif
    }
}

/* ------------------------------------------------------------------ sections */

/* Every op of every type, at 1 element and at an odd count of several KiB. --quick:
 * the representative types (T_REP), the odd count, blocking and one other kind. */
static void section_matrix(void)
{
    for (int i = 0; i < ntypes; i++) {
        const dtype_info *t = &types[i];
        if (g_quick && !(t->flags & T_REP))
            continue;
        const size_t mid = ((g_max_bytes < 65536 ? g_max_bytes : 65536) / 4 / t->size) | 1;
        for (int op = 0; op < NUM_OPS; op++) {
            if (!(t->ops & BIT(op)))
                continue;
            if (g_quick) {
                run_case(KIND_BLOCKING, t, op, mid, op % 2, 1);
                run_case(HAVE_PERSISTENT && op % 2 ? KIND_PERSISTENT : KIND_NONBLOCKING, t, op, mid, op % 3 == 0, 3);
                continue;
            }
            run_case(KIND_BLOCKING, t, op, 1, op % 2, 0);
            run_case(KIND_BLOCKING, t, op, mid, false, 1);
            run_case(KIND_BLOCKING, t, op, mid, true, 2);
            run_case(KIND_NONBLOCKING, t, op, mid, op % 2, 3);
            if (HAVE_PERSISTENT)
                run_case(KIND_PERSISTENT, t, op, mid, op % 2 == 0, 4);
        }
        check_digests(t->name);
    }
}

/* From 1 element to max_bytes: powers of 4 bytes, each with an odd count beside it.
 * --quick: float SUM only. */
static void section_sizes(void)
{
    const struct {
        MPI_Datatype dt;
        int op;
    } sweep[] = { { MPI_FLOAT, OP_SUM }, { MPI_INT, OP_SUM }, { MPI_DOUBLE, OP_MAX }, { MPI_UINT8_T, OP_BXOR } };
    for (size_t s = 0; s < (g_quick ? 1 : sizeof sweep / sizeof sweep[0]); s++) {
        const dtype_info *t = find_type(sweep[s].dt);
        if (!t)
            continue; /* check_types dropped it, and said why */
        const int op = sweep[s].op;
        const size_t most = g_max_bytes / t->size;
        for (size_t b = t->size; b <= g_max_bytes; b *= 4) {
            const size_t counts[2] = { b / t->size, b / t->size + 2 * (b / t->size / 3) + 1 };
            for (int k = 0; k < 2; k++) {
                const size_t c = counts[k] < most ? counts[k] : most;
                if (k == 1 && c == counts[0])
                    continue;
                run_case(KIND_BLOCKING, t, op, c, false, 10);
                run_case(KIND_BLOCKING, t, op, c, true, 11);
                run_case(KIND_NONBLOCKING, t, op, c, k == 1, 12);
                if (HAVE_PERSISTENT)
                    run_case(KIND_PERSISTENT, t, op, c, k == 0, 13);
            }
        }
        run_case(KIND_BLOCKING, t, op, most, false, 14);
        char group[64];
        snprintf(group, sizeof group, "sizes %s %s", op_name[op], t->name);
        check_digests(group);
    }
}

/* ------------------------------------------------------------------ declined calls */

/* What gpurdma declines (a user-defined op; a derived datatype) goes to the previous
 * allreduce, which cannot read GPU memory: the component or interposer runs it on host
 * copies of the buffers' span and copies the result back. g_gapped has a gap (ints 0
 * and 2 of every 3 are data, int 1 is not) that the copy back must leave as it was. */
static MPI_Datatype g_gapped;

static void user_int_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int *a = in;
    int *b = inout;
    const bool gapped = *dt == g_gapped;
    for (int i = 0; i < *len; i++) {
        if (gapped) {
            b[3 * i] += a[3 * i];
            b[3 * i + 2] += a[3 * i + 2];
        } else {
            b[i] += a[i];
        }
    }
}

static void declined_case(call_kind kind, bool gapped, bool in_place, MPI_Op op)
{
    if (g_blocking_only && kind != KIND_BLOCKING)
        return;
    const size_t per = gapped ? 3 : 1; /* ints per element */
    size_t count = g_max_bytes / sizeof(int) / per;
    if (count > 1001)
        count = 1001;
    const size_t ints = count * per, bytes = ints * sizeof(int);
    char what[200];
    snprintf(what, sizeof what, "declined %s (user op on %s) x %zu%s", kind_name[kind],
             gapped ? "a vector type with gaps" : "MPI_INT", count, in_place ? " in place" : "");
    memset(g_scratch, GUARD_FILL, bytes + 2 * GUARD_BYTES);
    to_buffer(g_drecv_base, g_scratch, bytes + 2 * GUARD_BYTES, "cuMemcpyHtoD (guard)");
    int *in = (int *)g_in, *want = (int *)g_expected;
    int fill;
    memset(&fill, GUARD_FILL, sizeof fill);
    for (size_t i = 0; i < ints; i++) {
        const bool gap = gapped && i % 3 == 1;
        in[i] = gap ? -7 : g_world_rank * 1000 + (int)i;
        /* A gap keeps what the receive buffer had: the input in place, the guard fill not. */
        want[i] = gap ? (in_place ? -7 : fill) : 1000 * (g_size * (g_size - 1) / 2) + g_size * (int)i;
    }
    to_buffer(in_place ? g_drecv : g_dsend, g_in, bytes, "cuMemcpyHtoD (input)");
    const void *send = in_place ? MPI_IN_PLACE : (const void *)(uintptr_t)g_dsend;
    void *recv = (void *)(uintptr_t)g_drecv;
    const MPI_Datatype dt = gapped ? g_gapped : MPI_INT;
    MPI_Request req;
    bool ok = false;
    if (kind == KIND_BLOCKING) {
        ok = call_ok(MPI_Allreduce(send, recv, (int)count, dt, op, g_comm), what, "MPI_Allreduce");
    } else if (kind == KIND_NONBLOCKING) {
        ok = call_ok(MPI_Iallreduce(send, recv, (int)count, dt, op, g_comm, &req), what, "MPI_Iallreduce") &&
             call_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), what, "MPI_Wait");
    } else {
#if HAVE_PERSISTENT
        ok = call_ok(ALLREDUCE_INIT(send, recv, (int)count, dt, op, g_comm, MPI_INFO_NULL, &req), what,
                     "MPI_Allreduce_init") &&
             call_ok(MPI_Start(&req), what, "MPI_Start") && call_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), what, "MPI_Wait");
        call_ok(MPI_Request_free(&req), what, "MPI_Request_free");
#else
        return;
#endif
    }
    if (!ok)
        return;
    from_buffer(g_out, g_drecv_base, bytes + 2 * GUARD_BYTES, "cuMemcpyDtoH (result)");
    const int *got = (const int *)(g_out + GUARD_BYTES);
    for (size_t i = 0; i < ints; i++) {
        if (got[i] != want[i]) {
            fail("%s: int %zu expected %d got %d%s", what, i, want[i], got[i],
                 gapped && i % 3 == 1 ? " (a gap of the datatype: the copy back wrote it)" : "");
            return;
        }
    }
    if (guards_and_send_kept(what, bytes, in_place))
        g_passed++;
}

static void section_declined(void)
{
    MPI_Op op;
    MPI_Op_create(user_int_sum, 1, &op);
    MPI_Type_vector(2, 1, 2, MPI_INT, &g_gapped);
    MPI_Type_commit(&g_gapped);
    for (int gapped = 0; gapped < 2; gapped++) {
        declined_case(KIND_BLOCKING, gapped, false, op);
        declined_case(KIND_BLOCKING, gapped, true, op);
        declined_case(KIND_NONBLOCKING, gapped, false, op);
        declined_case(KIND_PERSISTENT, gapped, true, op);
    }
    MPI_Type_free(&g_gapped);
    MPI_Op_free(&op);
}

/* ------------------------------------------------------------------ the device path */

enum { PV_CALLS, PV_NODE, PV_RING, PV_RD, PV_HIER, PV_DEVICE, PV_COUNT };
static const char *const g_pvar_names[PV_COUNT] = {
    "coll_gpurdma_calls",      "coll_gpurdma_node_calls", "coll_gpurdma_ring_calls",
    "coll_gpurdma_rd_calls",   "coll_gpurdma_hier_calls", "coll_gpurdma_device_calls",
};
static pvars g_pvars;

/* How many calls gpurdma did on the device path here, and whether it did any. */
static void check_device_path(bool expect)
{
    unsigned long long v[PV_COUNT];
    for (int k = 0; k < PV_COUNT; k++)
        v[k] = pvars_read(&g_pvars, k);
    const unsigned long long host = v[PV_NODE] + v[PV_RING] + v[PV_RD] + v[PV_HIER];
    printf("[world rank %d] gpurdma: %llu calls, %llu on the device path, %llu on the host path "
           "(staged or host buffers); %lld calls made on %s buffers\n",
           g_world_rank, v[PV_CALLS], v[PV_DEVICE], host, g_device_buffer_calls, g_host_buffers ? "host" : "GPU");
    fflush(stdout);
    if (!expect)
        return;
    if (!g_pvars.found[PV_DEVICE])
        fail("--expect-device: gpurdma's MPI_T counter coll_gpurdma_device_calls is missing (component not loaded?)");
    else if (v[PV_DEVICE] == 0)
        fail("--expect-device: none of the %lld GPU-buffer calls took gpurdma's device path (%llu gpurdma "
             "calls, %llu on the host path)",
             g_device_buffer_calls, v[PV_CALLS], host);
    else
        g_passed++;
}

/* ------------------------------------------------------------------ main */

static void usage(void)
{
    if (g_world_rank == 0)
        fprintf(stderr, "usage: " PROGRAM " [--quick] [--max-bytes N] [--device-per-rank] [--expect-device] "
                        "[--host-ranks a,b] [--blocking-only]\n");
}

int main(int argc, char **argv)
{
    bool device_per_rank = false, expect_device = false, bad = false;
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    /* Errors are results to report (check_types probes ops on MPI_COMM_SELF). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) {
            char *end;
            const unsigned long long v = strtoull(argv[++i], &end, 0);
            if (*end || v < 64 || v > (1ull << 30))
                bad = true;
            g_max_bytes = (size_t)v;
        } else if (strcmp(argv[i], "--quick") == 0) {
            g_quick = true;
        } else if (strcmp(argv[i], "--blocking-only") == 0) {
            g_blocking_only = true;
        } else if (strcmp(argv[i], "--device-per-rank") == 0) {
            device_per_rank = true;
        } else if (strcmp(argv[i], "--expect-device") == 0) {
            expect_device = true;
        } else if (strcmp(argv[i], "--host-ranks") == 0 && i + 1 < argc) {
            /* a comma-separated list of world ranks */
            for (char *item = strtok(argv[++i], ","); item; item = strtok(NULL, ","))
                if (atoi(item) == g_world_rank)
                    g_host_buffers = true;
        } else if (strcmp(argv[i], "--other-vendor-ranks") == 0 && i + 1 < argc) {
            for (char *item = strtok(argv[++i], ","); item; item = strtok(NULL, ","))
                if (atoi(item) == g_world_rank)
                    g_other_recv = true;
        } else {
            bad = true;
        }
    }
    if (bad) {
        usage();
        MPI_T_finalize();
        MPI_Finalize();
        return 2;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
    MPI_Comm_size(g_comm, &g_size);
    MPI_Comm local;
    int local_rank;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);

    /* Every rank needs a device, or all skip together. */
    char why[256] = "";
    int have = gpu_open(device_per_rank, local_rank, why, sizeof why), all_have = 0;
    if (have && g_other_recv && !other_vendor_open(local_rank, why, sizeof why)) {
        fail("--other-vendor-ranks: %s", why);
        g_other_recv = false;
    }
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_have) {
        if (!have)
            printf("SKIP " PROGRAM " [world rank %d]: %s\n", g_world_rank, why);
        if (have)
            cu.primary_ctx_release(cu.device);
        MPI_Comm_free(&g_comm);
        MPI_T_finalize();
        MPI_Finalize();
        return 77;
    }
    init_types();
    g_strict = true; /* gpurdma's results must be the standard's */
    check_types(false);
    const size_t room = g_max_bytes + 2 * GUARD_BYTES;
    g_room = room;
    g_dsend = buffer_alloc(&cu, g_max_bytes, "cuMemAlloc (send)");
    g_drecv_base = buffer_alloc(g_other_recv ? &g_other : &cu, room, "cuMemAlloc (receive)");
    g_drecv = g_drecv_base + GUARD_BYTES;
    g_in = xmalloc(room);
    g_expected = xmalloc(room);
    g_out = xmalloc(room);
    g_scratch = xmalloc(room);
    if (g_world_rank == 0) {
        printf(PROGRAM ": %d ranks, device buffers up to %zu bytes (%s), persistent: %s\n", g_size, g_max_bytes,
               cu.hip ? "HIP" : "CUDA", HAVE_PERSISTENT ? "yes" : "no (this MPI has no persistent allreduce)");
        fflush(stdout);
    }
    if (g_other_recv) {
        printf("[world rank %d] receive buffers of %s, send buffers of %s\n", g_world_rank, g_other.hip ? "HIP" : "CUDA",
               cu.hip ? "HIP" : "CUDA");
        fflush(stdout);
    }

    pvars_watch(&g_pvars, g_pvar_names, PV_COUNT);
    section_matrix();
    section_sizes();
    section_declined();
    check_device_path(expect_device && !g_host_buffers && !g_other_recv);
    pvars_done(&g_pvars);

    long long totals[3];
    check_totals(0, totals);
    MPI_Comm_free(&g_comm);
    MPI_Barrier(MPI_COMM_WORLD); /* every peer has let go of its IPC mappings of these */
    buffer_free(g_dsend);
    buffer_free(g_drecv_base);
    free(g_in);
    free(g_expected);
    free(g_out);
    free(g_scratch);
    MPI_T_finalize();
    const int rc = check_finish(totals);
    cu.primary_ctx_release(cu.device);
    if (g_other_recv)
        g_other.primary_ctx_release(g_other.device);
    return rc;
}
