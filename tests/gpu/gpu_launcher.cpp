// Drives the gpurdma core without MPI: N forked processes with the MPI-free bootstrap
// of tests/support/fork_ranks.h, and allreduce checks against a host reference.
//
//   gpu_launcher --mode host   [--np 2,4] [--max-bytes N] [--verbose V]
//   gpu_launcher --mode device [--np 2,4] [--max-bytes N] [--expect-device] [--bench]
//   gpu_launcher --mode probe   (exit 0 if a GPU runtime (CUDA, else HIP) and a GPU are usable, 77 if not)
//   logical nodes (the hierarchical device path on one machine):
//     [--logical-nodes K|a,b,c] [--algorithm auto|hier|...] [--chunk-size N]
//     [--stop-rank R]: instead of the checks, rank R stops in the middle of a large
//     device allreduce (started nonblocking, driven a little, then abandoned); every
//     other rank must get an error within --timeout (default 60) + a margin.
//     [--stop-coll reduce_scatter|allgather|bcast|reduce]: the same in that collective
//     (one good call of it first, so that its device set-up is done).
//     [--stop-may-finish a,b]: ranks whose result does not depend on the stopped rank
//     (a bcast's or reduce's on other nodes) and may complete instead.
//     [--stop-tests N]: how far the stopped rank drives its call: the start, then N tests
//     (default 3); 0 stops it with its buffers posted and nothing more.
//     [--host-ranks a,b]: in device mode these ranks pass host buffers (a node of
//     host-buffer ranks beside nodes of device-buffer ranks, or ranks of one node that
//     mix them: the node agrees per call). [--alternate]: they pass host buffers in
//     every other check only (the rest on the GPU, so its set-up has run: a call whose
//     ranks pass different buffers after ones where they passed the same).
//     [--expect-errors]: calls may fail (at least one must), but a call that returns
//     OK must be right (a copy outlasting the timeout).
//   [--stage-max N]: coll_gpurdma_device_stage_max (one node: up to N bytes stage through
//     host memory; 0: every size on the device path). [--bench-min N]: --bench from N
//     bytes (default 1 MiB).
//   [--kind nonblocking|persistent|mixed]: every check as that kind of call (persistent:
//     not in place, started twice; mixed: the two in turn), polled with
//     gpurdma_request_test.
//   [--hold-check]: instead of the checks, one nonblocking and one persistent call of
//     --max-bytes (checked); with --max-call-ms M, fail if one start or test held the
//     caller longer (a copy made inside the progress step instead of polled shows here,
//     with the stand-in's copies slowed far beyond M; the fills of the device buffers,
//     which land that slowly too, must not hold a nonblocking start either).
//   [--fills-land]: each fill of a device buffer (cuMemcpy from pageable memory, which
//     returns before its bytes land) is waited for before the call, as an application
//     that synchronises before MPI does; default: the call must wait for it itself.
//   [--expect-staged]: fail unless every device-buffer call staged through host memory.
//   [--rail-reduce auto|host|device]: coll_gpurdma_rail_reduce (across nodes: where the
//     rail stage reduces arrivals).
//   [--colls]: instead of the allreduce checks, reduce_scatter (one block per rank, and
//     uneven counts with zeros), allgather, bcast and reduce (every root) through
//     gpurdma_collective, gpurdma_icollective (driven by gpurdma_context_progress and
//     gpurdma_request_test) and gpurdma_collective_init (started twice, new data each
//     time), in place and not, at 1, 7, 1031 and --max-bytes/8+3 elements, against a
//     reference computed here; a non-root reduce's receive buffer must stay untouched,
//     and the communicator's per-collective counters must count every call; then
//     batches of nonblocking calls of every collective in flight together (driven by
//     tests, or completed by a blocking call started after them).
//     --host-ranks/--alternate as above; [--split-buffers]: a device-buffer rank also
//     passes its send buffer on the GPU and receive buffer in host memory, and the reverse.
//     [--interleave]: an allreduce (checked as above) after every check, so that the
//     allreduce's device path and its buffer-kind agreement run between staged calls.
//
// host: host buffers (runs anywhere). device: cuMemAlloc'd buffers on GPU 0 shared by
// all ranks, the CUDA driver loaded at run time like the component does. It checks
// every supported op x type at a few sizes, SUM on float and int32 at every power-of-4
// size up to --max-bytes, in place and not, and with --bench prints bus bandwidth
// beside the device's own copy bandwidth. Exit status 0 only if every check passed.
#include <dlfcn.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "gpu/gpu_runtime.h"
#include "gpurdma/gpurdma.h"
#include "reference.h"
#include "support/fork_ranks.h"

namespace {

using Clock = std::chrono::steady_clock;
using gpurdma::gpu::CUdeviceptr;
using gpurdma::gpu::GpuRuntime;
using namespace gpurdma::launcher;  // fill, same, digest: the host reference

struct Options {
    bool probe = false;
    bool device = false;
    std::vector<int> nps{2, 4};
    size_t max_bytes = 1 << 20;
    int verbose = 0;
    bool expect_device = false;
    bool bench = false;
    double limit_s = 280;
    int fake_hosts = 0;  // >0: ranks split over that many host names (own UTS namespaces; root)
    std::string logical_nodes;  // coll_gpurdma_logical_nodes: "K" or "a,b,c" ("" = by host)
    std::string algorithm = "auto";
    std::string rail_reduce = "auto";
    size_t chunk_size = 0;  // 0: the default
    long long stage_max = -1;  // coll_gpurdma_device_stage_max (-1: the default)
    size_t bench_min = size_t(1) << 20;  // --bench from this size up
    double timeout_s = 60;
    int stop_rank = -1;  // >= 0: the stopped-peer check instead of the others
    gpurdma_coll_t stop_coll = GPURDMA_COLL_ALLREDUCE;  // the collective it stops in
    std::vector<int> may_finish;  // ranks that may complete it
    int stop_tests = 3;  // tests the stopped rank makes after the start
    std::vector<int> host_ranks;  // in device mode, these ranks pass host buffers (mixed nodes)
    bool alternate_host = false;  // ... only in every other check, device buffers in the rest
    bool expect_errors = false;  // calls may fail (never a wrong result with OK); at least one must
    std::string kind = "blocking";  // of every check: blocking, nonblocking, persistent or mixed
    bool hold_check = false;  // only the nonblocking and persistent calls of max_bytes
    double max_call_ms = 0;  // >0: the longest start or test allowed
    bool fills_land = false;  // device buffers' fills waited for before each call
    bool expect_staged = false;  // no device-buffer call may take the device path
    bool colls = false;  // the other collectives' checks instead of the allreduce ones
    bool split_buffers = false;  // --colls: send and receive buffers also on different sides
    bool interleave = false;  // --colls: an allreduce after every check
};

// ---- one rank

struct Rank {
    Options opt;
    int rank = 0, size = 1;
    gpurdma_bootstrap_t boot{};
    // Stopped-peer check: the ranks that are done (call returned, communicator freed),
    // counted in memory all the ranks share, so the stopped rank leaves as soon as they
    // all are, not after a fixed wait.
    std::atomic<int> *stop_returned = nullptr;
    gpurdma_comm_t *comm = nullptr;
    int checks = 0, failures = 0, errors = 0;
    double longest_call_ms = 0;  // the longest iallreduce/init/start/test, nonblocking and persistent
    CUdeviceptr dsend = 0, drecv = 0;
    size_t dbytes = 0;

    void say(const char *fmt, ...) __attribute__((format(printf, 2, 3)))
    {
        va_list ap;
        va_start(ap, fmt);
        std::vfprintf(stdout, fmt, ap);
        va_end(ap);
        std::fflush(stdout);
    }

    bool ensure_device(size_t bytes)
    {
        if (bytes <= dbytes) return true;
        const auto &api = GpuRuntime::instance().api();
        if (dsend) api.mem_free(dsend);
        if (drecv) api.mem_free(drecv);
        dsend = drecv = 0;
        dbytes = 0;
        if (api.mem_alloc(&dsend, bytes) != 0 || api.mem_alloc(&drecv, bytes) != 0) return false;
        dbytes = bytes;
        return true;
    }

    // One allreduce of count elements; checks the result against the host reference.
    enum class Kind { Blocking, Nonblocking, Persistent };

    // One call of the given kind, waited for (a persistent one started twice).
    gpurdma_status_t call(Kind kind, const void *s, void *r, size_t count, gpurdma_dtype_t d, gpurdma_op_t op)
    {
        if (kind == Kind::Blocking) return gpurdma_allreduce(comm, s, r, count, d, op);
        // How long one call into the library held this thread.
        auto timed = [this](auto &&fn) {
            const auto t0 = Clock::now();
            auto rc = fn();
            longest_call_ms =
                std::max(longest_call_ms, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
            return rc;
        };
        struct Result {
            gpurdma_status_t status = GPURDMA_ERR_NO_RESOURCE;
            int calls = 0;
        } result;
        auto done = [](void *arg, gpurdma_status_t st) {
            auto *res = static_cast<Result *>(arg);
            res->status = st;
            ++res->calls;
        };
        gpurdma_request_t *req = nullptr;
        gpurdma_status_t st = timed([&] {
            return kind == Kind::Nonblocking ? gpurdma_iallreduce(comm, s, r, count, d, op, done, &result, &req)
                                             : gpurdma_allreduce_init(comm, s, r, count, d, op, done, &result, &req);
        });
        if (st != GPURDMA_OK) return st;
        for (int round = 0; round < (kind == Kind::Persistent ? 2 : 1) && st == GPURDMA_OK; ++round) {
            if (kind == Kind::Persistent && (st = timed([&] { return gpurdma_request_start(req); })) != GPURDMA_OK)
                break;
            while (!timed([&] { return gpurdma_request_test(req); }))
                sched_yield();  // the call's own timeout bounds it
            st = result.status;
        }
        gpurdma_request_free(req);
        return st;
    }

    void check(gpurdma_op_t op, gpurdma_dtype_t d, size_t count, bool in_place, uint64_t seed)
    {
        check(op, d, count, in_place, seed, default_kind());
    }
    void check(gpurdma_op_t op, gpurdma_dtype_t d, size_t count, bool in_place, uint64_t seed, Kind kind)
    {
        // In place and started twice (persistent), the second call would reduce the
        // first one's result: persistent calls here are never in place.
        in_place = in_place && kind != Kind::Persistent;
        const size_t es = gpurdma_dtype_size(d), bytes = count * es;
        std::vector<char> mine(bytes), want(bytes), tmp(bytes), got(bytes);
        fill(d, rank, seed, mine.data(), count);
        fill(d, 0, seed, want.data(), count);
        for (int r = 1; r < size; ++r) {  // lower rank first, as the component promises
            fill(d, r, seed, tmp.data(), count);
            gpurdma_reduce_local(op, d, want.data(), want.data(), tmp.data(), count);
        }
        gpurdma_status_t st = GPURDMA_ERR_NO_RESOURCE;
        const bool device = uses_device();
        const std::string where = device ? "device" : "host";
        const char *how = in_place ? ", in place" : "";
        std::string problem;
        if (device) {
            const auto &api = GpuRuntime::instance().api();
            if (ensure_device(bytes ? bytes : 1)) {
                api.memcpy_sync(in_place ? drecv : dsend, reinterpret_cast<CUdeviceptr>(mine.data()), bytes);
                // As in put(): left landing unless --fills-land.
                if (opt.fills_land) api.stream_synchronize(reinterpret_cast<gpurdma::gpu::CUstream>(0x1));
                st = call(kind, in_place ? nullptr : reinterpret_cast<void *>(dsend), reinterpret_cast<void *>(drecv),
                          count, d, op);
                api.memcpy_sync(reinterpret_cast<CUdeviceptr>(got.data()), drecv, bytes);
            } else {
                problem = "cuMemAlloc of " + std::to_string(bytes) + " bytes failed";
            }
        } else {
            if (in_place) got = mine;
            st = call(kind, in_place ? nullptr : mine.data(), got.data(), count, d, op);
        }
        if (opt.expect_errors && st != GPURDMA_OK) {
            ++errors;
            problem = "-";  // an expected error: no result to check
        }
        if (problem.empty() && st != GPURDMA_OK)
            problem = std::string(gpurdma_status_name(st)) + ": " + gpurdma_comm_last_error(comm);
        for (size_t i = 0; i < count && problem.empty(); ++i)
            if (!same(d, got.data() + i * es, want.data() + i * es, es) &&
                !close_half_product(op, d, got.data() + i * es, want.data() + i * es))
                problem = "element " + std::to_string(i) + " differs from the host reference";
        // Every rank takes part in the digest exchange, whatever happened above.
        const uint64_t h = digest(d, got.data(), count);
        std::vector<uint64_t> all(static_cast<size_t>(size));
        if (boot.allgather(&h, all.data(), sizeof h, boot.arg) != 0) problem = "bootstrap allgather failed";
        for (int r = 0; r < size && problem.empty() && !opt.expect_errors; ++r)
            if (all[size_t(r)] != h) problem = "result differs from rank " + std::to_string(r) + "'s";
        ++checks;
        if (problem == "-") return;
        if (!problem.empty()) {
            ++failures;
            say("FAIL rank %d: %s %s x %zu (%s%s): %s\n", rank, gpurdma_op_name(op), gpurdma_dtype_name(d), count,
                where.c_str(), how, problem.c_str());
        }
    }

    // Half-precision products of the small-integer inputs outgrow half's 11-bit
    // significand at 5 ranks and more, so each rounding depends on the grouping: the
    // hierarchical order (node first, then the rails) differs from the reference's rank
    // order by a few units in the last place (the host hierarchical schedule exactly
    // as the device path). Accepted within 4 ulps across logical nodes only; identity
    // across ranks is still checked bit for bit.
    bool close_half_product(gpurdma_op_t op, gpurdma_dtype_t d, const char *a, const char *b) const
    {
        if (opt.logical_nodes.empty() || op != GPURDMA_PROD || d != GPURDMA_FLOAT16) return false;
        _Float16 x, y;
        std::memcpy(&x, a, sizeof x);
        std::memcpy(&y, b, sizeof y);
        const double fx = double(x), fy = double(y);
        return std::isfinite(fx) && std::isfinite(fy) && std::fabs(fx - fy) <= 4 * std::ldexp(std::fabs(fy), -10);
    }

    Kind default_kind()
    {
        if (opt.kind == "mixed") return ++mixed_calls % 2 ? Kind::Nonblocking : Kind::Persistent;
        return opt.kind == "nonblocking"  ? Kind::Nonblocking
               : opt.kind == "persistent" ? Kind::Persistent
                                          : Kind::Blocking;
    }
    unsigned mixed_calls = 0;

    bool uses_device() const
    {
        if (!opt.device) return false;
        if (std::find(opt.host_ranks.begin(), opt.host_ranks.end(), rank) == opt.host_ranks.end()) return true;
        return opt.alternate_host && checks % 2 == 0;
    }

    // Every rank here (a bootstrap allgather is a barrier).
    void barrier()
    {
        std::vector<char> all(static_cast<size_t>(size));
        const char mine = 0;
        boot.allgather(&mine, all.data(), 1, boot.arg);
    }

    double time_allreduce(size_t bytes, int iters)
    {
        const size_t count = bytes / 4;
        void *s, *r;
        std::vector<char> hs, hr;
        if (opt.device) {
            ensure_device(bytes);
            s = reinterpret_cast<void *>(dsend);
            r = reinterpret_cast<void *>(drecv);
        } else {
            hs.assign(bytes, 0);
            hr.assign(bytes, 0);
            s = hs.data();
            r = hr.data();
        }
        gpurdma_allreduce(comm, s, r, count, GPURDMA_FLOAT, GPURDMA_SUM);  // warm-up
        barrier();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) gpurdma_allreduce(comm, s, r, count, GPURDMA_FLOAT, GPURDMA_SUM);
        barrier();
        return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    }

    // Copy bandwidths beside which the allreduce's bus bandwidth is read: memcpy for host
    // buffers; for device buffers cuMemcpyDtoD (the node stages' copy engine) and, where
    // page-locked memory is had, host-to-device and device-to-host (the staged path's
    // copies between the GPU and its rail). 0 where not measured.
    struct CopyBandwidth {
        double main = 0, htod = 0, dtoh = 0;
    };

    CopyBandwidth copy_bandwidth(size_t bytes)
    {
        CopyBandwidth bw;
        if (!opt.device) {
            std::vector<char> a(bytes, 1), b(bytes);
            const auto t0 = Clock::now();
            for (int i = 0; i < 5; ++i) std::memcpy(b.data(), a.data(), bytes);
            bw.main = 5.0 * bytes / std::chrono::duration<double>(Clock::now() - t0).count();
            return bw;
        }
        const auto &api = GpuRuntime::instance().api();
        ensure_device(bytes);
        gpurdma::gpu::CUstream st = nullptr;
        api.stream_create(&st, gpurdma::gpu::kStreamNonBlocking);
        auto rate = [&](CUdeviceptr dst, CUdeviceptr src, bool dtod) {
            auto copy = [&] {
                dtod ? api.memcpy_dtod_async(dst, src, bytes, st) : api.memcpy_async(dst, src, bytes, st);
            };
            copy();  // warm-up
            api.stream_synchronize(st);
            const auto t0 = Clock::now();
            for (int i = 0; i < 10; ++i) copy();
            api.stream_synchronize(st);
            return 10.0 * bytes / std::chrono::duration<double>(Clock::now() - t0).count();
        };
        bw.main = rate(drecv, dsend, true);
        void *pinned = nullptr;
        if (api.mem_host_alloc && api.memcpy_async && api.mem_host_alloc(&pinned, bytes, 0) == 0) {
            const auto host = reinterpret_cast<CUdeviceptr>(pinned);
            bw.htod = rate(drecv, host, false);
            bw.dtoh = rate(host, dsend, false);
            api.mem_free_host(pinned);
        }
        api.stream_destroy(st);
        return bw;
    }

    // ---- --colls: reduce_scatter, allgather, bcast and reduce (gpurdma_collective and
    // its nonblocking and persistent forms) against a reference computed here.

    gpurdma_context_t *ctx_ = nullptr;
    uint64_t want_calls[GPURDMA_COLL_COUNT] = {};  // calls of each collective that completed OK

    // One buffer of this rank's call: in host memory or (cuMemAlloc'd) on the GPU.
    struct Buffer {
        bool device = false;
        size_t bytes = 0;
        std::vector<char> host;
        CUdeviceptr dptr = 0;
        void *ptr() { return device ? reinterpret_cast<void *>(dptr) : host.data(); }
    };
    bool make(Buffer *b, size_t bytes, bool device)
    {
        b->device = device;
        b->bytes = bytes;
        if (!device) {
            b->host.assign(std::max<size_t>(bytes, 1), 0);
            return true;
        }
        return GpuRuntime::instance().api().mem_alloc(&b->dptr, std::max<size_t>(bytes, 1)) == 0;
    }
    void release(Buffer *b)
    {
        if (b->device && b->dptr) GpuRuntime::instance().api().mem_free(b->dptr);
        b->dptr = 0;
    }
    void put(Buffer *b, const std::vector<char> &data)
    {
        if (!b->device) std::memcpy(b->host.data(), data.data(), data.size());
        else if (!data.empty()) {
            // From pageable memory cuMemcpy returns before the bytes land: gpurdma waits for
            // them as the call begins (gpu/default_streams.h), which is what the checks test
            // (--fills-land: they land here first, as after an application's own wait).
            const auto &api = GpuRuntime::instance().api();
            api.memcpy_sync(b->dptr, reinterpret_cast<CUdeviceptr>(data.data()), data.size());
            if (opt.fills_land)
                api.stream_synchronize(reinterpret_cast<gpurdma::gpu::CUstream>(0x1));  // CU_STREAM_LEGACY
        }
    }
    std::vector<char> get(Buffer *b)
    {
        std::vector<char> out(b->bytes);
        if (!b->device) std::memcpy(out.data(), b->host.data(), b->bytes);
        else if (b->bytes)
            GpuRuntime::instance().api().memcpy_sync(reinterpret_cast<CUdeviceptr>(out.data()), b->dptr, b->bytes);
        return out;
    }

    // Where this rank's buffers are in this check: 0 both on the GPU (device mode),
    // 1 the send buffer on the GPU and the receive buffer in host memory, 2 the reverse;
    // --split-buffers cycles through them, --host-ranks (uses_device) puts both on the host.
    int placement() const
    {
        if (!uses_device()) return -1;
        return opt.split_buffers ? checks % 3 : 0;
    }

    // One collective check: the inputs of round k (a persistent call's second start
    // gets new data) set by prepare, the result checked by verify.
    struct CollCase {
        gpurdma_coll_args_t args{};
        std::vector<size_t> counts;
        bool in_place = false;
        size_t send_bytes = 0, recv_bytes = 0;
        std::string what;
    };

    // The inputs of round `seed` for rank r: send data (or, in place, the receive
    // buffer's starting content) and the expected receive buffer afterwards.
    void coll_data(const CollCase &c, int r, uint64_t seed, std::vector<char> *send, std::vector<char> *recv,
                   std::vector<char> *want, size_t *checked)
    {
        const gpurdma_dtype_t d = c.args.dtype;
        const size_t es = gpurdma_dtype_size(d);
        const int sentinel = 0x5a;
        send->assign(c.send_bytes, 0);
        recv->assign(c.recv_bytes, char(sentinel));
        *want = *recv;
        *checked = c.recv_bytes;
        switch (c.args.coll) {
            case GPURDMA_COLL_REDUCE_SCATTER: {
                size_t total = 0, offset = 0;
                for (int q = 0; q < size; ++q) {
                    if (q == r) offset = total;
                    total += c.counts[size_t(q)];
                }
                std::vector<char> sum(total * es), tmp(total * es);
                fill(d, 0, seed, sum.data(), total);
                for (int q = 1; q < size; ++q) {
                    fill(d, q, seed, tmp.data(), total);
                    gpurdma_reduce_local(c.args.op, d, sum.data(), sum.data(), tmp.data(), total);
                }
                std::vector<char> mine(total * es);
                fill(d, r, seed, mine.data(), total);
                if (c.in_place) *recv = mine;
                else *send = mine;
                *want = *recv;
                const size_t n = c.counts[size_t(r)] * es;
                std::memcpy(want->data(), sum.data() + offset * es, n);
                *checked = n;  // in place, the rest of the buffer is the call's
                break;
            }
            case GPURDMA_COLL_ALLGATHER: {
                const size_t n = c.args.count * es;
                for (int q = 0; q < size; ++q) fill(d, q, seed, want->data() + size_t(q) * n, c.args.count);
                if (c.in_place) std::memcpy(recv->data() + size_t(r) * n, want->data() + size_t(r) * n, n);
                else std::memcpy(send->data(), want->data() + size_t(r) * n, n);
                break;
            }
            case GPURDMA_COLL_BCAST: {
                fill(d, c.args.root, seed, want->data(), c.args.count);
                if (r == c.args.root) *recv = *want;
                if (!c.in_place) fill(d, r + 100, seed, send->data(), c.send_bytes / es);  // ignored
                break;
            }
            case GPURDMA_COLL_REDUCE: {
                std::vector<char> mine(c.args.count * es);
                fill(d, r, seed, mine.data(), c.args.count);
                if (c.in_place && r == c.args.root) *recv = mine;
                else *send = mine;
                if (r == c.args.root) {
                    std::vector<char> tmp(mine.size());
                    fill(d, 0, seed, want->data(), c.args.count);
                    for (int q = 1; q < size; ++q) {
                        fill(d, q, seed, tmp.data(), c.args.count);
                        gpurdma_reduce_local(c.args.op, d, want->data(), want->data(), tmp.data(), c.args.count);
                    }
                }  // elsewhere the receive buffer must stay as it was
                break;
            }
            default: break;
        }
    }

    enum class CollKind { Blocking, Nonblocking, Persistent };

    // Drives a started request with gpurdma_context_progress and gpurdma_request_test.
    static void on_done(void *arg, gpurdma_status_t st)
    {
        auto *res = static_cast<std::pair<gpurdma_status_t, int> *>(arg);
        res->first = st;
        ++res->second;
    }

    // This rank's buffer sizes for the call.
    void size_buffers(CollCase *cp)
    {
        CollCase &c = *cp;
        const gpurdma_dtype_t d = c.args.dtype;
        const size_t es = gpurdma_dtype_size(d);
        const gpurdma_coll_t coll = c.args.coll;
        size_t total = 0;
        for (size_t n : c.counts) total += n;
        const bool root = rank == c.args.root;
        switch (coll) {
            case GPURDMA_COLL_REDUCE_SCATTER:
                c.send_bytes = c.in_place ? 0 : total * es;
                c.recv_bytes = (c.in_place ? total : c.counts[size_t(rank)]) * es;
                break;
            case GPURDMA_COLL_ALLGATHER:
                c.send_bytes = c.in_place ? 0 : c.args.count * es;
                c.recv_bytes = c.args.count * es * size_t(size);
                break;
            case GPURDMA_COLL_BCAST:
                c.send_bytes = c.in_place ? 0 : c.args.count * es;
                c.recv_bytes = c.args.count * es;
                break;
            default:  // reduce: in place, the non-roots pass no receive buffer (NULL); not in place, one
                // that must stay untouched
                c.send_bytes = c.in_place && root ? 0 : c.args.count * es;
                c.recv_bytes = c.in_place && !root ? 0 : c.args.count * es;
                break;
        }
    }

    void coll_check(CollCase c, CollKind kind, uint64_t seed)
    {
        const gpurdma_dtype_t d = c.args.dtype;
        const size_t es = gpurdma_dtype_size(d);
        const gpurdma_coll_t coll = c.args.coll;
        const bool root = rank == c.args.root;
        size_buffers(&c);
        // The counts the call gets: a copy, scribbled over once the call has started (the
        // call copies them); the reference uses c.counts.
        std::vector<size_t> api_counts = c.counts;
        if (coll == GPURDMA_COLL_REDUCE_SCATTER && !c.counts.empty() && c.args.counts)
            c.args.counts = api_counts.data();
        auto scribble = [&] { std::fill(api_counts.begin(), api_counts.end(), size_t(1) << 40); };
        const int where = placement();
        Buffer sb, rb;
        std::string problem;
        if (!make(&sb, c.send_bytes, where == 0 || where == 1) || !make(&rb, c.recv_bytes, where == 0 || where == 2))
            problem = "cuMemAlloc failed";
        c.args.sendbuf = c.send_bytes || (coll == GPURDMA_COLL_BCAST && !c.in_place) ? sb.ptr() : nullptr;
        c.args.recvbuf = c.recv_bytes ? rb.ptr() : nullptr;
        const char *kinds[] = {"blocking", "nonblocking", "persistent"};
        const bool rooted = coll == GPURDMA_COLL_BCAST || coll == GPURDMA_COLL_REDUCE;
        const bool reduces = coll == GPURDMA_COLL_REDUCE_SCATTER || coll == GPURDMA_COLL_REDUCE;
        char label[256];
        std::snprintf(label, sizeof label, "%s %s %s x %zu%s%s%s%s%s, send %s, recv %s", kinds[int(kind)],
                      gpurdma_coll_name(coll), gpurdma_dtype_name(d), c.args.count, c.what.c_str(),
                      c.in_place ? " in place" : "", rooted ? (" root " + std::to_string(c.args.root)).c_str() : "",
                      reduces ? " " : "", reduces ? gpurdma_op_name(c.args.op) : "",
                      c.args.sendbuf ? (sb.device ? "GPU" : "host") : "none",
                      c.args.recvbuf ? (rb.device ? "GPU" : "host") : "none");
        std::pair<gpurdma_status_t, int> result{GPURDMA_ERR_NO_RESOURCE, 0};
        gpurdma_request_t *req = nullptr;
        const int rounds = kind == CollKind::Persistent ? 2 : 1;
        if (problem.empty() && kind == CollKind::Persistent) {
            const gpurdma_status_t st = gpurdma_collective_init(comm, &c.args, on_done, &result, &req);
            scribble();
            if (st != GPURDMA_OK)
                problem = std::string("init: ") + gpurdma_status_name(st) + ": " + gpurdma_comm_last_error(comm);
        }
        // Every round runs on every rank unless a call itself failed: a rank that stopped
        // after a wrong result would leave its peers' next round waiting for it.
        bool call_failed = !problem.empty();
        for (int round = 0; round < rounds && !call_failed; ++round) {
            std::vector<char> send, recv, want;
            size_t checked = 0;
            coll_data(c, rank, seed + uint64_t(round) * 7777, &send, &recv, &want, &checked);
            put(&sb, send);
            put(&rb, recv);
            gpurdma_status_t st = GPURDMA_OK;
            if (kind == CollKind::Blocking) {
                st = gpurdma_collective(comm, &c.args);
            } else {
                const int before = result.second;
                st = kind == CollKind::Nonblocking ? gpurdma_icollective(comm, &c.args, on_done, &result, &req)
                                                   : gpurdma_request_start(req);
                scribble();
                if (st == GPURDMA_OK) {
                    for (unsigned spin = 0;; ++spin) {
                        if (spin % 2) gpurdma_context_progress(ctx_);
                        else if (gpurdma_request_test(req)) break;
                        sched_yield();
                    }
                    st = result.first;
                    if (result.second != before + 1)
                        problem = "completion callback ran " + std::to_string(result.second - before) + " times";
                }
            }
            if (st != GPURDMA_OK) {
                if (problem.empty())
                    problem = std::string(gpurdma_status_name(st)) + ": " + gpurdma_comm_last_error(comm);
                call_failed = true;
                break;
            }
            ++want_calls[coll];
            const std::vector<char> got = get(&rb);
            for (size_t i = 0; i < c.recv_bytes && problem.empty(); i += es) {
                const bool result_part = i < checked;
                if (result_part ? !same(d, got.data() + i, want.data() + i, es)
                                : std::memcmp(got.data() + i, want.data() + i, std::min(es, c.recv_bytes - i)) != 0)
                    problem = (result_part ? "element " : "untouched element ") + std::to_string(i / es) +
                              (result_part ? " differs from the reference" : " was written") + " (round " +
                              std::to_string(round) + ")";
            }
            if (coll == GPURDMA_COLL_REDUCE && !root && problem.empty() && got != recv)
                problem = "the non-root receive buffer was written";
        }
        if (req) gpurdma_request_free(req);
        release(&sb);
        release(&rb);
        ++checks;
        if (!problem.empty()) {
            ++failures;
            say("FAIL rank %d: %s: %s\n", rank, label, problem.c_str());
        } else if (opt.verbose >= 1 && rank == 0) {
            say("  ok: %s\n", label);
        }
        // Every rank ends this check before any begins the next (a failed one leaves no call behind).
        barrier();
        if (opt.interleave) {  // an allreduce between them (on the device path where it takes it)
            check(GPURDMA_SUM, GPURDMA_FLOAT, c.args.count, false, seed, Kind::Blocking);
            ++allreduces;
        }
    }
    uint64_t allreduces = 0;  // --interleave: the allreduces made between the checks

    // Nonblocking calls of every collective in flight together (the communicator runs
    // them one after the other, each staging in and out through the same host memory),
    // driven by gpurdma_request_test on the last one and gpurdma_context_progress.
    void coll_batch(size_t count, uint64_t seed, bool blocking_last)
    {
        const gpurdma_coll_t colls[] = {GPURDMA_COLL_BCAST,  GPURDMA_COLL_REDUCE_SCATTER, GPURDMA_COLL_ALLGATHER,
                                        GPURDMA_COLL_REDUCE, GPURDMA_COLL_REDUCE_SCATTER, GPURDMA_COLL_BCAST};
        const size_t n = sizeof colls / sizeof colls[0];
        std::vector<CollCase> cases(n);
        std::vector<Buffer> sbs(n), rbs(n);
        std::vector<std::vector<char>> recvs(n), wants(n);
        std::vector<size_t> checked(n);
        std::vector<std::pair<gpurdma_status_t, int>> results(n, {GPURDMA_ERR_NO_RESOURCE, 0});
        std::vector<gpurdma_request_t *> reqs(n, nullptr);
        std::string problem;
        const int where = placement();
        for (size_t i = 0; i < n; ++i) {
            CollCase &c = cases[i];
            c.args.coll = colls[i];
            c.args.dtype = i % 2 ? GPURDMA_INT32 : GPURDMA_FLOAT;
            c.args.op = GPURDMA_SUM;
            c.args.count = count + i;
            c.args.root = int(i) % size;
            c.in_place = i % 3 == 1;
            if (c.args.coll == GPURDMA_COLL_REDUCE_SCATTER) {
                for (int r = 0; r < size; ++r) c.counts.push_back(r == 0 ? 0 : c.args.count + size_t(r));
                c.args.counts = c.counts.data();
            }
            size_buffers(&c);
            if (!make(&sbs[i], c.send_bytes, where == 0 || where == 1) ||
                !make(&rbs[i], c.recv_bytes, where == 0 || where == 2))
                problem = "cuMemAlloc failed";
            c.args.sendbuf = c.send_bytes ? sbs[i].ptr() : nullptr;
            c.args.recvbuf = c.recv_bytes ? rbs[i].ptr() : nullptr;
            std::vector<char> send;
            coll_data(c, rank, seed + i, &send, &recvs[i], &wants[i], &checked[i]);
            put(&sbs[i], send);
            put(&rbs[i], recvs[i]);
        }
        std::vector<char> started(n, 0);
        for (size_t i = 0; i < n && problem.empty(); ++i) {
            // blocking_last: the last call blocking, which first completes the ones in flight.
            const bool blocking = blocking_last && i == n - 1;
            const gpurdma_status_t st = blocking
                                            ? gpurdma_collective(comm, &cases[i].args)
                                            : gpurdma_icollective(comm, &cases[i].args, on_done, &results[i], &reqs[i]);
            if (blocking) results[i] = {st, 1};
            if (st != GPURDMA_OK)
                problem = std::string("start: ") + gpurdma_status_name(st) + ": " + gpurdma_comm_last_error(comm);
            else started[i] = 1;
        }
        if (problem.empty() && !blocking_last) {
            for (unsigned spin = 0;; ++spin) {
                if (spin % 2) gpurdma_context_progress(ctx_);
                else if (gpurdma_request_test(reqs[n - 1])) break;
                sched_yield();
            }
        }
        for (size_t i = 0; i < n; ++i) {
            if (started[i] && problem.empty()) {
                if (results[i].second != 1)
                    problem = std::string(gpurdma_coll_name(colls[i])) + ": completion callback ran " +
                              std::to_string(results[i].second) + " times (the last call has completed)";
                else if (results[i].first != GPURDMA_OK)
                    problem = std::string(gpurdma_coll_name(colls[i])) + ": " + gpurdma_status_name(results[i].first) +
                              ": " + gpurdma_comm_last_error(comm);
                else ++want_calls[colls[i]];
            }
            if (reqs[i]) gpurdma_request_free(reqs[i]);
            const std::vector<char> got = get(&rbs[i]);
            const size_t es = gpurdma_dtype_size(cases[i].args.dtype);
            for (size_t b = 0; b < got.size() && problem.empty(); b += es)
                if (b < checked[i] ? !same(cases[i].args.dtype, got.data() + b, wants[i].data() + b, es)
                                   : std::memcmp(got.data() + b, wants[i].data() + b, es) != 0)
                    problem = std::string(gpurdma_coll_name(colls[i])) + ": element " + std::to_string(b / es) +
                              " differs from the reference";
            release(&sbs[i]);
            release(&rbs[i]);
        }
        ++checks;
        if (!problem.empty()) {
            ++failures;
            say("FAIL rank %d: %zu calls in flight together (%s), %zu elements: %s\n", rank, n,
                blocking_last ? "the last one blocking" : "nonblocking", count, problem.c_str());
        }
        barrier();
    }

    int coll_checks()
    {
        uint64_t seed = 1000;
        const CollKind kinds[] = {CollKind::Blocking, CollKind::Nonblocking, CollKind::Persistent};
        struct Type {
            gpurdma_dtype_t d;
            gpurdma_op_t op;
        };
        const Type types[] = {
            {GPURDMA_INT32, GPURDMA_SUM}, {GPURDMA_FLOAT, GPURDMA_SUM}, {GPURDMA_INT64, GPURDMA_BXOR}};
        const size_t counts[] = {1, 7, 1031, opt.max_bytes / 8 + 3};
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ++ci) {
            const size_t count = counts[ci];
            const Type t = types[ci % 3];
            for (int k = 0; k < 3; ++k)
                for (bool in_place : {false, true}) {
                    CollCase c;
                    c.args.dtype = t.d;
                    c.args.op = t.op;
                    c.args.count = count;
                    c.in_place = in_place;
                    // reduce_scatter, one block per rank
                    c.args.coll = GPURDMA_COLL_REDUCE_SCATTER;
                    c.counts.assign(size_t(size), count);
                    c.what = " (block)";
                    coll_check(c, kinds[k], ++seed);
                    // ... uneven counts, zeros among them (rank 1 and every third rank get nothing)
                    for (int r = 0; r < size; ++r)
                        c.counts[size_t(r)] = r == 1 || r % 3 == 2 ? 0 : count + size_t(r) * 3 + 1;
                    c.args.counts = c.counts.data();
                    c.what = " (uneven)";
                    coll_check(c, kinds[k], ++seed);
                    c.args.counts = nullptr;
                    c.counts.clear();
                    c.what.clear();
                    c.args.coll = GPURDMA_COLL_ALLGATHER;
                    coll_check(c, kinds[k], ++seed);
                    for (int root = 0; root < size; ++root) {
                        c.args.root = root;
                        c.args.coll = GPURDMA_COLL_BCAST;
                        coll_check(c, kinds[k], ++seed);
                        c.args.coll = GPURDMA_COLL_REDUCE;
                        coll_check(c, kinds[k], ++seed);
                    }
                }
        }
        for (size_t count : {size_t(3), size_t(1031), opt.max_bytes / 8 + 3})
            for (bool blocking_last : {false, true}) coll_batch(count, ++seed, blocking_last);
        gpurdma_comm_stats_t stats;
        gpurdma_comm_get_stats(comm, &stats);
        const uint64_t got[GPURDMA_COLL_COUNT] = {stats.calls, stats.reduce_scatter_calls, stats.allgather_calls,
                                                  stats.bcast_calls, stats.reduce_calls};
        for (int k = GPURDMA_COLL_REDUCE_SCATTER; k < GPURDMA_COLL_COUNT; ++k)
            if (got[k] != want_calls[k]) {
                ++failures;
                say("FAIL rank %d: the communicator counted %llu %s calls, %llu completed\n", rank,
                    static_cast<unsigned long long>(got[k]), gpurdma_coll_name(gpurdma_coll_t(k)),
                    static_cast<unsigned long long>(want_calls[k]));
            }
        if (stats.calls != allreduces) {
            ++failures;
            say("FAIL rank %d: %llu allreduce calls counted, %llu made\n", rank,
                static_cast<unsigned long long>(stats.calls), static_cast<unsigned long long>(allreduces));
        }
        // Without the interleaved allreduces, every call on the device path is one of these.
        if (!opt.interleave && uses_device() &&
            ((opt.expect_device && stats.device_calls == 0) || (opt.expect_staged && stats.device_calls != 0))) {
            ++failures;
            say("FAIL rank %d: %llu calls took the device path, expected %s\n", rank,
                static_cast<unsigned long long>(stats.device_calls), opt.expect_device ? "some" : "none");
        }
        say("rank %d: %d collective checks, %d failures; completed reduce_scatter %llu, allgather %llu, bcast %llu, "
            "reduce %llu; allreduce %llu; %llu calls on the device path\n",
            rank, checks, failures, static_cast<unsigned long long>(stats.reduce_scatter_calls),
            static_cast<unsigned long long>(stats.allgather_calls), static_cast<unsigned long long>(stats.bcast_calls),
            static_cast<unsigned long long>(stats.reduce_calls), static_cast<unsigned long long>(stats.calls),
            static_cast<unsigned long long>(stats.device_calls));
        return failures ? 1 : 0;
    }

    int run()
    {
        gpurdma::gpu::CUcontext cu_ctx = nullptr;
        gpurdma::gpu::CUdevice dev = 0;
        if (opt.device) {
            const auto &drv = GpuRuntime::instance();
            if (!drv.available()) {
                say("FAIL rank %d: %s\n", rank, drv.why_unavailable().c_str());
                return 1;
            }
            const auto &api = drv.api();
            if (api.device_get(&dev, 0) != 0 || api.primary_ctx_retain(&cu_ctx, dev) != 0 ||
                api.ctx_set_current(cu_ctx) != 0) {
                say("FAIL rank %d: cannot make GPU 0's primary context current\n", rank);
                return 1;
            }
        }
        gpurdma_config_t cfg;
        gpurdma_config_default(&cfg);
        cfg.verbose = rank == 0 || opt.verbose >= 2 ? opt.verbose : 0;
        cfg.timeout_s = opt.timeout_s;
        cfg.dump_dir = "";  // timeouts here are the tests' own: no dump files in the build tree
        cfg.algorithm = opt.algorithm.c_str();
        cfg.rail_reduce = opt.rail_reduce.c_str();
        if (opt.chunk_size) cfg.chunk_size = opt.chunk_size;
        if (opt.stage_max >= 0) cfg.device_stage_max = size_t(opt.stage_max);
        if (!opt.logical_nodes.empty()) {  // all ranks on this host, in rank order
            cfg.logical_nodes = opt.logical_nodes.c_str();
            cfg.local_rank = rank;
            cfg.local_processes = size;
        }
        gpurdma_context_t *ctx = nullptr;
        gpurdma_comm_params_t params{};
        params.rank = rank;
        params.size = size;
        params.bootstrap = boot;
        params.name = "launcher";
        if (gpurdma_context_create(&cfg, &ctx) != GPURDMA_OK ||
            gpurdma_comm_create(ctx, &params, &comm) != GPURDMA_OK) {
            say("FAIL rank %d: cannot create the gpurdma context/communicator\n", rank);
            return 1;
        }
        ctx_ = ctx;
        if (opt.colls) return finish(coll_checks(), ctx, dev);
        if (opt.stop_rank >= 0) {
            const int rc = finish(stop_check(), ctx, dev);
            if (stop_returned) stop_returned->fetch_add(1);
            return rc;
        }
        if (opt.hold_check) {
            check(GPURDMA_SUM, GPURDMA_FLOAT, 1, false, 1, Kind::Blocking);  // the set-ups, not timed
            check(GPURDMA_SUM, GPURDMA_FLOAT, std::max<size_t>(opt.max_bytes / 4, 1), false, 3, Kind::Nonblocking);
            check(GPURDMA_SUM, GPURDMA_INT32, std::max<size_t>(opt.max_bytes / 4, 1), false, 5, Kind::Persistent);
            return finish(summary(), ctx, dev);
        }
        // Nonblocking and persistent calls need the communicator's set-up, which only a
        // blocking call runs: before it they are handed on (the caller's previous module).
        if (default_kind() != Kind::Blocking) {
            handed_on_before_set_up();
            check(GPURDMA_SUM, GPURDMA_FLOAT, 1, false, 1, Kind::Blocking);
        }
        mixed_calls = 0;
        // Every supported op x type at a few sizes (including the long double family,
        // which stages through host memory in device mode).
        uint64_t seed = 1;
        for (size_t count : {size_t(1), size_t(7), size_t(1031), size_t(65536 + 5)}) {
            for (int o = 0; o < GPURDMA_OP_COUNT; ++o)
                for (int d = 0; d < GPURDMA_DTYPE_COUNT; ++d)
                    if (gpurdma_op_supported(gpurdma_op_t(o), gpurdma_dtype_t(d)))
                        check(gpurdma_op_t(o), gpurdma_dtype_t(d), count, (o + d + count) % 2 == 0, ++seed);
        }
        // SUM on float and int32 at every power-of-4 size, 4 B up.
        for (size_t bytes = 4; bytes <= opt.max_bytes; bytes *= 4) {
            check(GPURDMA_SUM, GPURDMA_FLOAT, bytes / 4, false, ++seed);
            check(GPURDMA_SUM, GPURDMA_INT32, bytes / 4, true, ++seed);
        }
        if (opt.bench) {
            const CopyBandwidth bw = copy_bandwidth(std::min<size_t>(opt.max_bytes, 256u << 20));
            const double copy = bw.main;
            if (rank == 0 && !opt.device)
                say("  np %d, host buffers: memcpy copy bandwidth %.1f GB/s (one process)\n", size, copy / 1e9);
            if (rank == 0 && opt.device)
                say("  np %d, device buffers: cuMemcpyDtoD copy bandwidth %.1f GB/s; page-locked host to device "
                    "%.1f GB/s, device to host %.1f GB/s (one process; 0: not measured)\n",
                    size, copy / 1e9, bw.htod / 1e9, bw.dtoh / 1e9);
            for (size_t bytes = opt.bench_min; bytes <= opt.max_bytes; bytes *= 4) {
                const int iters = int(std::max<size_t>(3, std::min<size_t>(200, (size_t(2) << 30) / bytes)));
                const double t = time_allreduce(bytes, iters);
                const double busbw = double(bytes) * 2 * (size - 1) / size / t;
                if (rank == 0)
                    say("  np %d  %10zu B  %9.1f us  busbw %7.2f GB/s  (%.0f%% of copy)\n", size, bytes, t * 1e6,
                        busbw / 1e9, 100 * busbw / copy);
            }
        }
        // Unequal slices and many chunks: odd counts around multiples of the chunk.
        if (!opt.logical_nodes.empty()) {
            const size_t chunk = opt.chunk_size ? opt.chunk_size : cfg.chunk_size;
            for (size_t count : {chunk / 4 * 3 + 1, chunk / 4 * 7 + 3, chunk / 2 * 5 + 11})
                for (gpurdma_op_t op : {GPURDMA_SUM, GPURDMA_MAX, GPURDMA_BXOR}) {
                    check(op, op == GPURDMA_BXOR ? GPURDMA_INT32 : GPURDMA_FLOAT, count, false, ++seed);
                    check(op, op == GPURDMA_BXOR ? GPURDMA_INT64 : GPURDMA_DOUBLE, count, true, ++seed);
                }
            // Nonblocking and persistent calls take the same path (persistent: not in place).
            for (size_t count : {size_t(5), chunk / 4 * 3 + 1, chunk / 2 * 5 + 11}) {
                check(GPURDMA_SUM, GPURDMA_FLOAT, count, true, ++seed, Kind::Nonblocking);
                check(GPURDMA_MAX, GPURDMA_INT32, count, false, ++seed, Kind::Nonblocking);
                check(GPURDMA_SUM, GPURDMA_DOUBLE, count, false, ++seed, Kind::Persistent);
            }
        }
        return finish(summary(), ctx, dev);
    }

    // A nonblocking and a persistent call on the communicator before its set-up: handed
    // on (GPURDMA_ERR_UNSUPPORTED on every rank, nothing started).
    void handed_on_before_set_up()
    {
        if (size < 2) return;
        float in[4] = {1, 2, 3, 4}, out[4];
        gpurdma_request_t *nb = nullptr, *p = nullptr;
        const gpurdma_status_t a =
            gpurdma_iallreduce(comm, in, out, 4, GPURDMA_FLOAT, GPURDMA_SUM, nullptr, nullptr, &nb);
        const gpurdma_status_t b =
            gpurdma_allreduce_init(comm, in, out, 4, GPURDMA_FLOAT, GPURDMA_SUM, nullptr, nullptr, &p);
        ++checks;
        if (a != GPURDMA_ERR_UNSUPPORTED || b != GPURDMA_ERR_UNSUPPORTED || nb || p || gpurdma_comm_is_set_up(comm)) {
            ++failures;
            say("FAIL rank %d: before the set-up, a nonblocking call gave %s and a persistent one %s (want "
                "UNSUPPORTED, nothing started)\n",
                rank, gpurdma_status_name(a), gpurdma_status_name(b));
        }
    }

    // The checks on the whole run, its summary line; 0 if every check passed.
    int summary()
    {
        gpurdma_comm_stats_t stats;
        gpurdma_comm_get_stats(comm, &stats);
        if (opt.expect_errors && errors == 0) {
            ++failures;
            say("FAIL rank %d: every call succeeded, an error was expected\n", rank);
        }
        if (opt.expect_device && uses_device() && stats.device_calls == 0) {
            ++failures;
            say("FAIL rank %d: no call took the device path (run with --verbose 1 for why)\n", rank);
        }
        if (opt.expect_staged && (stats.device_calls != 0 || stats.calls == 0)) {
            ++failures;
            say("FAIL rank %d: %llu of %llu calls took the device path, every one should have staged\n", rank,
                static_cast<unsigned long long>(stats.device_calls), static_cast<unsigned long long>(stats.calls));
        }
        if (opt.max_call_ms > 0 && longest_call_ms > opt.max_call_ms) {
            ++failures;
            say("FAIL rank %d: one start or test held the caller %.1f ms (at most %.0f ms allowed)\n", rank,
                longest_call_ms, opt.max_call_ms);
        }
        char longest[64] = "";
        if (opt.max_call_ms > 0)
            std::snprintf(longest, sizeof longest, ", longest start or test %.1f ms", longest_call_ms);
        say("rank %d: %d checks, %d failures, %d expected errors, %llu of %llu calls on the GPU%s\n", rank, checks,
            failures, errors, static_cast<unsigned long long>(stats.device_calls),
            static_cast<unsigned long long>(stats.calls), longest);
        return failures ? 1 : 0;
    }

    int finish(int rc, gpurdma_context_t *ctx, gpurdma::gpu::CUdevice dev)
    {
        gpurdma_comm_destroy(comm);
        gpurdma_context_destroy(ctx);
        // HIP keeps a failed call's error as the thread's last error, which applications
        // read (hipGetLastError after their own calls): gpurdma's queries of host buffers,
        // which HIP 5 fails, must not leave one behind.
        if (opt.device && GpuRuntime::instance().vendor() == gpurdma::gpu::Vendor::Hip) {
            const int last = hip_last_error();
            if (last != 0) {
                say("FAIL rank %d: hipGetLastError says %d after gpurdma's calls (gpurdma left its own error)\n", rank,
                    last);
                rc = 1;
            }
        }
        if (opt.device) {
            const auto &api = GpuRuntime::instance().api();
            if (dsend) api.mem_free(dsend);
            if (drecv) api.mem_free(drecv);
            api.primary_ctx_release(dev);
        }
        return rc;
    }

    static int hip_last_error()
    {
        for (const char *name : {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"}) {
            void *lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
            if (!lib) continue;
            auto get = reinterpret_cast<int (*)()>(dlsym(lib, "hipGetLastError"));
            const int rc = get ? get() : 0;
            dlclose(lib);
            return rc;
        }
        return 0;
    }

    // One good call (the set-up), then rank stop_rank stops in the middle of the next
    // one; every other rank must return an error naming a stage within the timeout.
    int stop_check()
    {
        const size_t count = std::max<size_t>(opt.max_bytes / 4, 1024);
        check(GPURDMA_SUM, GPURDMA_FLOAT, count, false, 7);
        if (failures) return 1;
        void *s = opt.device ? reinterpret_cast<void *>(dsend) : nullptr;
        void *r = opt.device ? reinterpret_cast<void *>(drecv) : nullptr;
        std::vector<float> hs(opt.device ? 0 : count, 1.0f), hr(opt.device ? 0 : count);
        if (!opt.device) s = hs.data(), r = hr.data();
        // The other collectives: blocks of count / size (reduce-scatter's input and
        // allgather's result span the buffers), the root rank 0; one good call first.
        gpurdma_coll_args_t args{};
        args.coll = opt.stop_coll;
        args.sendbuf = s;
        args.recvbuf = r;
        const bool blocks = opt.stop_coll == GPURDMA_COLL_REDUCE_SCATTER || opt.stop_coll == GPURDMA_COLL_ALLGATHER;
        args.count = blocks ? count / size_t(size) : count;
        args.dtype = GPURDMA_FLOAT;
        args.op = GPURDMA_SUM;
        const bool other = opt.stop_coll != GPURDMA_COLL_ALLREDUCE;
        if (other && gpurdma_collective(comm, &args) != GPURDMA_OK) {
            say("FAIL rank %d: the %s before the stop: %s\n", rank, gpurdma_coll_name(opt.stop_coll),
                gpurdma_comm_last_error(comm));
            return 1;
        }
        if (rank == opt.stop_rank) {
            gpurdma_request_t *req = nullptr;
            const gpurdma_status_t st =
                other ? gpurdma_icollective(comm, &args, nullptr, nullptr, &req)
                      : gpurdma_iallreduce(comm, s, r, count, GPURDMA_FLOAT, GPURDMA_SUM, nullptr, nullptr, &req);
            for (int i = 0; i < opt.stop_tests && st == GPURDMA_OK; ++i) gpurdma_request_test(req);
            say("rank %d: stopped in the middle of the call (start: %s)\n", rank, gpurdma_status_name(st));
            std::fflush(nullptr);
            // Stopped: no progress until the others have given up (or timeout + 8 s), then
            // gone without a word.
            const auto until = Clock::now() + std::chrono::duration<double>(opt.timeout_s + 8);
            while (Clock::now() < until && (!stop_returned || stop_returned->load() < size - 1)) usleep(20000);
            _exit(0);
        }
        const auto t0 = Clock::now();
        const gpurdma_status_t st =
            other ? gpurdma_collective(comm, &args) : gpurdma_allreduce(comm, s, r, count, GPURDMA_FLOAT, GPURDMA_SUM);
        const double took = std::chrono::duration<double>(Clock::now() - t0).count();
        const std::string error = gpurdma_comm_last_error(comm);
        const bool may = std::find(opt.may_finish.begin(), opt.may_finish.end(), rank) != opt.may_finish.end();
        if (st == GPURDMA_OK && may) {
            say("rank %d: completed (its result does not depend on rank %d) after %.1f s\n", rank, opt.stop_rank, took);
            return 0;
        }
        if (st == GPURDMA_OK) {
            say("FAIL rank %d: the call succeeded although rank %d stopped\n", rank, opt.stop_rank);
            return 1;
        }
        if (took > opt.timeout_s + 10) {
            say("FAIL rank %d: the error came after %.1f s (timeout %.0f s): %s\n", rank, took, opt.timeout_s,
                error.c_str());
            return 1;
        }
        say("rank %d: %s after %.1f s: %s\n", rank, gpurdma_status_name(st), took, error.c_str());
        return 0;
    }
};

bool parse(int argc, char **argv, Options *o)
{
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--mode") {
            const std::string m = next();
            if (m != "host" && m != "device" && m != "probe") return false;
            o->device = m == "device";
            o->probe = m == "probe";
        } else if (a == "--np") {
            o->nps.clear();
            for (const char *p = next(); *p;) {
                char *end;
                const long v = std::strtol(p, &end, 10);
                if (end == p || v < 1 || v > 64) return false;
                o->nps.push_back(int(v));
                p = *end == ',' ? end + 1 : end;
            }
        } else if (a == "--max-bytes") {
            o->max_bytes = std::strtoull(next(), nullptr, 0);
        } else if (a == "--verbose") {
            o->verbose = std::atoi(next());
        } else if (a == "--expect-device") {
            o->expect_device = true;
        } else if (a == "--bench") {
            o->bench = true;
        } else if (a == "--fake-hosts") {
            o->fake_hosts = std::atoi(next());
        } else if (a == "--logical-nodes") {
            o->logical_nodes = next();
        } else if (a == "--algorithm") {
            o->algorithm = next();
        } else if (a == "--rail-reduce") {
            o->rail_reduce = next();
        } else if (a == "--chunk-size") {
            o->chunk_size = std::strtoull(next(), nullptr, 0);
        } else if (a == "--stage-max") {
            o->stage_max = std::strtoll(next(), nullptr, 0);
        } else if (a == "--bench-min") {
            o->bench_min = std::max<size_t>(4, std::strtoull(next(), nullptr, 0));
        } else if (a == "--stop-tests") {
            o->stop_tests = std::max(0, std::atoi(next()));
        } else if (a == "--timeout") {
            o->timeout_s = std::atof(next());
        } else if (a == "--alternate") {
            o->alternate_host = true;
        } else if (a == "--host-ranks" || a == "--stop-may-finish") {
            std::vector<int> &to = a == "--host-ranks" ? o->host_ranks : o->may_finish;
            for (const char *p = next(); *p;) {
                char *end;
                const long v = std::strtol(p, &end, 10);
                if (end == p || v < 0) return false;
                to.push_back(int(v));
                p = *end == ',' ? end + 1 : end;
            }
        } else if (a == "--expect-errors") {
            o->expect_errors = true;
        } else if (a == "--stop-rank") {
            o->stop_rank = std::atoi(next());
        } else if (a == "--stop-coll") {
            const std::string c = next();
            bool found = false;
            for (int k = GPURDMA_COLL_REDUCE_SCATTER; k < GPURDMA_COLL_COUNT; ++k)
                if (c == gpurdma_coll_name(gpurdma_coll_t(k))) o->stop_coll = gpurdma_coll_t(k), found = true;
            if (!found) return false;
        } else if (a == "--kind") {
            o->kind = next();
            if (o->kind != "blocking" && o->kind != "nonblocking" && o->kind != "persistent" && o->kind != "mixed")
                return false;
        } else if (a == "--fills-land") {
            o->fills_land = true;
        } else if (a == "--hold-check") {
            o->hold_check = true;
        } else if (a == "--max-call-ms") {
            o->max_call_ms = std::atof(next());
        } else if (a == "--expect-staged") {
            o->expect_staged = true;
        } else if (a == "--colls") {
            o->colls = true;
        } else if (a == "--split-buffers") {
            o->split_buffers = true;
        } else if (a == "--interleave") {
            o->interleave = true;
        } else if (a == "--limit") {
            o->limit_s = std::atof(next());
        } else {
            return false;
        }
    }
    return !o->nps.empty();
}

// Forks np ranks (killed if they outlive the limit).
int launch(const Options &opt, int np)
{
    void *shared = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    auto *stop_returned = shared == MAP_FAILED ? nullptr : new (shared) std::atomic<int>(0);
    const auto result = gpurdma::testing::run_ranks(
        np,
        [&opt, stop_returned](int r, int n, gpurdma_bootstrap_t bootstrap) -> int {
            if (opt.fake_hosts > 0) {  // several "nodes" on one machine: the inter-node decisions run
                const std::string host = "gpurdma-fake-" + std::to_string(r * opt.fake_hosts / n);
                if (unshare(CLONE_NEWUTS) != 0 || sethostname(host.c_str(), host.size()) != 0) {
                    std::printf("SKIP: --fake-hosts needs CAP_SYS_ADMIN (unshare/sethostname): %s\n",
                                std::strerror(errno));
                    std::fflush(nullptr);
                    _exit(77);
                }
            }
            Rank rank;
            rank.opt = opt;
            rank.rank = r;
            rank.size = n;
            rank.boot = bootstrap;
            rank.stop_returned = stop_returned;
            const int rc = rank.run();
            std::fflush(nullptr);
            std::exit(rc);  // not run_ranks' _exit: leak checkers (LSan) run at exit
        },
        opt.limit_s);
    if (shared != MAP_FAILED) munmap(shared, sizeof(std::atomic<int>));
    if (result.timed_out) std::printf("FAIL: np %d still running after %.0f s; killing the ranks\n", np, opt.limit_s);
    else if (result.failed) std::printf("FAIL: %s\n", result.detail.c_str());
    return result.failed || result.timed_out ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv)
{
    Options opt;
    if (!parse(argc, argv, &opt)) {
        std::fprintf(
            stderr,
            "usage: %s --mode host|device|probe [--np 2,4] [--max-bytes N] [--verbose V] [--expect-device] "
            "[--bench] [--limit SECONDS] [--fake-hosts K] [--logical-nodes K|a,b,c] [--algorithm A] "
            "[--chunk-size N] [--stage-max N] [--bench-min N] [--timeout S] [--stop-rank R] [--host-ranks "
            "a,b] [--alternate] [--expect-errors] "
            "[--kind nonblocking|persistent|mixed] [--hold-check] [--max-call-ms M] [--fills-land] [--expect-staged] "
            "[--rail-reduce auto|host|device] [--colls [--split-buffers] [--interleave]]\n",
            argv[0]);
        return 2;
    }
    if (opt.probe) {  // in this process only: the ranks are forked before any CUDA call
        const auto &drv = GpuRuntime::instance();
        int version = 0;
        if (drv.available() && drv.api().driver_get_version) drv.api().driver_get_version(&version);
        if (!drv.available()) {
            std::printf("%s\n", drv.why_unavailable().c_str());
            return 77;
        }
        // What decides whether arrivals may land in GPU memory (gpu/gdr_landing.h): -1 unknown.
        int dev = -1, gdr = -1, flush = -1, ordering = -1;
        if (drv.api().device_get && drv.api().device_get(&dev, 0) == 0 && drv.api().device_get_attribute) {
            if (drv.api().device_get_attribute(&gdr, 116, dev) != 0) gdr = -1;
            if (drv.api().device_get_attribute(&flush, gpurdma::gpu::kDevAttrGdrFlushWritesOptions, dev) != 0)
                flush = -1;
            if (drv.api().device_get_attribute(&ordering, gpurdma::gpu::kDevAttrGdrWritesOrdering, dev) != 0)
                ordering = -1;
        }
        if (drv.vendor() == gpurdma::gpu::Vendor::Hip)
            std::printf("HIP runtime %d.%d (%d); GPU 0\n", version / 10000000, version / 100000 % 100, version);
        else
            std::printf(
                "CUDA driver %d.%d; GPU 0: GPUDirect RDMA supported %d, its writes' flush options %d, ordering %d\n",
                version / 1000, version % 1000 / 10, gdr, flush, ordering);
        return drv.available() ? 0 : 77;
    }
    int failed = 0;
    for (int np : opt.nps) {
        const auto t0 = Clock::now();
        std::printf("== %s buffers, %d processes, sizes up to %zu B\n", opt.device ? "device" : "host", np,
                    opt.max_bytes);
        std::fflush(stdout);
        const int rc = launch(opt, np);
        std::printf("== np %d: %s (%.1f s)\n", np, rc ? "FAIL" : "PASS",
                    std::chrono::duration<double>(Clock::now() - t0).count());
        failed |= rc;
    }
    return failed;
}
