// The collectives' schedules (plan::build_collective: reduce-scatter, allgather, bcast,
// reduce) run for every rank by the in-process simulator with one landing slot per
// pair, checked against a reference fold in rank order: one and several nodes, equal
// and unequal, interleaved ranks, counts that span many pieces, every root.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "plan/collective.h"
#include "plan/planner.h"
#include "reduce/reduce.h"
#include "support/shapes.h"
#include "support/simulator.h"
#include "topo/fabric_order.h"

using gpurdma::plan::Coll;
using gpurdma::plan::CollShape;
using gpurdma::plan::PlanParams;
using gpurdma::plan::Schedule;
using gpurdma::plan::StepKind;
using gpurdma::testing::nodes_of;
using gpurdma::testing::simulate_buffers;
using gpurdma::topo::Topology;

namespace {

using Buffers = std::vector<std::vector<char>>;

struct Named {
    std::string name;
    Topology topo;
};

std::vector<Named> topologies()
{
    std::vector<Named> out;
    for (int n = 1; n <= 5; ++n) out.push_back({"1x" + std::to_string(n), gpurdma::plan::single_node(n)});
    out.push_back({"2x2", nodes_of({2, 2})});
    out.push_back({"3x1", nodes_of({1, 1, 1})});
    out.push_back({"2+1", nodes_of({2, 1})});
    out.push_back({"3+2+1", nodes_of({3, 2, 1})});
    out.push_back({"2x4", nodes_of({4, 4})});
    // Rails of 5 and 6 nodes: binomial trees whose links are no ring or recursive-doubling pair.
    out.push_back({"6x1", nodes_of({1, 1, 1, 1, 1, 1})});
    out.push_back({"2+1+2+1+1", nodes_of({2, 1, 2, 1, 1})});
    out.push_back({"1+3 interleaved", nodes_of({1, 3}, true)});
    out.push_back({"3+2+1 interleaved", nodes_of({3, 2, 1}, true)});
    // Nodes renumbered by where they sit in the fabric (topo/fabric_order.h): node k is no
    // longer the node of the k-th lowest rank.
    Topology fabric = nodes_of({2, 1, 2, 1, 1});
    gpurdma::topo::reorder_nodes(&fabric, {3, 0, 4, 1, 2});
    out.push_back({"2+1+2+1+1 in fabric order", fabric});
    fabric = nodes_of({3, 2, 1}, true);
    gpurdma::topo::reorder_nodes(&fabric, {2, 0, 1});
    out.push_back({"3+2+1 interleaved, fabric order", fabric});
    return out;
}

PlanParams small_params()
{
    PlanParams p;
    p.chunk_size = 64;  // 16 elements a piece: many pieces, every boundary
    p.small_msg_max = 256;  // binomial trees and the direct allgather up to 64 elements
    return p;
}

struct Kind {
    gpurdma_dtype_t dtype;
    gpurdma_op_t op;
};
const Kind kKinds[] = {{GPURDMA_INT32, GPURDMA_SUM}, {GPURDMA_INT32, GPURDMA_MAX}, {GPURDMA_FLOAT, GPURDMA_SUM}};

// count elements of rank-specific values: any int32 (sums wrap, exactly), floats small
// integers (every order of summing gives the same bits).
std::vector<char> values(const Kind &k, size_t count, uint32_t seed)
{
    std::vector<char> buf(count * 4);
    std::mt19937 rng(seed);
    for (size_t i = 0; i < count; ++i) {
        if (k.dtype == GPURDMA_FLOAT) {
            const float v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
            std::memcpy(buf.data() + i * 4, &v, 4);
        } else {
            const int32_t v = static_cast<int32_t>(rng());
            std::memcpy(buf.data() + i * 4, &v, 4);
        }
    }
    return buf;
}

// The fold of every rank's bytes [off, off + bytes) in rank order.
std::vector<char> fold(const Kind &k, const Buffers &in, size_t off, size_t bytes)
{
    std::vector<char> acc(in[0].begin() + static_cast<long>(off), in[0].begin() + static_cast<long>(off + bytes));
    for (size_t r = 1; r < in.size(); ++r)
        gpurdma::reduce::apply(k.op, k.dtype, acc.data(), acc.data(), in[r].data() + off, bytes / 4);
    return acc;
}

// Whether ranks a and b (on different nodes) share a rail: a slot both carry.
bool share_rail(const Topology &t, int a, int b)
{
    auto owner = [&](int node, int slot) {
        const auto &m = t.members[static_cast<size_t>(node)];
        return m[static_cast<size_t>(slot) % m.size()];
    };
    for (int s = 0; s < t.max_ppn(); ++s)
        if (owner(t.node_of[static_cast<size_t>(a)], s) == a && owner(t.node_of[static_cast<size_t>(b)], s) == b)
            return true;
    return false;
}

// Every rank's schedule, checked on its own: messages fit a slot, a peer on another
// node is one of plan::peers and on a rail with this rank, and every message a rank
// sends to a peer is expected by that peer in the same order with the same size.
std::vector<Schedule> schedules_for(const Topology &t, const CollShape &shape, const PlanParams &params)
{
    std::vector<Schedule> out;
    std::map<std::pair<int, int>, std::vector<size_t>> sent, received;
    for (int r = 0; r < t.size; ++r) {
        out.push_back(gpurdma::plan::build_collective(t, r, shape, params));
        const auto nb = gpurdma::plan::peers(t, r);
        for (const auto &st : out.back().steps) {
            if (st.kind == StepKind::Send) {
                EXPECT_LE(st.bytes, params.chunk_size);
                EXPECT_GT(st.bytes, 0u);
                sent[{r, st.peer}].push_back(st.bytes);
            } else if (st.kind == StepKind::RecvReduce || st.kind == StepKind::RecvCopy) {
                received[{st.peer, r}].push_back(st.bytes);
            }
            if (st.peer < 0) continue;
            EXPECT_NE(st.peer, r);
            if (t.node_of[static_cast<size_t>(st.peer)] != t.node_of[static_cast<size_t>(r)]) {
                EXPECT_TRUE(std::binary_search(nb.begin(), nb.end(), st.peer)) << "rank " << r << " peer " << st.peer;
                EXPECT_TRUE(share_rail(t, r, st.peer)) << "rank " << r << " peer " << st.peer;
            }
        }
    }
    EXPECT_EQ(sent, received);
    return out;
}

std::string what(const Named &n, const CollShape &s, const Kind &k)
{
    std::string c;
    for (size_t x : s.counts) c += std::to_string(x) + ",";
    return n.name + " " + gpurdma::plan::coll_name(s.coll) + " counts=" + c + " root=" + std::to_string(s.root) +
           " in_place=" + std::to_string(s.in_place) + " dtype=" + std::to_string(k.dtype) +
           " op=" + std::to_string(k.op);
}

std::vector<std::vector<size_t>> per_rank_counts(int n)
{
    std::vector<std::vector<size_t>> out;
    for (size_t c : {0ul, 1ul, 7ul, 40ul, 100ul}) out.emplace_back(static_cast<size_t>(n), c);
    std::vector<size_t> uneven, last_only(static_cast<size_t>(n), 0);
    for (int r = 0; r < n; ++r) uneven.push_back(r % 3 == 1 ? 0 : static_cast<size_t>(r) * 13 + 3);
    last_only.back() = 50;
    out.push_back(uneven);
    out.push_back(last_only);
    return out;
}

size_t sum(const std::vector<size_t> &v)
{
    size_t s = 0;
    for (size_t x : v) s += x;
    return s;
}

size_t before(const std::vector<size_t> &v, int r)
{
    size_t s = 0;
    for (int i = 0; i < r; ++i) s += v[static_cast<size_t>(i)];
    return s;
}

}  // namespace

TEST(CollectivePlan, ReduceScatter)
{
    const PlanParams p = small_params();
    for (const Named &nt : topologies()) {
        const int n = nt.topo.size;
        for (const auto &counts : per_rank_counts(n))
            for (bool in_place : {false, true})
                for (const Kind &k : kKinds) {
                    const CollShape shape{Coll::ReduceScatter, 4, counts, 0, in_place};
                    const auto sched = schedules_for(nt.topo, shape, p);
                    const size_t total = sum(counts) * 4;
                    Buffers in, recv;
                    for (int r = 0; r < n; ++r) {
                        in.push_back(values(k, total / 4, static_cast<uint32_t>(r * 101 + total)));
                        recv.push_back(in_place ? in.back() : std::vector<char>(counts[r] * 4, char(0x33)));
                    }
                    const auto res = simulate_buffers(nt.topo, sched, in, recv, k.dtype, k.op, in_place, 1);
                    ASSERT_TRUE(res.ok) << res.error << " " << what(nt, shape, k);
                    for (int r = 0; r < n; ++r) {
                        const auto want = fold(k, in, before(counts, r) * 4, counts[r] * 4);
                        ASSERT_TRUE(want.empty() || std::memcmp(res.outputs[r].data(), want.data(), want.size()) == 0)
                            << "rank " << r << " " << what(nt, shape, k);
                    }
                }
    }
}

TEST(CollectivePlan, Allgather)
{
    const PlanParams p = small_params();
    const Kind k = kKinds[0];
    for (const Named &nt : topologies()) {
        const int n = nt.topo.size;
        for (const auto &counts : per_rank_counts(n))
            for (bool in_place : {false, true}) {
                const CollShape shape{Coll::Allgather, 4, counts, 0, in_place};
                const auto sched = schedules_for(nt.topo, shape, p);
                const size_t total = sum(counts) * 4;
                Buffers in, recv;
                std::vector<char> want;
                for (int r = 0; r < n; ++r) {
                    in.push_back(values(k, counts[r], static_cast<uint32_t>(r * 31 + total)));
                    want.insert(want.end(), in.back().begin(), in.back().end());
                }
                for (int r = 0; r < n; ++r) {
                    recv.emplace_back(total, char(0x33));
                    if (in_place) std::copy(in[r].begin(), in[r].end(), recv.back().begin() + before(counts, r) * 4);
                }
                const auto res = simulate_buffers(nt.topo, sched, in, recv, k.dtype, k.op, in_place, 1);
                ASSERT_TRUE(res.ok) << res.error << " " << what(nt, shape, k);
                for (int r = 0; r < n; ++r)
                    ASSERT_EQ(res.outputs[r], want) << "rank " << r << " " << what(nt, shape, k);
            }
    }
}

TEST(CollectivePlan, BcastEveryRoot)
{
    const PlanParams p = small_params();
    const Kind k = kKinds[0];
    for (const Named &nt : topologies()) {
        const int n = nt.topo.size;
        for (size_t count : {0ul, 1ul, 7ul, 40ul, 100ul})
            for (int root = 0; root < n; ++root) {
                const CollShape shape{Coll::Bcast, 4, {count}, root, false};
                const auto sched = schedules_for(nt.topo, shape, p);
                const auto data = values(k, count, static_cast<uint32_t>(root * 7 + count));
                Buffers recv;
                for (int r = 0; r < n; ++r) recv.push_back(r == root ? data : std::vector<char>(count * 4, char(0x33)));
                // Bcast's one buffer: the send buffer aliases the receive buffer.
                const auto res = simulate_buffers(nt.topo, sched, Buffers(n), recv, k.dtype, k.op, true, 1);
                ASSERT_TRUE(res.ok) << res.error << " " << what(nt, shape, k);
                for (int r = 0; r < n; ++r)
                    ASSERT_EQ(res.outputs[r], data) << "rank " << r << " " << what(nt, shape, k);
            }
    }
}

TEST(CollectivePlan, ReduceEveryRoot)
{
    const PlanParams p = small_params();
    for (const Named &nt : topologies()) {
        const int n = nt.topo.size;
        for (size_t count : {0ul, 1ul, 7ul, 40ul, 100ul})
            for (int root = 0; root < n; ++root)
                for (bool in_place : {false, true})
                    for (const Kind &k : kKinds) {
                        const CollShape shape{Coll::Reduce, 4, {count}, root, in_place};
                        const auto sched = schedules_for(nt.topo, shape, p);
                        Buffers in, recv;
                        for (int r = 0; r < n; ++r) {
                            in.push_back(values(k, count, static_cast<uint32_t>(r * 17 + count * 3 + root)));
                            recv.push_back(in_place ? in.back() : std::vector<char>(count * 4, char(0x33)));
                        }
                        const auto res = simulate_buffers(nt.topo, sched, in, recv, k.dtype, k.op, in_place, 1);
                        ASSERT_TRUE(res.ok) << res.error << " " << what(nt, shape, k);
                        ASSERT_EQ(res.outputs[root], fold(k, in, 0, count * 4)) << what(nt, shape, k);
                        // Nothing but the root's receive buffer is written.
                        for (int r = 0; r < n; ++r) {
                            if (r == root) continue;
                            ASSERT_EQ(res.outputs[r], recv[r]) << "rank " << r << " " << what(nt, shape, k);
                        }
                    }
    }
}

// Two slots per pair and the default sizes (one piece a block, the ring and chain
// paths at their real sizes) give the same results.
TEST(CollectivePlan, LargerSlotsAndDefaultParams)
{
    PlanParams p;
    p.chunk_size = 4096;
    p.small_msg_max = 1024;
    const Kind k = kKinds[0];
    const Named nt{"3+2+1", nodes_of({3, 2, 1})};
    const int n = nt.topo.size;
    for (size_t count : {1ul, 300ul, 5000ul})
        for (int slots : {1, 2}) {
            const std::vector<size_t> counts(static_cast<size_t>(n), count);
            CollShape shape{Coll::Allgather, 4, counts, 0, false};
            auto sched = schedules_for(nt.topo, shape, p);
            Buffers in, recv;
            std::vector<char> want;
            for (int r = 0; r < n; ++r) {
                in.push_back(values(k, count, static_cast<uint32_t>(r + count)));
                want.insert(want.end(), in.back().begin(), in.back().end());
            }
            for (int r = 0; r < n; ++r) recv.emplace_back(want.size(), char(0x33));
            auto res = simulate_buffers(nt.topo, sched, in, recv, k.dtype, k.op, false, slots);
            ASSERT_TRUE(res.ok) << res.error;
            for (int r = 0; r < n; ++r) ASSERT_EQ(res.outputs[r], want) << "rank " << r << " count " << count;

            shape = CollShape{Coll::Bcast, 4, {count * 3}, 4, false};
            sched = schedules_for(nt.topo, shape, p);
            const auto data = values(k, count * 3, 5);
            recv.clear();
            for (int r = 0; r < n; ++r) recv.push_back(r == 4 ? data : std::vector<char>(data.size(), char(0x33)));
            res = simulate_buffers(nt.topo, sched, Buffers(n), recv, k.dtype, k.op, true, slots);
            ASSERT_TRUE(res.ok) << res.error;
            for (int r = 0; r < n; ++r) ASSERT_EQ(res.outputs[r], data) << "rank " << r << " count " << count;
        }
}

TEST(CollectivePlan, EmptyAndAlone)
{
    const PlanParams p = small_params();
    const auto t = nodes_of({2, 2});
    for (Coll c : {Coll::ReduceScatter, Coll::Allgather, Coll::Bcast, Coll::Reduce}) {
        const std::vector<size_t> counts(c == Coll::Bcast || c == Coll::Reduce ? 1 : 4, 0);
        for (int r = 0; r < 4; ++r)
            EXPECT_TRUE(gpurdma::plan::build_collective(t, r, CollShape{c, 4, counts, 1, false}, p).steps.empty());
        const auto one = gpurdma::plan::single_node(1);
        const Schedule copy = gpurdma::plan::build_collective(one, 0, CollShape{c, 4, {5}, 0, false}, p);
        const Schedule none = gpurdma::plan::build_collective(one, 0, CollShape{c, 4, {5}, 0, true}, p);
        EXPECT_EQ(copy.steps.size(), c == Coll::Bcast ? 0u : 1u) << gpurdma::plan::coll_name(c);
        EXPECT_TRUE(none.steps.empty()) << gpurdma::plan::coll_name(c);
    }
}

// peers() stays symmetric with the rails' binomial links.
TEST(CollectivePlan, PeersSymmetric)
{
    for (const Named &nt : topologies())
        for (int a = 0; a < nt.topo.size; ++a)
            for (int b : gpurdma::plan::peers(nt.topo, a)) {
                const auto pb = gpurdma::plan::peers(nt.topo, b);
                EXPECT_TRUE(std::binary_search(pb.begin(), pb.end(), a)) << nt.name << " " << a << " " << b;
            }
}
