// The fabric model's tests: line rate and latency of one flow, PFC pausing (and dropping
// without it), byte conservation and dependency order over random DAGs, DCQCN's state
// machines, and the paper's scenarios (fair share, incast, PFC unfairness, victim flow)
// bounded where the model's measured numbers sit (docs/FABRIC-MODEL.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <tuple>

#include "dcqcn.h"
#include "fabric_model.h"
#include "validation.h"

namespace gpurdma::fabric {
namespace {

double wire_fraction(const FabricParams &p)
{
    return static_cast<double>(p.mtu) / (p.mtu + p.header_bytes);
}

// Time to serialise n bytes at line rate, in microseconds.
double ser_us(const FabricParams &p, double bytes)
{
    return bytes * 8 / (p.link_gbps * 1e3);
}

TEST(Topology, SingleSwitchAndTwoTierAreConsistent)
{
    Topology a = Topology::single_switch(5);
    EXPECT_EQ(a.check(), "");
    EXPECT_EQ(a.switches(), 1);
    Topology b = Topology::two_tier(40, 16, 4);  // a partial last leaf
    EXPECT_EQ(b.check(), "");
    EXPECT_EQ(b.switches(), 3 + 4);
    EXPECT_EQ(b.ports[40 + 2].size(), 8u + 4u);  // leaf 2: 8 hosts, 4 uplinks
    EXPECT_NE(b.describe().find("3 leaves, 4 spines"), std::string::npos);
    EXPECT_NE(Topology::two_tier(32, 8, 0).check(), "");  // leaves with no spine cannot reach each other
}

TEST(SingleFlow, ReachesLineRateAndTheExpectedCompletionTime)
{
    FabricParams p;  // 400 Gb/s, 1 us per link
    const uint64_t bytes = 16ull << 20;
    for (bool two_tier : {false, true}) {
        Topology t = two_tier ? Topology::two_tier(32, 16, 4) : Topology::single_switch(2);
        int dst = two_tier ? 20 : 1;  // across the spines: four links
        int links = two_tier ? 4 : 2;
        Simulator sim(t, p);
        Message m;
        m.src = 0;
        m.dst = dst;
        m.bytes = bytes;
        MessageId id = sim.add(m);
        Result r = sim.run();
        ASSERT_TRUE(r.ok) << r.error;
        double goodput = bytes * 8 / ((r.done_us[id] - r.start_us[id]) * 1e3);
        EXPECT_NEAR(goodput, p.link_gbps * wire_fraction(p), 0.03 * p.link_gbps) << t.describe();
        // Store and forward: the NIC serialises every packet; each switch adds one packet's
        // serialisation; each link its delay.
        double packets = std::ceil(static_cast<double>(bytes) / p.mtu);
        double expect = packets * ser_us(p, p.mtu + p.header_bytes) + (links - 1) * ser_us(p, p.mtu + p.header_bytes) +
                        links * p.link_delay_us;
        EXPECT_NEAR(r.done_us[id], expect, 0.005) << t.describe();
        EXPECT_EQ(r.packets_dropped, 0u);
        EXPECT_EQ(r.pause_frames, 0u);
        EXPECT_EQ(r.bytes_delivered, bytes);
    }
}

TEST(SingleFlow, ZeroByteMessageIsOneHeaderPacketAndLocalIsFree)
{
    FabricParams p;
    Simulator sim(Topology::single_switch(2), p);
    Message note;
    note.src = 0;
    note.dst = 1;
    MessageId a = sim.add(note);
    Message local;
    local.src = 1;
    local.dst = 1;
    local.bytes = 1 << 20;
    local.after = {a};
    MessageId b = sim.add(local);
    Result r = sim.run();
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_NEAR(r.done_us[a], 2 * p.link_delay_us + 2 * ser_us(p, p.header_bytes), 1e-3);
    EXPECT_DOUBLE_EQ(r.done_us[b], r.done_us[a]);  // off the wire: done when ready
}

// Eight senders into one port at line rate, DCQCN off.
Simulator incast_sim(const FabricParams &p, int senders, uint64_t bytes)
{
    Simulator sim(Topology::single_switch(senders + 1), p);
    for (int i = 0; i < senders; ++i) {
        Message m;
        m.src = i;
        m.dst = senders;
        m.bytes = bytes;
        sim.add(m);
    }
    return sim;
}

TEST(Pfc, PauseStopsSendersWithoutDropsAndItsAbsenceDrops)
{
    FabricParams p;
    p.dcqcn = false;
    p.switch_buffer = 4ull << 20;
    p.pfc_xoff = 64 << 10;
    p.pfc_xon = 32 << 10;
    Result r = incast_sim(p, 8, 4ull << 20).run();
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.packets_dropped, 0u);
    EXPECT_GT(r.pause_frames, 0u);
    EXPECT_GT(r.resume_frames, 0u);
    for (int h = 0; h < 8; ++h) {
        EXPECT_GT(r.ports[h].paused_us, 0) << r.ports[h].name;
        EXPECT_GT(r.ports[h].pauses_received, 0u) << r.ports[h].name;
    }
    EXPECT_LE(r.peak_switch_buffer, p.switch_buffer);
    // The receiver's link stays busy: 32 MiB at about line rate (pausing costs no throughput).
    double ideal = 8.0 * (4 << 20) * 8 / (p.link_gbps * wire_fraction(p) * 1e3);
    EXPECT_LT(r.end_us, 1.05 * ideal + 10);

    p.pfc = false;
    Result d = incast_sim(p, 8, 4ull << 20).run();
    EXPECT_FALSE(d.ok);
    EXPECT_GT(d.packets_dropped, 0u);
    EXPECT_EQ(d.pause_frames, 0u);
    EXPECT_NE(d.error.find("dropped"), std::string::npos) << d.error;
    EXPECT_EQ(d.bytes_injected, d.bytes_delivered + d.bytes_dropped + d.bytes_in_flight_at_end);
}

TEST(Pfc, PauseSpreadsUpstreamThroughASpine)
{
    // Two leaves, one spine; six hosts on leaf 0 send to one host on leaf 1: the bottleneck is
    // leaf 1's port, so leaf 1 pauses the spine, the spine pauses leaf 0, leaf 0 the hosts.
    FabricParams p;
    p.dcqcn = false;
    Topology t = Topology::two_tier(16, 8, 1);
    Simulator sim(t, p);
    for (int i = 0; i < 6; ++i) sim.add(Message{i, 8, 4ull << 20, {}, 0, 0, -1, 0});
    for (int i = 9; i < 12; ++i) sim.add(Message{i, 8, 4ull << 20, {}, 0, 0, -1, 0});
    Result r = sim.run();
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.packets_dropped, 0u);
    auto port = [&](const std::string &name) -> const PortStats & {
        for (const PortStats &s : r.ports)
            if (s.name == name) return s;
        ADD_FAILURE() << "no port " << name;
        return r.ports[0];
    };
    EXPECT_GT(port("spine 0 -> leaf 1").paused_us, 0);
    EXPECT_GT(port("leaf 0 -> spine 0").paused_us, 0);
    EXPECT_GT(port("host 0").paused_us, 0);
}

// Random DAGs on a two-tier fabric: conservation in every outcome (complete, cut by the
// time limit, dropping without PFC), and every message starts after what it waits for.
struct RandomDag {
    std::vector<Message> messages;
};

RandomDag random_dag(std::mt19937 &rng, int hosts, int count)
{
    RandomDag d;
    std::uniform_int_distribution<int> host(0, hosts - 1), deps(0, 3), qp(-1, 2), kind(0, 9);
    std::uniform_real_distribution<double> delay(0, 5);
    for (int m = 0; m < count; ++m) {
        Message msg;
        msg.src = host(rng);
        msg.dst = host(rng);
        int k = kind(rng);
        msg.bytes = k == 0  ? 0
                    : k < 4 ? std::uniform_int_distribution<uint64_t>(1, 9000)(rng)
                            : std::uniform_int_distribution<uint64_t>(1, 1 << 20)(rng);
        msg.qp = qp(rng);
        if (m > 0)
            for (int i = deps(rng); i > 0; --i) msg.after.push_back(std::uniform_int_distribution<int>(0, m - 1)(rng));
        msg.delay_us = kind(rng) < 3 ? delay(rng) : 0;
        msg.not_before_us = kind(rng) == 0 ? delay(rng) * 20 : 0;
        msg.tag = m;
        d.messages.push_back(msg);
    }
    return d;
}

TEST(Conservation, InjectedIsDeliveredPlusDroppedPlusInFlight)
{
    std::mt19937 rng(7);
    Topology t = Topology::two_tier(32, 8, 4);
    for (int round = 0; round < 12; ++round) {
        RandomDag dag = random_dag(rng, 32, 300);
        FabricParams p;
        p.seed = round + 1;
        double limit = 60e6;
        if (round % 4 == 1) limit = 40;  // cut mid-run: bytes in flight
        if (round % 4 == 2) {  // PFC off and a small buffer: drops
            p.pfc = false;
            p.dcqcn = false;
            p.switch_buffer = 256 << 10;
        }
        if (round % 4 == 3) p.link_gbps = 100;
        Simulator sim(t, p);
        uint64_t total = 0;
        for (const Message &m : dag.messages) {
            sim.add(m);
            if (m.src != m.dst) total += m.bytes;
        }
        Result r = sim.run(limit);
        SCOPED_TRACE("round " + std::to_string(round) + ": " + r.error);
        EXPECT_EQ(r.bytes_injected, r.bytes_delivered + r.bytes_dropped + r.bytes_in_flight_at_end);
        if (round % 4 == 1) {
            EXPECT_TRUE(r.time_limit_reached);
            EXPECT_GT(r.bytes_in_flight_at_end, 0u);
        } else if (round % 4 == 2) {
            EXPECT_GT(r.packets_dropped, 0u);
        } else {
            ASSERT_TRUE(r.ok);
            EXPECT_EQ(r.bytes_delivered, total);
            EXPECT_EQ(r.bytes_in_flight_at_end, 0u);
            EXPECT_EQ(r.packets_dropped, 0u);
        }
    }
}

TEST(Dependencies, NoMessageStartsBeforeItsAfterPlusDelay)
{
    std::mt19937 rng(11);
    Topology t = Topology::two_tier(32, 8, 4);
    for (int round = 0; round < 6; ++round) {
        RandomDag dag = random_dag(rng, 32, 400);
        FabricParams p;
        p.seed = round + 3;
        Simulator sim(t, p);
        for (const Message &m : dag.messages) sim.add(m);
        Result r = sim.run();
        ASSERT_TRUE(r.ok) << r.error;
        std::map<std::tuple<int, int, int>, int> last_on_qp;
        for (size_t i = 0; i < dag.messages.size(); ++i) {
            const Message &m = dag.messages[i];
            double after = 0;
            for (MessageId a : m.after) after = std::max(after, r.done_us[a]);
            const double eps = 1e-6;
            EXPECT_GE(r.ready_us[i] + eps, after + m.delay_us) << "message " << i;
            EXPECT_GE(r.ready_us[i] + eps, m.not_before_us) << "message " << i;
            EXPECT_GE(r.start_us[i] + eps, r.ready_us[i]) << "message " << i;
            EXPECT_GE(r.done_us[i] + eps, r.start_us[i]) << "message " << i;
            EXPECT_EQ(r.tags[i], m.tag);
            if (m.src == m.dst) continue;
            // One QP's messages go one after another.
            auto key = std::make_tuple(m.src, m.dst, m.qp);
            auto it = last_on_qp.find(key);
            if (it != last_on_qp.end()) {
                EXPECT_GE(r.start_us[i] + eps, r.start_us[it->second]) << "message " << i;
            }
            last_on_qp[key] = static_cast<int>(i);
        }
    }
}

TEST(Dependencies, ChainWaitsForEachStepPlusDelay)
{
    FabricParams p;
    Simulator sim(Topology::single_switch(4), p);
    MessageId prev = -1;
    for (int k = 0; k < 8; ++k) {
        Message m;
        m.src = k % 4;
        m.dst = (k + 1) % 4;
        m.bytes = 64 << 10;
        m.delay_us = 3;
        if (prev >= 0) m.after = {prev};
        prev = sim.add(m);
    }
    Result r = sim.run();
    ASSERT_TRUE(r.ok) << r.error;
    for (int k = 1; k < 8; ++k) EXPECT_NEAR(r.start_us[k], r.done_us[k - 1] + 3, 1e-6);
}

TEST(Dependencies, CyclesAndBadIdsAreRefused)
{
    FabricParams p;
    Simulator a(Topology::single_switch(2), p);
    a.add(Message{0, 1, 100, {1}, 0, 0, -1, 0});
    a.add(Message{1, 0, 100, {0}, 0, 0, -1, 0});
    Result r = a.run();
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("cycle"), std::string::npos) << r.error;

    // A message that waits for a later one on its own QP can never be sent.
    Simulator b(Topology::single_switch(3), p);
    b.add(Message{0, 1, 100, {2}, 0, 0, -1, 0});
    b.add(Message{0, 1, 100, {}, 0, 0, -1, 0});
    b.add(Message{2, 0, 100, {1}, 0, 0, -1, 0});
    r = b.run();
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("cycle"), std::string::npos) << r.error;

    Simulator c(Topology::single_switch(2), p);
    c.add(Message{0, 1, 100, {5}, 0, 0, -1, 0});
    EXPECT_FALSE(c.run().ok);
}

TEST(Engine, TimeLimitStopsTheRun)
{
    FabricParams p;
    Simulator sim(Topology::single_switch(2), p);
    sim.add(Message{0, 1, 1ull << 30, {}, 0, 0, -1, 0});
    Result r = sim.run(100);
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.time_limit_reached);
    EXPECT_NE(r.error.find("time limit"), std::string::npos);
    EXPECT_EQ(r.done_us[0], -1);
    EXPECT_EQ(r.bytes_injected, r.bytes_delivered + r.bytes_in_flight_at_end);
}

TEST(Engine, EcmpSpreadsQpsOverSpinesAndTraceHasItsColumns)
{
    FabricParams p;
    Topology t = Topology::two_tier(16, 8, 4);
    Simulator sim(t, p);
    for (int q = 0; q < 16; ++q) sim.add(Message{0, 8, 1 << 20, {}, 0, 0, q, 0});
    sim.trace_queue_to_host(8);
    sim.trace_rates_of(0);
    sim.set_trace_period_us(5);
    Result r = sim.run();
    ASSERT_TRUE(r.ok) << r.error;
    int used = 0;
    for (const PortStats &s : r.ports)
        if (s.name.rfind("leaf 0 -> spine", 0) == 0 && s.bytes_sent > 0) ++used;
    EXPECT_GE(used, 3);
    ASSERT_EQ(r.trace_columns.size(), 1u + 16u);
    EXPECT_EQ(r.trace_columns[0], "queue:host 8");
    EXPECT_EQ(r.trace_columns[1], "rate:0->8/0");
    ASSERT_GT(r.trace.size(), 10u);
    EXPECT_EQ(r.trace[3].values.size(), r.trace_columns.size());
    EXPECT_DOUBLE_EQ(r.trace[3].t_us, 15);
}

TEST(Engine, RunsRepeatExactly)
{
    std::mt19937 rng(5);
    RandomDag dag = random_dag(rng, 32, 200);
    FabricParams p;
    Simulator sim(Topology::two_tier(32, 8, 4), p);
    for (const Message &m : dag.messages) sim.add(m);
    Result a = sim.run(), b = sim.run();
    ASSERT_TRUE(a.ok) << a.error;
    EXPECT_EQ(a.done_us, b.done_us);
    EXPECT_EQ(a.ecn_marks, b.ecn_marks);
}

TEST(Dcqcn, ReactionPointCutsAndRecoversAsThePaper)
{
    DcqcnParams d;
    ReactionPoint rp(d, 40);
    EXPECT_DOUBLE_EQ(rp.rate_gbps(), 40);
    rp.on_cnp(0);  // alpha starts at 1: the first cut halves
    EXPECT_DOUBLE_EQ(rp.rate_gbps(), 20);
    EXPECT_DOUBLE_EQ(rp.target_gbps(), 40);
    EXPECT_DOUBLE_EQ(rp.alpha(0), 1.0);  // (1-g)*1 + g
    EXPECT_NEAR(rp.alpha(56), 1 - d.g, 1e-12);  // one alpha period without a CNP
    EXPECT_NEAR(rp.alpha(111), (1 - d.g) * (1 - d.g), 1e-12);
    // Fast recovery: F timer events halve the distance to Rt.
    double rc = 20;
    for (int i = 0; i < d.fast_recovery_steps; ++i) {
        rp.on_timer();
        rc = (40 + rc) / 2;
        EXPECT_NEAR(rp.rate_gbps(), rc, 1e-9);
        EXPECT_DOUBLE_EQ(rp.target_gbps(), 40);
    }
    // A second cut uses the decayed alpha.
    double a = rp.alpha(300);
    rp.on_cnp(300);
    EXPECT_NEAR(rp.rate_gbps(), rc * (1 - a / 2), 1e-9);
    EXPECT_NEAR(rp.alpha(300), (1 - d.g) * a + d.g, 1e-12);
    // Past F timer events alone: additive increase of Rt by Rai (40 Mb/s at 40 Gb/s).
    double rt = rp.target_gbps();
    for (int i = 0; i < d.fast_recovery_steps; ++i) rp.on_timer();
    EXPECT_DOUBLE_EQ(rp.target_gbps(), rt);
    rp.on_timer();
    EXPECT_NEAR(rp.target_gbps(), rt + 0.04, 1e-9);
    // Both counters past F: hyper increase, i * Rhai.
    for (int i = 0; i <= d.fast_recovery_steps; ++i) EXPECT_TRUE(rp.on_bytes_sent(d.byte_counter));
    EXPECT_EQ(rp.byte_stage(), d.fast_recovery_steps + 1);
    double before = rp.target_gbps();
    rp.on_timer();  // timer stage 7, byte stage 6: i = 1
    EXPECT_NEAR(rp.target_gbps(), std::min(40.0, before + 0.2), 1e-9);
    // It climbs back to line rate and stops there.
    for (int i = 0; i < 2000 && rp.recovering(); ++i) rp.on_timer();
    EXPECT_FALSE(rp.recovering());
    EXPECT_DOUBLE_EQ(rp.rate_gbps(), 40);
    // Never below the minimum rate.
    for (int i = 0; i < 200; ++i) rp.on_cnp(1000);
    EXPECT_DOUBLE_EQ(rp.rate_gbps(), d.min_rate_gbps);
}

TEST(Dcqcn, NotificationPointSendsOneCnpPerInterval)
{
    NotificationPoint np(50);
    EXPECT_TRUE(np.on_marked(10));
    EXPECT_FALSE(np.on_marked(30));
    EXPECT_FALSE(np.on_marked(59.9));
    EXPECT_TRUE(np.on_marked(60));
}

// ---- the paper's scenarios -------------------------------------------------------------

// The largest distance of a flow from the mean (the fair share), as a fraction of it.
double off_fair(const std::vector<double> &g)
{
    double mean = 0, worst = 0;
    for (double v : g) mean += v / static_cast<double>(g.size());
    for (double v : g) worst = std::max(worst, std::fabs(v / mean - 1));
    return worst;
}

// DCQCN's shares wander: over the last 50 ms of 100 ms runs, six seeds put 2 or 4 flows at
// most 11% (40 Gb/s) and 15% (400 Gb/s) from the fair share, Jain's index above 0.99.
TEST(Validation, DcqcnFlowsShareOnePortFairly)
{
    for (double gbps : {40.0, 400.0})
        for (int flows : {2, 4}) {
            FairShareResult f = fair_share(flows, gbps, true);
            SCOPED_TRACE(std::to_string(flows) + " flows at " + std::to_string(gbps) + " Gb/s");
            EXPECT_GT(f.jain, 0.98);
            EXPECT_LT(off_fair(f.gbps), gbps < 100 ? 0.15 : 0.2);
            FabricParams p;
            EXPECT_GT(f.total_gbps, 0.95 * gbps * wire_fraction(p));
            EXPECT_EQ(f.packets_dropped, 0u);
        }
}

TEST(Validation, IncastQueueSettlesBelowKmaxWithDcqcnAndPausesWithout)
{
    for (int n : {8, 16}) {
        IncastResult on = incast(n, 40, true, true);
        IncastResult off = incast(n, 40, false, true);
        SCOPED_TRACE(std::to_string(n) + ":1 at 40 Gb/s");
        EXPECT_LT(on.queue_mean_bytes, static_cast<double>(on.kmax));
        EXPECT_GT(on.queue_mean_bytes, static_cast<double>(on.kmin));
        EXPECT_GT(on.cnps_last_half, 0u);
        EXPECT_LE(on.pause_frames_last_half, off.pause_frames_last_half / 10);
        EXPECT_GT(off.pause_frames_last_half, 100u);
        // Without DCQCN each ingress sits near XOFF: the egress holds about n of them.
        EXPECT_GT(off.queue_mean_bytes, 0.8 * n * static_cast<double>(off.xon));
        EXPECT_LT(off.queue_mean_bytes, 1.2 * n * static_cast<double>(off.xoff) + static_cast<double>(off.kmax));
        EXPECT_EQ(on.packets_dropped + off.packets_dropped, 0u);
        EXPECT_GT(on.goodput_gbps, 0.9 * 40 * wire_fraction(FabricParams{}));
    }
    IncastResult on = incast(16, 400, true, true, 20e3);
    EXPECT_LT(on.queue_mean_bytes, static_cast<double>(on.kmax));
    IncastResult off = incast(16, 400, false, true, 20e3);
    EXPECT_GT(off.pause_frames, 0u);
}

TEST(Validation, PfcAloneIsUnfairAcrossIngressPortsDcqcnIsNot)
{
    FairShareResult off = pfc_unfairness(40, false);
    // The local flow holds one ingress of two: about half the port; the three remote ones share the rest.
    EXPECT_GT(off.gbps[3], 2.5 * off.gbps[0]);
    EXPECT_LT(off.jain, 0.85);
    FairShareResult on = pfc_unfairness(40, true);
    EXPECT_GT(on.jain, 0.98);
    EXPECT_LT(off_fair(on.gbps), 0.15);
}

TEST(Validation, VictimFlowSuffersFromPauseSpreadingWithoutDcqcn)
{
    VictimResult off = victim_flow(40, false);
    VictimResult on = victim_flow(40, true);
    EXPECT_LT(off.victim_gbps, 0.25 * off.victim_fair_gbps);
    EXPECT_GT(off.victim_paused_us, 0);
    EXPECT_GT(on.victim_gbps, 0.8 * on.victim_fair_gbps);
    EXPECT_GT(on.victim_gbps, 4 * off.victim_gbps);
}

}  // namespace
}  // namespace gpurdma::fabric
