// exec::Executor over local work that finishes later (exec/local_work.h), as a GPU's
// does: whatever the schedule and however late each piece of work runs, every rank
// ends with the bits the host's work gives; and work said to be done before it ran is
// caught (the simulator overwrites a slot once it is released, so work still reading
// it reads garbage), which is what the fences of the GPU rail guard against.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/local_work.h"
#include "plan/planner.h"
#include "plan/rail.h"
#include "reduce/reduce.h"
#include "support/shapes.h"
#include "support/simulator.h"

using gpurdma::Status;
using gpurdma::plan::Algorithm;
using gpurdma::plan::PlanParams;
using gpurdma::plan::Schedule;
using gpurdma::testing::double_inputs;
using gpurdma::testing::nodes_of;
using gpurdma::topo::Topology;

namespace {

// Each piece of work runs only at the `delay`-th finished() poll after it started, or,
// if `honest` is false, when the next piece starts (finished() says yes at once).
// Sends are staged through two buffers of its own when `stage_sends`, the copy into
// them deferred like the rest; `refuse_first` send_source calls find no buffer free.
class DeferredWork : public gpurdma::exec::LocalWork {
public:
    DeferredWork(int delay, bool stage_sends, bool honest = true, int refuse_first = 0)
        : delay_(delay), stage_(stage_sends), honest_(honest), refusals_(refuse_first)
    {}

    Status copy(void *dst, const void *src, size_t bytes) override
    {
        return defer([=] { std::memmove(dst, src, bytes); });
    }
    Status reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                  size_t count) override
    {
        if (fail_reduce_) return Status::error(GPURDMA_ERR_TRANSPORT, "deferred reduce refused (test)");
        return defer([=] { gpurdma::reduce::apply(op, dtype, dst, a, b, count); });
    }
    Status send_source(const void *src, size_t bytes, const void **from) override
    {
        if (!stage_) {
            *from = src;
            return Status::ok();
        }
        *from = nullptr;
        if (refusals_ > 0) {
            --refusals_;
            return Status::ok();
        }
        std::vector<char> &buf = staging_[next_++ % 2];
        buf.resize(bytes);
        *from = buf.data();
        return defer([&buf, src, bytes] { std::memcpy(buf.data(), src, bytes); });
    }
    gpurdma::transport::Reader reader() const override { return gpurdma::transport::Reader::Cpu; }
    Status finished(bool *done) override
    {
        if (pending_ && honest_ && --polls_left_ > 0) {
            *done = false;
            return Status::ok();
        }
        if (honest_) run();
        *done = true;
        return Status::ok();
    }
    void fail_reductions() { fail_reduce_ = true; }
    int pieces() const { return pieces_; }

private:
    Status defer(std::function<void()> work)
    {
        run();  // a dishonest engine's last piece runs now, late
        pending_ = std::move(work);
        polls_left_ = delay_;
        ++pieces_;
        return Status::ok();
    }
    void run()
    {
        if (pending_) pending_();
        pending_ = nullptr;
    }

    int delay_;
    bool stage_;
    bool honest_;
    int refusals_;
    bool fail_reduce_ = false;
    std::function<void()> pending_;
    int polls_left_ = 0;
    int pieces_ = 0;
    std::vector<char> staging_[2];
    size_t next_ = 0;
};

PlanParams small_params(Algorithm algorithm)
{
    PlanParams p;
    p.algorithm = algorithm;
    p.chunk_size = 1024;
    p.small_msg_max = 256;
    return p;
}

struct Outcome {
    gpurdma::testing::SimulationResult result;
    int pieces = 0;  // pieces of deferred work, over all ranks
};

// The schedules run once with each rank's work from make(rank) (null: the host's).
Outcome run(const Topology &t, const std::vector<Schedule> &schedules, const std::vector<std::vector<char>> &in,
            size_t count, bool in_place, const std::function<std::unique_ptr<DeferredWork>(int)> &make)
{
    std::vector<std::unique_ptr<DeferredWork>> works;
    for (int r = 0; r < t.size; ++r) works.push_back(make ? make(r) : nullptr);
    Outcome out;
    out.result = gpurdma::testing::simulate_schedules(t, schedules, in, count, GPURDMA_DOUBLE, GPURDMA_SUM, in_place, 2,
                                                      [&](int r) { return works[size_t(r)].get(); });
    for (const auto &w : works) out.pieces += w ? w->pieces() : 0;
    return out;
}

std::vector<Schedule> full_schedules(const Topology &t, size_t count, bool in_place, const PlanParams &p)
{
    std::vector<Schedule> s;
    for (int r = 0; r < t.size; ++r) s.push_back(gpurdma::plan::build(t, r, count, sizeof(double), in_place, p));
    return s;
}

std::vector<Schedule> rail_schedules(const Topology &t, int slice, size_t count, const PlanParams &p)
{
    std::vector<Schedule> s;
    for (int r = 0; r < t.size; ++r)
        s.push_back(gpurdma::plan::build_rail_allreduce(t, r, slice, count, sizeof(double), p));
    return s;
}

// Same bits with deferred work as with the host's, for every rank.
void expect_host_bits(const Topology &t, const std::vector<Schedule> &schedules, size_t count, bool in_place,
                      const std::string &what)
{
    const auto in = double_inputs(t.size, count, static_cast<uint32_t>(count * 31 + t.size));
    const Outcome host = run(t, schedules, in, count, in_place, nullptr);
    ASSERT_TRUE(host.result.ok) << host.result.error << " " << what;
    for (int delay : {1, 3})
        for (bool stage : {false, true}) {
            const Outcome late = run(t, schedules, in, count, in_place,
                                     [&](int) { return std::make_unique<DeferredWork>(delay, stage); });
            ASSERT_TRUE(late.result.ok) << late.result.error << " " << what << " delay " << delay;
            for (int r = 0; r < t.size; ++r)
                ASSERT_EQ(0, std::memcmp(late.result.outputs[size_t(r)].data(), host.result.outputs[size_t(r)].data(),
                                         count * sizeof(double)))
                    << what << ": rank " << r << " differs from the host's work, delay " << delay << " staged sends "
                    << stage;
        }
}

}  // namespace

TEST(LocalWork, RailsOnDeferredWorkGiveTheHostBits)
{
    const PlanParams p = small_params(Algorithm::Auto);
    for (const auto &sizes : std::vector<std::vector<int>>{{2, 2}, {3, 1, 2}, {1, 1, 1, 1}, {2, 2, 2, 2, 2}}) {
        const Topology t = nodes_of(sizes);
        for (size_t count : {size_t(1), size_t(20), size_t(33), size_t(700)})  // recursive doubling, then the ring
            for (int slice = 0; slice < t.max_ppn(); ++slice)
                expect_host_bits(t, rail_schedules(t, slice, count, p), count, true,
                                 t.summary() + " slice " + std::to_string(slice) + " count " + std::to_string(count));
    }
}

TEST(LocalWork, WholeSchedulesOnDeferredWorkGiveTheHostBits)
{
    for (Algorithm a : {Algorithm::Ring, Algorithm::RecursiveDoubling, Algorithm::Hierarchical}) {
        const PlanParams p = small_params(a);
        for (const auto &sizes : std::vector<std::vector<int>>{{5}, {2, 2}, {3, 1, 2}}) {
            const Topology t = nodes_of(sizes);
            for (size_t count : {size_t(1), size_t(100), size_t(600)})
                for (bool in_place : {false, true})  // not in place: the schedules' local copies too
                    expect_host_bits(t, full_schedules(t, count, in_place, p), count, in_place,
                                     std::string(gpurdma::plan::algorithm_name(a)) + " " + t.summary() + " count " +
                                         std::to_string(count) + (in_place ? " in place" : ""));
        }
    }
}

namespace {

// One rail of 2x2 nodes (small pieces, so the ring pipelines), its inputs, and what the
// host's work makes of them.
struct RailCase {
    RailCase(int slice, size_t n, uint32_t seed)
        : t(nodes_of({2, 2})),
          count(n),
          schedules(rail_schedules(t, slice, n, small_params(Algorithm::Auto))),
          in(double_inputs(t.size, n, seed)),
          host(with(nullptr))
    {}
    Outcome with(const std::function<std::unique_ptr<DeferredWork>(int)> &make) const
    {
        return run(t, schedules, in, count, true, make);
    }
    bool same_as_host(const Outcome &o, int r) const
    {
        return std::memcmp(o.result.outputs[size_t(r)].data(), host.result.outputs[size_t(r)].data(),
                           count * sizeof(double)) == 0;
    }

    Topology t;
    size_t count;
    std::vector<Schedule> schedules;
    std::vector<std::vector<char>> in;
    Outcome host;
};

}  // namespace

// Work that says it is done before it ran: the slot goes back with the reduction still
// to read it, a staged send goes out before its copy. The results must show it.
TEST(LocalWork, WorkSaidDoneBeforeItRanIsCaught)
{
    const RailCase c(0, 700, 7);
    ASSERT_TRUE(c.host.result.ok) << c.host.result.error;
    for (bool stage : {false, true}) {
        const Outcome lying = c.with([&](int) { return std::make_unique<DeferredWork>(1, stage, /*honest=*/false); });
        bool differs = !lying.result.ok;
        for (int r = 0; r < c.t.size && !differs; ++r) differs = !c.same_as_host(lying, r);
        EXPECT_TRUE(differs) << "work reported done before it ran went unnoticed (staged sends " << stage << ")";
    }
}

// No staging buffer free yet: the send waits and goes once one is.
TEST(LocalWork, ASendWaitsForAStagingBuffer)
{
    const RailCase c(1, 700, 11);
    const Outcome waited =
        c.with([&](int) { return std::make_unique<DeferredWork>(2, true, true, /*refuse_first=*/5); });
    ASSERT_TRUE(waited.result.ok) << waited.result.error;
    EXPECT_GT(waited.pieces, 0);
    for (int r = 0; r < c.t.size; ++r) EXPECT_TRUE(c.same_as_host(waited, r)) << "rank " << r;
}

// Work that cannot start fails the step with the work's own message.
TEST(LocalWork, AFailedReductionFailsTheScheduleWithItsMessage)
{
    const RailCase c(0, 100, 3);
    const Outcome failed = c.with([](int r) {
        auto w = std::make_unique<DeferredWork>(1, false);
        if (r == 2) w->fail_reductions();
        return w;
    });
    ASSERT_FALSE(failed.result.ok);
    EXPECT_NE(std::string::npos, failed.result.error.find("deferred reduce refused (test)")) << failed.result.error;
    EXPECT_NE(std::string::npos, failed.result.error.find("rank 2")) << failed.result.error;
}

// The host's own work: everything done at once, a send reads its source.
TEST(LocalWork, HostWorkIsDoneAtOnce)
{
    auto &w = gpurdma::exec::HostLocalWork::instance();
    double a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, out[3] = {};
    ASSERT_TRUE(w.reduce(GPURDMA_SUM, GPURDMA_DOUBLE, out, a, b, 3).is_ok());
    bool done = false;
    ASSERT_TRUE(w.finished(&done).is_ok());
    EXPECT_TRUE(done);
    EXPECT_EQ(33.0, out[2]);
    ASSERT_TRUE(w.copy(out, a, sizeof a).is_ok());
    EXPECT_EQ(3.0, out[2]);
    const void *from = nullptr;
    ASSERT_TRUE(w.send_source(b, sizeof b, &from).is_ok());
    EXPECT_EQ(static_cast<const void *>(b), from);
    EXPECT_FALSE(w.reduce(GPURDMA_BAND, GPURDMA_DOUBLE, out, a, b, 3).is_ok()) << "BAND on double is not defined";
}
