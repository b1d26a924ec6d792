// Reduce-scatter, allgather, bcast and reduce on GPU buffers across nodes
// (algo/device_node_rail.h), without a GPU:
//  - the rail's schedule (plan::build_collective_rail) puts on the wire exactly the
//    messages of the host schedule's steps between nodes (same peers, order, pieces,
//    offsets): a node that stages a call whole interoperates with a node that runs it
//    on its GPUs;
//  - every rank's work (algo/device_node_rail_work.h) run on host memory in the order
//    the protocol allows (every rank's kernels and copies out; the rails, by the
//    in-process simulator; every rank's copies back; every rank's copies out of its
//    members' results), with the buffers a rank does not share absent: the results are
//    the reference's, on nodes equal and unequal, interleaved, every root, in place and
//    not, counts with zeros.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "algo/call_spans.h"
#include "algo/device_node_rail_work.h"
#include "plan/collective.h"
#include "plan/planner.h"
#include "reduce/reduce.h"
#include "support/shapes.h"
#include "support/simulator.h"

using gpurdma::algo::Call;
using gpurdma::plan::Coll;
using gpurdma::plan::Schedule;
using gpurdma::plan::StepKind;
using gpurdma::testing::nodes_of;
using gpurdma::topo::Topology;

namespace {

struct Named {
    std::string name;
    Topology topo;
};

std::vector<Named> topologies()
{
    return {{"2x2", nodes_of({2, 2})},
            {"3x1", nodes_of({1, 1, 1})},
            {"2+1", nodes_of({2, 1})},
            {"3+1+2", nodes_of({3, 1, 2})},
            {"2x4", nodes_of({4, 4})},
            {"2+1+2+1+1", nodes_of({2, 1, 2, 1, 1})},
            {"1+3 interleaved", nodes_of({1, 3}, true)},
            {"3+2+1 interleaved", nodes_of({3, 2, 1}, true)}};
}

gpurdma::plan::PlanParams small_params()
{
    gpurdma::plan::PlanParams p;
    p.chunk_size = 64;  // 16 elements a piece: many pieces
    p.small_msg_max = 256;  // binomial trees up to 64 elements, chains above
    return p;
}

// Every call shape the tests run on `size` ranks (int32 sum).
std::vector<Call> calls_for(int size)
{
    std::vector<Call> out;
    auto add = [&](Call c) {
        c.dtype = GPURDMA_INT32;
        c.op = GPURDMA_SUM;
        out.push_back(c);
    };
    for (size_t count : {1ul, 7ul, 40ul, 100ul}) {
        Call c;
        c.count = count;
        c.coll = Coll::ReduceScatter;
        add(c);
        c.coll = Coll::Allgather;
        add(c);
        for (int root = 0; root < size; ++root) {
            c.root = root;
            c.coll = Coll::Bcast;
            add(c);
            c.coll = Coll::Reduce;
            add(c);
        }
        c.root = 0;
    }
    Call uneven;
    uneven.coll = Coll::ReduceScatter;
    for (int r = 0; r < size; ++r) uneven.counts.push_back(r % 3 == 1 ? 0 : static_cast<size_t>(r) * 13 + 3);
    add(uneven);
    return out;
}

std::string what(const Named &n, const Call &c, bool in_place)
{
    return n.name + " " + gpurdma::plan::coll_name(c.coll) + " count=" + std::to_string(c.count) +
           (c.counts.empty() ? "" : " uneven") + " root=" + std::to_string(c.root) + (in_place ? " in place" : "");
}

bool off_node(const Topology &t, int a, int b)
{
    return b >= 0 && t.node_of[static_cast<size_t>(a)] != t.node_of[static_cast<size_t>(b)];
}

// A step as the wire sees it: the peer, the direction, the bytes and where they are.
std::string wire(const gpurdma::plan::Step &s)
{
    const bool sends = s.kind == StepKind::Send;
    return std::string(sends ? "send " : "recv ") + std::to_string(s.peer) + " " + std::to_string(s.bytes) + "@" +
           std::to_string(sends ? s.src_off : s.dst_off) + " " + gpurdma::plan::phase_name(s.phase);
}

// Where one rank's memory is: its user buffers and its rail's page-locked buffers and
// GPU scratch; work must stay inside them.
struct RankMemory {
    std::vector<char> send, recv, rail_send, rail_recv, scratch;
};

bool inside(const std::vector<RankMemory> &mem, const void *p, size_t bytes)
{
    const char *c = static_cast<const char *>(p);
    for (const RankMemory &m : mem)
        for (const std::vector<char> *b : {&m.send, &m.recv, &m.rail_send, &m.rail_recv, &m.scratch})
            if (!b->empty() && c >= b->data() && c + bytes <= b->data() + b->size()) return true;
    return false;
}

int32_t value(int rank, size_t i)
{
    return static_cast<int32_t>(static_cast<uint32_t>(rank) * 2654435761u + static_cast<uint32_t>(i) * 40503u);
}

// One call on every rank of t through the device path's work and the rails; "" if every
// result is the reference's.
std::string run_case(const Topology &t, Call call, bool in_place)
{
    const int n = t.size;
    const auto params = small_params();
    const size_t total = gpurdma::algo::total_count(call, n);
    std::vector<RankMemory> mem(static_cast<size_t>(n));
    std::vector<std::vector<int32_t>> inputs(static_cast<size_t>(n));  // each rank's input elements
    for (int r = 0; r < n; ++r) {
        RankMemory &m = mem[size_t(r)];
        const size_t in_elems = call.coll == Coll::ReduceScatter ? total
                                : call.coll == Coll::Allgather   ? gpurdma::algo::part_count(call, r)
                                                                 : call.count;
        for (size_t i = 0; i < in_elems; ++i) inputs[size_t(r)].push_back(value(r, i));
        const size_t recv_elems = call.coll == Coll::Allgather || (call.coll == Coll::ReduceScatter && in_place) ? total
                                  : call.coll == Coll::ReduceScatter ? gpurdma::algo::part_count(call, r)
                                                                     : call.count;
        m.recv.assign(recv_elems * 4 + 4, char(0x5a));  // never empty: every rank has a receive buffer
        const auto *bytes = reinterpret_cast<const char *>(inputs[size_t(r)].data());
        if (call.coll == Coll::Bcast) {
            if (r == call.root) std::memcpy(m.recv.data(), bytes, call.count * 4);
        } else if (in_place) {
            size_t at = 0;
            if (call.coll == Coll::Allgather)
                for (int q = 0; q < r; ++q) at += gpurdma::algo::part_count(call, q) * 4;
            std::memcpy(m.recv.data() + at, bytes, in_elems * 4);
        } else {
            m.send.assign(bytes, bytes + in_elems * 4);
        }
    }
    std::vector<Call> calls(static_cast<size_t>(n), call);
    for (int r = 0; r < n; ++r) {
        Call &c = calls[size_t(r)];
        c.recvbuf = mem[size_t(r)].recv.data();
        c.sendbuf = call.coll == Coll::Bcast || in_place ? nullptr : mem[size_t(r)].send.data();
        const auto sizes = gpurdma::algo::node_rail_sizes(t, r, c);
        mem[size_t(r)].rail_send.assign(sizes.rail_send, char(0x11));
        mem[size_t(r)].rail_recv.assign(sizes.rail_recv, char(0x22));
        mem[size_t(r)].scratch.assign(sizes.scratch, char(0x33));
    }
    // Every rank's work, given its members' buffers as it maps them: only the sides
    // they share (nullptr otherwise: work that used one would leave the buffers).
    std::vector<gpurdma::algo::NodeRailWork> work;
    for (int r = 0; r < n; ++r) {
        const auto &members = t.members[static_cast<size_t>(t.node_of[size_t(r)])];
        std::vector<const char *> srcs;
        std::vector<char *> dsts;
        for (int q : members) {
            const Call &cq = calls[size_t(q)];
            const auto shared = gpurdma::algo::node_rail_shared(t, q, cq);
            const char *src = static_cast<const char *>(cq.sendbuf ? cq.sendbuf : cq.recvbuf);
            srcs.push_back(q == r || shared.src ? src : nullptr);
            dsts.push_back(q == r || shared.dst ? static_cast<char *>(cq.recvbuf) : nullptr);
        }
        RankMemory &m = mem[size_t(r)];
        work.push_back(gpurdma::algo::node_rail_work(
            t, r, calls[size_t(r)], srcs, dsts, m.rail_send.empty() ? nullptr : m.rail_send.data(),
            m.rail_recv.empty() ? nullptr : m.rail_recv.data(), m.scratch.empty() ? nullptr : m.scratch.data()));
    }
    std::string problem;
    auto run_copies = [&](const std::vector<gpurdma::algo::DeviceCopy> &copies, const char *stage, int r) {
        for (const auto &c : copies) {
            if (!inside(mem, c.src, c.bytes) || !inside(mem, c.dst, c.bytes)) {
                problem += "rank " + std::to_string(r) + ": a " + stage + " copy outside the buffers; ";
                continue;
            }
            std::memmove(c.dst, c.src, c.bytes);
        }
    };
    for (int r = 0; r < n; ++r) {
        for (const auto &red : work[size_t(r)].reductions) {
            bool ok = inside(mem, red.dst, red.count * 4);
            for (const void *s : red.srcs) ok = ok && inside(mem, s, red.count * 4);
            if (!ok) {
                problem += "rank " + std::to_string(r) + ": a reduction outside the buffers; ";
                continue;
            }
            std::vector<int32_t> acc(red.count);
            std::memcpy(acc.data(), red.srcs[0], red.count * 4);
            for (size_t q = 1; q < red.srcs.size(); ++q)
                gpurdma::reduce::apply(GPURDMA_SUM, GPURDMA_INT32, acc.data(), acc.data(), red.srcs[q], red.count);
            std::memcpy(red.dst, acc.data(), red.count * 4);
        }
        run_copies(work[size_t(r)].local, "local", r);
        run_copies(work[size_t(r)].out, "out", r);
    }
    if (!problem.empty()) return problem;
    // The rails: every rank's rail schedule on its page-locked buffers.
    std::vector<Schedule> rails;
    std::vector<std::vector<char>> sends, receives;
    const auto shape = gpurdma::algo::shape_of(call, n);
    for (int r = 0; r < n; ++r) {
        rails.push_back(gpurdma::plan::build_collective_rail(t, r, shape, params));
        sends.push_back(mem[size_t(r)].rail_send);
        receives.push_back(mem[size_t(r)].rail_recv);
    }
    const auto sim =
        gpurdma::testing::simulate_buffers(t, rails, sends, receives, GPURDMA_INT32, GPURDMA_SUM, false, 1);
    if (!sim.ok) return "rails: " + sim.error;
    // In place: the work's copies back point into these buffers.
    for (int r = 0; r < n; ++r)
        if (!mem[size_t(r)].rail_recv.empty())
            std::memcpy(mem[size_t(r)].rail_recv.data(), sim.outputs[size_t(r)].data(),
                        mem[size_t(r)].rail_recv.size());
    for (int r = 0; r < n; ++r) run_copies(work[size_t(r)].in, "in", r);
    for (int r = 0; r < n; ++r) run_copies(work[size_t(r)].gather, "gather", r);
    if (!problem.empty()) return problem;
    // The reference.
    for (int r = 0; r < n; ++r) {
        std::vector<int32_t> want;
        switch (call.coll) {
            case Coll::ReduceScatter: {
                size_t at = 0;
                for (int q = 0; q < r; ++q) at += gpurdma::algo::part_count(call, q);
                for (size_t i = 0; i < gpurdma::algo::part_count(call, r); ++i) {
                    uint32_t s = 0;
                    for (int q = 0; q < n; ++q) s += static_cast<uint32_t>(value(q, at + i));
                    want.push_back(static_cast<int32_t>(s));
                }
                break;
            }
            case Coll::Allgather:
                for (int q = 0; q < n; ++q) want.insert(want.end(), inputs[size_t(q)].begin(), inputs[size_t(q)].end());
                break;
            case Coll::Bcast: want = inputs[size_t(call.root)]; break;
            case Coll::Reduce:
                if (r != call.root) break;
                for (size_t i = 0; i < call.count; ++i) {
                    uint32_t s = 0;
                    for (int q = 0; q < n; ++q) s += static_cast<uint32_t>(value(q, i));
                    want.push_back(static_cast<int32_t>(s));
                }
                break;
            case Coll::Allreduce: break;
        }
        if (!want.empty() && std::memcmp(mem[size_t(r)].recv.data(), want.data(), want.size() * 4) != 0)
            problem += "rank " + std::to_string(r) + ": wrong result; ";
    }
    return problem;
}

}  // namespace

TEST(DeviceNodeRail, RailStepsAreTheHostSchedulesStepsBetweenNodes)
{
    const auto params = small_params();
    size_t compared = 0;
    for (const Named &nt : topologies()) {
        const Topology &t = nt.topo;
        for (const Call &call : calls_for(t.size))
            for (bool in_place : {false, true}) {
                if (in_place && call.coll == Coll::Bcast) continue;
                auto shape = gpurdma::algo::shape_of(call, t.size);
                shape.in_place = in_place;
                for (int r = 0; r < t.size; ++r) {
                    std::vector<std::string> host, rail;
                    for (const auto &s : gpurdma::plan::build_collective(t, r, shape, params).steps)
                        if (off_node(t, r, s.peer)) host.push_back(wire(s));
                    for (const auto &s : gpurdma::plan::build_collective_rail(t, r, shape, params).steps) {
                        if (s.peer < 0) continue;
                        EXPECT_TRUE(off_node(t, r, s.peer)) << "rank " << r << " " << what(nt, call, in_place);
                        rail.push_back(wire(s));
                    }
                    ASSERT_EQ(host, rail) << "rank " << r << " " << what(nt, call, in_place);
                    compared += host.size();
                }
            }
    }
    EXPECT_GT(compared, 10000u);  // the shapes above do cross nodes
}

TEST(DeviceNodeRail, NodeStagesAndRailsGiveTheReference)
{
    size_t cases = 0;
    for (const Named &nt : topologies())
        for (const Call &call : calls_for(nt.topo.size))
            for (bool in_place : {false, true}) {
                if (in_place && call.coll == Coll::Bcast) continue;
                const std::string problem = run_case(nt.topo, call, in_place);
                ASSERT_EQ(problem, "") << what(nt, call, in_place);
                ++cases;
            }
    EXPECT_GT(cases, 300u);
}

// Who shares what, and who reduces: only the head of a node reads its members' inputs
// in a reduce, and a node of one rank needs no scratch.
TEST(DeviceNodeRail, SharedSidesAndScratch)
{
    const Topology t = nodes_of({3, 1});
    Call c;
    c.coll = Coll::Reduce;
    c.count = 10;
    c.dtype = GPURDMA_INT32;
    c.op = GPURDMA_SUM;
    c.root = 3;  // the one-rank node; its rail (slot 0) reaches node 0 through rank 0
    EXPECT_EQ(gpurdma::plan::rail_head(t, 0, 3), 0);
    EXPECT_TRUE(gpurdma::algo::node_rail_shared(t, 1, c).src);
    EXPECT_FALSE(gpurdma::algo::node_rail_shared(t, 0, c).src);
    EXPECT_EQ(gpurdma::algo::node_rail_sizes(t, 0, c).scratch, 40u);
    EXPECT_EQ(gpurdma::algo::node_rail_sizes(t, 1, c).scratch, 0u);
    EXPECT_EQ(gpurdma::algo::node_rail_sizes(t, 3, c).scratch, 0u);
    EXPECT_EQ(gpurdma::algo::node_rail_sizes(t, 3, c).rail_recv, 40u);
    c.coll = Coll::Allgather;
    EXPECT_TRUE(gpurdma::algo::node_rail_shared(t, 1, c).dst);
    EXPECT_FALSE(gpurdma::algo::node_rail_shared(t, 1, c).src);
}
