// The one wait loop (exec/progress.h) driving fake tasks in one process: completion,
// the timeout (when, and its message naming stage, peer, rank and host), the idle
// clock restarting on movement, failure and decline, network polling while idle, and
// when it spins or yields; and the wait for sends still reading memory before it is
// freed (exec::wait_until_unread).
//
// Yields are counted exactly: this program's sched_yield (which std::this_thread::yield
// calls) counts, then makes the system call. Context-switch counts cannot tell: a
// yielding thread stays runnable, so getrusage's ru_nvcsw does not see it, and how
// often the kernel switches depends on the machine's load. Timings are only bounded
// where the loop promises them, with margins of 10x or more (shared 2-core machines).
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "exec/executor.h"
#include "exec/progress.h"
#include "exec/task.h"
#include "transport/transport.h"

using gpurdma::Status;
using namespace gpurdma::exec;  // the loop under test and its task interface

namespace {
std::atomic<unsigned long> yields{0};
}  // namespace

extern "C" int sched_yield() noexcept
{
    yields.fetch_add(1, std::memory_order_relaxed);
    return static_cast<int>(syscall(SYS_sched_yield));
}

namespace {

using Clock = std::chrono::steady_clock;

const char *const kName = "MPI_COMM_WORLD (cid 0)";
const char *const kWait = "ring reduce-scatter (inter-node), waiting for data from rank 3 on host node-c";
const char *const kFailure = "allreduce failed in ring allgather with rank 1 on host node-a: connection reset";

// A task whose advance() is a script: it may move (position), finish, fail or decline.
class FakeTask : public Task {
public:
    using Script = std::function<State(FakeTask &)>;
    explicit FakeTask(Script script) : script_(std::move(script)) {}

    State advance() override
    {
        ++advances;
        return script_(*this);
    }
    uint64_t position() const override { return moved; }
    std::string describe_wait() const override { return kWait; }
    std::string describe_failure() const override { return kFailure; }

    uint64_t moved = 0;  // the position
    uint64_t advances = 0;  // calls so far, this one included

private:
    Script script_;
};

WaitPolicy policy(bool yield_when_idle, double spin_us, double timeout_s = 30)
{
    WaitPolicy p;
    p.yield_when_idle = yield_when_idle;
    p.spin_us = spin_us;
    p.timeout_s = timeout_s;
    return p;
}

ProgressLoop loop(const WaitPolicy &p, std::function<unsigned()> poll = {})
{
    return ProgressLoop(p, WaitSite{kName, 5, "node-b"}, std::move(poll));
}

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Done after `idle` advances that move nothing.
FakeTask idle_then_done(uint64_t idle)
{
    return FakeTask([idle](FakeTask &t) { return t.advances > idle ? State::Done : State::Running; });
}

// Idle until `seconds` have passed since the first advance, then done.
FakeTask idle_for(double seconds)
{
    auto start = std::make_shared<Clock::time_point>();
    return FakeTask([start, seconds](FakeTask &t) {
        if (t.advances == 1) *start = Clock::now();
        return seconds_since(*start) >= seconds ? State::Done : State::Running;
    });
}

// The policies a wait can run under: yield at once, spin then yield, spin only.
const WaitPolicy kPolicies[] = {policy(true, 20), policy(false, 20), policy(false, -1)};

}  // namespace

TEST(ProgressLoop, YieldCounterSeesEveryYield)
{
    // What the yield tests below rely on.
    const unsigned long before = yields.load();
    for (int i = 0; i < 3; ++i) std::this_thread::yield();
    EXPECT_EQ(yields.load() - before, 3u);
}

TEST(ProgressLoop, CompletesWhenTheTaskIsDone)
{
    for (const WaitPolicy &p : kPolicies) {
        FakeTask moving([](FakeTask &t) {
            ++t.moved;
            return t.advances == 1000 ? State::Done : State::Running;
        });
        const Status st = loop(p).run(moving);
        EXPECT_TRUE(st.is_ok()) << st.message();
        EXPECT_EQ(moving.advances, 1000u);

        FakeTask idle = idle_then_done(300);  // waits without moving, then completes
        const Status st2 = loop(p).run(idle);
        EXPECT_TRUE(st2.is_ok()) << st2.message();
        EXPECT_EQ(idle.advances, 301u);
    }
}

TEST(ProgressLoop, NeverMovingTaskTimesOutNamingStagePeerRankAndHost)
{
    for (WaitPolicy p : kPolicies) {
        p.timeout_s = 0.2;
        FakeTask stuck([](FakeTask &) { return State::Running; });
        const auto t0 = Clock::now();
        const Status st = loop(p).run(stuck);
        const double took = seconds_since(t0);
        EXPECT_EQ(st.code(), GPURDMA_ERR_TIMEOUT) << st.message();
        EXPECT_EQ(st.message(), std::string(kName) + ": allreduce timed out after 0 s in " + kWait +
                                    " (this is rank 5 on host node-b)");
        EXPECT_GE(took, 0.2);
        EXPECT_LT(took, 2.0);
    }
}

TEST(ProgressLoop, TimeoutMessageRoundsTheSeconds)
{
    WaitPolicy p = policy(true, 20, 0.6);  // "%.0f": 0.6 s reads "1 s"
    FakeTask stuck([](FakeTask &) { return State::Running; });
    const Status st = loop(p).run(stuck);
    EXPECT_EQ(st.code(), GPURDMA_ERR_TIMEOUT);
    EXPECT_NE(st.message().find(": allreduce timed out after 1 s in "), std::string::npos) << st.message();
}

TEST(ProgressLoop, SteadyMovementRestartsTheIdleClock)
{
    // Moves every 10 ms for 1 s: three timeouts long in all, never idle for one.
    const double timeout = 0.3, total = 1.0, step = 0.01;
    FakeTask slow([=, start = Clock::now(), last = Clock::now()](FakeTask &t) mutable {
        if (t.advances == 1) start = last = Clock::now();
        if (seconds_since(last) >= step) {
            last = Clock::now();
            ++t.moved;
        }
        return seconds_since(start) >= total ? State::Done : State::Running;
    });
    const auto t0 = Clock::now();
    const Status st = loop(policy(false, 20, timeout)).run(slow);
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_GE(seconds_since(t0), total);
    EXPECT_GT(slow.moved, 3u);  // it did move (at most every 10 ms; the count depends on the machine)
}

TEST(ProgressLoop, TimeoutCountsFromTheLastMovement)
{
    // Moves every 10 ms for 0.6 s (three timeouts), then stops: the timeout comes 0.2 s
    // after the last movement, not after the start.
    const double timeout = 0.2, moving = 0.6;
    Clock::time_point last_move{};
    FakeTask stalls([&, start = Clock::now()](FakeTask &t) mutable {
        if (t.advances == 1) start = last_move = Clock::now();
        if (seconds_since(start) < moving && seconds_since(last_move) >= 0.01) {
            last_move = Clock::now();
            ++t.moved;
        }
        return State::Running;
    });
    const auto t0 = Clock::now();
    const Status st = loop(policy(false, 20, timeout)).run(stalls);
    const double took = seconds_since(t0), after_last_move = seconds_since(last_move);
    EXPECT_EQ(st.code(), GPURDMA_ERR_TIMEOUT) << st.message();
    EXPECT_GT(stalls.moved, 3u);
    EXPECT_GE(took, moving);
    EXPECT_GE(after_last_move, timeout);
    EXPECT_LT(after_last_move, 2.0);
}

TEST(ProgressLoop, FailedTaskReportsItsFailure)
{
    FakeTask failing([](FakeTask &t) {
        ++t.moved;
        return t.advances == 3 ? State::Failed : State::Running;
    });
    const Status st = loop(policy(false, 20)).run(failing);
    EXPECT_EQ(st.code(), GPURDMA_ERR_TRANSPORT);
    EXPECT_EQ(st.message(), std::string(kName) + ": " + kFailure);
    EXPECT_EQ(failing.advances, 3u);  // not advanced after it failed
}

TEST(ProgressLoop, DeclinedTaskIsUnsupported)
{
    FakeTask declining([](FakeTask &t) { return t.advances == 2 ? State::Declined : State::Running; });
    const Status st = loop(policy(true, 20)).run(declining);
    EXPECT_TRUE(st.is_unsupported()) << st.code() << " " << st.message();
    EXPECT_EQ(st.message(), std::string(kName) + ": declined by every rank");
    EXPECT_EQ(declining.advances, 2u);
}

TEST(ProgressLoop, PollsTheNetworkWhileIdle)
{
    // The task completes only once the network was driven K times: nothing else moves it.
    constexpr unsigned K = 500;
    for (const WaitPolicy &p : kPolicies) {
        unsigned polls = 0;
        FakeTask needs_network([&](FakeTask &) { return polls >= K ? State::Done : State::Running; });
        const Status st = loop(p, [&] {
                              ++polls;
                              return 0u;
                          }).run(needs_network);
        EXPECT_TRUE(st.is_ok()) << st.message();
        EXPECT_EQ(polls, K);
    }
}

TEST(ProgressLoop, NetworkEventsCountAsActivity)
{
    // Every poll handles an event: the loop goes straight back to the task instead of
    // yielding, even where it would yield at once when idle.
    constexpr unsigned K = 500;
    unsigned polls = 0;
    FakeTask needs_network([&](FakeTask &) { return polls >= K ? State::Done : State::Running; });
    const unsigned long before = yields.load();
    const Status st = loop(policy(true, 20), [&] {
                          ++polls;
                          return 1u;
                      }).run(needs_network);
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(polls, K);
    EXPECT_EQ(yields.load() - before, 0u);
}

TEST(ProgressLoop, YieldsAtOnceWhenIdleIfTheHostIsOversubscribed)
{
    FakeTask idle = idle_then_done(200);
    const unsigned long before = yields.load();
    const Status st = loop(policy(true, 1e9)).run(idle);  // the spin budget does not matter
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_GE(yields.load() - before, 200u);  // once per idle pass
}

TEST(ProgressLoop, SpinOnlyNeverYields)
{
    const WaitPolicy spin = policy(false, -1);
    FakeTask many = idle_then_done(20000);
    FakeTask timed = idle_for(0.005);
    const unsigned long before = yields.load();
    EXPECT_TRUE(loop(spin).run(many).is_ok());
    EXPECT_TRUE(loop(spin).run(timed).is_ok());
    EXPECT_EQ(yields.load() - before, 0u);
}

TEST(ProgressLoop, SpinsWithinTheBudgetThenYields)
{
    // A short wait spins: no yield before the budget is spent.
    FakeTask short_wait = idle_then_done(10);
    unsigned long before = yields.load();
    EXPECT_TRUE(loop(policy(false, 20)).run(short_wait).is_ok());
    EXPECT_EQ(yields.load() - before, 0u);
    // A budget far longer than the wait: 20 ms of spinning, no yield.
    FakeTask within = idle_for(0.02);
    before = yields.load();
    EXPECT_TRUE(loop(policy(false, 1e9)).run(within).is_ok());
    EXPECT_EQ(yields.load() - before, 0u);
    // 20 ms against a 20 us budget: it yields for the rest of the wait.
    FakeTask beyond = idle_for(0.02);
    before = yields.load();
    EXPECT_TRUE(loop(policy(false, 20)).run(beyond).is_ok());
    EXPECT_GT(yields.load() - before, 0u);
}

TEST(ProgressLoop, MovementRestoresSpinning)
{
    // 20 ms idle (yielding after the 20 us budget), one movement, then a short idle
    // wait: after the movement the loop spins again.
    unsigned long at_move = 0, before_move = 0;
    FakeTask task([&, start = Clock::now(), moved_at = uint64_t{0}](FakeTask &t) mutable {
        if (t.advances == 1) start = Clock::now();
        if (t.moved == 0 && seconds_since(start) >= 0.02) {
            before_move = yields.load();
            ++t.moved;
            moved_at = t.advances;
        }
        if (t.moved == 1 && t.advances == moved_at + 10) {
            at_move = yields.load() - before_move;
            return State::Done;
        }
        return State::Running;
    });
    const unsigned long before = yields.load();
    EXPECT_TRUE(loop(policy(false, 20)).run(task).is_ok());
    EXPECT_GT(before_move - before, 0u) << "it yielded during the long idle wait";
    EXPECT_EQ(at_move, 0u) << "no yield in the short wait after the movement";
}

namespace {

// One send under way that reads its source only when it completes (a zero-copy put),
// after `polls` network polls; until then source_busy() reports its range.
class PendingSend : public gpurdma::transport::PeerTransport {
public:
    PendingSend(const char *src, size_t bytes, unsigned polls) : src_(src), bytes_(bytes), polls_(polls) {}

    gpurdma::transport::Poll try_send(int, const void *, size_t, gpurdma::transport::Reader) override
    {
        return gpurdma::transport::Poll::Failed;
    }
    const void *try_receive(int, size_t, gpurdma::transport::Reader) override { return nullptr; }
    void release(int) override {}
    bool source_busy(const void *ptr, size_t bytes) override
    {
        const char *lo = static_cast<const char *>(ptr);
        return pending() && lo < src_ + bytes_ && src_ < lo + bytes;
    }
    bool sends_pending() override { return pending(); }
    bool failed() const override { return false; }
    const char *error() const override { return ""; }

    // The network: the send completes (reads its source) at the last poll.
    unsigned progress()
    {
        if (polls_ > 0 && --polls_ == 0) wire.assign(src_, src_ + bytes_);
        return 0;
    }
    bool pending() const { return polls_ > 0; }

    std::string wire;  // what the send read

private:
    const char *src_;
    size_t bytes_;
    unsigned polls_;
};

}  // namespace

TEST(WaitUntilUnread, ReturnsOnlyOnceNoSendReadsTheMemory)
{
    // A failed call's chunk buffer: freed right after the wait. Had the wait returned
    // with the send still pending, the send would read freed memory at its completion
    // (AddressSanitizer: heap-use-after-free) and the checks below fail anyway.
    for (const WaitPolicy &p : kPolicies) {
        auto buffer = std::make_unique<std::string>(4096, 'x');
        PendingSend send(buffer->data(), buffer->size(), 300);
        const Status st = wait_until_unread(loop(p, [&] { return send.progress(); }), send,
                                            {{buffer->data(), buffer->size()}}, "teardown");
        EXPECT_TRUE(st.is_ok()) << st.message();
        EXPECT_FALSE(send.pending());
        EXPECT_EQ(send.wire, *buffer);
        buffer.reset();
        send.progress();
    }
}

TEST(WaitUntilUnread, SendsReadingOtherMemoryDoNotHoldIt)
{
    const std::string other(64, 'o'), mine(64, 'm');
    PendingSend send(other.data(), other.size(), 1000000);
    const Status st = wait_until_unread(loop(policy(false, 20)), send, {{mine.data(), mine.size()}}, "teardown");
    EXPECT_TRUE(st.is_ok()) << st.message();
    EXPECT_TRUE(send.pending());
}

TEST(WaitUntilUnread, ASendThatNeverEndsTimesOutNamingTheWait)
{
    const std::string buffer(64, 'b');
    PendingSend send(buffer.data(), buffer.size(), 1000000000);
    const auto t0 = Clock::now();
    const Status st = wait_until_unread(loop(policy(true, 20, 0.2)), send, {{buffer.data(), buffer.size()}},
                                        "device hierarchical teardown, waiting for rail sends");
    EXPECT_EQ(st.code(), GPURDMA_ERR_TIMEOUT);
    EXPECT_NE(st.message().find("device hierarchical teardown, waiting for rail sends"), std::string::npos)
        << st.message();
    EXPECT_LT(seconds_since(t0), 5.0);
    EXPECT_TRUE(send.pending());
}

// One idle rule for blocking loops and stepped requests: gaps between clock reads count
// up to IdleTime::kMaxGap each (a process not run, or a caller computing between two
// tests, was not waiting on its peers all that time).
TEST(IdleTime, EachGapCountsAtMostTheCap)
{
    using std::chrono::milliseconds;
    gpurdma::exec::IdleTime t;
    const auto t0 = std::chrono::steady_clock::time_point(std::chrono::seconds(1000));
    EXPECT_DOUBLE_EQ(t.add_read(t0), 0.0);  // the first read starts the count
    EXPECT_NEAR(t.add_read(t0 + milliseconds(10)), 0.010, 1e-9);
    EXPECT_NEAR(t.add_read(t0 + milliseconds(5010)), 0.010 + gpurdma::exec::IdleTime::kMaxGap, 1e-9);
    t.reset();
    EXPECT_DOUBLE_EQ(t.seconds(), 0.0);
    EXPECT_DOUBLE_EQ(t.add_read(t0 + milliseconds(6000)), 0.0);
}
