// The core's nonblocking, persistent and multi-threaded engine through the C API only
// (gpurdma_iallreduce, gpurdma_allreduce_init, gpurdma_request_start/test/free,
// gpurdma_context_progress), in forked ranks with the MPI-free bootstrap: one node
// (shared memory) and two logical nodes of two (UCX over tcp between them). Every
// result is checked element by element, and bit-identical across ranks through a
// digest exchanged over the bootstrap. The bootstrap is not thread-safe: every
// communicator's first call (its set-up) comes from the rank's main thread, in the
// same order on every rank.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "gpurdma/gpurdma.h"
#include "support/fork_ranks.h"
#include "support/rank_check.h"

using gpurdma::testing::RankCheck;
using gpurdma::testing::RankResult;
using gpurdma::testing::run_ranks;

namespace {

constexpr double kRankTimeoutS = 40;  // a whole scenario; a hang shows as timed_out
constexpr double kCallTimeoutS = 10;  // config.timeout_s: a stuck call fails well before the scenario
constexpr double kWaitS = 15;  // the longest a rank waits for a callback before it calls it lost
constexpr size_t kChunk = 64 * 1024;  // small pipeline chunks: a 1 MiB call takes many steps

struct Layout {
    int size;
    const char *logical_nodes;  // "": one node; "2": nodes of two ranks, UCX between them
    const char *tls;  // config.ucx_tls
    std::string label() const
    {
        return std::to_string(size) + " ranks" +
               (*logical_nodes ? std::string(" in nodes of ") + logical_nodes + " over UCX " + tls
                               : std::string(" on one node"));
    }
    bool ucx() const { return *logical_nodes != '\0'; }
};

const Layout kSingle{1, "", ""};
const Layout kOneNode3{3, "", ""};
const Layout kOneNode4{4, "", ""};
const Layout kTwoByTwo{4, "2", "tcp"};

struct Options {
    int threads = 0;
    double timeout_s = kCallTimeoutS;
};

// Written by rank 0 for the parent: why UCX cannot run here (the test is then skipped).
struct Note {
    char skip[512];
};

// The core's messages, kept for the failure report (a rank prints them if a check failed).
std::mutex log_lock;
std::string log_text;
void capture_log(int level, const char *message)
{
    std::lock_guard<std::mutex> hold(log_lock);
    log_text += "[" + std::to_string(level) + "] " + message + "\n";
}
std::string captured_log()
{
    std::lock_guard<std::mutex> hold(log_lock);
    return log_text;
}

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Calls poll() until done() holds or `seconds` pass; returns done().
template <class Done, class Poll> bool wait_for(Done done, Poll poll, double seconds = kWaitS)
{
    const auto t0 = std::chrono::steady_clock::now();
    while (!done()) {
        if (seconds_since(t0) > seconds) return done();
        poll();
    }
    return true;
}

// ---- data: inputs that differ by rank, element and call; exact expected results ----

struct Spec {
    gpurdma_dtype_t dtype;
    gpurdma_op_t op;
    size_t count;
    bool in_place;
};

std::string describe(const Spec &s)
{
    return std::to_string(s.count) + " x " + gpurdma_dtype_name(s.dtype) + " " + gpurdma_op_name(s.op) +
           (s.in_place ? " in place" : "");
}

// Rank `rank`'s element i of a call's input; `salt` changes it from call to call.
double input(gpurdma_dtype_t dtype, int rank, size_t i, unsigned salt)
{
    const uint64_t k = i * 7919u + static_cast<uint64_t>(rank) * 104729u + static_cast<uint64_t>(salt) * 1299709u;
    switch (dtype) {
        case GPURDMA_INT32: return static_cast<double>(static_cast<int64_t>(k % 20001) - 10000);
        // Inexact: the sum rounds, so it is checked to a tolerance and for equality across ranks.
        case GPURDMA_DOUBLE: return static_cast<double>(k % 1000) * 0.001 + 0.1 * rank;
        case GPURDMA_UINT8: return static_cast<double>(0xffu ^ (1u << (k % 8)));  // each rank clears another bit
        case GPURDMA_FLOAT: return static_cast<double>(static_cast<int64_t>(k % 1999) - 999) * 0.5;
        default: return 0;
    }
}

double expected(const Spec &s, int size, size_t i, unsigned salt)
{
    double acc = input(s.dtype, 0, i, salt);
    for (int r = 1; r < size; ++r) {
        const double v = input(s.dtype, r, i, salt);
        if (s.op == GPURDMA_SUM) acc += v;
        else if (s.op == GPURDMA_MAX) acc = std::max(acc, v);
        else if (s.op == GPURDMA_BAND) acc = static_cast<double>(static_cast<unsigned>(acc) & static_cast<unsigned>(v));
    }
    return acc;
}

void store(gpurdma_dtype_t dtype, unsigned char *buf, size_t i, double v)
{
    switch (dtype) {
        case GPURDMA_INT32: {
            const int32_t x = static_cast<int32_t>(v);
            std::memcpy(buf + i * sizeof x, &x, sizeof x);
            break;
        }
        case GPURDMA_DOUBLE: std::memcpy(buf + i * sizeof v, &v, sizeof v); break;
        case GPURDMA_UINT8: buf[i] = static_cast<unsigned char>(v); break;
        case GPURDMA_FLOAT: {
            const float x = static_cast<float>(v);
            std::memcpy(buf + i * sizeof x, &x, sizeof x);
            break;
        }
        default: break;
    }
}

double load(gpurdma_dtype_t dtype, const unsigned char *buf, size_t i)
{
    switch (dtype) {
        case GPURDMA_INT32: {
            int32_t x;
            std::memcpy(&x, buf + i * sizeof x, sizeof x);
            return x;
        }
        case GPURDMA_DOUBLE: {
            double x;
            std::memcpy(&x, buf + i * sizeof x, sizeof x);
            return x;
        }
        case GPURDMA_UINT8: return buf[i];
        case GPURDMA_FLOAT: {
            float x;
            std::memcpy(&x, buf + i * sizeof x, sizeof x);
            return x;
        }
        default: return 0;
    }
}

// One call's buffers (in place: the input is written into recv).
struct Buffers {
    explicit Buffers(const Spec &s)
        : spec(s),
          send(s.in_place ? 0 : s.count * gpurdma_dtype_size(s.dtype)),
          recv(s.count * gpurdma_dtype_size(s.dtype))
    {}
    const void *sendbuf() const { return spec.in_place ? nullptr : send.data(); }
    void *recvbuf() { return recv.data(); }

    void fill(int rank, unsigned salt)
    {
        unsigned char *in = spec.in_place ? recv.data() : send.data();
        for (size_t i = 0; i < spec.count; ++i) store(spec.dtype, in, i, input(spec.dtype, rank, i, salt));
        if (!spec.in_place) std::fill(recv.begin(), recv.end(), 0xa5);  // stale bytes must be overwritten
    }

    // Every element against the expected one; reports the first wrong one and how many.
    bool check(RankCheck &check, int size, unsigned salt, const std::string &what) const
    {
        size_t wrong = 0, first = 0;
        double got_first = 0, want_first = 0;
        for (size_t i = 0; i < spec.count; ++i) {
            const double got = load(spec.dtype, recv.data(), i), want = expected(spec, size, i, salt);
            const bool ok = spec.dtype == GPURDMA_DOUBLE ? std::fabs(got - want) <= 1e-9 : got == want;
            if (ok) continue;
            if (wrong++ == 0) {
                first = i;
                got_first = got;
                want_first = want;
            }
        }
        return check.expect(wrong == 0, what + " (" + describe(spec) + "): " + std::to_string(wrong) +
                                            " elements wrong, first [" + std::to_string(first) + "] = " +
                                            std::to_string(got_first) + ", want " + std::to_string(want_first));
    }

    uint64_t digest(uint64_t h = 1469598103934665603ull) const
    {
        for (unsigned char b : recv) h = (h ^ b) * 1099511628211ull;
        return h;
    }

    Spec spec;
    std::vector<unsigned char> send, recv;
};

// What a completion callback saw.
struct Completion {
    std::atomic<int> calls{0};
    std::atomic<int> status{-1};
    std::atomic<std::thread::id> thread{};
};

void on_complete(void *arg, gpurdma_status_t status)
{
    auto *c = static_cast<Completion *>(arg);
    c->status.store(status, std::memory_order_relaxed);
    c->thread.store(std::this_thread::get_id(), std::memory_order_relaxed);
    c->calls.fetch_add(1, std::memory_order_release);
}

std::string status_text(int status)
{
    return status < 0 ? "none" : gpurdma_status_name(static_cast<gpurdma_status_t>(status));
}

// ---- one forked rank: its context, its communicators, its checks ----

class Env {
public:
    Env(const Layout &layout, const Options &opt, int rank, int size, gpurdma_bootstrap_t boot, Note *note)
        : layout(layout), rank(rank), size(size), boot(boot), check(rank), note_(note)
    {
        gpurdma_config_t c;
        gpurdma_config_default(&c);
        c.verbose = 1;  // a decline says why (UCX cannot start: skip)
        c.log = capture_log;
        c.cuda = 0;
        c.local_rank = rank;
        c.local_processes = size;
        c.logical_nodes = layout.logical_nodes;
        c.ucx_tls = layout.tls;
        c.timeout_s = opt.timeout_s;
        c.dump_dir = "";  // timeouts here are the tests' own: no dump files in the build tree
        c.threads = opt.threads;
        c.chunk_size = kChunk;
        c.node_chunk_size = kChunk;
        const gpurdma_status_t st = gpurdma_context_create(&c, &context);
        check.expect(st == GPURDMA_OK, std::string("gpurdma_context_create: ") + gpurdma_status_name(st));
    }

    ~Env()
    {
        if (leak_) return;  // a rank that "dies": nothing of it is released
        for (auto it = comms_.rbegin(); it != comms_.rend(); ++it) gpurdma_comm_destroy(*it);
        gpurdma_context_destroy(context);
    }

    // A communicator over every rank (nothing collective happens until its first call).
    gpurdma_comm_t *comm(const std::string &name)
    {
        gpurdma_comm_params_t p{rank, size, boot, name.c_str()};
        gpurdma_comm_t *c = nullptr;
        const gpurdma_status_t st = gpurdma_comm_create(context, &p, &c);
        check.expect(st == GPURDMA_OK, "gpurdma_comm_create " + name + ": " + gpurdma_status_name(st));
        if (c) comms_.push_back(c);
        return c;
    }

    // The status of a communicator's first call (its set-up): true if it started. A
    // decline because UCX cannot run here skips the test (rank 0 says why).
    bool first_call(gpurdma_comm_t *c, gpurdma_status_t st, const std::string &what)
    {
        if (st == GPURDMA_OK) return true;
        const std::string log = captured_log();
        if (st == GPURDMA_ERR_UNSUPPORTED && layout.ucx() && log.find("UCX") != std::string::npos) {
            skipped = true;
            if (rank == 0)
                std::snprintf(note_->skip, sizeof note_->skip, "%s: UCX cannot run here: %s", layout.label().c_str(),
                              log.c_str());
            return false;
        }
        check.expect(false, what + " (the set-up): " + gpurdma_status_name(st) + ": " + gpurdma_comm_last_error(c));
        return false;
    }

    // A small blocking allreduce as a communicator's first call: its set-up, checked.
    bool set_up(gpurdma_comm_t *c, const std::string &what)
    {
        Buffers b({GPURDMA_INT32, GPURDMA_SUM, 16, false});
        b.fill(rank, 999);
        if (!first_call(c, gpurdma_allreduce(c, b.sendbuf(), b.recvbuf(), 16, GPURDMA_INT32, GPURDMA_SUM), what))
            return false;
        return b.check(check, size, 999, what + " (the set-up call)");
    }

    // A nonblocking and a persistent call before the set-up (which only a blocking call
    // runs): handed on, GPURDMA_ERR_UNSUPPORTED on every rank, no request, nothing set up.
    bool hands_on_before_set_up(gpurdma_comm_t *c, const std::string &what)
    {
        Buffers b({GPURDMA_INT32, GPURDMA_SUM, 16, false});
        b.fill(rank, 998);
        Completion d;
        gpurdma_request_t *nb = nullptr, *p = nullptr;
        const gpurdma_status_t nb_st =
            gpurdma_iallreduce(c, b.sendbuf(), b.recvbuf(), 16, GPURDMA_INT32, GPURDMA_SUM, on_complete, &d, &nb);
        const gpurdma_status_t p_st =
            gpurdma_allreduce_init(c, b.sendbuf(), b.recvbuf(), 16, GPURDMA_INT32, GPURDMA_SUM, on_complete, &d, &p);
        gpurdma_comm_stats_t s{};
        gpurdma_comm_get_stats(c, &s);
        return check.expect(nb_st == GPURDMA_ERR_UNSUPPORTED && p_st == GPURDMA_ERR_UNSUPPORTED && !nb && !p &&
                                s.setups == 0 && d.calls.load() == 0,
                            what + ": nonblocking " + gpurdma_status_name(nb_st) + ", persistent " +
                                gpurdma_status_name(p_st) + " before the set-up (want UNSUPPORTED, nothing started), " +
                                "set-ups " + std::to_string(s.setups));
    }

    bool ok(gpurdma_comm_t *c, gpurdma_status_t st, const std::string &what)
    {
        return check.expect(st == GPURDMA_OK, what + ": " + gpurdma_status_name(st) + " " + gpurdma_comm_last_error(c));
    }

    // Every rank's digest equal (over the bootstrap: main thread, after every set-up).
    bool same_everywhere(uint64_t digest, const std::string &what)
    {
        std::vector<uint64_t> all(static_cast<size_t>(size));
        if (!check.expect(boot.allgather(&digest, all.data(), sizeof digest, boot.arg) == 0, what + ": bootstrap"))
            return false;
        for (int r = 0; r < size; ++r)
            if (!check.expect(all[static_cast<size_t>(r)] == digest,
                              what + ": result differs from rank " + std::to_string(r) + "'s"))
                return false;
        return true;
    }

    bool barrier() { return same_everywhere(0, "barrier"); }

    void expect_stats(gpurdma_comm_t *c, uint64_t calls, uint64_t nonblocking, uint64_t persistent,
                      const std::string &what)
    {
        gpurdma_comm_stats_t s{};
        gpurdma_comm_get_stats(c, &s);
        check.expect(s.calls == calls && s.nonblocking_calls == nonblocking && s.persistent_calls == persistent,
                     what + ": stats calls/nonblocking/persistent " + std::to_string(s.calls) + "/" +
                         std::to_string(s.nonblocking_calls) + "/" + std::to_string(s.persistent_calls) + ", want " +
                         std::to_string(calls) + "/" + std::to_string(nonblocking) + "/" + std::to_string(persistent));
    }

    void leak() { leak_ = true; }

    int result()
    {
        if (check.failures() > 0) std::fprintf(stderr, "rank %d: the core's log:\n%s", rank, captured_log().c_str());
        return check.result();
    }

    const Layout &layout;
    const int rank;
    const int size;
    const gpurdma_bootstrap_t boot;
    gpurdma_context_t *context = nullptr;
    RankCheck check;
    bool skipped = false;

private:
    Note *note_;
    std::vector<gpurdma_comm_t *> comms_;
    bool leak_ = false;
};

// Runs body on every rank of the layout; fails on a failed or hung rank, skips when UCX cannot run.
void run(const Layout &layout, const Options &opt, const std::function<void(Env &)> &body,
         double timeout_s = kRankTimeoutS)
{
    void *map = mmap(nullptr, sizeof(Note), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    auto *note = new (map) Note{};
    const auto t0 = std::chrono::steady_clock::now();
    const RankResult res = run_ranks(
        layout.size,
        [&](int rank, int size, gpurdma_bootstrap_t boot) {
            Env env(layout, opt, rank, size, boot, note);
            if (env.context) body(env);
            return env.result();
        },
        timeout_s);
    const std::string skip = note->skip;
    munmap(map, sizeof(Note));
    EXPECT_FALSE(res.timed_out) << layout.label() << ": " << res.detail;
    EXPECT_EQ(res.failed, 0) << layout.label() << ": " << res.detail;
    std::printf("[          ] %s: %.2f s\n", layout.label().c_str(), seconds_since(t0));
    if (!skip.empty()) GTEST_SKIP() << skip;
}

// ---- the scenarios ----

void many_outstanding(Env &env)
{
    const std::vector<Spec> specs = {
        {GPURDMA_INT32, GPURDMA_SUM, 1, false},        {GPURDMA_DOUBLE, GPURDMA_SUM, 3, true},
        {GPURDMA_UINT8, GPURDMA_BAND, 1000, false},    {GPURDMA_FLOAT, GPURDMA_MAX, 4097, false},
        {GPURDMA_INT32, GPURDMA_SUM, 65536, true},     {GPURDMA_DOUBLE, GPURDMA_SUM, 131072, false},
        {GPURDMA_UINT8, GPURDMA_BAND, 1 << 20, false}, {GPURDMA_FLOAT, GPURDMA_MAX, 262144, true},
    };
    const size_t n = specs.size();
    gpurdma_comm_t *comm = env.comm("many");
    std::vector<std::unique_ptr<Buffers>> bufs;
    std::vector<Completion> done(n);
    std::vector<gpurdma_request_t *> reqs(n, nullptr);
    if (!env.hands_on_before_set_up(comm, "many") || !env.set_up(comm, "many")) return;
    for (size_t k = 0; k < n; ++k) {
        bufs.push_back(std::make_unique<Buffers>(specs[k]));
        bufs[k]->fill(env.rank, static_cast<unsigned>(k));
        const gpurdma_status_t st = gpurdma_iallreduce(comm, bufs[k]->sendbuf(), bufs[k]->recvbuf(), specs[k].count,
                                                       specs[k].dtype, specs[k].op, on_complete, &done[k], &reqs[k]);
        const std::string what = "iallreduce " + std::to_string(k);
        if (!env.ok(comm, st, what)) return;
        env.check.expect(reqs[k] != nullptr, what + ": a request");
    }
    // Reverse order: testing the last one drives the ones before it (they run in start order).
    for (size_t k = n; k-- > 0;) {
        const std::string what = "request " + std::to_string(k);
        const bool finished = wait_for([&] { return gpurdma_request_test(reqs[k]) == 1; }, [] {});
        if (!env.check.expect(finished, what + ": never completed")) return;
        env.check.expect(done[k].calls.load(std::memory_order_acquire) == 1,
                         what + ": callback ran " + std::to_string(done[k].calls.load()) + " times when test said 1");
        env.check.expect(done[k].status.load() == GPURDMA_OK, what + ": status " + status_text(done[k].status.load()));
    }
    uint64_t digest = 1469598103934665603ull;
    for (size_t k = 0; k < n; ++k) {
        bufs[k]->check(env.check, env.size, static_cast<unsigned>(k), "request " + std::to_string(k));
        digest = bufs[k]->digest(digest);
    }
    env.same_everywhere(digest, "eight results");
    env.expect_stats(comm, n + 1, n, 0, "after the set-up and eight iallreduce");
    gpurdma_comm_stats_t s{};
    gpurdma_comm_get_stats(comm, &s);
    const uint64_t between_nodes = s.ring_calls + s.rd_calls + s.hier_calls;
    env.check.expect(env.layout.ucx() ? between_nodes == n + 1 : s.node_calls == n + 1,
                     "the path: node " + std::to_string(s.node_calls) + ", between nodes " +
                         std::to_string(between_nodes) + " of " + std::to_string(n + 1) + " calls");
    for (size_t k = 0; k < n; ++k)
        env.check.expect(gpurdma_request_free(reqs[k]) == 0, "free of completed request " + std::to_string(k));
    for (size_t k = 0; k < n; ++k)
        env.check.expect(done[k].calls.load() == 1, "callback " + std::to_string(k) + " ran once");
}

void blocking_after_nonblocking(Env &env)
{
    gpurdma_comm_t *comm = env.comm("order");
    Buffers a1({GPURDMA_DOUBLE, GPURDMA_SUM, 131072, false}), a2({GPURDMA_FLOAT, GPURDMA_MAX, 100, true}),
        b({GPURDMA_INT32, GPURDMA_SUM, 4096, false});
    a1.fill(env.rank, 1);
    a2.fill(env.rank, 2);
    b.fill(env.rank, 3);
    Completion d1, d2;
    gpurdma_request_t *r1 = nullptr, *r2 = nullptr;
    if (!env.set_up(comm, "order")) return;
    if (!env.ok(comm,
                gpurdma_iallreduce(comm, a1.sendbuf(), a1.recvbuf(), a1.spec.count, a1.spec.dtype, a1.spec.op,
                                   on_complete, &d1, &r1),
                "iallreduce A1"))
        return;
    if (!env.ok(comm,
                gpurdma_iallreduce(comm, a2.sendbuf(), a2.recvbuf(), a2.spec.count, a2.spec.dtype, a2.spec.op,
                                   on_complete, &d2, &r2),
                "iallreduce A2"))
        return;
    if (!env.ok(comm, gpurdma_allreduce(comm, b.sendbuf(), b.recvbuf(), b.spec.count, b.spec.dtype, b.spec.op),
                "blocking B"))
        return;
    // Nothing drove A1 and A2 but B: they ran first.
    env.check.expect(d1.calls.load(std::memory_order_acquire) == 1 && d1.status.load() == GPURDMA_OK,
                     "A1's callback when B returned: ran " + std::to_string(d1.calls.load()) + " times, status " +
                         status_text(d1.status.load()));
    env.check.expect(d2.calls.load(std::memory_order_acquire) == 1 && d2.status.load() == GPURDMA_OK,
                     "A2's callback when B returned: ran " + std::to_string(d2.calls.load()) + " times, status " +
                         status_text(d2.status.load()));
    a1.check(env.check, env.size, 1, "A1");
    a2.check(env.check, env.size, 2, "A2");
    b.check(env.check, env.size, 3, "B");
    env.same_everywhere(b.digest(a2.digest(a1.digest())), "A1, A2 and B");
    env.check.expect(gpurdma_request_test(r1) == 1 && gpurdma_request_test(r2) == 1, "test after B: complete");
    env.check.expect(gpurdma_request_free(r1) == 0 && gpurdma_request_free(r2) == 0, "free after B: released now");
    env.expect_stats(comm, 4, 2, 0, "the set-up, A1, A2, B");
}

void persistent_starts(Env &env)
{
    constexpr int kStarts = 20;
    gpurdma_comm_t *comm = env.comm("persistent");
    Buffers p({GPURDMA_INT32, GPURDMA_SUM, 65536, false}), q({GPURDMA_DOUBLE, GPURDMA_SUM, 1000, true});
    Completion dp, dq;
    gpurdma_request_t *rp = nullptr, *rq = nullptr;
    // After the set-up (a blocking call), both plan everything now.
    if (!env.hands_on_before_set_up(comm, "persistent") || !env.set_up(comm, "persistent")) return;
    if (!env.ok(comm,
                gpurdma_allreduce_init(comm, p.sendbuf(), p.recvbuf(), p.spec.count, p.spec.dtype, p.spec.op,
                                       on_complete, &dp, &rp),
                "allreduce_init P"))
        return;
    if (!env.ok(comm,
                gpurdma_allreduce_init(comm, q.sendbuf(), q.recvbuf(), q.spec.count, q.spec.dtype, q.spec.op,
                                       on_complete, &dq, &rq),
                "allreduce_init Q"))
        return;
    env.check.expect(gpurdma_request_test(rp) == 1, "an inactive persistent request tests complete");
    uint64_t digest = 1469598103934665603ull;
    for (int it = 0; it < kStarts; ++it) {
        const bool odd = it % 2 == 1;
        Buffers &b = odd ? q : p;
        gpurdma_request_t *r = odd ? rq : rp;
        Completion &d = odd ? dq : dp;
        const unsigned salt = 100 + static_cast<unsigned>(it);
        const std::string what = std::string(odd ? "Q" : "P") + " start " + std::to_string(it);
        b.fill(env.rank, salt);
        if (it == 0) {
            // Rank 0 starts first; its peers only after its second start, so the call is
            // surely still in flight then.
            if (env.rank == 0) {
                if (!env.ok(comm, gpurdma_request_start(r), what)) return;
                const gpurdma_status_t again = gpurdma_request_start(r);
                env.check.expect(again == GPURDMA_ERR_INVALID,
                                 std::string("start while active: ") + gpurdma_status_name(again) + ", want INVALID");
                if (!env.barrier()) return;
            } else {
                if (!env.barrier() || !env.ok(comm, gpurdma_request_start(r), what)) return;
            }
        } else if (!env.ok(comm, gpurdma_request_start(r), what)) {
            return;
        }
        const bool finished = wait_for([&] { return gpurdma_request_test(r) == 1; }, [] {});
        if (!env.check.expect(finished, what + ": never completed")) return;
        const int want_calls = it / 2 + 1;
        env.check.expect(d.calls.load(std::memory_order_acquire) == want_calls && d.status.load() == GPURDMA_OK,
                         what + ": callbacks " + std::to_string(d.calls.load()) + ", want " +
                             std::to_string(want_calls) + ", status " + status_text(d.status.load()));
        b.check(env.check, env.size, salt, what);
        digest = b.digest(digest);
    }
    env.same_everywhere(digest, "twenty persistent results");
    env.expect_stats(comm, kStarts + 1, 0, kStarts, "the set-up and twenty starts");
    env.check.expect(gpurdma_request_free(rp) == 0, "free of inactive P returns 0");
    env.check.expect(gpurdma_request_free(rq) == 0, "free of inactive Q returns 0");
}

void free_while_in_flight(Env &env)
{
    gpurdma_comm_t *comm = env.comm("free");
    if (!env.set_up(comm, "free")) return;
    Buffers a({GPURDMA_FLOAT, GPURDMA_MAX, 262144, false});
    a.fill(env.rank, 7);
    Completion d;
    gpurdma_request_t *r = nullptr;
    // The last rank starts after everyone else freed theirs: those are surely in flight.
    const bool last = env.rank == env.size - 1;
    if (last && !env.barrier()) return;
    if (!env.ok(comm,
                gpurdma_iallreduce(comm, a.sendbuf(), a.recvbuf(), a.spec.count, a.spec.dtype, a.spec.op, on_complete,
                                   &d, &r),
                "iallreduce"))
        return;
    const int freed = gpurdma_request_free(r);
    env.check.expect(freed == 1, "free while in flight returned " + std::to_string(freed) + ", want 1");
    if (!last && !env.barrier()) return;
    const bool ran = wait_for([&] { return d.calls.load(std::memory_order_acquire) > 0; },
                              [&] { gpurdma_context_progress(env.context); });
    if (!env.check.expect(ran, "callback of the freed request never ran")) return;
    for (int i = 0; i < 1000; ++i) gpurdma_context_progress(env.context);  // and never again
    env.check.expect(d.calls.load() == 1 && d.status.load() == GPURDMA_OK,
                     "freed request's callback: ran " + std::to_string(d.calls.load()) + " times, status " +
                         status_text(d.status.load()));
    a.check(env.check, env.size, 7, "freed request");
    env.same_everywhere(a.digest(), "freed request");
    env.expect_stats(comm, 2, 1, 0, "set-up and the freed request");
}

void progress_from_another_thread(Env &env)
{
    gpurdma_comm_t *comm = env.comm("driven");
    Buffers a({GPURDMA_DOUBLE, GPURDMA_SUM, 131072, false});
    a.fill(env.rank, 5);
    Completion d;
    gpurdma_request_t *r = nullptr;
    if (!env.set_up(comm, "driven") || !env.ok(comm,
                                               gpurdma_iallreduce(comm, a.sendbuf(), a.recvbuf(), a.spec.count,
                                                                  a.spec.dtype, a.spec.op, on_complete, &d, &r),
                                               "iallreduce"))
        return;
    std::atomic<bool> stop{false};
    std::atomic<std::thread::id> driver_id{};
    std::thread driver([&] {
        driver_id.store(std::this_thread::get_id());
        while (d.calls.load(std::memory_order_acquire) == 0 && !stop.load()) gpurdma_context_progress(env.context);
    });
    // The main thread only watches the flag.
    const bool ran = wait_for([&] { return d.calls.load(std::memory_order_acquire) > 0; },
                              [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
    stop.store(true);
    driver.join();
    if (!env.check.expect(ran, "callback never ran with progress from another thread")) return;
    env.check.expect(
        d.calls.load() == 1 && d.status.load() == GPURDMA_OK,
        "callback ran " + std::to_string(d.calls.load()) + " times, status " + status_text(d.status.load()));
    env.check.expect(d.thread.load() == driver_id.load(), "the callback ran in the progress thread");
    a.check(env.check, env.size, 5, "driven from another thread");
    env.same_everywhere(a.digest(), "driven from another thread");
    env.check.expect(gpurdma_request_test(r) == 1 && gpurdma_request_free(r) == 0, "test 1 then free 0");
    env.expect_stats(comm, 2, 1, 0, "the set-up and one iallreduce");
}

// One thread's calls on its own communicator: blocking and nonblocking, waited by
// test and by the context's progress (which also drives the other threads' calls).
struct ThreadRun {
    int failures = 0;
    int calls = 0;
    int nonblocking = 0;
    uint64_t digest = 1469598103934665603ull;
};

void thread_calls(Env &env, gpurdma_comm_t *comm, int t, int iterations, ThreadRun *out)
{
    RankCheck check(env.rank);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string who = "thread " + std::to_string(t);
    for (int j = 0; j < iterations; ++j) {
        const unsigned salt = static_cast<unsigned>(1000 * t + j);
        const std::string what = who + " call " + std::to_string(j);
        const size_t u = static_cast<size_t>(j) * 37 + static_cast<size_t>(t) * 11;
        Spec s;
        switch (j % 4) {
            case 0: s = {GPURDMA_INT32, GPURDMA_SUM, 1 + u % 2000, false}; break;
            case 1: s = {GPURDMA_DOUBLE, GPURDMA_SUM, 1 + u % 5000, j % 3 == 0}; break;
            case 2: s = {GPURDMA_UINT8, GPURDMA_BAND, 1 + u % 300, true}; break;
            default: s = {GPURDMA_FLOAT, GPURDMA_MAX, j % 25 == 3 ? 32768 : 1 + u % 64, false}; break;
        }
        Buffers b(s);
        b.fill(env.rank, salt);
        gpurdma_status_t st;
        if (j % 2 == 0) {
            st = gpurdma_allreduce(comm, b.sendbuf(), b.recvbuf(), s.count, s.dtype, s.op);
        } else {
            Completion d;
            gpurdma_request_t *r = nullptr;
            st = gpurdma_iallreduce(comm, b.sendbuf(), b.recvbuf(), s.count, s.dtype, s.op, on_complete, &d, &r);
            if (st == GPURDMA_OK) {
                ++out->nonblocking;
                const bool finished = j % 4 == 1 ? wait_for([&] { return gpurdma_request_test(r) == 1; }, [] {})
                                                 : wait_for([&] { return d.calls.load(std::memory_order_acquire) > 0; },
                                                            [&] { gpurdma_context_progress(env.context); });
                if (!check.expect(finished, what + ": never completed")) break;
                check.expect(d.calls.load(std::memory_order_acquire) == 1,
                             what + ": callbacks " + std::to_string(d.calls.load()) + " when complete" +
                                 (j % 4 == 1 ? " (test returned 1 before the callback ran)" : ""));
                check.expect(gpurdma_request_free(r) == 0, what + ": free after completion returns 0");
                st = static_cast<gpurdma_status_t>(d.status.load());
            }
        }
        if (!check.expect(st == GPURDMA_OK,
                          what + ": " + gpurdma_status_name(st) + " " + gpurdma_comm_last_error(comm)))
            break;
        ++out->calls;
        b.check(check, env.size, salt, what);
        out->digest = b.digest(out->digest);
        if (!check.expect(seconds_since(t0) < kWaitS, what + ": over " + std::to_string(kWaitS) + " s")) break;
    }
    out->failures = check.failures();
}

// A callback that takes its time (allowed: it only must not call gpurdma on its
// communicator), so that another thread can test while it runs.
struct SlowCompletion {
    Completion done;
    std::atomic<bool> entered{false};
};

void on_complete_slowly(void *arg, gpurdma_status_t status)
{
    auto *c = static_cast<SlowCompletion *>(arg);
    c->entered.store(true, std::memory_order_release);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    on_complete(&c->done, status);
}

void test_waits_for_the_callback(Env &env)
{
    gpurdma_comm_t *comm = env.comm("slow callback");
    if (!env.set_up(comm, "slow callback")) return;
    Buffers a({GPURDMA_INT32, GPURDMA_SUM, 1000, false});
    a.fill(env.rank, 61);
    SlowCompletion d;
    gpurdma_request_t *r = nullptr;
    if (!env.ok(comm,
                gpurdma_iallreduce(comm, a.sendbuf(), a.recvbuf(), 1000, GPURDMA_INT32, GPURDMA_SUM, on_complete_slowly,
                                   &d, &r),
                "iallreduce"))
        return;
    std::atomic<bool> stop{false};
    std::thread driver([&] {
        while (d.done.calls.load(std::memory_order_acquire) == 0 && !stop.load()) gpurdma_context_progress(env.context);
    });
    // Once the callback is running (in the driver, or already in the start), test.
    const bool entered = wait_for([&] { return d.entered.load(std::memory_order_acquire); },
                                  [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
    env.check.expect(entered, "the callback never started");
    const int first = gpurdma_request_test(r);
    const int calls_then = d.done.calls.load(std::memory_order_acquire);
    env.check.expect(first == 0 || calls_then == 1,
                     "gpurdma_request_test returned 1 while the callback was still running in another thread");
    const bool finished = wait_for([&] { return gpurdma_request_test(r) == 1; }, [] {});
    const int calls = d.done.calls.load(std::memory_order_acquire);
    env.check.expect(finished && calls == 1,
                     "test returned 1 with the callback run " + std::to_string(calls) + " times, want once");
    stop.store(true);
    driver.join();
    env.check.expect(d.done.status.load() == GPURDMA_OK, "status " + status_text(d.done.status.load()));
    env.check.expect(gpurdma_request_free(r) == 0, "free after completion returns 0");
    a.check(env.check, env.size, 61, "slow callback");
}

void threads_on_separate_comms(Env &env, int iterations)
{
    constexpr int kThreads = 3;
    std::vector<gpurdma_comm_t *> comms;
    for (int t = 0; t < kThreads; ++t) {
        comms.push_back(env.comm("thread " + std::to_string(t)));
        if (!env.set_up(comms.back(), "comm " + std::to_string(t))) return;  // one by one, main thread
    }
    std::vector<ThreadRun> runs(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back(thread_calls, std::ref(env), comms[static_cast<size_t>(t)], t, iterations,
                             &runs[static_cast<size_t>(t)]);
    for (auto &th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
        const ThreadRun &run = runs[static_cast<size_t>(t)];
        const std::string who = "thread " + std::to_string(t);
        env.check.expect(run.failures == 0, who + ": " + std::to_string(run.failures) + " failed checks");
        env.check.expect(run.calls == iterations, who + ": " + std::to_string(run.calls) + " calls done");
        env.same_everywhere(run.digest, who + "'s results");
        env.expect_stats(comms[static_cast<size_t>(t)], 1 + static_cast<uint64_t>(run.calls),
                         static_cast<uint64_t>(run.nonblocking), 0, who);
    }
}

void concurrent_start(Env &env)
{
    gpurdma_comm_t *comm = env.comm("concurrent");
    if (!env.set_up(comm, "concurrent")) return;
    Buffers pb({GPURDMA_INT32, GPURDMA_SUM, 64, false});
    Completion dp;
    gpurdma_request_t *persistent = nullptr;
    if (!env.ok(comm,
                gpurdma_allreduce_init(comm, pb.sendbuf(), pb.recvbuf(), 64, GPURDMA_INT32, GPURDMA_SUM, on_complete,
                                       &dp, &persistent),
                "allreduce_init"))
        return;
    Buffers a({GPURDMA_INT32, GPURDMA_SUM, 1000, false});
    a.fill(env.rank, 11);
    if (env.rank == 0) {
        std::atomic<int> a_status{-1};
        std::thread thread_a([&] {
            a_status.store(gpurdma_allreduce(comm, a.sendbuf(), a.recvbuf(), 1000, GPURDMA_INT32, GPURDMA_SUM));
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        env.check.expect(a_status.load() == -1, "thread A still inside its allreduce at 100 ms");
        // Thread B: every starting call is refused and starts nothing.
        Buffers bb({GPURDMA_INT32, GPURDMA_SUM, 8, false});
        bb.fill(env.rank, 12);
        Completion db;
        gpurdma_request_t *rb = reinterpret_cast<gpurdma_request_t *>(&db);  // must be cleared
        gpurdma_status_t st =
            gpurdma_iallreduce(comm, bb.sendbuf(), bb.recvbuf(), 8, GPURDMA_INT32, GPURDMA_SUM, on_complete, &db, &rb);
        env.check.expect(st == GPURDMA_ERR_CONCURRENT,
                         std::string("iallreduce during A: ") + gpurdma_status_name(st) + ", want CONCURRENT");
        env.check.expect(rb == nullptr, "iallreduce during A: no request");
        st = gpurdma_allreduce(comm, bb.sendbuf(), bb.recvbuf(), 8, GPURDMA_INT32, GPURDMA_SUM);
        env.check.expect(st == GPURDMA_ERR_CONCURRENT,
                         std::string("allreduce during A: ") + gpurdma_status_name(st) + ", want CONCURRENT");
        rb = reinterpret_cast<gpurdma_request_t *>(&db);
        st = gpurdma_allreduce_init(comm, bb.sendbuf(), bb.recvbuf(), 8, GPURDMA_INT32, GPURDMA_SUM, on_complete, &db,
                                    &rb);
        env.check.expect(st == GPURDMA_ERR_CONCURRENT,
                         std::string("allreduce_init during A: ") + gpurdma_status_name(st) + ", want CONCURRENT");
        env.check.expect(rb == nullptr, "allreduce_init during A: no request");
        st = gpurdma_request_start(persistent);
        env.check.expect(st == GPURDMA_ERR_CONCURRENT,
                         std::string("request_start during A: ") + gpurdma_status_name(st) + ", want CONCURRENT");
        env.check.expect(a_status.load() == -1, "thread A was inside its allreduce throughout B's calls");
        thread_a.join();
        env.check.expect(a_status.load() == GPURDMA_OK,
                         "thread A's allreduce: " + status_text(a_status.load()) + " " + gpurdma_comm_last_error(comm));
        env.check.expect(db.calls.load() == 0 && dp.calls.load() == 0, "no callback from the refused calls");
        std::vector<unsigned char> untouched(bb.recv.size(), 0xa5);
        env.check.expect(bb.recv == untouched, "the refused calls wrote nothing");
    } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        env.ok(comm, gpurdma_allreduce(comm, a.sendbuf(), a.recvbuf(), 1000, GPURDMA_INT32, GPURDMA_SUM),
               "allreduce A");
    }
    a.check(env.check, env.size, 11, "A");
    // The communicator goes on in step: nothing of B's reached the queue.
    Buffers c({GPURDMA_DOUBLE, GPURDMA_SUM, 3000, false});
    c.fill(env.rank, 13);
    env.ok(comm, gpurdma_allreduce(comm, c.sendbuf(), c.recvbuf(), 3000, GPURDMA_DOUBLE, GPURDMA_SUM), "allreduce C");
    c.check(env.check, env.size, 13, "C after the refused calls");
    env.same_everywhere(c.digest(a.digest()), "A and C");
    env.expect_stats(comm, 3, 0, 0, "set-up, A, C");
    env.check.expect(gpurdma_request_free(persistent) == 0, "free of the never started persistent request");
}

void stuck_peer(Env &env)
{
    gpurdma_comm_t *comm = env.comm("stuck");
    if (!env.set_up(comm, "stuck")) return;
    if (env.rank == 1) {
        // Never calls again: waits until the others are done, then exits without freeing.
        env.leak();
        env.barrier();
        return;
    }
    Buffers a({GPURDMA_INT32, GPURDMA_SUM, 1000, false});
    a.fill(env.rank, 21);
    Completion d;
    gpurdma_request_t *r = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    if (env.ok(
            comm,
            gpurdma_iallreduce(comm, a.sendbuf(), a.recvbuf(), 1000, GPURDMA_INT32, GPURDMA_SUM, on_complete, &d, &r),
            "iallreduce")) {
        const bool ran = wait_for([&] { return gpurdma_request_test(r) == 1; }, [] {}, 8);
        const double took = seconds_since(t0);
        if (env.check.expect(ran, "the request never completed with rank 1 stuck")) {
            const int st = d.status.load();
            env.check.expect(d.calls.load() == 1, "callback ran " + std::to_string(d.calls.load()) + " times");
            env.check.expect(st == GPURDMA_ERR_TIMEOUT || st == GPURDMA_ERR_TRANSPORT,
                             "status " + status_text(st) + ", want TIMEOUT or TRANSPORT");
            env.check.expect(took > 0.9 && took < 3.5, "failed after " + std::to_string(took) + " s, want 1..3 s");
            const std::string error = gpurdma_comm_last_error(comm);
            const std::string self = "(this is rank " + std::to_string(env.rank) + " on host ";
            env.check.expect(error.find("stuck: allreduce timed out after 1 s in node") == 0 &&
                                 error.find("waiting for rank 1") != std::string::npos &&
                                 error.find(self) != std::string::npos,
                             "last error names the stage, rank 1 and this rank's host: \"" + error + "\"");
            env.check.expect(gpurdma_request_free(r) == 0, "free after the failure returns 0");
            // Broken from now on; the first failure's message stays.
            Completion d2;
            gpurdma_request_t *r2 = nullptr;
            gpurdma_status_t later =
                gpurdma_allreduce(comm, a.sendbuf(), a.recvbuf(), 1000, GPURDMA_INT32, GPURDMA_SUM);
            env.check.expect(later == GPURDMA_ERR_BROKEN,
                             std::string("allreduce after the failure: ") + gpurdma_status_name(later));
            later = gpurdma_iallreduce(comm, a.sendbuf(), a.recvbuf(), 1000, GPURDMA_INT32, GPURDMA_SUM, on_complete,
                                       &d2, &r2);
            env.check.expect(later == GPURDMA_ERR_BROKEN && r2 == nullptr,
                             std::string("iallreduce after the failure: ") + gpurdma_status_name(later));
            later = gpurdma_allreduce_init(comm, a.sendbuf(), a.recvbuf(), 1000, GPURDMA_INT32, GPURDMA_SUM,
                                           on_complete, &d2, &r2);
            env.check.expect(later == GPURDMA_ERR_BROKEN && r2 == nullptr,
                             std::string("allreduce_init after the failure: ") + gpurdma_status_name(later));
            env.check.equal(gpurdma_comm_last_error(comm), error, "last error after the later calls");
            env.check.expect(d2.calls.load() == 0, "no callback from the refused calls");
            env.expect_stats(comm, 1, 0, 0, "only the set-up call completed");
        }
    }
    env.barrier();  // rank 1 may go
}

void count_zero(Env &env)
{
    gpurdma_comm_t *comm = env.comm("zero");
    Completion d0;
    gpurdma_request_t *r0 = nullptr;
    // Count 0 as the communicator's first call (no buffers at all).
    if (!env.first_call(
            comm, gpurdma_iallreduce(comm, nullptr, nullptr, 0, GPURDMA_INT32, GPURDMA_SUM, on_complete, &d0, &r0),
            "iallreduce of 0"))
        return;
    const bool zero_done = wait_for([&] { return gpurdma_request_test(r0) == 1; }, [] {});
    env.check.expect(
        zero_done && d0.calls.load() == 1 && d0.status.load() == GPURDMA_OK,
        "iallreduce of 0: callbacks " + std::to_string(d0.calls.load()) + ", status " + status_text(d0.status.load()));
    env.check.expect(gpurdma_request_free(r0) == 0, "free after count 0");
    Completion dp;
    gpurdma_request_t *rp = nullptr;
    if (env.ok(comm,
               gpurdma_allreduce_init(comm, nullptr, nullptr, 0, GPURDMA_FLOAT, GPURDMA_MAX, on_complete, &dp, &rp),
               "allreduce_init of 0") &&
        env.ok(comm, gpurdma_request_start(rp), "start of 0")) {
        const bool done = wait_for([&] { return gpurdma_request_test(rp) == 1; }, [] {});
        env.check.expect(done && dp.calls.load() == 1 && dp.status.load() == GPURDMA_OK, "persistent of 0");
        env.check.expect(gpurdma_request_free(rp) == 0, "free of persistent of 0");
    }
    // Real calls after them: handed on before the set-up, the set-up (blocking), then
    // nonblocking again, the ranks still in step.
    if (!env.hands_on_before_set_up(comm, "after count 0") || !env.set_up(comm, "after count 0")) return;
    Buffers a({GPURDMA_INT32, GPURDMA_SUM, 100, false});
    a.fill(env.rank, 31);
    Completion da;
    gpurdma_request_t *ra = nullptr;
    if (env.ok(
            comm,
            gpurdma_iallreduce(comm, a.sendbuf(), a.recvbuf(), 100, GPURDMA_INT32, GPURDMA_SUM, on_complete, &da, &ra),
            "iallreduce after count 0")) {
        const bool done = wait_for([&] { return gpurdma_request_test(ra) == 1; }, [] {});
        env.check.expect(done && da.status.load() == GPURDMA_OK, "iallreduce after count 0 completed");
        a.check(env.check, env.size, 31, "after count 0");
        env.check.expect(gpurdma_request_free(ra) == 0, "free");
    }
    gpurdma_comm_stats_t s{};
    gpurdma_comm_get_stats(comm, &s);
    env.check.expect(s.nonblocking_calls == 2 && s.persistent_calls == 1 && s.setups == 1,
                     "stats nonblocking/persistent/setups " + std::to_string(s.nonblocking_calls) + "/" +
                         std::to_string(s.persistent_calls) + "/" + std::to_string(s.setups) + ", want 2/1/1");
}

void single_rank(Env &env)
{
    gpurdma_comm_t *comm = env.comm("self");
    Buffers a({GPURDMA_DOUBLE, GPURDMA_SUM, 1000, false}), b({GPURDMA_UINT8, GPURDMA_BAND, 777, true});
    a.fill(0, 41);
    b.fill(0, 42);
    Completion da, db;
    gpurdma_request_t *ra = nullptr, *rb = nullptr;
    if (!env.ok(comm,
                gpurdma_iallreduce(comm, a.sendbuf(), a.recvbuf(), 1000, GPURDMA_DOUBLE, GPURDMA_SUM, on_complete, &da,
                                   &ra),
                "iallreduce on one rank") ||
        !env.ok(comm,
                gpurdma_iallreduce(comm, nullptr, b.recvbuf(), 777, GPURDMA_UINT8, GPURDMA_BAND, on_complete, &db, &rb),
                "in-place iallreduce on one rank"))
        return;
    env.check.expect(wait_for([&] { return gpurdma_request_test(rb) == 1; }, [] {}), "one rank: completes");
    env.check.expect(da.calls.load() == 1 && da.status.load() == GPURDMA_OK && db.calls.load() == 1 &&
                         db.status.load() == GPURDMA_OK,
                     "one rank: each callback once with OK");
    env.check.expect(a.recv == a.send, "one rank: recv is a bit-exact copy of send");
    b.check(env.check, 1, 42, "one rank in place");
    env.check.expect(gpurdma_request_test(ra) == 1 && gpurdma_request_free(ra) == 0 && gpurdma_request_free(rb) == 0,
                     "one rank: test and free");
    Completion dp;
    gpurdma_request_t *rp = nullptr;
    Buffers p({GPURDMA_FLOAT, GPURDMA_MAX, 5000, false});
    if (!env.ok(comm,
                gpurdma_allreduce_init(comm, p.sendbuf(), p.recvbuf(), 5000, GPURDMA_FLOAT, GPURDMA_MAX, on_complete,
                                       &dp, &rp),
                "allreduce_init on one rank"))
        return;
    for (unsigned it = 0; it < 3; ++it) {
        p.fill(0, 50 + it);
        if (!env.ok(comm, gpurdma_request_start(rp), "start on one rank")) return;
        env.check.expect(wait_for([&] { return gpurdma_request_test(rp) == 1; }, [] {}), "one rank: start completes");
        env.check.expect(p.recv == p.send, "one rank persistent: recv is a copy of send");
    }
    env.check.expect(dp.calls.load() == 3, "one rank persistent: three callbacks");
    env.check.expect(gpurdma_request_free(rp) == 0, "one rank: free persistent");
    gpurdma_comm_stats_t s{};
    gpurdma_comm_get_stats(comm, &s);
    env.check.expect(s.nonblocking_calls == 2 && s.persistent_calls == 3 && s.setups == 0,
                     "one rank stats nonblocking/persistent/setups " + std::to_string(s.nonblocking_calls) + "/" +
                         std::to_string(s.persistent_calls) + "/" + std::to_string(s.setups) + ", want 2/3/0");
}

}  // namespace

TEST(Requests, ManyOutstandingCompleteInAnyOrder)
{
    run(kOneNode3, {}, many_outstanding);
    run(kTwoByTwo, {}, many_outstanding);
}

TEST(Requests, BlockingAfterNonblockingRunsInOrder)
{
    run(kOneNode3, {}, blocking_after_nonblocking);
    run(kTwoByTwo, {}, blocking_after_nonblocking);
}

TEST(Requests, PersistentStartsMany)
{
    run(kOneNode3, {}, persistent_starts);
    run(kTwoByTwo, {}, persistent_starts);
}

TEST(Requests, FreeWhileInFlight)
{
    run(kOneNode3, {}, free_while_in_flight);
}

TEST(Requests, ProgressFromAnotherThread)
{
    Options threads;
    threads.threads = 1;
    run(kOneNode3, threads, progress_from_another_thread);
    run(kTwoByTwo, threads, progress_from_another_thread);
}

TEST(Requests, TestIsCompleteOnlyOnceTheCallbackRan)
{
    Options threads;
    threads.threads = 1;
    run(kOneNode3, threads, test_waits_for_the_callback);
}

TEST(Requests, ThreadsOnSeparateCommunicators)
{
    Options threads;
    threads.threads = 1;
    run(kOneNode4, threads, [](Env &env) { threads_on_separate_comms(env, 150); });
    run(kTwoByTwo, threads, [](Env &env) { threads_on_separate_comms(env, 80); });
}

TEST(Requests, ConcurrentStartOnOneCommunicatorIsRefused)
{
    Options threads;
    threads.threads = 1;
    run(kOneNode3, threads, concurrent_start);
}

TEST(Requests, StuckPeerFailsTheRequest)
{
    Options quick;
    quick.timeout_s = 1;
    run(kOneNode3, quick, stuck_peer, 20);
}

TEST(Requests, CountZeroAndSingleRank)
{
    run(kOneNode3, {}, count_zero);
    run(kSingle, {}, single_rank);
}
