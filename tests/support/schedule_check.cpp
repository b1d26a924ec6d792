#include "support/schedule_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>

#include "base/status.h"
#include "base/text.h"
#include "exec/executor.h"
#include "exec/task.h"
#include "plan/planner.h"

namespace gpurdma::testing {

namespace {

// One rank's schedule as the progress loop's task, described like the communicator does.
class ScheduleTask : public exec::Task {
public:
    ScheduleTask(const plan::Schedule &s, transport::PeerTransport &t, const topo::Topology &topology,
                 const std::vector<std::string> &hosts, int rank, gpurdma_op_t op, gpurdma_dtype_t dtype,
                 const void *send, void *recv)
        : exec_(s, t, op, dtype, send, recv), topo_(topology), hosts_(hosts), rank_(rank)
    {}
    exec::State advance() override { return exec_.advance(); }
    uint64_t position() const override { return exec_.position(); }
    std::string describe_wait() const override
    {
        const plan::Step *step = exec_.current();
        if (!step) return "completion, waiting for sends to complete";
        return stage(*step) + ", waiting for " + describe_rank(step->peer, hosts_);
    }
    std::string describe_failure() const override
    {
        const plan::Step *step = exec_.current();
        return "allreduce failed in " + (step ? stage(*step) : std::string("completion")) + ": " + exec_.error();
    }

private:
    std::string stage(const plan::Step &step) const
    {
        std::string text = plan::phase_name(step.phase);
        if (step.peer >= 0)
            text += topo_.node_of[static_cast<size_t>(step.peer)] == topo_.node_of[static_cast<size_t>(rank_)]
                        ? " (intra-node)"
                        : " (inter-node)";
        return text;
    }
    exec::Executor exec_;
    const topo::Topology &topo_;
    const std::vector<std::string> &hosts_;  // rank -> host, for messages
    int rank_;
};

// Rank r's input: full-range int32 (sums wrap) or multiples of 1/4 within +-250,
// whose float sums are exact in any order.
std::vector<char> input(int rank, size_t count, gpurdma_dtype_t dtype, uint32_t seed)
{
    std::vector<char> bytes(count * 4);
    std::mt19937 rng(seed * 977u + static_cast<uint32_t>(rank) * 131u + static_cast<uint32_t>(count));
    for (size_t i = 0; i < count; ++i) {
        if (dtype == GPURDMA_FLOAT) {
            const float v = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) * 0.25f;
            std::memcpy(bytes.data() + i * 4, &v, 4);
        } else {
            const uint32_t v = rng();
            std::memcpy(bytes.data() + i * 4, &v, 4);
        }
    }
    return bytes;
}

std::vector<char> reference(int size, size_t count, gpurdma_dtype_t dtype, gpurdma_op_t op, uint32_t seed)
{
    std::vector<char> out = input(0, count, dtype, seed);
    for (int r = 1; r < size; ++r) {
        const std::vector<char> in = input(r, count, dtype, seed);
        for (size_t i = 0; i < count; ++i) {
            char *acc = out.data() + i * 4;
            const char *x = in.data() + i * 4;
            if (dtype == GPURDMA_FLOAT) {
                float a, b;
                std::memcpy(&a, acc, 4);
                std::memcpy(&b, x, 4);
                a += b;
                std::memcpy(acc, &a, 4);
            } else {
                int32_t a, b;
                std::memcpy(&a, acc, 4);
                std::memcpy(&b, x, 4);
                const int32_t v = op == GPURDMA_MAX
                                      ? std::max(a, b)
                                      : static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
                std::memcpy(acc, &v, 4);
            }
        }
    }
    return out;
}

// Index of the first element (4 bytes) that differs, or -1.
long first_difference(const std::vector<char> &got, const std::vector<char> &want)
{
    for (size_t i = 0; i < want.size(); i += 4)
        if (std::memcmp(got.data() + i, want.data() + i, 4) != 0) return static_cast<long>(i / 4);
    return -1;
}

}  // namespace

void check_schedule_allreduces(const topo::Topology &t, const std::vector<std::string> &hosts, int rank,
                               size_t chunk_size, transport::PeerTransport &router, const exec::ProgressLoop &loop,
                               RankCheck &check)
{
    using plan::Algorithm;
    plan::PlanParams params;
    params.chunk_size = chunk_size;
    // With 16 KiB slots: 1 and 7 elements, 4 KB (one active message), 12 KB (above the
    // active-message limit, one slot) and 200 KB in slot-sized pieces (pipelined).
    const size_t counts[] = {1, 7, 1001, 3001, 50001};
    const struct {
        gpurdma_dtype_t dtype;
        gpurdma_op_t op;
    } kinds[] = {{GPURDMA_FLOAT, GPURDMA_SUM}, {GPURDMA_INT32, GPURDMA_SUM}, {GPURDMA_INT32, GPURDMA_MAX}};
    uint32_t seed = 0;
    for (Algorithm algorithm : {Algorithm::Ring, Algorithm::Hierarchical, Algorithm::RecursiveDoubling}) {
        params.algorithm = algorithm;
        for (size_t count : counts)
            for (const auto &k : kinds)
                for (bool in_place : {false, true}) {
                    ++seed;
                    const std::string what = std::string(plan::algorithm_name(algorithm)) + " " +
                                             std::to_string(count) + " x " + gpurdma_dtype_name(k.dtype) + " " +
                                             gpurdma_op_name(k.op) + (in_place ? " in place" : "");
                    const plan::Schedule s = plan::build(t, rank, count, 4, in_place, params);
                    const std::vector<char> mine = input(rank, count, k.dtype, seed);
                    std::vector<char> recv = in_place ? mine : std::vector<char>(count * 4, '\x7f');
                    ScheduleTask task(s, router, t, hosts, rank, k.op, k.dtype, in_place ? nullptr : mine.data(),
                                      recv.data());
                    const Status st = loop.run(task);
                    if (!check.expect(st.is_ok(), what + ": " + st.message())) return;  // the peers fail too
                    const long at = first_difference(recv, reference(t.size, count, k.dtype, k.op, seed));
                    check.expect(at < 0, what + ": element " + std::to_string(at) + " differs from the reference");
                    if (!in_place)
                        check.expect(mine == input(rank, count, k.dtype, seed), what + ": send buffer changed");
                }
    }
}

}  // namespace gpurdma::testing
