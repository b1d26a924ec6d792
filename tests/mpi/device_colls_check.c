/*
 * device_colls_check: MPI_Reduce_scatter_block, MPI_Reduce_scatter (uneven counts with a
 * zero), MPI_Allgather, MPI_Bcast and MPI_Reduce (every root), blocking and nonblocking,
 * in place and not, on GPU device buffers under mpirun.
 *
 * The CUDA driver is loaded at run time (gpu_driver.h: on a machine without a GPU, the
 * stand-in tests/gpu/fake_cuda.cpp through LD_LIBRARY_PATH). Inputs: MPI_INT with
 * MPI_SUM (wrapping) and MPI_FLOAT with MPI_MAX, exact in any order, at 1, 7, 1031
 * elements and --max-bytes / 4 + 3 per rank. Each result must equal the reference
 * computed here element for element, the receive buffer beyond the result (in place:
 * the rest of the input; a non-root's reduce buffer: all of it) and the 64 bytes
 * before and after it untouched.
 *
 * First, nonblocking and persistent calls of each collective on a fresh communicator,
 * before any blocking call on it (gpurdma hands them on: the previous module's
 * nonblocking and persistent calls on host copies of the GPU buffers).
 *
 * gpurdma's MPI_T counters must show it served each collective (coll_gpurdma_*_calls);
 * --expect-device: and that it took the device path (coll_gpurdma_device_calls above
 * zero on every rank that passes GPU memory). --host-ranks a,b: these world ranks pass
 * host memory, the others GPU memory (the node stages those calls).
 *
 * Exit status: 0 if every check passed, 1 on any failure, 77 (SKIP line) without a
 * CUDA driver or device on some rank.
 *
 * Usage: device_colls_check [--max-bytes N] [--expect-device] [--host-ranks a,b]
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM "device_colls_check"
#define GUARD_BYTES 64
#define GUARD_FILL 0x5A

#include "check_common.h" /* fail, xmalloc, check_totals, check_finish */
#include "gpu_driver.h" /* cu, gpu_open, gpu_must */
#include "persistent_coll.h"
#include "pvars.h"

static MPI_Comm g_comm;
static int g_size;
static size_t g_max_bytes = 256u << 10;
static bool g_host_buffers;
static devptr g_send, g_recv_base; /* the receive buffer starts GUARD_BYTES in */
static size_t g_room; /* bytes of each allocation */
static unsigned char *g_in, *g_want, *g_got;

typedef enum { COLL_RSB, COLL_RS, COLL_AG, COLL_BCAST, COLL_REDUCE, COLL_N } coll_t;
static const char *const coll_name[COLL_N] = {"MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather",
                                              "MPI_Bcast", "MPI_Reduce"};

/* One element of rank r's input at index i, as MPI_INT or MPI_FLOAT. */
static void element(bool is_float, int r, size_t i, unsigned char *out)
{
    if (is_float) {
        const float f = (float)((r * 37 + (int)(i % 100003) * 11) % 997) - 400.0f;
        memcpy(out, &f, 4);
    } else {
        const uint32_t u = (uint32_t)r * 2654435761u + (uint32_t)i * 40503u; /* wraps as MPI_SUM must */
        memcpy(out, &u, 4);
    }
}

/* The reduction of every rank's element i. */
static void reduced(bool is_float, size_t i, unsigned char *out)
{
    unsigned char e[4];
    element(is_float, 0, i, out);
    for (int r = 1; r < g_size; r++) {
        element(is_float, r, i, e);
        if (is_float) {
            float a, b;
            memcpy(&a, out, 4);
            memcpy(&b, e, 4);
            if (b > a) memcpy(out, &b, 4);
        } else {
            uint32_t a, b;
            memcpy(&a, out, 4);
            memcpy(&b, e, 4);
            a += b;
            memcpy(out, &a, 4);
        }
    }
}

static void to_buffer(devptr dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    if (g_host_buffers) memcpy((void *)(uintptr_t)dst, src, bytes);
    else gpu_must(cu.htod(dst, src, bytes), "cuMemcpyHtoD");
}

static void from_buffer(void *dst, devptr src, size_t bytes)
{
    if (g_host_buffers) memcpy(dst, (const void *)(uintptr_t)src, bytes);
    else gpu_must(cu.dtoh(dst, src, bytes), "cuMemcpyDtoH");
}

static devptr buffer_alloc(size_t bytes)
{
    devptr p = 0;
    if (g_host_buffers) p = (devptr)(uintptr_t)xmalloc(bytes);
    else gpu_must(cu.mem_alloc(&p, bytes), "cuMemAlloc");
    return p;
}

static void buffer_free(devptr p)
{
    if (g_host_buffers) free((void *)(uintptr_t)p);
    else gpu_must(cu.mem_free(p), "cuMemFree");
}

typedef enum { BLOCKING, NONBLOCKING, PERSISTENT } call_kind;

/* One call: inputs set, the call made (blocking, nonblocking, or persistent: made, then
 * started twice with the inputs set again before each start), the receive span checked. */
static void run_case(coll_t coll, call_kind kind, bool in_place, bool is_float, size_t count, int root)
{
    const bool nonblocking = kind != BLOCKING;
    const MPI_Datatype dt = is_float ? MPI_FLOAT : MPI_INT;
    const MPI_Op op = is_float ? MPI_MAX : MPI_SUM;
    const int me = g_world_rank;
    int counts[64];
    size_t total = 0, offset = 0; /* elements: the whole vector, and this rank's part's start */
    for (int r = 0; r < g_size; r++) {
        counts[r] = coll == COLL_RS ? (r == 0 ? 0 : (int)count + r) : (int)count;
        if (r == me) offset = total;
        total += (size_t)counts[r];
    }
    if (coll == COLL_BCAST || coll == COLL_REDUCE) total = count;
    const size_t part = coll == COLL_BCAST || coll == COLL_REDUCE ? count : (size_t)counts[me];
    /* The receive span: what the call may write, plus what must stay as it was. */
    size_t recv_elems = total;
    if ((coll == COLL_RSB || coll == COLL_RS) && !in_place) recv_elems = part;
    const size_t recv_bytes = recv_elems * 4, span = recv_bytes + 2 * GUARD_BYTES;
    memset(g_want, GUARD_FILL, span);
    unsigned char *want = g_want + GUARD_BYTES;
    /* Inputs: the send buffer, or (in place) the receive buffer. */
    size_t send_elems = 0;
    switch (coll) {
        case COLL_RSB:
        case COLL_RS:
        case COLL_REDUCE:
            send_elems = total;
            for (size_t i = 0; i < total; i++) element(is_float, me, i, g_in + 4 * i);
            if (in_place) memcpy(want, g_in, recv_bytes < total * 4 ? recv_bytes : total * 4);
            break;
        case COLL_AG:
            send_elems = count;
            for (size_t i = 0; i < count; i++) element(is_float, me, i, g_in + 4 * i);
            if (in_place) memcpy(want + 4 * (size_t)me * count, g_in, 4 * count);
            break;
        case COLL_BCAST:
            for (size_t i = 0; i < count; i++) element(is_float, root, i, g_in + 4 * i);
            if (me == root) memcpy(want, g_in, 4 * count);
            break;
        default: break;
    }
    to_buffer(g_recv_base, g_want, span); /* guards, and in place the input */
    if (!in_place && send_elems) to_buffer(g_send, g_in, 4 * send_elems);
    const void *sbuf = in_place ? MPI_IN_PLACE : (const void *)(uintptr_t)g_send;
    void *rbuf = (void *)(uintptr_t)(g_recv_base + GUARD_BYTES);

    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Request *rq = nonblocking ? &req : NULL;
    int rc = MPI_SUCCESS;
#if HAVE_PERSISTENT
    if (kind == PERSISTENT) {
        if (coll == COLL_REDUCE && in_place && me != root) {
            to_buffer(g_send, g_in, 4 * total);
            sbuf = (const void *)(uintptr_t)g_send;
        }
        switch (coll) {
            case COLL_RSB:
                rc = REDUCE_SCATTER_BLOCK_INIT(sbuf, rbuf, (int)count, dt, op, g_comm, MPI_INFO_NULL, rq);
                break;
            case COLL_RS: rc = REDUCE_SCATTER_INIT(sbuf, rbuf, counts, dt, op, g_comm, MPI_INFO_NULL, rq); break;
            case COLL_AG:
                rc = ALLGATHER_INIT(sbuf, (int)count, dt, rbuf, (int)count, dt, g_comm, MPI_INFO_NULL, rq);
                break;
            case COLL_BCAST: rc = BCAST_INIT(rbuf, (int)count, dt, root, g_comm, MPI_INFO_NULL, rq); break;
            case COLL_REDUCE: rc = REDUCE_INIT(sbuf, rbuf, (int)count, dt, op, root, g_comm, MPI_INFO_NULL, rq); break;
            default: break;
        }
        for (int start = 0; start < 2 && rc == MPI_SUCCESS; start++) {
            if (start) { /* the inputs again (in place the first start overwrote them) */
                to_buffer(g_recv_base, g_want, span);
                if (send_elems && sbuf != MPI_IN_PLACE)
                    to_buffer(g_send, g_in, 4 * (coll == COLL_REDUCE ? total : send_elems));
            }
            rc = MPI_Start(rq);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(rq, MPI_STATUS_IGNORE);
        }
        if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
        rq = NULL;
    }
#endif
    switch (kind == PERSISTENT ? COLL_N : coll) {
        case COLL_RSB:
            rc = rq ? MPI_Ireduce_scatter_block(sbuf, rbuf, (int)count, dt, op, g_comm, rq)
                    : MPI_Reduce_scatter_block(sbuf, rbuf, (int)count, dt, op, g_comm);
            break;
        case COLL_RS:
            rc = rq ? MPI_Ireduce_scatter(sbuf, rbuf, counts, dt, op, g_comm, rq)
                    : MPI_Reduce_scatter(sbuf, rbuf, counts, dt, op, g_comm);
            break;
        case COLL_AG:
            rc = rq ? MPI_Iallgather(sbuf, (int)count, dt, rbuf, (int)count, dt, g_comm, rq)
                    : MPI_Allgather(sbuf, (int)count, dt, rbuf, (int)count, dt, g_comm);
            break;
        case COLL_BCAST:
            rc =
                rq ? MPI_Ibcast(rbuf, (int)count, dt, root, g_comm, rq) : MPI_Bcast(rbuf, (int)count, dt, root, g_comm);
            break;
        case COLL_REDUCE:
            /* In place only at the root; the other ranks send from their send buffer. */
            if (in_place && me != root) {
                to_buffer(g_send, g_in, 4 * total);
                sbuf = (const void *)(uintptr_t)g_send;
            }
            rc = rq ? MPI_Ireduce(sbuf, rbuf, (int)count, dt, op, root, g_comm, rq)
                    : MPI_Reduce(sbuf, rbuf, (int)count, dt, op, root, g_comm);
            break;
        default: break;
    }
    if (rc == MPI_SUCCESS && rq) rc = MPI_Wait(rq, MPI_STATUS_IGNORE);
    char what[200];
    snprintf(what, sizeof what, "%s%s %s x %zu%s root %d",
             kind == PERSISTENT ? "persistent "
             : nonblocking      ? "nonblocking "
                                : "",
             coll_name[coll], is_float ? "float MAX" : "int SUM", count, in_place ? " in place" : "", root);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fail("%s: error: %s", what, msg);
        return;
    }
    /* The expected result. */
    switch (coll) {
        case COLL_RSB:
        case COLL_RS:
            for (size_t i = 0; i < part; i++) reduced(is_float, offset + i, want + 4 * i);
            break;
        case COLL_AG:
            for (int r = 0; r < g_size; r++)
                for (size_t i = 0; i < count; i++) element(is_float, r, i, want + 4 * ((size_t)r * count + i));
            break;
        case COLL_BCAST: memcpy(want, g_in, 4 * count); break;
        case COLL_REDUCE:
            if (me == root)
                for (size_t i = 0; i < count; i++) reduced(is_float, i, want + 4 * i);
            break;
        default: break;
    }
    from_buffer(g_got, g_recv_base, span);
    for (size_t b = 0; b < span; b++)
        if (g_got[b] != g_want[b]) {
            const long long at = (long long)b - GUARD_BYTES;
            fail("%s: byte %lld of the receive buffer (of %zu): %#x, expected %#x", what, at, recv_bytes, g_got[b],
                 g_want[b]);
            return;
        }
    g_passed++;
}

enum { PV_DEVICE, PV_RS, PV_AG, PV_BCAST, PV_REDUCE, PV_COUNT };
static const char *const g_pvar_names[PV_COUNT] = {"coll_gpurdma_device_calls", "coll_gpurdma_reduce_scatter_calls",
                                                   "coll_gpurdma_allgather_calls", "coll_gpurdma_bcast_calls",
                                                   "coll_gpurdma_reduce_calls"};

int main(int argc, char **argv)
{
    bool expect_device = false, bad = false;
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) {
            g_max_bytes = (size_t)strtoull(argv[++i], NULL, 0);
            bad = bad || g_max_bytes < 64 || g_max_bytes > (64u << 20);
        } else if (strcmp(argv[i], "--expect-device") == 0) {
            expect_device = true;
        } else if (strcmp(argv[i], "--host-ranks") == 0 && i + 1 < argc) {
            for (char *item = strtok(argv[++i], ","); item; item = strtok(NULL, ","))
                if (atoi(item) == g_world_rank) g_host_buffers = true;
        } else {
            bad = true;
        }
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    MPI_Comm_size(g_comm, &g_size);
    if (bad || g_size > 64) {
        if (g_world_rank == 0)
            fprintf(stderr,
                    "usage: " PROGRAM " [--max-bytes N] [--expect-device] [--host-ranks a,b] (at most 64 ranks)\n");
        MPI_Comm_free(&g_comm);
        MPI_T_finalize();
        MPI_Finalize();
        return 2;
    }
    MPI_Comm local;
    int local_rank;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    char why[256] = "";
    int have = gpu_open(false, local_rank, why, sizeof why), all_have = 0;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_have) {
        if (!have) printf("SKIP " PROGRAM " [world rank %d]: %s\n", g_world_rank, why);
        else cu.primary_ctx_release(cu.device);
        MPI_Comm_free(&g_comm);
        MPI_T_finalize();
        MPI_Finalize();
        return 77;
    }
    if (g_world_rank == 0) {
        printf(PROGRAM ": %d ranks, device buffers through %s\n", g_size, cu.hip ? "HIP" : "CUDA");
        fflush(stdout);
    }
    const size_t big = g_max_bytes / 4 + 3;
    /* The largest vector: reduce-scatter's uneven parts over every rank. */
    g_room = 4 * (size_t)g_size * (big + (size_t)g_size) + 2 * GUARD_BYTES;
    g_send = buffer_alloc(g_room);
    g_recv_base = buffer_alloc(g_room);
    g_in = xmalloc(g_room);
    g_want = xmalloc(g_room);
    g_got = xmalloc(g_room);
    pvars p;
    pvars_watch(&p, g_pvar_names, PV_COUNT);

    const size_t sizes[] = {1, 7, 1031, big};
    /* First, nonblocking calls on a communicator of their own before any blocking call on
     * it: gpurdma sets a communicator up in its first blocking call and hands these on,
     * to the previous module's nonblocking calls on host copies of the GPU buffers. */
    const MPI_Comm main_comm = g_comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    for (int k = NONBLOCKING; k <= (HAVE_PERSISTENT ? PERSISTENT : NONBLOCKING); k++)
        for (int ip = 0; ip < 2; ip++)
            for (int fl = 0; fl < 2; fl++) {
                run_case(COLL_RSB, k, ip, fl, sizes[2], 0);
                run_case(COLL_RS, k, ip, fl, sizes[2], 0);
                run_case(COLL_AG, k, ip, fl, sizes[2], 0);
                if (!ip) run_case(COLL_BCAST, k, false, fl, sizes[1], g_size - 1);
                run_case(COLL_REDUCE, k, ip, fl, sizes[1], g_size - 1);
            }
    MPI_Comm_free(&g_comm);
    g_comm = main_comm;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int nb = 0; nb < 2; nb++)
            for (int ip = 0; ip < 2; ip++)
                for (int fl = 0; fl < 2; fl++) {
                    const bool in_place = ip, is_float = fl;
                    const call_kind nonblocking = nb ? NONBLOCKING : BLOCKING;
                    run_case(COLL_RSB, nonblocking, in_place, is_float, sizes[s], 0);
                    run_case(COLL_RS, nonblocking, in_place, is_float, sizes[s], 0);
                    run_case(COLL_AG, nonblocking, in_place, is_float, sizes[s], 0);
                    for (int root = 0; root < g_size; root++) {
                        if (!in_place) /* MPI_Bcast has one buffer */
                            run_case(COLL_BCAST, nonblocking, false, is_float, sizes[s], root);
                        run_case(COLL_REDUCE, nonblocking, in_place, is_float, sizes[s], root);
                    }
                }

    unsigned long long v[PV_COUNT];
    for (int k = 0; k < PV_COUNT; k++) v[k] = pvars_read(&p, k);
    printf(
        "[world rank %d] gpurdma: reduce-scatter %llu, allgather %llu, bcast %llu, reduce %llu calls; %llu on the "
        "device path (%s buffers)\n",
        g_world_rank, v[PV_RS], v[PV_AG], v[PV_BCAST], v[PV_REDUCE], v[PV_DEVICE], g_host_buffers ? "host" : "GPU");
    for (int k = PV_RS; k < PV_COUNT; k++) {
        if (!p.found[k] || v[k] == 0)
            fail("%s: gpurdma served none of these calls (component not loaded, or declined?)", g_pvar_names[k]);
        else g_passed++;
    }
    if (expect_device && !g_host_buffers) {
        if (!p.found[PV_DEVICE] || v[PV_DEVICE] == 0) fail("--expect-device: no call took gpurdma's device path");
        else g_passed++;
    }
    pvars_done(&p);

    long long totals[3];
    check_totals(0, totals);
    MPI_Comm_free(&g_comm);
    MPI_Barrier(MPI_COMM_WORLD); /* every peer has let go of its IPC mappings of these */
    buffer_free(g_send);
    buffer_free(g_recv_base);
    free(g_in);
    free(g_want);
    free(g_got);
    MPI_T_finalize();
    const int rc = check_finish(totals);
    cu.primary_ctx_release(cu.device);
    return rc;
}
