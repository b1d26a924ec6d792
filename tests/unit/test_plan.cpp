// Planner and neighbor sets: pure functions, checked without any transport.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "plan/neighbors.h"
#include "plan/planner.h"
#include "transport/channel_layout.h"

using namespace gpurdma::plan;

TEST(Neighbors, SymmetricAndExcludeSelf)
{
    for (int n = 1; n <= 70; ++n) {
        for (int r = 0; r < n; ++r) {
            const auto mine = neighbors(n, r);
            EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
            for (int p : mine) {
                ASSERT_NE(p, r);
                ASSERT_GE(p, 0);
                ASSERT_LT(p, n);
                const auto theirs = neighbors(n, p);
                EXPECT_TRUE(std::binary_search(theirs.begin(), theirs.end(), r)) << n << " " << r << " " << p;
            }
        }
    }
}

TEST(Neighbors, PowerOfTwoFloor)
{
    EXPECT_EQ(power_of_two_floor(1), 1);
    EXPECT_EQ(power_of_two_floor(2), 2);
    EXPECT_EQ(power_of_two_floor(3), 2);
    EXPECT_EQ(power_of_two_floor(8), 8);
    EXPECT_EQ(power_of_two_floor(1000), 512);
}

TEST(Planner, ParseAlgorithm)
{
    Algorithm a;
    EXPECT_TRUE(parse_algorithm("auto", &a));
    EXPECT_EQ(a, Algorithm::Auto);
    EXPECT_TRUE(parse_algorithm("ring", &a));
    EXPECT_EQ(a, Algorithm::Ring);
    EXPECT_TRUE(parse_algorithm("rd", &a));
    EXPECT_EQ(a, Algorithm::RecursiveDoubling);
    EXPECT_TRUE(parse_algorithm("hier", &a));
    EXPECT_EQ(a, Algorithm::Hierarchical);
    EXPECT_FALSE(parse_algorithm("tree", &a));
    EXPECT_FALSE(parse_algorithm("RING ", &a));
}

TEST(Planner, AlgorithmTableNamesEveryAlgorithmOnce)
{
    // Every spelling parses to its own entry, names print back, and the spellings the
    // parameter has always accepted are there.
    size_t n = 0;
    const AlgorithmInfo *table = algorithm_table(&n);
    ASSERT_EQ(n, 6u);
    for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < i; ++j) EXPECT_NE(table[i].algorithm, table[j].algorithm) << "once";
        EXPECT_STREQ(algorithm_name(table[i].algorithm), table[i].name);
        EXPECT_TRUE(table[i].help && *table[i].help);
        ASSERT_TRUE(table[i].spellings[0]);
        for (const char *spelling : table[i].spellings) {
            if (!spelling) continue;
            Algorithm a = Algorithm::Node;
            EXPECT_TRUE(parse_algorithm(spelling, &a)) << spelling;
            EXPECT_EQ(a, table[i].algorithm) << spelling;
        }
    }
    Algorithm a = Algorithm::Ring;
    EXPECT_TRUE(parse_algorithm("", &a));
    EXPECT_EQ(a, Algorithm::Auto);
    for (const char *s : {"recursive_doubling", "hierarchical", "node"}) EXPECT_TRUE(parse_algorithm(s, &a)) << s;
    // The parameter's spellings in its order, first names then aliases.
    const char *const spellings[] = {
        "auto", "node", "ring", "rd", "hier", "rhd", "recursive_doubling", "hierarchical", "halving_doubling"};
    for (size_t i = 0; i < 9; ++i) EXPECT_STREQ(algorithm_spelling(i), spellings[i]) << i;
    EXPECT_EQ(algorithm_spelling(9), nullptr);
    EXPECT_STREQ(algorithm_name(Algorithm::RecursiveDoubling), "recursive-doubling");
    EXPECT_STREQ(algorithm_name(Algorithm::Hierarchical), "hierarchical");
}

TEST(Planner, SchedulesCarryTheirAlgorithm)
{
    PlanParams p;
    p.algorithm = Algorithm::Ring;
    EXPECT_EQ(build(4, 1, 1000, 4, false, p).algorithm, Algorithm::Ring);
    p.algorithm = Algorithm::RecursiveDoubling;
    EXPECT_EQ(build(4, 1, 1000, 4, false, p).algorithm, Algorithm::RecursiveDoubling);
    p.algorithm = Algorithm::Hierarchical;
    std::string unused;
    const auto two_nodes = gpurdma::topo::build_topology({"a", "a", "b", "b"}, "", &unused);
    EXPECT_EQ(build(two_nodes, 1, 1000, 4, false, p).algorithm, Algorithm::Hierarchical);
    EXPECT_EQ(build(1, 0, 1000, 4, false, p).algorithm, Algorithm::Auto);  // a local copy
}

static bool same_steps(const Schedule &a, const Schedule &b)
{
    auto key = [](const Step &s) {
        return std::make_tuple(s.kind, s.phase, s.landed_first, s.peer, s.dst_buf, s.src_buf, s.dst_off, s.src_off,
                               s.bytes);
    };
    if (a.algorithm != b.algorithm || a.rank != b.rank || a.size != b.size || a.bytes != b.bytes ||
        a.elem_size != b.elem_size || a.steps.size() != b.steps.size())
        return false;
    for (size_t i = 0; i < a.steps.size(); ++i)
        if (key(a.steps[i]) != key(b.steps[i])) return false;
    return true;
}

TEST(Planner, BuildOfTheChosenAlgorithmIsTheChoosingBuild)
{
    // algo::Selector chooses (choose_algorithm) and ScheduleAllreduce builds that
    // algorithm: the same schedules as build() choosing by itself, for every forced
    // or auto parameter, the local cases included.
    std::string unused;
    const gpurdma::topo::Topology topos[] = {single_node(1), single_node(4),
                                             gpurdma::topo::build_topology({"a", "a", "b", "b"}, "", &unused),
                                             gpurdma::topo::build_topology({"a", "b", "b", "b", "c", "c"}, "", &unused),
                                             gpurdma::topo::build_topology({"a", "b", "c"}, "", &unused)};
    PlanParams p;
    p.chunk_size = 1024;
    p.small_msg_max = 512;
    for (const auto &t : topos)
        for (Algorithm forced : {Algorithm::Auto, Algorithm::Node, Algorithm::Ring, Algorithm::RecursiveDoubling,
                                 Algorithm::Hierarchical}) {
            p.algorithm = forced;
            for (size_t count : {0ul, 1ul, 7ul, 64ul, 129ul, 256ul, 257ul, 5000ul})
                for (bool in_place : {false, true})
                    for (int r = 0; r < t.size; ++r) {
                        const Algorithm a = choose_algorithm(t, count * 4, p);
                        EXPECT_TRUE(
                            same_steps(build(t, r, count, 4, in_place, a, p), build(t, r, count, 4, in_place, p)))
                            << t.size << " ranks, " << algorithm_name(forced) << ", " << count << " x 4, rank " << r;
                    }
        }
}

TEST(Planner, BuildTakesTheAlgorithmGiven)
{
    std::string unused;
    const auto two_nodes = gpurdma::topo::build_topology({"a", "a", "b", "b"}, "", &unused);
    const PlanParams p;  // auto: ignored by the overload that is given the algorithm
    for (Algorithm a : {Algorithm::Ring, Algorithm::RecursiveDoubling, Algorithm::Hierarchical})
        EXPECT_EQ(build(two_nodes, 1, 100, 4, false, a, p).algorithm, a);
    EXPECT_EQ(build(two_nodes, 1, 0, 4, false, Algorithm::Ring, p).algorithm, Algorithm::Auto);  // nothing to do
}

TEST(Planner, ChoosesByMessageSize)
{
    const auto one = single_node(4);
    auto choose_algorithm = [&one](size_t bytes, const PlanParams &p) {
        return gpurdma::plan::choose_algorithm(one, bytes, p);
    };
    PlanParams p;
    p.chunk_size = 256 * 1024;
    p.small_msg_max = 16 * 1024;
    // Below small_msg_max the cost model decides (test_cost_model.cpp); above it, never
    // recursive doubling.
    EXPECT_EQ(choose_algorithm(8, p), Algorithm::RecursiveDoubling);
    EXPECT_EQ(choose_algorithm(16 * 1024 + 1, p), Algorithm::Ring);
    p.algorithm = Algorithm::RecursiveDoubling;
    // Forced recursive doubling still cannot exceed one landing slot.
    EXPECT_EQ(choose_algorithm(p.chunk_size + 1, p), Algorithm::Ring);
    p.algorithm = Algorithm::Ring;
    EXPECT_EQ(choose_algorithm(8, p), Algorithm::Ring);
}

// Every message a rank sends to a peer is expected by that peer, in the same order
// and with the same size: the property the transport's slot sequence relies on.
static void expect_matched(int n, size_t count, size_t elem, const PlanParams &params)
{
    std::vector<Schedule> s;
    for (int r = 0; r < n; ++r) s.push_back(build(n, r, count, elem, false, params));
    std::map<std::pair<int, int>, std::vector<size_t>> sent, received;
    for (int r = 0; r < n; ++r)
        for (const auto &st : s[r].steps) {
            if (st.kind == StepKind::Send) {
                ASSERT_LE(st.bytes, params.chunk_size);
                sent[{r, st.peer}].push_back(st.bytes);
            } else if (st.kind == StepKind::RecvReduce || st.kind == StepKind::RecvCopy) {
                received[{st.peer, r}].push_back(st.bytes);
            }
            if (st.peer >= 0) {
                const auto nb = peers(single_node(n), r);
                EXPECT_TRUE(std::binary_search(nb.begin(), nb.end(), st.peer));
            }
        }
    EXPECT_EQ(sent, received) << "n=" << n << " count=" << count;
}

TEST(Planner, SendsMatchReceives)
{
    PlanParams p;
    p.chunk_size = 256;
    p.small_msg_max = 64;
    for (int n : {2, 3, 4, 5, 7, 8, 12, 16})
        for (size_t count : {1ul, 2ul, 3ul, 15ul, 16ul, 17ul, 64ul, 65ul, 1000ul})
            for (size_t elem : {1ul, 4ul, 16ul}) expect_matched(n, count, elem, p);
}

TEST(Planner, RingPiecesAreWholeElementsWithinChunk)
{
    Group g{{0, 1, 2, 3}, 1};
    std::vector<Step> steps;
    append_ring(steps, g, Buf::Send, 0, 1001, 12, 100);
    ASSERT_FALSE(steps.empty());
    for (const auto &st : steps) {
        EXPECT_EQ(st.bytes % 12, 0u);
        EXPECT_LE(st.bytes, 100u);
        EXPECT_GT(st.bytes, 0u);
    }
}

TEST(Planner, LocalCasesNeedNoMessages)
{
    PlanParams p;
    EXPECT_TRUE(build(4, 0, 0, 4, false, p).steps.empty());
    const Schedule one = build(1, 0, 10, 4, false, p);
    ASSERT_EQ(one.steps.size(), 1u);
    EXPECT_EQ(one.steps[0].kind, StepKind::Copy);
    EXPECT_TRUE(build(1, 0, 10, 4, true, p).steps.empty());
}

TEST(Planner, SizesDoNotOverflowPast4GiB)
{
    // 600M doubles = 4.8 GB: offsets must be size_t all the way.
    Group g{{0, 1}, 0};
    std::vector<Step> steps;
    append_ring(steps, g, Buf::Send, 0, 600000000ul, 8, 64ul << 20);
    size_t max_end = 0;
    for (const auto &st : steps) max_end = std::max(max_end, std::max(st.dst_off, st.src_off) + st.bytes);
    EXPECT_EQ(max_end, 600000000ul * 8);
}

TEST(ChannelLayout, DisjointAndAligned)
{
    gpurdma::transport::ChannelLayout l;
    l.neighbors = 5;
    l.slots = 3;
    l.slot_size = 4096;
    EXPECT_EQ(l.control_stride() % 64, 0u);
    EXPECT_EQ(l.data_start() % 4096, 0u);
    EXPECT_GE(l.data_start(), l.credit_offset(4) + 8);
    EXPECT_EQ(l.data_offset(4, 2) + 4096, l.bytes());
    EXPECT_LT(l.credit_offset(0), l.flag_offset(1, 0));
}
