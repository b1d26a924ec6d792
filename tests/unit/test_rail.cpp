// The hierarchical allreduce's inter-node stage on its own (plan/rail.h): each rail
// allreduces its slice among its members, bit-identical on every member, and its
// messages are exactly the host hierarchical schedule's inter-node steps (so nodes
// running either interoperate).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "plan/planner.h"
#include "plan/rail.h"
#include "reduce/reduce.h"
#include "support/shapes.h"
#include "support/simulator.h"

using gpurdma::plan::PlanParams;
using gpurdma::plan::Schedule;
using gpurdma::testing::double_inputs;
using gpurdma::testing::nodes_of;
using gpurdma::topo::Topology;

namespace {

// Every slice's rail, simulated: each member ends with the rail's sum, the same bits
// on every member; every rank outside the rail keeps its input.
void check_rails(const std::vector<int> &sizes, size_t count, const PlanParams &p)
{
    const Topology t = nodes_of(sizes);
    const auto in = double_inputs(t.size, count, static_cast<uint32_t>(t.size * 131 + count));
    for (int sl = 0; sl < t.max_ppn(); ++sl) {
        std::vector<Schedule> schedules;
        for (int r = 0; r < t.size; ++r)
            schedules.push_back(gpurdma::plan::build_rail_allreduce(t, r, sl, count, sizeof(double), p));
        const auto res =
            gpurdma::testing::simulate_schedules(t, schedules, in, count, GPURDMA_DOUBLE, GPURDMA_SUM, true, 2);
        ASSERT_TRUE(res.ok) << res.error << " shape " << t.summary() << " slice " << sl << " count " << count;
        std::vector<int> rail;
        for (int k = 0; k < t.nodes(); ++k) rail.push_back(gpurdma::plan::slice_owner(t, k, sl));
        // The sum in exact arithmetic is not the point: every member has the same bits,
        // and that is a sum of the members' inputs (within rounding).
        const auto &first = res.outputs[static_cast<size_t>(rail[0])];
        for (int m : rail)
            ASSERT_EQ(0, std::memcmp(res.outputs[size_t(m)].data(), first.data(), first.size()))
                << "rank " << m << " differs from rank " << rail[0] << " on slice " << sl << ", " << t.summary();
        const auto *got = reinterpret_cast<const double *>(first.data());
        for (size_t i = 0; i < count; ++i) {
            double want = 0;
            for (int m : rail) want += reinterpret_cast<const double *>(in[size_t(m)].data())[i];
            ASSERT_NEAR(want, got[i], 1e-9 * (1 + std::abs(want))) << "element " << i << " slice " << sl;
        }
        for (int r = 0; r < t.size; ++r) {
            if (std::find(rail.begin(), rail.end(), r) != rail.end()) continue;
            ASSERT_EQ(0, std::memcmp(res.outputs[size_t(r)].data(), in[size_t(r)].data(), first.size()))
                << "rank " << r << " is not on rail " << sl << " but its buffer changed";
        }
    }
}

PlanParams small_params()
{
    PlanParams p;
    p.chunk_size = 1024;  // the ring pipelines in several pieces
    p.small_msg_max = 256;
    return p;
}

}  // namespace

TEST(Rail, TwoByTwo)
{
    for (size_t count : {1, 3, 32, 33, 700}) check_rails({2, 2}, count, small_params());
}

TEST(Rail, IrregularThreeOneTwo)
{
    for (size_t count : {1, 5, 32, 129, 1000}) check_rails({3, 1, 2}, count, small_params());
}

TEST(Rail, FourByOne)
{
    for (size_t count : {1, 31, 32, 500}) check_rails({1, 1, 1, 1}, count, small_params());
}

TEST(Rail, EightNodesByTwo)
{
    for (size_t count : {1, 17, 32, 999}) check_rails({2, 2, 2, 2, 2, 2, 2, 2}, count, small_params());
}

TEST(Rail, NotOnTheRailOrOneNodeIsEmpty)
{
    const Topology t = nodes_of({2, 2});
    EXPECT_TRUE(gpurdma::plan::build_rail_allreduce(t, 1, 0, 100, 4, small_params()).steps.empty());
    EXPECT_FALSE(gpurdma::plan::build_rail_allreduce(t, 0, 0, 100, 4, small_params()).steps.empty());
    EXPECT_TRUE(gpurdma::plan::build_rail_allreduce(nodes_of({4}), 0, 0, 100, 4, small_params()).steps.empty());
}

// The wire contract: for every rank, the rail schedules of the units it owns, in
// hierarchical_units order and shifted to each unit's offset, are exactly the host
// hierarchical schedule's steps with peers on other nodes.
TEST(Rail, SameMessagesAsTheHostHierarchicalSchedule)
{
    const PlanParams p = small_params();
    for (const auto &sizes : std::vector<std::vector<int>>{{2, 2}, {3, 1, 2}, {1, 1, 1, 1}, {2, 2, 2, 2, 2, 2, 2, 2}}) {
        const Topology t = nodes_of(sizes);
        for (size_t count : {size_t(1), size_t(7), size_t(300), size_t(5000)}) {
            for (size_t elem : {size_t(4), size_t(8)}) {
                const auto units = gpurdma::plan::hierarchical_units(t, count, elem, p);
                size_t covered = 0;
                for (const auto &u : units) covered += u.count;
                ASSERT_EQ(count, covered);
                for (int r = 0; r < t.size; ++r) {
                    const int node = t.node_of[size_t(r)];
                    const Schedule host =
                        gpurdma::plan::build(t, r, count, elem, true, gpurdma::plan::Algorithm::Hierarchical, p);
                    std::vector<gpurdma::plan::Step> want;
                    for (const auto &s : host.steps)
                        if (s.peer >= 0 && t.node_of[size_t(s.peer)] != node) want.push_back(s);
                    std::vector<gpurdma::plan::Step> got;
                    for (const auto &u : units) {
                        if (gpurdma::plan::slice_owner(t, node, u.slice) != r) continue;
                        for (auto s : gpurdma::plan::build_rail_allreduce(t, r, u.slice, u.count, elem, p).steps) {
                            // Shift the offsets each kind uses (a send has no destination,
                            // a copy-in no source: those stay 0).
                            using gpurdma::plan::StepKind;
                            if (s.kind != StepKind::Send) s.dst_off += u.first * elem;
                            if (s.kind != StepKind::RecvCopy) s.src_off += u.first * elem;
                            got.push_back(s);
                        }
                    }
                    ASSERT_EQ(want.size(), got.size()) << t.summary() << " rank " << r << " count " << count;
                    for (size_t i = 0; i < want.size(); ++i) {
                        const auto &a = want[i], &b = got[i];
                        EXPECT_TRUE(a.kind == b.kind && a.phase == b.phase && a.peer == b.peer &&
                                    a.landed_first == b.landed_first && a.bytes == b.bytes && a.dst_off == b.dst_off &&
                                    a.src_off == b.src_off && a.dst_buf == b.dst_buf && a.src_buf == b.src_buf)
                            << t.summary() << " rank " << r << " count " << count << " step " << i;
                    }
                }
            }
        }
    }
}
