// gpurdma's schedules as the fabric model's input (contrib/fabric/schedule_dag.h): the
// bytes a rail plane moves, the admission limit as the DAG expresses it, and the same
// limit as the model then runs it (never more writes in flight to one peer than slots);
// halving-doubling's exchanges overlapping at their boundaries never break it either.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "schedule_dag.h"

namespace gpurdma::fabric {
namespace {

const RailPlan kRing{plan::Algorithm::Ring, kWholeSlice};  // one ring of the whole slice

ClusterSpec small_cluster(int nodes)
{
    ClusterSpec s;
    s.nodes = nodes;
    s.gpus_per_node = 4;
    s.hosts_per_leaf = 4;
    s.spines = 2;
    return s;
}

uint64_t data_bytes_from(const ScheduleDag &dag, int host)
{
    uint64_t sum = 0;
    for (size_t m = 0; m < dag.messages.size(); ++m)
        if (dag.kinds[m] == MessageKind::Data && dag.messages[m].src == host) sum += dag.messages[m].bytes;
    return sum;
}

// A ring allreduce sends 2(n-1)/n of the slice from every rank (the bandwidth bound).
TEST(ScheduleDag, RingSendsTheBandwidthBound)
{
    const ClusterSpec spec = small_cluster(8);
    const size_t bytes = 8u << 20;  // slice 2 MiB
    const ScheduleDag dag = build_rail_dag(spec, kRing, bytes, 64u << 10, 4);
    EXPECT_EQ(dag.slice_bytes, 2u << 20);
    for (int h = 0; h < spec.nodes; ++h) EXPECT_EQ(data_bytes_from(dag, h), 2u * 7 * (2u << 20) / 8) << "host " << h;
    EXPECT_EQ(dag.last.size(), 8u);
}

// Nodes scattered over the leaves (a scheduler's allocation): when gpurdma knows the
// topology, a ring's writes leave a leaf only where the ring moves on to the next leaf
// (once per leaf); in rank order, most of them cross the spines.
TEST(ScheduleDag, FabricOrderKeepsTheRingUnderEachLeaf)
{
    ClusterSpec spec = small_cluster(16);  // 4 leaves of 4
    spec.placement = "random";
    spec.fabric.seed = 5;
    auto crossing_pairs = [&] {
        const ScheduleDag dag = build_rail_dag(spec, kRing, 16u << 20, 64u << 10, 4);
        std::set<std::pair<int, int>> pairs;
        for (size_t m = 0; m < dag.messages.size(); ++m) {
            const Message &msg = dag.messages[m];
            if (dag.kinds[m] == MessageKind::Data && msg.src / spec.hosts_per_leaf != msg.dst / spec.hosts_per_leaf)
                pairs.insert({msg.src, msg.dst});
        }
        return pairs.size();
    };
    spec.topology_known = true;
    EXPECT_EQ(crossing_pairs(), 4u);
    spec.topology_known = false;
    EXPECT_GT(crossing_pairs(), 8u);
    EXPECT_EQ(spec.host_of_index(), spec.host_of_node());
}

// Halving-doubling sends 2(p-1)/p of the slice from every rank too, in 2 log2(p) exchanges.
TEST(ScheduleDag, HalvingDoublingSendsTheBandwidthBound)
{
    const ClusterSpec spec = small_cluster(8);
    const ScheduleDag dag =
        build_rail_dag(spec, RailPlan{plan::Algorithm::HalvingDoubling, kWholeSlice}, 8u << 20, 64u << 10, 4);
    for (int h = 0; h < spec.nodes; ++h) EXPECT_EQ(data_bytes_from(dag, h), 2u * 7 * (2u << 20) / 8) << "host " << h;
    RailPlan parsed;
    ASSERT_TRUE(parse_rail_plan("rhd/4M", &parsed));
    EXPECT_EQ(parsed.algorithm, plan::Algorithm::HalvingDoubling);
    EXPECT_EQ(parsed.unit, 4u << 20);
    EXPECT_FALSE(parse_rail_plan("bogus/4M", &parsed));
    EXPECT_FALSE(parse_rail_plan("rhd/4Q", &parsed));
}

// The k-th write to a peer is posted only after that peer's credit for write k - slots.
TEST(ScheduleDag, EachWriteWaitsForTheCreditSlotsBefore)
{
    const ClusterSpec spec = small_cluster(4);
    for (int slots : {1, 3}) {
        const ScheduleDag dag = build_rail_dag(spec, kRing, 4u << 20, 16u << 10, slots);
        std::map<std::pair<int, int>, int> sent;
        size_t gated = 0;
        for (size_t m = 0; m < dag.messages.size(); ++m) {
            if (dag.kinds[m] != MessageKind::Data) continue;
            const Message &w = dag.messages[m];
            const int k = sent[{w.src, w.dst}]++;
            ASSERT_EQ(w.after.size(), 1u);  // its posting
            const Message &post = dag.messages[static_cast<size_t>(w.after[0])];
            size_t credits = 0;
            for (MessageId a : post.after)
                if (dag.kinds[static_cast<size_t>(a)] == MessageKind::Credit) {
                    ++credits;
                    EXPECT_EQ(dag.messages[static_cast<size_t>(a)].src, w.dst);  // from the receiver
                    EXPECT_EQ(dag.messages[static_cast<size_t>(a)].dst, w.src);
                }
            EXPECT_EQ(credits, k >= slots ? 1u : 0u) << "write " << k << " with " << slots << " slots";
            gated += credits;
        }
        EXPECT_GT(gated, 0u);
    }
}

// Run in the model, the limit holds on the wire: at no time are more than `slots` writes
// from one host to one peer between their start and their arrival.
TEST(ScheduleDag, TheModelNeverHasMoreThanSlotsWritesInFlightToOnePeer)
{
    const ClusterSpec spec = small_cluster(4);
    const std::vector<RailPlan> rails = {RailPlan{}, kRing, RailPlan{plan::Algorithm::HalvingDoubling, kWholeSlice},
                                         RailPlan{plan::Algorithm::RecursiveDoubling, 0}};
    for (const RailPlan &rail : rails)
        for (int slots : {1, 2, 64}) {
            const ScheduleDag dag = build_rail_dag(spec, rail, 2u << 20, 16u << 10, slots);
            Simulator sim(Topology::two_tier(spec.nodes, spec.hosts_per_leaf, spec.spines), spec.params());
            for (const Message &m : dag.messages) sim.add(m);
            const Result r = sim.run();
            ASSERT_TRUE(r.ok) << rail.name() << ": " << r.error;
            EXPECT_EQ(r.bytes_injected, r.bytes_delivered);
            std::map<std::pair<int, int>, std::vector<std::pair<double, int>>> events;  // (time, +1 start / -1 done)
            for (size_t m = 0; m < dag.messages.size(); ++m) {
                if (dag.kinds[m] != MessageKind::Data) continue;
                auto &e = events[{dag.messages[m].src, dag.messages[m].dst}];
                e.push_back({r.start_us[m], +1});
                e.push_back({r.done_us[m], -1});
            }
            int most = 0;
            for (auto &[pair, e] : events) {
                std::sort(e.begin(), e.end());  // at a tie an arrival (-1) before a start
                int now = 0;
                for (const auto &[t, d] : e) most = std::max(most, now += d);
            }
            EXPECT_LE(most, slots) << rail.name();
            EXPECT_GE(most, 1);
        }
}

// Admission shapes time: one write in flight per peer leaves the ring a credit round trip
// per chunk; more slots overlap them.
TEST(ScheduleDag, OneSlotIsSlowerThanFourForAPipelinedRing)
{
    const ClusterSpec spec = small_cluster(4);
    double time[2] = {0, 0};
    int i = 0;
    for (int slots : {1, 4}) {
        const ScheduleDag dag = build_rail_dag(spec, kRing, 8u << 20, 64u << 10, slots);
        Simulator sim(Topology::two_tier(spec.nodes, spec.hosts_per_leaf, spec.spines), spec.params());
        for (const Message &m : dag.messages) sim.add(m);
        const Result r = sim.run();
        ASSERT_TRUE(r.ok) << r.error;
        time[i++] = r.end_us;
    }
    EXPECT_GT(time[0], time[1] * 1.2);
    EXPECT_GT(time[1], ideal_us(spec, 8u << 20));  // never faster than the bandwidth bound
}

}  // namespace
}  // namespace gpurdma::fabric
