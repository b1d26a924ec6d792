// The one-node device path's work per rank (algo/device_node_work.h), run on host
// memory: every rank's reductions (the kernel's rule: sources reduced in rank order)
// and copies, in the orders the protocol allows: ranks one after another, first to
// last and last to first, a rank whose copies need the barrier running them only once
// every rank has reduced. Peers' buffers that a rank does not share are absent
// (nullptr), so work that touched one would crash here. Every collective, in place and
// not, 1 to 5 ranks, counts with zeros, uneven parts and slices that end early.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "algo/call_spans.h"
#include "algo/device_node_work.h"
#include "reduce/reduce.h"

using gpurdma::algo::BufferSides;
using gpurdma::algo::Call;
using gpurdma::algo::DeviceNodeWork;
using gpurdma::plan::Coll;

namespace {

using Elems = std::vector<int32_t>;

int32_t value(int rank, size_t i)
{
    return static_cast<int32_t>(rank * 1000003 + static_cast<int>(i) * 7 + 1);
}

// The kernel's rule on host memory: dst = ((s0 op s1) op s2)..., dst may be a source.
void run_reduction(const gpurdma::algo::DeviceReduction &r)
{
    Elems acc(r.count);
    std::memcpy(acc.data(), r.srcs[0], r.count * sizeof(int32_t));
    for (size_t q = 1; q < r.srcs.size(); ++q)
        gpurdma::reduce::apply(GPURDMA_SUM, GPURDMA_INT32, acc.data(), acc.data(), r.srcs[q], r.count);
    std::memcpy(r.dst, acc.data(), r.count * sizeof(int32_t));
}

struct Rank {
    Elems send, recv;
};

// One call on every rank; the expected receive buffers; returns failures as text.
std::string run_case(Call call, int size, bool reverse)
{
    std::vector<Rank> ranks(static_cast<size_t>(size));
    std::vector<Elems> want(static_cast<size_t>(size));
    const size_t total = gpurdma::algo::total_count(call, size);
    // Inputs: rank r's whole input vector is value(r, i).
    for (int r = 0; r < size; ++r) {
        Rank &k = ranks[size_t(r)];
        const size_t part = gpurdma::algo::part_count(call, r);
        switch (call.coll) {
            case Coll::Allreduce:
            case Coll::Reduce:
            case Coll::ReduceScatter:
                k.send.resize(total);
                for (size_t i = 0; i < total; ++i) k.send[i] = value(r, i);
                k.recv.assign(call.in_place() ? total : (call.coll == Coll::ReduceScatter ? part : total), -1);
                if (call.in_place()) k.recv = k.send;
                break;
            case Coll::Allgather:
                k.send.resize(call.count);
                for (size_t i = 0; i < call.count; ++i) k.send[i] = value(r, i);
                k.recv.assign(total, -1);
                if (call.in_place() && call.count)
                    std::memcpy(k.recv.data() + size_t(r) * call.count, k.send.data(), call.count * 4);
                break;
            case Coll::Bcast:
                k.recv.resize(call.count);
                for (size_t i = 0; i < call.count; ++i) k.recv[i] = r == call.root ? value(r, i) : -1;
                break;
        }
    }
    auto sum_at = [&](size_t i) {
        int32_t s = 0;
        for (int q = 0; q < size; ++q) s = static_cast<int32_t>(uint32_t(s) + uint32_t(value(q, i)));
        return s;
    };
    for (int r = 0; r < size; ++r) {
        Elems &w = want[size_t(r)];
        w = ranks[size_t(r)].recv;
        switch (call.coll) {
            case Coll::Allreduce:
                for (size_t i = 0; i < total; ++i) w[i] = sum_at(i);
                break;
            case Coll::Reduce:
                if (r == call.root)
                    for (size_t i = 0; i < total; ++i) w[i] = sum_at(i);
                break;
            case Coll::ReduceScatter: {
                size_t offset = 0;
                for (int q = 0; q < r; ++q) offset += gpurdma::algo::part_count(call, q);
                for (size_t i = 0; i < gpurdma::algo::part_count(call, r); ++i) w[i] = sum_at(offset + i);
                break;
            }
            case Coll::Allgather:
                for (int q = 0; q < size; ++q)
                    for (size_t i = 0; i < call.count; ++i) w[size_t(q) * call.count + i] = value(q, i);
                break;
            case Coll::Bcast:
                for (size_t i = 0; i < call.count; ++i) w[i] = value(call.root, i);
                break;
        }
    }
    // What each rank's plan sees: its own buffers, the peers' shared sides.
    std::vector<DeviceNodeWork> work(static_cast<size_t>(size));
    std::vector<std::vector<char>> scratch(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
        std::vector<const char *> srcs(static_cast<size_t>(size), nullptr);
        std::vector<char *> dsts(static_cast<size_t>(size), nullptr);
        for (int q = 0; q < size; ++q) {
            Rank &k = ranks[size_t(q)];
            const char *src = reinterpret_cast<const char *>(
                call.in_place() || call.coll == Coll::Bcast ? k.recv.data() : k.send.data());
            char *dst = reinterpret_cast<char *>(k.recv.data());
            const BufferSides shared = gpurdma::algo::shared_sides(call, q);
            srcs[size_t(q)] = q == r || shared.src ? src : nullptr;
            dsts[size_t(q)] = q == r || shared.dst ? dst : nullptr;
        }
        Call mine = call;
        if (call.coll == Coll::Bcast) mine.sendbuf = nullptr;
        scratch[size_t(r)].assign(gpurdma::algo::device_node_scratch(mine, r), 0);
        work[size_t(r)] = gpurdma::algo::device_node_work(mine, size, r, srcs, dsts, scratch[size_t(r)].data());
    }
    auto each_rank = [&](auto &&fn) {
        for (int i = 0; i < size; ++i) fn(reverse ? size - 1 - i : i);
    };
    each_rank([&](int r) {
        const DeviceNodeWork &w = work[size_t(r)];
        for (const auto &red : w.reductions) run_reduction(red);
        if (!w.barrier)
            for (const auto &c : w.copies) std::memmove(c.dst, c.src, c.bytes);
    });
    each_rank([&](int r) {
        const DeviceNodeWork &w = work[size_t(r)];
        if (w.barrier)
            for (const auto &c : w.copies) std::memmove(c.dst, c.src, c.bytes);
    });
    std::string failures;
    for (int r = 0; r < size; ++r) {
        const Elems &got = ranks[size_t(r)].recv, &w = want[size_t(r)];
        for (size_t i = 0; i < w.size(); ++i)
            if (got[i] != w[i]) {
                failures += "rank " + std::to_string(r) + " element " + std::to_string(i) + ": " +
                            std::to_string(got[i]) + " != " + std::to_string(w[i]) + "; ";
                break;
            }
    }
    return failures;
}

Call make_call(Coll coll, size_t count, bool in_place, int root)
{
    Call c;
    c.coll = coll;
    c.count = count;
    c.dtype = GPURDMA_INT32;
    c.op = GPURDMA_SUM;
    c.root = root;
    static int32_t dummy;
    c.sendbuf = in_place ? nullptr : &dummy;  // only in_place() is read: the plan gets the addresses
    return c;
}

}  // namespace

TEST(DeviceNodeWork, EveryCollectiveEveryShape)
{
    int cases = 0;
    for (Coll coll : {Coll::Allreduce, Coll::ReduceScatter, Coll::Allgather, Coll::Bcast, Coll::Reduce})
        for (int size = 1; size <= 5; ++size)
            for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(33), size_t(1000)})
                for (bool in_place : {false, true})
                    for (int root = 0; root < size; ++root)
                        for (bool reverse : {false, true}) {
                            if (coll == Coll::Bcast && !in_place) continue;
                            if (coll != Coll::Bcast && coll != Coll::Reduce && root > 0) continue;
                            const Call call = make_call(coll, count, in_place, root);
                            const std::string f = run_case(call, size, reverse);
                            EXPECT_EQ(f, "") << gpurdma::plan::coll_name(coll) << " np " << size << " count " << count
                                             << (in_place ? " in place" : "") << " root " << root
                                             << (reverse ? " last rank first" : "");
                            ++cases;
                        }
    EXPECT_GT(cases, 400);
}

// MPI_Reduce_scatter's parts: zeros, uneven, parts shorter and longer than their offsets.
TEST(DeviceNodeWork, ReduceScatterUnevenParts)
{
    const std::vector<std::vector<size_t>> shapes = {{0, 5, 6, 7}, {3, 0, 9}, {64, 1, 0, 17, 2},
                                                     {0, 0, 4},    {5},       {1, 5}};
    for (const auto &counts : shapes)
        for (bool in_place : {false, true})
            for (bool reverse : {false, true}) {
                Call call = make_call(Coll::ReduceScatter, 0, in_place, 0);
                call.counts = counts;
                const int size = static_cast<int>(counts.size());
                EXPECT_EQ(run_case(call, size, reverse), "") << (in_place ? "in place" : "") << " np " << size;
            }
}

// Work that needs the barrier says so: only where a copy reads or overwrites what
// another rank's reduction reads or writes.
TEST(DeviceNodeWork, BarrierOnlyWhereNeeded)
{
    std::vector<const char *> srcs(4);
    std::vector<char *> dsts(4);
    static char buffers[4][4096];
    for (int q = 0; q < 4; ++q) {
        srcs[size_t(q)] = buffers[q];
        dsts[size_t(q)] = buffers[q];
    }
    static char scratch[4096];
    auto barrier = [&](Coll coll, bool in_place, int rank) {
        return gpurdma::algo::device_node_work(make_call(coll, 100, in_place, 2), 4, rank, srcs, dsts, scratch).barrier;
    };
    EXPECT_TRUE(barrier(Coll::Allreduce, false, 1));
    EXPECT_FALSE(barrier(Coll::ReduceScatter, false, 1));
    EXPECT_TRUE(barrier(Coll::ReduceScatter, true, 1));
    EXPECT_FALSE(barrier(Coll::ReduceScatter, true, 0));  // its part is at the front already
    for (Coll coll : {Coll::Allgather, Coll::Bcast, Coll::Reduce}) EXPECT_FALSE(barrier(coll, false, 1));
}
