// Rabenseifner's halving-doubling (plan/halving_doubling.h) and the rail stage's choices
// (plan/rail_choice.h): every rank's result checked against a fold in rank order in the
// simulator, flat and as the hierarchical schedule's rail at any node count; the messages
// matched pair by pair and every peer one the channels are made for; bit-identical floats.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "plan/halving_doubling.h"
#include "plan/neighbors.h"
#include "plan/planner.h"
#include "plan/rail.h"
#include "plan/rail_choice.h"
#include "reduce/reduce.h"
#include "support/shapes.h"
#include "support/simulator.h"

using gpurdma::plan::Algorithm;
using gpurdma::plan::PlanParams;
using gpurdma::plan::Schedule;
using gpurdma::plan::StepKind;
using gpurdma::testing::int_inputs;
using gpurdma::testing::nodes_of;
using gpurdma::topo::Topology;

namespace {

void check(const Topology &t, size_t count, const PlanParams &p, int slots, bool in_place)
{
    const auto in = int_inputs(t.size, count, static_cast<uint32_t>(t.size * 131 + count));
    for (gpurdma_op_t op : {GPURDMA_SUM, GPURDMA_MAX, GPURDMA_BXOR}) {
        const auto res = gpurdma::testing::simulate(t, in, count, GPURDMA_INT32, op, in_place, p, slots);
        ASSERT_TRUE(res.ok) << res.error << " shape=" << t.summary() << " count=" << count << " slots=" << slots;
        std::vector<char> want = in[0];
        for (size_t r = 1; r < in.size(); ++r)
            gpurdma::reduce::apply(op, GPURDMA_INT32, want.data(), want.data(), in[r].data(), count);
        for (int r = 0; r < t.size; ++r)
            ASSERT_EQ(0, std::memcmp(res.outputs[static_cast<size_t>(r)].data(), want.data(), want.size()))
                << "rank " << r << " shape=" << t.summary() << " count=" << count << " op=" << gpurdma_op_name(op)
                << " slots=" << slots;
    }
}

// Every send is received by its peer in the same order and size, no message exceeds a
// landing slot, and every peer is one plan::peers lists (the channels set up for it).
void expect_wired(const Topology &t, size_t count, size_t elem, Algorithm algorithm, const PlanParams &p)
{
    std::map<std::pair<int, int>, std::vector<size_t>> sent, received;
    for (int r = 0; r < t.size; ++r) {
        const auto peers = gpurdma::plan::peers(t, r);
        for (const auto &st : gpurdma::plan::build(t, r, count, elem, false, algorithm, p).steps) {
            if (st.peer < 0) continue;
            EXPECT_TRUE(std::binary_search(peers.begin(), peers.end(), st.peer))
                << t.summary() << ": rank " << r << " talks to " << st.peer << ", not one of its peers";
            if (st.kind == StepKind::Send) {
                EXPECT_LE(st.bytes, p.chunk_size);
                sent[{r, st.peer}].push_back(st.bytes);
            } else {
                received[{st.peer, r}].push_back(st.bytes);
            }
        }
    }
    EXPECT_EQ(sent, received) << t.summary() << " count=" << count;
}

}  // namespace

TEST(HalvingDoubling, FlatEveryGroupSize)
{
    PlanParams p;
    p.algorithm = Algorithm::HalvingDoubling;
    p.chunk_size = 64;  // 16 ints per piece: many pieces, every boundary
    for (int n = 2; n <= 17; ++n)
        for (size_t count : {1ul, 2ul, 5ul, 16ul, 17ul, 100ul, 257ul, 1000ul})
            for (int slots : {1, 2, 4}) {
                p.rail_window = slots;
                check(gpurdma::plan::single_node(n), count, p, slots, count % 2 == 0);
            }
}

TEST(HalvingDoubling, FlatAcrossNodesWired)
{
    PlanParams p;
    p.chunk_size = 256;
    p.rail_window = 2;
    for (const auto &shape : std::vector<std::vector<int>>{{1, 1, 1}, {1, 1, 1, 1, 1, 1}, {2, 3}, {3, 1, 2}})
        for (size_t count : {1ul, 7ul, 300ul, 5000ul}) {
            const Topology t = nodes_of(shape);
            expect_wired(t, count, 4, Algorithm::HalvingDoubling, p);
            p.algorithm = Algorithm::HalvingDoubling;
            check(t, count, p, 2, false);
            p.algorithm = Algorithm::Auto;
        }
}

TEST(HalvingDoubling, FloatBitIdenticalOnEveryRank)
{
    PlanParams p;
    p.algorithm = Algorithm::HalvingDoubling;
    p.chunk_size = 512;
    p.rail_window = 2;
    for (int n : {2, 3, 6, 7, 8, 13}) {
        const size_t count = 999;
        std::vector<std::vector<char>> in(static_cast<size_t>(n), std::vector<char>(count * sizeof(double)));
        std::mt19937_64 rng(static_cast<uint64_t>(n));
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        for (auto &b : in) {
            auto *d = reinterpret_cast<double *>(b.data());
            for (size_t i = 0; i < count; ++i) d[i] = u(rng) * std::ldexp(1.0, static_cast<int>(i % 40) - 20);
        }
        const auto res = gpurdma::testing::simulate(in, count, GPURDMA_DOUBLE, GPURDMA_SUM, false, p, 2);
        ASSERT_TRUE(res.ok) << res.error;
        for (int r = 1; r < n; ++r)
            EXPECT_EQ(0, std::memcmp(res.outputs[static_cast<size_t>(r)].data(), res.outputs[0].data(), count * 8))
                << "rank " << r << " differs, n=" << n;
    }
}

// The hierarchical schedule with its rail forced to each algorithm, in units of one
// chunk, of three, and of the whole slice, at node counts that are powers of two and not.
TEST(HalvingDoubling, HierarchicalRailsEveryUnit)
{
    PlanParams p;
    p.algorithm = Algorithm::Hierarchical;
    p.chunk_size = 64;
    p.small_msg_max = 32;
    const std::vector<std::vector<int>> shapes = {
        {2, 2}, {3, 1, 2}, {2, 2, 2}, {1, 1, 1, 1, 1}, {2, 2, 2, 2, 2}, {4, 4, 4, 4, 4, 4, 4}, {1, 2, 3, 4, 5, 6}};
    for (Algorithm rail : {Algorithm::HalvingDoubling, Algorithm::Ring, Algorithm::Auto})
        for (size_t unit : {size_t(64), size_t(192), size_t(1) << 30})
            for (const auto &shape : shapes)
                for (size_t count : {1ul, 17ul, 129ul, 1000ul}) {
                    p.rail_algorithm = rail;
                    p.rail_unit = unit;
                    p.rail_window = 2;
                    const Topology t = nodes_of(shape, count % 3 == 0);
                    expect_wired(t, count, 4, Algorithm::Hierarchical, p);
                    check(t, count, p, 2, (count & 1) != 0);
                }
}

// On a cluster's cost model (a 400 Gb/s rail, a few us per message): recursive doubling
// for what fits one message, halving-doubling for large units across many nodes, units
// of one chunk on few nodes, of the whole slice on many, smaller where the node stages
// are as slow as the rail.
TEST(RailChoice, FollowsTheNodeCountAndSize)
{
    PlanParams p;
    p.model.net = {6.0, 50.0};
    p.model.reduce_gbps = 1000;
    p.rail_window = 4;
    EXPECT_EQ(gpurdma::plan::choose_rail_algorithm(p, 128, 4), Algorithm::RecursiveDoubling);
    EXPECT_EQ(gpurdma::plan::choose_rail_algorithm(p, 128, 32u << 20), Algorithm::HalvingDoubling);
    EXPECT_EQ(gpurdma::plan::choose_rail_algorithm(p, 2, 32u << 20), Algorithm::Ring);  // one exchange each way
    const size_t count = (64u << 20) / 4;
    const auto few_nodes = nodes_of(std::vector<int>(2, 8)), many_nodes = nodes_of(std::vector<int>(128, 8));
    // Few nodes: one chunk per unit.
    EXPECT_EQ(gpurdma::plan::rail_unit_elems(few_nodes, count, 4, p) * 4, p.chunk_size);
    // Many nodes, node stages much faster than the rail: the whole slice, one unit.
    p.model.shm = {0.0, 1e9};
    p.model.reduce_gbps = 1e9;
    EXPECT_EQ(gpurdma::plan::rail_unit_elems(many_nodes, count, 4, p) * 4, (64u << 20) / 8);
    // Node stages as slow as the rail: smaller units, so that they overlap it.
    p.model.shm = {0.0, 50.0 / 7};
    const size_t overlapped = gpurdma::plan::rail_unit_elems(many_nodes, count, 4, p) * 4;
    EXPECT_LT(overlapped, (64u << 20) / 8);
    EXPECT_GE(overlapped, p.chunk_size);
    p.rail_unit = 1u << 20;  // the parameter wins
    EXPECT_EQ(gpurdma::plan::rail_unit_elems(nodes_of(std::vector<int>(128, 8)), count, 4, p), (1u << 20) / 4);
    // Every algorithm's estimate grows with the bytes.
    for (Algorithm a : {Algorithm::Ring, Algorithm::HalvingDoubling, Algorithm::RecursiveDoubling})
        EXPECT_LT(gpurdma::plan::rail_us(p, a, 16, 4096), gpurdma::plan::rail_us(p, a, 16, 1u << 20));
}

TEST(RailChoice, PartnersAreSymmetric)
{
    for (int n = 2; n <= 40; ++n)
        for (int i = 0; i < n; ++i)
            for (int j : gpurdma::plan::halving_doubling_partners(i, n)) {
                ASSERT_GE(j, 0);
                ASSERT_LT(j, n);
                const auto back = gpurdma::plan::halving_doubling_partners(j, n);
                EXPECT_NE(std::find(back.begin(), back.end(), i), back.end()) << n << ": " << i << " -> " << j;
            }
}

// Halving-doubling needs no channel the other schedules lack (landing slots do not grow):
// every partner is a recursive-doubling one (plan::neighbors) or at a distance 2^k, as
// the rail's binomial trees already have.
TEST(RailChoice, PartnersAreChannelsThatExistAlready)
{
    for (int n = 2; n <= 70; ++n)
        for (int i = 0; i < n; ++i) {
            const auto nb = gpurdma::plan::neighbors(n, i);
            for (int j : gpurdma::plan::halving_doubling_partners(i, n)) {
                const int d = std::abs(i - j);
                const bool tree = (d & (d - 1)) == 0 || ((n - d) & (n - d - 1)) == 0;
                EXPECT_TRUE(tree || std::find(nb.begin(), nb.end(), j) != nb.end()) << n << ": " << i << " -> " << j;
            }
        }
}
