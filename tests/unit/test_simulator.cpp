// Schedules executed for every rank by the in-process simulator, checked against a
// reference fold in rank order.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>

#include "reduce/reduce.h"
#include "support/shapes.h"
#include "support/simulator.h"
#include "topo/fabric_order.h"

using gpurdma::plan::Algorithm;
using gpurdma::plan::PlanParams;
using gpurdma::testing::int_inputs;
using gpurdma::testing::nodes_of;
using gpurdma::testing::simulate;

namespace {

std::vector<char> reference(const std::vector<std::vector<char>> &in, size_t count, gpurdma_dtype_t t, gpurdma_op_t op)
{
    std::vector<char> acc = in[0];
    for (size_t r = 1; r < in.size(); ++r) gpurdma::reduce::apply(op, t, acc.data(), acc.data(), in[r].data(), count);
    return acc;
}

void check_shape(int n, size_t count, const PlanParams &params, int slots, bool in_place)
{
    const auto in = int_inputs(n, count, static_cast<uint32_t>(n * 7919 + count));
    for (gpurdma_op_t op : {GPURDMA_SUM, GPURDMA_MAX, GPURDMA_BXOR}) {
        const auto res = simulate(in, count, GPURDMA_INT32, op, in_place, params, slots);
        ASSERT_TRUE(res.ok) << res.error << " n=" << n << " count=" << count;
        const auto want = reference(in, count, GPURDMA_INT32, op);
        for (int r = 0; r < n; ++r)
            ASSERT_EQ(0, std::memcmp(res.outputs[r].data(), want.data(), want.size()))
                << "rank " << r << " n=" << n << " count=" << count << " op=" << gpurdma_op_name(op);
    }
}

}  // namespace

TEST(Simulator, RingAllShapesSmall)
{
    PlanParams p;
    p.algorithm = Algorithm::Ring;
    p.chunk_size = 64;  // 16 ints per piece: many pieces, every boundary
    for (int n = 2; n <= 9; ++n)
        for (size_t count : {1ul, 2ul, 7ul, 15ul, 16ul, 17ul, 31ul, 32ul, 33ul, 100ul, 257ul})
            for (int slots : {1, 2, 4}) check_shape(n, count, p, slots, (count % 2) == 0);
}

TEST(Simulator, RecursiveDoublingAllShapes)
{
    PlanParams p;
    p.algorithm = Algorithm::RecursiveDoubling;
    p.chunk_size = 4096;
    for (int n = 2; n <= 33; ++n)
        for (size_t count : {1ul, 3ul, 64ul})
            for (bool in_place : {false, true}) check_shape(n, count, p, 2, in_place);
}

TEST(Simulator, AutoAcrossTheThreshold)
{
    PlanParams p;
    p.chunk_size = 256;
    p.small_msg_max = 128;
    for (int n : {2, 3, 5, 8})
        for (size_t count : {31ul, 32ul, 33ul, 63ul, 64ul, 65ul}) check_shape(n, count, p, 3, false);
}

TEST(Simulator, FloatResultsBitIdenticalOnEveryRank)
{
    for (Algorithm alg : {Algorithm::Ring, Algorithm::RecursiveDoubling}) {
        PlanParams p;
        p.algorithm = alg;
        p.chunk_size = 4096;
        for (int n : {2, 3, 6, 7, 8, 13}) {
            const size_t count = 999;
            std::vector<std::vector<char>> in(n, std::vector<char>(count * sizeof(double)));
            std::mt19937_64 rng(static_cast<uint64_t>(n));
            std::uniform_real_distribution<double> u(-1.0, 1.0);
            for (auto &b : in) {
                auto *d = reinterpret_cast<double *>(b.data());
                for (size_t i = 0; i < count; ++i) d[i] = u(rng) * std::ldexp(1.0, static_cast<int>(i % 40) - 20);
            }
            const auto res = simulate(in, count, GPURDMA_DOUBLE, GPURDMA_SUM, false, p, 2);
            ASSERT_TRUE(res.ok) << res.error;
            for (int r = 1; r < n; ++r)
                EXPECT_EQ(0, std::memcmp(res.outputs[r].data(), res.outputs[0].data(), count * 8))
                    << "rank " << r << " differs, n=" << n << " alg=" << gpurdma::plan::algorithm_name(alg);
        }
    }
}

TEST(Simulator, PairTypesWithPadding)
{
    struct DI {
        double v;
        int i;
    };
    const int n = 5;
    const size_t count = 37;
    std::vector<std::vector<char>> in(n, std::vector<char>(count * sizeof(DI), 0));
    for (int r = 0; r < n; ++r) {
        auto *p = reinterpret_cast<DI *>(in[r].data());
        for (size_t i = 0; i < count; ++i) p[i] = DI{static_cast<double>((r * 7 + i) % 3), r};
    }
    PlanParams p;
    p.chunk_size = 64;
    p.algorithm = Algorithm::Ring;
    const auto res = simulate(in, count, GPURDMA_DOUBLE_INT, GPURDMA_MAXLOC, false, p, 2);
    ASSERT_TRUE(res.ok) << res.error;
    for (int r = 0; r < n; ++r) {
        const auto *out = reinterpret_cast<const DI *>(res.outputs[r].data());
        for (size_t i = 0; i < count; ++i) {
            double best = -1;
            int idx = -1;
            for (int q = 0; q < n; ++q) {
                const double v = static_cast<double>((q * 7 + i) % 3);
                if (v > best) {
                    best = v;
                    idx = q;
                }
            }
            ASSERT_EQ(out[i].v, best);
            ASSERT_EQ(out[i].i, idx);
        }
    }
}

// The largest flat shape checked here: 512 ranks (the size of 64 nodes x 8 ranks).
TEST(Simulator, LargeShape512Ranks)
{
    PlanParams p;
    p.chunk_size = 1024;
    const auto t0 = std::chrono::steady_clock::now();
    check_shape(512, 4099, p, 4, false);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[          ] 512 ranks x 4099 int32, ring + 3 ops: %.2f s\n", s);
}

namespace {

void check_topology(const gpurdma::topo::Topology &t, size_t count, const PlanParams &p, int slots, bool in_place)
{
    const int n = t.size;
    const auto in = int_inputs(n, count, static_cast<uint32_t>(n * 31 + count));
    for (gpurdma_op_t op : {GPURDMA_SUM, GPURDMA_MIN}) {
        const auto res = gpurdma::testing::simulate(t, in, count, GPURDMA_INT32, op, in_place, p, slots);
        ASSERT_TRUE(res.ok) << res.error << " shape=" << t.summary() << " count=" << count << " slots=" << slots;
        const auto want = reference(in, count, GPURDMA_INT32, op);
        for (int r = 0; r < n; ++r)
            ASSERT_EQ(0, std::memcmp(res.outputs[r].data(), want.data(), want.size()))
                << "rank " << r << " shape=" << t.summary() << " count=" << count;
    }
}

}  // namespace

TEST(Hierarchical, RegularAndIrregularShapes)
{
    PlanParams p;
    p.algorithm = Algorithm::Hierarchical;
    p.chunk_size = 64;  // 16 int32 per piece: many blocks and every boundary
    p.small_msg_max = 32;
    const std::vector<std::vector<int>> shapes = {{2, 2}, {1, 1, 1}, {3, 1, 2}, {3, 5, 1, 8}, {4, 4, 4},
                                                  {1, 4}, {8},       {2, 3},    {5, 5}};
    for (const auto &shape : shapes)
        for (bool interleave : {false, true})
            for (size_t count : {1ul, 7ul, 16ul, 17ul, 63ul, 64ul, 65ul, 129ul, 1000ul})
                for (int slots : {1, 2, 4})
                    check_topology(nodes_of(shape, interleave), count, p, slots, (count & 1) != 0);
}

// Nodes renumbered by the fabric (topo/fabric_order.h): every rail algorithm walks node
// indices, which no longer follow the ranks.
TEST(Hierarchical, NodesInFabricOrder)
{
    PlanParams p;
    p.algorithm = Algorithm::Hierarchical;
    p.chunk_size = 64;
    p.small_msg_max = 32;
    gpurdma::topo::Topology t = nodes_of({2, 3, 2, 1, 2, 2}, true);
    gpurdma::topo::reorder_nodes(&t, gpurdma::topo::fabric_order({"a.l1", "b.l3", "a.l2", "a.l1", "b.l3", "a.l2"}));
    ASSERT_EQ(t.node_names.size(), 6u);
    for (Algorithm rail :
         {Algorithm::Auto, Algorithm::Ring, Algorithm::RecursiveDoubling, Algorithm::HalvingDoubling}) {
        p.rail_algorithm = rail;
        for (size_t count : {1ul, 17ul, 129ul, 1000ul})
            for (int slots : {1, 3}) check_topology(t, count, p, slots, (count & 1) != 0);
    }
}

TEST(Hierarchical, AutoPicksItAcrossNodes)
{
    PlanParams p;
    p.chunk_size = 1024;
    p.small_msg_max = 256;
    const auto t = nodes_of({2, 2});
    EXPECT_EQ(gpurdma::plan::choose_algorithm(t, 100, p), Algorithm::RecursiveDoubling);
    EXPECT_EQ(gpurdma::plan::choose_algorithm(t, 4096, p), Algorithm::Hierarchical);
    // One rank per node or one node: flat.
    EXPECT_EQ(gpurdma::plan::choose_algorithm(nodes_of({1, 1, 1}), 4096, p), Algorithm::Ring);
    EXPECT_EQ(gpurdma::plan::choose_algorithm(nodes_of({4}), 4096, p), Algorithm::Ring);
    for (size_t count : {10ul, 300ul, 5000ul}) check_topology(t, count, p, 2, false);
}

TEST(Hierarchical, FloatBitIdenticalAcrossRanks)
{
    PlanParams p;
    p.algorithm = Algorithm::Hierarchical;
    p.chunk_size = 256;
    const auto t = nodes_of({3, 5, 1, 8});
    const size_t count = 2001;
    std::vector<std::vector<char>> in(t.size, std::vector<char>(count * sizeof(float)));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto &b : in) {
        auto *f = reinterpret_cast<float *>(b.data());
        for (size_t i = 0; i < count; ++i) f[i] = u(rng) * std::ldexp(1.0f, static_cast<int>(i % 30) - 15);
    }
    const auto res = gpurdma::testing::simulate(t, in, count, GPURDMA_FLOAT, GPURDMA_SUM, false, p, 2);
    ASSERT_TRUE(res.ok) << res.error;
    for (int r = 1; r < t.size; ++r)
        EXPECT_EQ(0, std::memcmp(res.outputs[r].data(), res.outputs[0].data(), count * sizeof(float))) << r;
}

// The cluster scale the design targets: 64 nodes x 8 ranks.
TEST(Hierarchical, Shape64x8)
{
    PlanParams p;
    p.chunk_size = 1024;
    p.small_msg_max = 64;
    const auto t0 = std::chrono::steady_clock::now();
    check_topology(nodes_of(std::vector<int>(64, 8)), 8 * 1024 + 3, p, 4, false);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[          ] 64 nodes x 8 ranks, 8195 int32, hierarchical, 2 ops: %.2f s\n", s);
}
