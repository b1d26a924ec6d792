// The one-node shared-memory allreduce: every rank's state machine run in one
// thread over one in-memory arena, interleaved in round-robin and random orders,
// for many calls in a row (the block sequence carries over), checked against a
// reference fold in rank order, bit for bit on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "algo/node_allreduce.h"
#include "reduce/reduce.h"

using gpurdma::algo::NodeArena;
using gpurdma::algo::NodeArenaLayout;
using gpurdma::algo::NodeCall;
using gpurdma::exec::State;

namespace {

struct Node {
    NodeArenaLayout layout;
    std::vector<uint64_t> storage;  // 8-byte aligned, zeroed like a fresh segment
    uint64_t next_block = 0;
    std::vector<std::vector<uint64_t>> consumed_seen;  // each rank's, kept across calls as in algo::NodeAllreduce

    Node(int ranks, int slots, size_t block)
    {
        consumed_seen.assign(static_cast<size_t>(ranks), std::vector<uint64_t>(static_cast<size_t>(ranks), 0));
        layout.ranks = ranks;
        layout.slots = slots;
        layout.block = block;
        storage.assign(layout.bytes() / 8 + 1, 0);
    }
    NodeArena arena() { return NodeArena(reinterpret_cast<char *>(storage.data()), layout); }
};

std::vector<char> random_bytes(size_t n, std::mt19937 &rng)
{
    std::vector<char> v(n);
    for (auto &c : v) c = static_cast<char>(rng());
    return v;
}

// Floats from a small range: sums are inexact, so a wrong order shows.
std::vector<char> random_floats(size_t count, std::mt19937 &rng)
{
    std::vector<char> v(count * sizeof(float));
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (size_t i = 0; i < count; ++i) {
        const float f = d(rng) * 1e3f;
        std::memcpy(v.data() + i * sizeof f, &f, sizeof f);
    }
    return v;
}

// One allreduce on all ranks; false with a message on deadlock or mismatch.
::testing::AssertionResult run_call(Node &node, gpurdma_dtype_t dtype, gpurdma_op_t op, size_t count, bool in_place,
                                    size_t direct_max, std::mt19937 &rng, bool random_order)
{
    const int n = node.layout.ranks;
    const size_t elem = gpurdma::reduce::dtype_size(dtype);
    std::vector<std::vector<char>> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        in[r] = dtype == GPURDMA_FLOAT ? random_floats(count, rng) : random_bytes(count * elem, rng);
        if (dtype == GPURDMA_DOUBLE_INT || dtype == GPURDMA_FLOAT_INT) {
            // Keep the value parts finite: compare bits, but NaN != NaN makes MAXLOC order-dependent.
            for (size_t i = 0; i < count; ++i) {
                if (dtype == GPURDMA_DOUBLE_INT) {
                    const double v = static_cast<double>(rng() % 100);
                    std::memcpy(in[r].data() + i * elem, &v, sizeof v);
                } else {
                    const float v = static_cast<float>(rng() % 100);
                    std::memcpy(in[r].data() + i * elem, &v, sizeof v);
                }
            }
        }
        out[r] = in_place ? in[r] : std::vector<char>(count * elem, 0x5a);
    }
    std::vector<char> want = in[0];
    for (int r = 1; r < n; ++r) gpurdma::reduce::apply(op, dtype, want.data(), want.data(), in[r].data(), count);

    NodeArena arena = node.arena();
    std::vector<std::unique_ptr<NodeCall>> m;
    for (int r = 0; r < n; ++r)
        m.push_back(std::make_unique<NodeCall>(arena, r, node.next_block, op, dtype, in_place ? nullptr : in[r].data(),
                                               out[r].data(), count, direct_max, node.consumed_seen[r].data()));
    std::vector<bool> done(static_cast<size_t>(n), false);
    int remaining = n;
    for (size_t round = 0; remaining > 0; ++round) {
        if (round > 1000000) return ::testing::AssertionFailure() << "no progress (deadlock)";
        const int r = random_order ? static_cast<int>(rng() % static_cast<unsigned>(n)) : static_cast<int>(round % n);
        if (done[r]) continue;
        const State st = m[r]->advance();
        if (st == State::Failed) return ::testing::AssertionFailure() << "rank " << r << " failed";
        if (st == State::Done) {
            done[r] = true;
            --remaining;
        }
    }
    for (int r = 1; r < n; ++r)
        if (m[r]->blocks() != m[0]->blocks()) return ::testing::AssertionFailure() << "ranks disagree on blocks";
    node.next_block += m[0]->blocks();
    // struct { double; int; } has 4 bytes of padding that MPI leaves undefined, and each
    // x87 long double of a long double complex 6.
    auto same = [&](const char *a, const char *b) {
        if (dtype == GPURDMA_DOUBLE_INT) return std::memcmp(a, b, 12) == 0;
        if (dtype == GPURDMA_LONG_DOUBLE_COMPLEX && sizeof(long double) == 16)
            return std::memcmp(a, b, 10) == 0 && std::memcmp(a + 16, b + 16, 10) == 0;
        return std::memcmp(a, b, elem) == 0;
    };
    for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
            if (same(out[r].data() + i * elem, want.data() + i * elem)) continue;
            return ::testing::AssertionFailure()
                   << "rank " << r << " of " << n << " differs: " << gpurdma_dtype_name(dtype) << " "
                   << gpurdma_op_name(op) << " count " << count << (in_place ? " in place" : "") << " at element " << i;
        }
    return ::testing::AssertionSuccess();
}

}  // namespace

TEST(NodeAllreduce, SlicesCoverTheBlockAlignedAndDisjoint)
{
    for (size_t elem : {1ul, 2ul, 4ul, 8ul, 16ul, 32ul})
        for (int ranks = 1; ranks <= 9; ++ranks)
            for (size_t elems : {0ul, 1ul, 3ul, 64ul, 100ul, 1000ul, 4096ul, 65537ul}) {
                size_t next = 0;
                for (int i = 0; i < ranks; ++i) {
                    size_t first = 0, count = 0;
                    NodeCall::slice(elems, elem, ranks, i, &first, &count);
                    ASSERT_EQ(next, first) << "elem " << elem << " ranks " << ranks << " elems " << elems;
                    if (first < elems && first + count < elems) {
                        ASSERT_EQ(0u, ((first + count) * elem) % 64);
                    }
                    next = first + count;
                }
                ASSERT_EQ(elems, next);
            }
}

TEST(NodeAllreduce, ManyShapesAndCallsInARow)
{
    std::mt19937 rng(12345);
    for (int ranks = 2; ranks <= 9; ++ranks)
        for (int slots : {1, 2, 4}) {
            // 4 KiB blocks: large counts cross many blocks and reuse every slot.
            Node node(ranks, slots, 4096);
            for (size_t count : {1ul, 7ul, 1000ul, 1024ul, 1025ul, 5000ul, 20000ul})
                for (bool in_place : {false, true})
                    for (bool random_order : {false, true}) {
                        ASSERT_TRUE(
                            run_call(node, GPURDMA_INT32, GPURDMA_SUM, count, in_place, 256, rng, random_order));
                        ASSERT_TRUE(
                            run_call(node, GPURDMA_FLOAT, GPURDMA_SUM, count, in_place, 256, rng, random_order));
                    }
        }
}

TEST(NodeAllreduce, DirectFormOverManyBlocks)
{
    // Two ranks take the direct form at every size: each block is posted whole and
    // reduced by everyone, slots reused across blocks and calls.
    std::mt19937 rng(4242);
    for (int ranks : {2, 3, 5})
        for (int slots : {1, 2, 4}) {
            Node node(ranks, slots, 4096);
            for (size_t count : {1ul, 1024ul, 1025ul, 9000ul, 30000ul})
                for (bool in_place : {false, true}) {
                    ASSERT_TRUE(run_call(node, GPURDMA_FLOAT, GPURDMA_SUM, count, in_place, SIZE_MAX, rng, true));
                    ASSERT_TRUE(run_call(node, GPURDMA_INT64, GPURDMA_PROD, count, in_place, SIZE_MAX, rng, false));
                }
        }
}

TEST(NodeAllreduce, DirectFormAndOtherTypes)
{
    std::mt19937 rng(777);
    for (int ranks : {2, 3, 4, 7}) {
        Node node(ranks, 2, 8192);
        for (size_t count : {1ul, 5ul, 64ul, 300ul, 2000ul})
            for (bool in_place : {false, true}) {
                // direct_max 8 KiB: small counts reduce everything on every rank.
                ASSERT_TRUE(run_call(node, GPURDMA_INT8, GPURDMA_SUM, count, in_place, 8192, rng, true));
                ASSERT_TRUE(run_call(node, GPURDMA_FLOAT, GPURDMA_SUM, count, in_place, 8192, rng, true));
                ASSERT_TRUE(run_call(node, GPURDMA_DOUBLE_INT, GPURDMA_MAXLOC, count, in_place, 8192, rng, true));
                ASSERT_TRUE(run_call(node, GPURDMA_UINT16, GPURDMA_BXOR, count, in_place, 0, rng, false));
                ASSERT_TRUE(run_call(node, GPURDMA_DOUBLE, GPURDMA_PROD, count, in_place, 0, rng, true));
            }
    }
}

// Small messages travel in mailboxes of several lines, each line with its own flag, and
// are reduced line by line: every count up to a mailbox's size and just past it, for
// element sizes that divide a line's payload and one (32 bytes) that takes one line only.
TEST(NodeAllreduce, MailboxesCarryEveryCountUpToTheirSize)
{
    std::mt19937 rng(4242);
    const size_t line = NodeArenaLayout::kMailLineBytes;
    for (int ranks : {2, 3, 5}) {
        Node node(ranks, 2, 4096);
        for (gpurdma_dtype_t dtype :
             {GPURDMA_INT8, GPURDMA_UINT16, GPURDMA_FLOAT, GPURDMA_DOUBLE, GPURDMA_LONG_DOUBLE_COMPLEX}) {
            const size_t elem = gpurdma::reduce::dtype_size(dtype);
            const gpurdma_op_t op = dtype == GPURDMA_FLOAT ? GPURDMA_SUM : GPURDMA_PROD;
            for (size_t count = 1; count * elem <= NodeArenaLayout::kMailBytes + 2 * elem; ++count) {
                const size_t bytes = count * elem;
                const bool fits = bytes <= NodeArenaLayout::kMailBytes && (bytes <= line || line % elem == 0);
                std::vector<char> buf(bytes);
                NodeArena arena = node.arena();
                EXPECT_EQ(fits,
                          NodeCall(arena, 0, node.next_block, op, dtype, nullptr, buf.data(), count, SIZE_MAX).mailed())
                    << gpurdma_dtype_name(dtype) << " count " << count;
                for (bool in_place : {false, true})
                    ASSERT_TRUE(run_call(node, dtype, op, count, in_place, SIZE_MAX, rng, true));
            }
        }
    }
}

TEST(NodeAllreduce, DirectFormReadsTheOwnOperandFromTheBufferWhereSafe)
{
    // In the direct form each rank reads its own operand from its buffer instead of
    // its posted copy, except in place with more than two ranks. Every such case,
    // with 64 KiB blocks and both forms, slots reused.
    std::mt19937 rng(9001);
    for (int ranks : {2, 3, 4})
        for (size_t direct_max : {size_t{0}, SIZE_MAX}) {
            Node node(ranks, 2, 64 * 1024);
            for (size_t count : {4096ul, 16384ul + 3, 70000ul})
                for (bool in_place : {false, true}) {
                    ASSERT_TRUE(run_call(node, GPURDMA_FLOAT, GPURDMA_SUM, count, in_place, direct_max, rng, true));
                    ASSERT_TRUE(run_call(node, GPURDMA_INT16, GPURDMA_MAX, count, in_place, direct_max, rng, false));
                }
        }
}

TEST(NodeAllreduce, OverlappingBuffersStillGetTheSum)
{
    // Send and receive buffers that overlap without being the same are erroneous in
    // MPI, but the result stays defined: the direct form then reads the posted copy,
    // not the buffer it is overwriting.
    const int ranks = 2;
    const size_t count = 5000;
    Node node(ranks, 2, 64 * 1024);
    std::vector<std::vector<float>> mem(ranks, std::vector<float>(count + 16));
    std::vector<float> want(count);
    for (int r = 0; r < ranks; ++r)
        for (size_t i = 0; i < count; ++i) mem[r][i] = static_cast<float>(r * 1000 + i % 97);
    for (size_t i = 0; i < count; ++i) want[i] = mem[0][i] + mem[1][i];
    NodeArena arena = node.arena();
    std::vector<std::unique_ptr<NodeCall>> m;
    for (int r = 0; r < ranks; ++r)
        m.push_back(std::make_unique<NodeCall>(arena, r, 0, GPURDMA_SUM, GPURDMA_FLOAT, mem[r].data(),
                                               mem[r].data() + 16, count, SIZE_MAX, node.consumed_seen[r].data()));
    std::vector<bool> done(ranks, false);
    for (int round = 0; round < 100000 && !(done[0] && done[1]); ++round) {
        const int r = round % ranks;
        if (!done[r]) done[r] = m[r]->advance() == State::Done;
    }
    ASSERT_TRUE(done[0] && done[1]) << "no progress";
    for (int r = 0; r < ranks; ++r)
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(want[i], mem[r][16 + i]) << "rank " << r << " element " << i;
}

TEST(NodeAllreduce, ARankThatIsLateBlocksTheOthersButNothingBreaks)
{
    // Rank 1 does not start: the others must wait (Running), never finish early.
    Node node(3, 2, 4096);
    const size_t count = 3000;
    std::vector<std::vector<float>> in(3, std::vector<float>(count, 1.0f)), out(3, std::vector<float>(count));
    NodeArena arena = node.arena();
    NodeCall r0(arena, 0, 0, GPURDMA_SUM, GPURDMA_FLOAT, in[0].data(), out[0].data(), count, 0);
    NodeCall r2(arena, 2, 0, GPURDMA_SUM, GPURDMA_FLOAT, in[2].data(), out[2].data(), count, 0);
    for (int i = 0; i < 100; ++i) {
        ASSERT_EQ(State::Running, r0.advance());
        ASSERT_EQ(State::Running, r2.advance());
    }
    int peer = -2;
    const std::string what = r0.waiting_for(&peer);
    EXPECT_EQ(1, peer) << what;
    NodeCall r1(arena, 1, 0, GPURDMA_SUM, GPURDMA_FLOAT, in[1].data(), out[1].data(), count, 0);
    bool d0 = false, d1 = false, d2 = false;
    for (int i = 0; i < 10000 && !(d0 && d1 && d2); ++i) {
        d0 = d0 || r0.advance() == State::Done;
        d1 = d1 || r1.advance() == State::Done;
        d2 = d2 || r2.advance() == State::Done;
    }
    ASSERT_TRUE(d0 && d1 && d2);
    for (int r = 0; r < 3; ++r)
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(3.0f, out[r][i]);
}

TEST(NodeAllreduce, TheAlgorithmCarriesTheBlockSequenceAndNamesWhoItWaitsFor)
{
    // The algorithm object keeps the block sequence from call to call; a rank that
    // has not started shows in the wait description with its host.
    using gpurdma::algo::Call;
    using gpurdma::algo::NodeAllreduce;
    const int ranks = 3;
    Node node(ranks, 2, 4096);
    const std::vector<std::string> hosts{"a", "a", "a"};
    std::vector<std::unique_ptr<NodeAllreduce>> m;
    for (int r = 0; r < ranks; ++r)
        m.push_back(std::make_unique<NodeAllreduce>(node.arena(), std::vector<int>{0, 1, 2}, r,
                                                    NodeAllreduce::direct_max(ranks, 256), hosts));
    const size_t count = 3000;
    for (int call_no = 0; call_no < 4; ++call_no) {
        std::vector<std::vector<float>> buf(ranks, std::vector<float>(count));
        for (int r = 0; r < ranks; ++r) std::fill(buf[r].begin(), buf[r].end(), static_cast<float>(r + call_no));
        for (int r = 0; r < ranks; ++r) {
            Call c;
            c.recvbuf = buf[r].data();
            c.count = count;
            c.dtype = GPURDMA_FLOAT;
            c.op = GPURDMA_SUM;
            ASSERT_TRUE(m[r]->start(c).is_ok());
        }
        if (call_no == 1) {
            // Rank 2 late: the others wait for it, by name.
            for (int i = 0; i < 100; ++i) {
                ASSERT_EQ(State::Running, m[0]->advance());
                ASSERT_EQ(State::Running, m[1]->advance());
            }
            EXPECT_NE(m[0]->describe_wait().find("node reduce-scatter/allgather (intra-node), waiting for rank 2 on "
                                                 "host a to post its data for block"),
                      std::string::npos)
                << m[0]->describe_wait();
        }
        std::vector<bool> done(ranks, false);
        for (int round = 0; round < 100000 && std::count(done.begin(), done.end(), true) < ranks; ++round) {
            const int r = round % ranks;
            if (!done[r]) done[r] = m[r]->advance() == State::Done;
        }
        ASSERT_EQ(ranks, std::count(done.begin(), done.end(), true)) << "no progress in call " << call_no;
        for (int r = 0; r < ranks; ++r) {
            m[r]->finish();
            EXPECT_EQ(&gpurdma_comm_stats_t::node_calls, m[r]->counter());
            EXPECT_EQ(m[0]->next_block(), m[r]->next_block());
            for (size_t i = 0; i < count; ++i) ASSERT_EQ(static_cast<float>(3 + 3 * call_no), buf[r][i]);
        }
    }
    EXPECT_EQ(4u * 3u, m[0]->next_block());  // 3000 floats in 4 KiB blocks: 3 per call
}
