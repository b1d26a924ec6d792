// The one-node reduce-scatter, allgather, bcast and reduce (algo::NodeCollective) and
// their interleaving with the node allreduce on one arena and one block sequence: every
// rank's algorithm object run in one thread over one in-memory arena, advanced in
// round-robin and random orders, checked against references computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "algo/node_allreduce.h"
#include "algo/node_collective.h"
#include "reduce/reduce.h"

using gpurdma::algo::Algorithm;
using gpurdma::algo::Call;
using gpurdma::algo::NodeAllreduce;
using gpurdma::algo::NodeArena;
using gpurdma::algo::NodeArenaLayout;
using gpurdma::algo::NodeCollective;
using gpurdma::algo::NodeCounter;
using gpurdma::algo::NodeSequence;
using gpurdma::exec::State;
using gpurdma::plan::Coll;

namespace {

using Check = std::function<::testing::AssertionResult()>;

// One call on every rank, and how its result is checked.
struct Job {
    Coll coll;
    std::vector<Call> calls;
    Check check;
};

// One node: the arena, and per rank its sequence and both algorithms, as the selector
// would make them.
struct Node {
    NodeArenaLayout layout;
    std::vector<uint64_t> storage;  // 8-byte aligned, zeroed like a fresh segment
    std::vector<std::unique_ptr<NodeSequence>> seq;
    std::vector<std::unique_ptr<NodeAllreduce>> allreduce;
    std::vector<std::unique_ptr<NodeCollective>> coll;
    std::vector<Job> *batch = nullptr;  // set: calls are queued for run_threads, not run

    Node(int ranks, int slots, size_t block, size_t direct_max = 256)
    {
        layout = NodeAllreduce::layout(ranks, slots, block);
        storage.assign(layout.bytes() / 8 + 1, 0);
        std::vector<int> members;
        for (int r = 0; r < ranks; ++r) members.push_back(r);
        const std::vector<std::string> hosts(static_cast<size_t>(ranks), "a");
        for (int r = 0; r < ranks; ++r) {
            seq.push_back(std::make_unique<NodeSequence>(ranks));
            allreduce.push_back(std::make_unique<NodeAllreduce>(arena(), *seq[r], members, r, direct_max, hosts));
            coll.push_back(std::make_unique<NodeCollective>(arena(), *seq[r], members, r, hosts, direct_max));
        }
    }
    int ranks() const { return layout.ranks; }
    NodeArena arena() { return NodeArena(reinterpret_cast<char *>(storage.data()), layout); }
    Algorithm &algo(int r, Coll c) { return c == Coll::Allreduce ? *allreduce[r] : static_cast<Algorithm &>(*coll[r]); }
};

// Drives one call on every rank to its end; checks that all ranks agree on the sequence
// and that every counter of every rank ends at it.
::testing::AssertionResult run_all(Node &node, Coll coll, const std::vector<Call> &calls, std::mt19937 &rng,
                                   bool random_order, const Check &check)
{
    if (node.batch) {
        node.batch->push_back(Job{coll, calls, check});
        return ::testing::AssertionSuccess();
    }
    const int n = node.ranks();
    for (int r = 0; r < n; ++r) {
        const gpurdma::Status st = node.algo(r, coll).start(calls[r]);
        if (!st.is_ok()) return ::testing::AssertionFailure() << "rank " << r << " start: " << st.message();
    }
    std::vector<bool> done(static_cast<size_t>(n), false);
    int remaining = n;
    for (size_t round = 0; remaining > 0; ++round) {
        if (round > 2000000) {
            return ::testing::AssertionFailure() << "no progress (deadlock): " << node.algo(0, coll).describe_wait();
        }
        const int r = random_order ? static_cast<int>(rng() % static_cast<unsigned>(n)) : static_cast<int>(round % n);
        if (done[r]) continue;
        const State st = node.algo(r, coll).advance();
        if (st == State::Failed) return ::testing::AssertionFailure() << "rank " << r << " failed";
        if (st == State::Done) {
            done[r] = true;
            --remaining;
        }
    }
    for (int r = 0; r < n; ++r) node.algo(r, coll).finish();
    for (int r = 1; r < n; ++r)
        if (node.seq[r]->next_block != node.seq[0]->next_block)
            return ::testing::AssertionFailure() << "ranks disagree on the block sequence";
    // After a call every rank's counters stand at the sequence.
    NodeArena arena = node.arena();
    for (int r = 0; r < n; ++r)
        for (NodeCounter c : {NodeCounter::Posted, NodeCounter::Reduced, NodeCounter::Consumed})
            if (node.seq[0]->next_block > 0 && arena.load(r, c) != node.seq[0]->next_block)
                return ::testing::AssertionFailure() << "rank " << r << " counter " << static_cast<int>(c) << " at "
                                                     << arena.load(r, c) << ", sequence " << node.seq[0]->next_block;
    return check();
}

// Small integers in any dtype the tests use (int32, double): exact sums in any order.
struct Values {
    gpurdma_dtype_t dtype;
    size_t elem() const { return gpurdma::reduce::dtype_size(dtype); }
    std::vector<char> make(size_t count, std::mt19937 &rng) const
    {
        std::vector<char> v(count * elem());
        for (size_t i = 0; i < count; ++i) {
            const int x = static_cast<int>(rng() % 201) - 100;
            if (dtype == GPURDMA_DOUBLE) {
                const double d = x;
                std::memcpy(v.data() + i * 8, &d, 8);
            } else {
                std::memcpy(v.data() + i * 4, &x, 4);
            }
        }
        return v;
    }
};

std::vector<char> fold_ref(const std::vector<std::vector<char>> &in, size_t first, size_t count, gpurdma_op_t op,
                           gpurdma_dtype_t dtype)
{
    const size_t elem = gpurdma::reduce::dtype_size(dtype);
    std::vector<char> want(in[0].begin() + static_cast<long>(first * elem),
                           in[0].begin() + static_cast<long>((first + count) * elem));
    for (size_t r = 1; r < in.size(); ++r)
        gpurdma::reduce::apply(op, dtype, want.data(), want.data(), in[r].data() + first * elem, count);
    return want;
}

::testing::AssertionResult same(const std::vector<char> &got, const std::vector<char> &want, size_t offset,
                                const std::string &what)
{
    if (want.empty() || std::memcmp(got.data() + offset, want.data(), want.size()) == 0)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << " differs";
}

std::string name(Coll coll, int ranks, size_t count, bool in_place, int root = -1)
{
    return std::string(gpurdma::plan::coll_name(coll)) + " ranks " + std::to_string(ranks) + " count " +
           std::to_string(count) + (in_place ? " in place" : "") + (root >= 0 ? " root " + std::to_string(root) : "");
}

// A call's buffers, kept alive until it is checked.
struct Bufs {
    std::vector<std::vector<char>> in, out;
    std::vector<char> want;
};

::testing::AssertionResult allreduce(Node &node, size_t count, bool in_place, gpurdma_op_t op, Values v,
                                     std::mt19937 &rng, bool random_order)
{
    const int n = node.ranks();
    auto d = std::make_shared<Bufs>();
    for (int r = 0; r < n; ++r) {
        d->in.push_back(v.make(count, rng));
        d->out.push_back(in_place ? d->in[r] : std::vector<char>(count * v.elem(), 0x5a));
    }
    d->want = fold_ref(d->in, 0, count, op, v.dtype);
    std::vector<Call> calls(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        calls[r].coll = Coll::Allreduce;
        calls[r].sendbuf = in_place ? nullptr : d->in[r].data();
        calls[r].recvbuf = d->out[r].data();
        calls[r].count = count;
        calls[r].dtype = v.dtype;
        calls[r].op = op;
    }
    return run_all(node, Coll::Allreduce, calls, rng, random_order, [=]() {
        ::testing::AssertionResult ok = ::testing::AssertionSuccess();
        for (int r = 0; r < n; ++r)
            if (!(ok = same(d->out[r], d->want, 0,
                            name(Coll::Allreduce, n, count, in_place) + " rank " + std::to_string(r))))
                return ok;
        return ok;
    });
}

::testing::AssertionResult reduce_scatter(Node &node, const std::vector<size_t> &counts, bool explicit_counts,
                                          bool in_place, gpurdma_op_t op, Values v, std::mt19937 &rng,
                                          bool random_order)
{
    const int n = node.ranks();
    size_t total = 0;
    std::vector<size_t> offsets;
    for (size_t c : counts) {
        offsets.push_back(total);
        total += c;
    }
    auto d = std::make_shared<Bufs>();
    for (int r = 0; r < n; ++r) {
        d->in.push_back(v.make(total, rng));
        d->out.push_back(in_place ? d->in[r] : std::vector<char>(counts[r] * v.elem() + 1, 0x5a));
    }
    std::vector<Call> calls(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        calls[r].coll = Coll::ReduceScatter;
        calls[r].sendbuf = in_place ? nullptr : d->in[r].data();
        calls[r].recvbuf = d->out[r].data();
        calls[r].count = counts[0];
        if (explicit_counts) calls[r].counts = counts;
        calls[r].dtype = v.dtype;
        calls[r].op = op;
    }
    return run_all(node, Coll::ReduceScatter, calls, rng, random_order, [=]() {
        ::testing::AssertionResult ok = ::testing::AssertionSuccess();
        for (int r = 0; r < n; ++r) {
            const std::vector<char> want = fold_ref(d->in, offsets[r], counts[r], op, v.dtype);
            if (!(ok = same(d->out[r], want, 0,
                            name(Coll::ReduceScatter, n, counts[r], in_place) + " rank " + std::to_string(r))))
                return ok;
            if (!in_place && d->out[r].back() != 0x5a) return ::testing::AssertionFailure() << "wrote past the result";
        }
        return ok;
    });
}

::testing::AssertionResult allgather(Node &node, size_t count, bool in_place, Values v, std::mt19937 &rng,
                                     bool random_order)
{
    const int n = node.ranks();
    const size_t bytes = count * v.elem();
    auto d = std::make_shared<Bufs>();
    for (int r = 0; r < n; ++r) {
        d->in.push_back(v.make(count, rng));
        d->want.insert(d->want.end(), d->in[r].begin(), d->in[r].end());
    }
    for (int r = 0; r < n; ++r) {
        d->out.emplace_back(static_cast<size_t>(n) * bytes, 0x5a);
        if (in_place && bytes) std::memcpy(d->out[r].data() + static_cast<size_t>(r) * bytes, d->in[r].data(), bytes);
    }
    std::vector<Call> calls(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        calls[r].coll = Coll::Allgather;
        calls[r].sendbuf = in_place ? nullptr : d->in[r].data();
        calls[r].recvbuf = d->out[r].data();
        calls[r].count = count;
        calls[r].dtype = v.dtype;
    }
    return run_all(node, Coll::Allgather, calls, rng, random_order, [=]() {
        ::testing::AssertionResult ok = ::testing::AssertionSuccess();
        for (int r = 0; r < n; ++r)
            if (!(ok = same(d->out[r], d->want, 0,
                            name(Coll::Allgather, n, count, in_place) + " rank " + std::to_string(r))))
                return ok;
        return ok;
    });
}

::testing::AssertionResult bcast(Node &node, size_t count, int root, Values v, std::mt19937 &rng, bool random_order)
{
    const int n = node.ranks();
    auto d = std::make_shared<Bufs>();
    for (int r = 0; r < n; ++r) d->out.push_back(v.make(count, rng));
    d->want = d->out[root];
    std::vector<Call> calls(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        calls[r].coll = Coll::Bcast;
        calls[r].recvbuf = d->out[r].data();
        calls[r].count = count;
        calls[r].dtype = v.dtype;
        calls[r].root = root;
    }
    return run_all(node, Coll::Bcast, calls, rng, random_order, [=]() {
        ::testing::AssertionResult ok = ::testing::AssertionSuccess();
        for (int r = 0; r < n; ++r)
            if (!(ok = same(d->out[r], d->want, 0,
                            name(Coll::Bcast, n, count, false, root) + " rank " + std::to_string(r))))
                return ok;
        return ok;
    });
}

::testing::AssertionResult reduce(Node &node, size_t count, int root, bool in_place, gpurdma_op_t op, Values v,
                                  std::mt19937 &rng, bool random_order)
{
    const int n = node.ranks();
    auto d = std::make_shared<Bufs>();
    for (int r = 0; r < n; ++r) {
        d->in.push_back(v.make(count, rng));
        // Non-roots' receive buffers stay untouched.
        d->out.push_back(in_place && r == root ? d->in[r] : std::vector<char>(count * v.elem(), 0x5a));
    }
    d->want = fold_ref(d->in, 0, count, op, v.dtype);
    std::vector<Call> calls(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        calls[r].coll = Coll::Reduce;
        calls[r].sendbuf = in_place && r == root ? nullptr : d->in[r].data();
        calls[r].recvbuf = d->out[r].data();
        calls[r].count = count;
        calls[r].dtype = v.dtype;
        calls[r].op = op;
        calls[r].root = root;
    }
    return run_all(node, Coll::Reduce, calls, rng, random_order, [=]() {
        const std::string what = name(Coll::Reduce, n, count, in_place, root);
        ::testing::AssertionResult ok = same(d->out[root], d->want, 0, what + " at the root");
        if (!ok) return ok;
        const std::vector<char> untouched(count * v.elem(), 0x5a);
        for (int r = 0; r < n; ++r)
            if (r != root && d->out[r] != untouched)
                return ::testing::AssertionFailure() << what << ": rank " << r << " written";
        return ok;
    });
}

const Values kInt{GPURDMA_INT32};
const Values kDouble{GPURDMA_DOUBLE};

// 4 KiB blocks, 2 slots: 5000 int32 span 5 blocks (reduce-scatter: pieces of a block / ranks).
const std::vector<size_t> kCounts{0, 1, 7, 1000, 5000};

}  // namespace

TEST(NodeCollective, ReduceScatterEvenCounts)
{
    std::mt19937 rng(1);
    for (int ranks : {2, 3, 4}) {
        Node node(ranks, 2, 4096);
        for (size_t count : kCounts)
            for (bool in_place : {false, true})
                for (bool explicit_counts : {false, true}) {
                    const std::vector<size_t> counts(static_cast<size_t>(ranks), count);
                    ASSERT_TRUE(reduce_scatter(node, counts, explicit_counts, in_place, GPURDMA_SUM, kInt, rng, true));
                    ASSERT_TRUE(reduce_scatter(node, counts, explicit_counts, in_place, GPURDMA_MAX, kInt, rng, false));
                    ASSERT_TRUE(
                        reduce_scatter(node, counts, explicit_counts, in_place, GPURDMA_SUM, kDouble, rng, true));
                }
    }
}

TEST(NodeCollective, ReduceScatterUnevenCountsWithZeros)
{
    std::mt19937 rng(2);
    for (int ranks : {2, 3, 4}) {
        Node node(ranks, 2, 4096);
        for (int trial = 0; trial < 12; ++trial)
            for (bool in_place : {false, true}) {
                std::vector<size_t> counts;
                for (int r = 0; r < ranks; ++r) {
                    const unsigned k = rng() % 4;
                    counts.push_back(k == 0 ? 0 : k == 1 ? rng() % 8 : k == 2 ? rng() % 300 : rng() % 6000);
                }
                ASSERT_TRUE(reduce_scatter(node, counts, true, in_place, GPURDMA_SUM, kInt, rng, true));
                ASSERT_TRUE(reduce_scatter(node, counts, true, in_place, GPURDMA_SUM, kDouble, rng, false));
            }
        // Only one rank with a result, first or last.
        for (int who : {0, ranks - 1}) {
            std::vector<size_t> counts(static_cast<size_t>(ranks), 0);
            counts[static_cast<size_t>(who)] = 3000;
            for (bool in_place : {false, true})
                ASSERT_TRUE(reduce_scatter(node, counts, true, in_place, GPURDMA_MAX, kInt, rng, true));
        }
    }
}

TEST(NodeCollective, ARankWithNothingToReceiveDoesNotWait)
{
    // counts {n, 0, n}: rank 1 posts its input for the others and is done, before
    // ranks 0 and 2 have started (OSU's 8-byte float reduce-scatter at np=4 is {1,1,0,0};
    // such a rank waiting for everyone cost 2.3x tuned's time oversubscribed). Mailbox
    // form (2 elements) and block form (500: two blocks, within the arena's two slots; a
    // longer call must wait for slots to come free), then the others finish with the
    // right sums.
    for (size_t n : {size_t{2}, size_t{500}}) {
        Node node(3, 2, 4096);
        const std::vector<size_t> counts{n, 0, n};
        std::vector<std::vector<int32_t>> in(3), out(3, std::vector<int32_t>(n + 1, -1));
        std::vector<Call> calls(3);
        for (int r = 0; r < 3; ++r) {
            for (size_t i = 0; i < 2 * n; ++i) in[r].push_back(static_cast<int32_t>(i * 7 + static_cast<size_t>(r)));
            calls[r].coll = Coll::ReduceScatter;
            calls[r].sendbuf = in[r].data();
            calls[r].recvbuf = out[r].data();
            calls[r].counts = counts;
            calls[r].count = counts[0];
            calls[r].dtype = GPURDMA_INT32;
            calls[r].op = GPURDMA_SUM;
        }
        ASSERT_TRUE(node.coll[1]->start(calls[1]).is_ok());
        State st = State::Running;
        for (int i = 0; i < 1000 && st == State::Running; ++i) st = node.coll[1]->advance();
        ASSERT_EQ(State::Done, st) << n << " elements: rank 1 waited for ranks that have not started";
        for (int r : {0, 2}) ASSERT_TRUE(node.coll[r]->start(calls[r]).is_ok());
        bool done0 = false, done2 = false;
        for (int i = 0; i < 100000 && !(done0 && done2); ++i) {
            if (!done0) done0 = node.coll[0]->advance() == State::Done;
            if (!done2) done2 = node.coll[2]->advance() == State::Done;
        }
        ASSERT_TRUE(done0 && done2);
        for (int r : {0, 2})
            for (size_t i = 0; i < n; ++i) {
                const size_t at = (r == 0 ? 0 : n) + i;
                ASSERT_EQ(static_cast<int32_t>(3 * (at * 7) + 3), out[r][i]) << "rank " << r << " element " << i;
            }
    }
}

TEST(NodeCollective, Allgather)
{
    std::mt19937 rng(3);
    for (int ranks : {2, 3, 4}) {
        Node node(ranks, 2, 4096);
        for (size_t count : kCounts)
            for (bool in_place : {false, true}) {
                ASSERT_TRUE(allgather(node, count, in_place, kInt, rng, true));
                ASSERT_TRUE(allgather(node, count, in_place, kDouble, rng, false));
            }
    }
}

TEST(NodeCollective, BcastFromEveryRoot)
{
    std::mt19937 rng(4);
    for (int ranks : {2, 3, 4}) {
        Node node(ranks, 2, 4096);
        for (size_t count : kCounts)
            for (int root = 0; root < ranks; ++root) {
                ASSERT_TRUE(bcast(node, count, root, kInt, rng, true));
                ASSERT_TRUE(bcast(node, count, root, kDouble, rng, false));
            }
    }
}

TEST(NodeCollective, ReduceToEveryRoot)
{
    // Direct form (the root reduces whole blocks) never, for small messages, always.
    std::mt19937 rng(5);
    for (size_t direct_max : {size_t{0}, size_t{256}, SIZE_MAX})
        for (int ranks : {2, 3, 4}) {
            Node node(ranks, 2, 4096, direct_max);
            for (size_t count : kCounts)
                for (int root = 0; root < ranks; ++root)
                    for (bool in_place : {false, true}) {
                        ASSERT_TRUE(reduce(node, count, root, in_place, GPURDMA_SUM, kInt, rng, true));
                        ASSERT_TRUE(reduce(node, count, root, in_place, GPURDMA_MAX, kInt, rng, false));
                        ASSERT_TRUE(reduce(node, count, root, in_place, GPURDMA_SUM, kDouble, rng, true));
                    }
        }
}

// Small messages (up to 288 bytes mailed by a rank) take the mailbox form: one block
// each; a rank that has not posted is named as for the block forms.
TEST(NodeCollective, SmallCallsTakeTheMailbox)
{
    std::mt19937 rng(10);
    for (int ranks : {2, 3, 4}) {
        Node node(ranks, 2, 4096);
        for (size_t count : {size_t{1}, size_t{7}, size_t{12}}) {  // 12 int32: one line; 12 doubles: two
            const uint64_t before = node.seq[0]->next_block;
            ASSERT_TRUE(allgather(node, count, false, kDouble, rng, true));
            ASSERT_TRUE(allgather(node, count, true, kInt, rng, false));
            ASSERT_TRUE(bcast(node, count, ranks - 1, kDouble, rng, true));
            ASSERT_TRUE(reduce(node, count, ranks - 1, true, GPURDMA_SUM, kDouble, rng, false));
            ASSERT_TRUE(reduce(node, count, 0, false, GPURDMA_MAX, kInt, rng, true));
            const std::vector<size_t> counts(static_cast<size_t>(ranks), count / 2);
            ASSERT_TRUE(reduce_scatter(node, counts, false, true, GPURDMA_SUM, kInt, rng, true));
            ASSERT_TRUE(reduce_scatter(node, counts, true, false, GPURDMA_SUM, kDouble, rng, false));
            EXPECT_EQ(count / 2 ? 7u : 5u, node.seq[0]->next_block - before) << "count " << count;
        }
    }
    Node node(3, 2, 4096);
    std::vector<std::vector<double>> buf(3, std::vector<double>(7, 1.0));
    for (int r = 0; r < 2; ++r) {
        Call c;
        c.coll = Coll::Bcast;
        c.recvbuf = buf[r].data();
        c.count = 7;
        c.dtype = GPURDMA_DOUBLE;
        c.root = 2;
        ASSERT_TRUE(node.coll[r]->start(c).is_ok());
        for (int i = 0; i < 20; ++i) ASSERT_EQ(State::Running, node.coll[r]->advance());
    }
    EXPECT_EQ("node bcast, mailbox", node.coll[0]->describe_call());
    EXPECT_EQ("node bcast (intra-node), waiting for rank 2 on host a to post its data for block 0",
              node.coll[1]->describe_wait());
}

TEST(NodeCollective, ZeroCountsUseNoBlocks)
{
    std::mt19937 rng(6);
    Node node(3, 2, 4096);
    ASSERT_TRUE(allgather(node, 0, false, kInt, rng, true));
    ASSERT_TRUE(bcast(node, 0, 1, kInt, rng, true));
    ASSERT_TRUE(reduce(node, 0, 2, false, GPURDMA_SUM, kInt, rng, true));
    ASSERT_TRUE(reduce_scatter(node, {0, 0, 0}, true, false, GPURDMA_SUM, kInt, rng, true));
    EXPECT_EQ(0u, node.seq[0]->next_block);
    ASSERT_TRUE(bcast(node, 5000, 1, kInt, rng, true));
    EXPECT_EQ(5u, node.seq[0]->next_block);  // 20000 bytes in 4 KiB blocks
}

namespace {

// One call of a random kind and shape (the same on every rank).
::testing::AssertionResult random_call(Node &node, std::mt19937 &rng)
{
    const int ranks = node.ranks();
    const size_t count = kCounts[rng() % kCounts.size()] + rng() % 3;
    const bool in_place = rng() % 2;
    const bool random_order = rng() % 2;
    const int root = static_cast<int>(rng() % static_cast<unsigned>(ranks));
    const Values v = rng() % 2 ? kInt : kDouble;
    switch (rng() % 5) {
        case 0: return allreduce(node, count, in_place, GPURDMA_SUM, v, rng, random_order);
        case 1: {
            std::vector<size_t> counts;
            for (int r = 0; r < ranks; ++r) counts.push_back(rng() % 3 ? count : rng() % 50);
            return reduce_scatter(node, counts, true, in_place, GPURDMA_SUM, v, rng, random_order);
        }
        case 2: return allgather(node, count, in_place, v, rng, random_order);
        case 3: return bcast(node, count, root, v, rng, random_order);
        default: return reduce(node, count, root, in_place, GPURDMA_MAX, v, rng, random_order);
    }
}

// Every rank in a thread of its own through all of `jobs`, back to back (a rank may be
// calls ahead of another), then every result checked.
::testing::AssertionResult run_threads(Node &node, const std::vector<Job> &jobs)
{
    const int n = node.ranks();
    std::atomic<bool> stop{false};
    std::vector<std::string> failures(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r]() {
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            for (size_t i = 0; i < jobs.size(); ++i) {
                Algorithm &a = node.algo(r, jobs[i].coll);
                if (!a.start(jobs[i].calls[r]).is_ok()) {
                    failures[r] = "start failed in call " + std::to_string(i);
                    stop = true;
                    return;
                }
                for (unsigned spin = 0;; ++spin) {
                    const State st = a.advance();
                    if (st == State::Done) break;
                    if (st == State::Failed || stop || std::chrono::steady_clock::now() > deadline) {
                        failures[r] = "call " + std::to_string(i) + ": " + a.describe_wait();
                        stop = true;
                        return;
                    }
                    if (spin % 16 == 15) std::this_thread::yield();
                }
                a.finish();
            }
        });
    for (auto &t : threads) t.join();
    for (int r = 0; r < n; ++r)
        if (!failures[r].empty()) return ::testing::AssertionFailure() << "rank " << r << ": " << failures[r];
    for (int r = 1; r < n; ++r)
        if (node.seq[r]->next_block != node.seq[0]->next_block)
            return ::testing::AssertionFailure() << "ranks disagree on the block sequence";
    for (size_t i = 0; i < jobs.size(); ++i) {
        auto ok = jobs[i].check();
        if (!ok) return ok << " (call " << i << ")";
    }
    return ::testing::AssertionSuccess();
}

}  // namespace

// Every collective and the allreduce (both its forms) on one arena and sequence, in a
// random order: slots are reused across calls of different kinds.
TEST(NodeCollective, MixedWithAllreduceOnOneSequence)
{
    std::mt19937 rng(7);
    for (int ranks : {2, 3, 4})
        for (int slots : {1, 2, 3}) {
            Node node(ranks, slots, 4096, ranks == 2 ? SIZE_MAX : 256);
            for (int i = 0; i < 150; ++i) ASSERT_TRUE(random_call(node, rng)) << "call " << i;
        }
}

// The same with every rank in a thread of its own: a rank that runs ahead into its next
// blocks or calls must find each slot free only once everyone is done with it.
TEST(NodeCollective, MixedWithAllreduceInThreads)
{
    std::mt19937 rng(8);
    for (int round = 0; round < 6; ++round)
        for (int ranks : {2, 3, 4})
            for (int slots : {1, 2}) {
                Node node(ranks, slots, 4096, ranks == 2 ? SIZE_MAX : 256);
                std::vector<Job> jobs;
                node.batch = &jobs;
                for (int i = 0; i < 100; ++i) ASSERT_TRUE(random_call(node, rng));
                node.batch = nullptr;
                ASSERT_TRUE(run_threads(node, jobs)) << "ranks " << ranks << " slots " << slots;
            }
}

TEST(NodeCollective, ALateRankIsNamedWithItsStage)
{
    // Rank 2 does not start a bcast from rank 2: the others wait for it to post.
    Node node(3, 2, 4096);
    const size_t count = 3000;
    std::vector<std::vector<int32_t>> buf(3, std::vector<int32_t>(count, 7));
    for (int r = 0; r < 2; ++r) {
        Call c;
        c.coll = Coll::Bcast;
        c.recvbuf = buf[r].data();
        c.count = count;
        c.dtype = GPURDMA_INT32;
        c.root = 2;
        ASSERT_TRUE(node.coll[r]->start(c).is_ok());
        for (int i = 0; i < 50; ++i) ASSERT_EQ(State::Running, node.coll[r]->advance());
    }
    EXPECT_EQ("node bcast (intra-node), waiting for rank 2 on host a to post its data for block 0",
              node.coll[0]->describe_wait());
    EXPECT_EQ("node bcast", node.coll[0]->describe_call());
    std::vector<int32_t> one(1);
    Call r;
    r.coll = Coll::Reduce;
    r.sendbuf = one.data();
    r.recvbuf = one.data();
    r.count = 1;
    r.dtype = GPURDMA_INT32;
    r.op = GPURDMA_SUM;
    Node node3(3, 2, 4096, 1024);
    ASSERT_TRUE(node3.coll[0]->start(r).is_ok());
    EXPECT_EQ("node reduce, mailbox", node3.coll[0]->describe_call());
    std::vector<int32_t> hundred(100);  // 400 bytes: beyond a mailbox, within direct_max
    r.sendbuf = hundred.data();
    r.recvbuf = hundred.data();
    r.count = hundred.size();
    Node node4(3, 2, 4096, 1024);
    ASSERT_TRUE(node4.coll[0]->start(r).is_ok());
    EXPECT_EQ("node reduce, direct", node4.coll[0]->describe_call());
    EXPECT_EQ(&gpurdma_comm_stats_t::node_calls, node.coll[0]->counter());

    // An allgather where rank 1 lags: named as the one that has not posted.
    Node node2(3, 2, 4096);
    std::vector<std::vector<int32_t>> out(3, std::vector<int32_t>(3 * count));
    for (int r : {0, 2}) {
        Call c;
        c.coll = Coll::Allgather;
        c.sendbuf = buf[r].data();
        c.recvbuf = out[r].data();
        c.count = count;
        c.dtype = GPURDMA_INT32;
        ASSERT_TRUE(node2.coll[r]->start(c).is_ok());
        for (int i = 0; i < 50; ++i) ASSERT_EQ(State::Running, node2.coll[r]->advance());
    }
    EXPECT_EQ("node allgather (intra-node), waiting for rank 1 on host a to post its data for block 0",
              node2.coll[0]->describe_wait());
}

TEST(NodeCollective, BadCallsAreRefused)
{
    Node node(3, 2, 4096);
    int32_t x = 0;
    Call c;
    c.recvbuf = &x;
    c.count = 1;
    c.dtype = GPURDMA_INT32;
    c.op = GPURDMA_SUM;
    c.coll = Coll::Allreduce;
    EXPECT_TRUE(node.coll[0]->start(c).is_unsupported());
    c.coll = Coll::Bcast;
    c.root = 3;
    EXPECT_FALSE(node.coll[0]->start(c).is_ok());
    c.coll = Coll::ReduceScatter;
    c.root = 0;
    c.counts = {1, 1};
    EXPECT_FALSE(node.coll[0]->start(c).is_ok());
}

TEST(NodeCollective, ReduceScatterPiecesFitABlockAligned)
{
    for (size_t elem : {1ul, 4ul, 8ul, 16ul, 32ul})
        for (int ranks = 1; ranks <= 9; ++ranks) {
            const size_t block_elems = 4096 / elem;
            const size_t q = gpurdma::algo::NodeCollCall::piece_elems(block_elems, elem, ranks);
            EXPECT_LE(q * static_cast<size_t>(ranks), block_elems);
            EXPECT_EQ(0u, q * elem % 64) << "elem " << elem << " ranks " << ranks;
        }
}
