// The hierarchical device path's units as schedules (plan/device_unit.h), run by the
// executor in the simulator on host memory: every rank's units, one after another,
// leave each unit it owns holding the allreduce of every rank's input there, whether
// the rail runs on a staging buffer or in place, in place or not, on nodes of any size.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>

#include "exec/executor.h"
#include "plan/device_unit.h"
#include "plan/rail.h"
#include "support/shapes.h"
#include "support/simulator.h"

namespace {

using gpurdma::plan::Buf;
using gpurdma::plan::DeviceUnit;
using gpurdma::plan::PlanParams;
using gpurdma::plan::Schedule;
using gpurdma::plan::StepKind;
using gpurdma::plan::UnitSpan;
using gpurdma::testing::nodes_of;

PlanParams small_params()
{
    PlanParams p;
    p.chunk_size = 256;  // several units per slice at the larger counts
    return p;
}

TEST(DeviceUnit, StagedUnitWrapsTheRailInCopies)
{
    const auto t = nodes_of({2, 2});
    const Schedule rail = gpurdma::plan::build_rail_allreduce(t, 0, 0, 64, 4, small_params());
    ASSERT_FALSE(rail.steps.empty());
    UnitSpan span;
    const Schedule s = gpurdma::plan::build_device_unit(rail, DeviceUnit{1024, 256, true, true, false}, &span);
    ASSERT_EQ(s.steps.size(), rail.steps.size() + 3);
    EXPECT_EQ(s.steps[0].kind, StepKind::NodeReduce);
    EXPECT_EQ(s.steps[0].src_buf, Buf::Node);
    EXPECT_EQ(s.steps[0].dst_off, 1024u);
    EXPECT_EQ(s.steps[1].kind, StepKind::Copy);
    EXPECT_EQ(s.steps[1].dst_buf, Buf::Stage);
    EXPECT_EQ(span.rail_begin, 2u);
    EXPECT_EQ(span.rail_end, 2 + rail.steps.size());
    for (size_t i = span.rail_begin; i < span.rail_end; ++i) {
        EXPECT_NE(s.steps[i].dst_buf, Buf::Recv) << i;
        EXPECT_EQ(s.steps[i].dst_off, rail.steps[i - 2].dst_off) << i;
    }
    EXPECT_EQ(s.steps.back().dst_buf, Buf::Recv);
    EXPECT_EQ(s.steps.back().src_buf, Buf::Stage);
}

TEST(DeviceUnit, InPlaceRailShiftsToTheUnit)
{
    const auto t = nodes_of({1, 1});
    const Schedule rail = gpurdma::plan::build_rail_allreduce(t, 0, 0, 64, 4, small_params());
    UnitSpan span;
    const Schedule s = gpurdma::plan::build_device_unit(rail, DeviceUnit{512, 256, false, false, false}, &span);
    // A node of one, not in place: its send buffer's span into the receive buffer first.
    ASSERT_EQ(s.steps.size(), rail.steps.size() + 1);
    EXPECT_EQ(s.steps[0].kind, StepKind::Copy);
    EXPECT_EQ(s.steps[0].src_buf, Buf::Send);
    for (size_t i = span.rail_begin; i < span.rail_end; ++i) {
        const auto &a = s.steps[i], &b = rail.steps[i - 1];
        if (a.kind != StepKind::Send) {
            EXPECT_EQ(a.dst_off, b.dst_off + 512) << i;
        }
        if (a.kind != StepKind::RecvCopy) {
            EXPECT_EQ(a.src_off, b.src_off + 512) << i;
        }
    }
}

// op SUM on int32 (wraps alike whatever the order) and MAX.
TEST(DeviceUnit, OwnedUnitsHoldTheAllreduce)
{
    const PlanParams p = small_params();
    std::mt19937 rng(7);
    for (const auto &sizes : std::vector<std::vector<int>>{{2, 2}, {3, 1, 2}, {1, 1, 1}, {4}}) {
        const auto t = nodes_of(sizes);
        for (size_t count : {size_t(1), size_t(7), size_t(300), size_t(5000)}) {
            for (const bool staged : {true, false}) {
                for (const bool in_place : {false, true}) {
                    for (const gpurdma_op_t op : {GPURDMA_SUM, GPURDMA_MAX}) {
                        const size_t elem = 4;
                        const auto units = gpurdma::plan::hierarchical_units(t, count, elem, p);
                        std::vector<Schedule> schedules(static_cast<size_t>(t.size));
                        size_t largest = 0;
                        for (const auto &u : units) largest = std::max(largest, u.count * elem);
                        for (int r = 0; r < t.size; ++r) {
                            const int node = t.node_of[size_t(r)];
                            Schedule &all = schedules[size_t(r)];
                            all.rank = r;
                            all.size = t.size;
                            all.bytes = count * elem;
                            all.elem_size = elem;
                            for (const auto &u : units) {
                                if (gpurdma::plan::slice_owner(t, node, u.slice) != r) continue;
                                const Schedule rail =
                                    gpurdma::plan::build_rail_allreduce(t, r, u.slice, u.count, elem, p);
                                const DeviceUnit unit{u.first * elem, u.count * elem,
                                                      t.members[size_t(node)].size() > 1, staged, in_place};
                                UnitSpan span;
                                const Schedule one = gpurdma::plan::build_device_unit(rail, unit, &span);
                                all.steps.insert(all.steps.end(), one.steps.begin(), one.steps.end());
                            }
                        }
                        std::vector<std::vector<char>> inputs(static_cast<size_t>(t.size));
                        std::vector<int32_t> want(count, op == GPURDMA_SUM ? 0 : INT32_MIN);
                        for (int r = 0; r < t.size; ++r) {
                            std::vector<int32_t> v(count);
                            for (size_t i = 0; i < count; ++i) {
                                v[i] = static_cast<int32_t>(rng());
                                want[i] = op == GPURDMA_SUM ? static_cast<int32_t>(static_cast<uint32_t>(want[i]) +
                                                                                   static_cast<uint32_t>(v[i]))
                                                            : std::max(want[i], v[i]);
                            }
                            inputs[size_t(r)].resize(count * elem);
                            std::memcpy(inputs[size_t(r)].data(), v.data(), count * elem);
                        }
                        // The node's members' send buffers, in member order; in place,
                        // their receive buffers (the simulator's, filled from the inputs).
                        std::vector<std::vector<char>> stages(static_cast<size_t>(t.size), std::vector<char>(largest));
                        std::vector<std::vector<const void *>> bases(static_cast<size_t>(t.size));
                        const auto setup = [&](int r, gpurdma::exec::Executor &e,
                                               const std::vector<std::vector<char>> &receive) {
                            e.set_stage(stages[size_t(r)].data());
                            for (int m : t.members[size_t(t.node_of[size_t(r)])])
                                bases[size_t(r)].push_back(in_place ? receive[size_t(m)].data()
                                                                    : inputs[size_t(m)].data());
                            e.set_node_sources(&bases[size_t(r)]);
                        };
                        const auto res = gpurdma::testing::simulate_schedules(
                            t, schedules, inputs, count, GPURDMA_INT32, op, in_place, 2, {}, setup);
                        const std::string shape = t.summary() + " count " + std::to_string(count) +
                                                  (staged ? " staged" : " in GPU memory") +
                                                  (in_place ? " in place" : "") + (op == GPURDMA_SUM ? " sum" : " max");
                        ASSERT_TRUE(res.ok) << shape << ": " << res.error;
                        size_t checked = 0;
                        for (int r = 0; r < t.size; ++r) {
                            const int node = t.node_of[size_t(r)];
                            const auto *got = reinterpret_cast<const int32_t *>(res.outputs[size_t(r)].data());
                            for (const auto &u : units) {
                                if (gpurdma::plan::slice_owner(t, node, u.slice) != r) continue;
                                for (size_t i = u.first; i < u.first + u.count; ++i, ++checked)
                                    ASSERT_EQ(got[i], want[i]) << shape << " rank " << r << " element " << i;
                            }
                        }
                        // Every element is owned by one rank of each node.
                        EXPECT_EQ(checked, count * size_t(t.nodes())) << shape;
                    }
                }
            }
        }
    }
}

}  // namespace
