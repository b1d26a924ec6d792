// The paper-validation scenarios; see validation.h.
#include "validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace gpurdma::fabric {

namespace {

struct Stream {
    int src, dst;
};

// What one run of long-lived streams measured over its last half.
struct Measured {
    Result whole;
    std::vector<double> gbps;  // per stream
    double queue_mean = 0, queue_max = 0, queue_peak = 0;
    std::vector<std::pair<double, double>> series;
    Result half;  // the same run stopped at half time (when asked)
};

FabricParams params_for(double link_gbps, uint64_t seed)
{
    FabricParams p;
    p.link_gbps = link_gbps;
    p.seed = seed;
    if (link_gbps <= 40) p.switch_buffer = 12'000'000;  // the paper's Trident II
    return p;
}

// Long enough for DCQCN to settle. Its clocks are fixed in time (55 us timers, a CNP per
// 50 us), so it takes about as long at any line rate: tens of milliseconds for the shares.
double fairness_duration(double /*link_gbps*/)
{
    return 100e3;
}
double queue_duration(double link_gbps)
{
    return link_gbps <= 100 ? 100e3 : 40e3;
}

double jain(const std::vector<double> &x)
{
    double s = 0, s2 = 0;
    for (double v : x) {
        s += v;
        s2 += v * v;
    }
    return s2 > 0 ? s * s / (static_cast<double>(x.size()) * s2) : 0;
}

int column(const Result &r, const std::string &name)
{
    auto it = std::find(r.trace_columns.begin(), r.trace_columns.end(), name);
    return it == r.trace_columns.end() ? -1 : static_cast<int>(it - r.trace_columns.begin());
}

Measured measure(const Topology &topo, const FabricParams &params, const std::vector<Stream> &streams, int queue_host,
                 double duration_us, bool with_half)
{
    Measured out;
    auto build = [&](Simulator &sim) {
        // More than the run can carry, so every stream is backlogged to the end.
        uint64_t bytes = static_cast<uint64_t>(params.link_gbps * 1e3 / 8 * duration_us * 1.5) + params.mtu;
        for (const Stream &s : streams) {
            Message m;
            m.src = s.src;
            m.dst = s.dst;
            m.bytes = bytes;
            sim.add(m);
        }
    };
    Simulator sim(topo, params);
    build(sim);
    sim.trace_queue_to_host(queue_host);
    std::set<int> srcs;
    for (const Stream &s : streams) srcs.insert(s.src);
    for (int s : srcs) sim.trace_delivered_of(s);
    sim.set_trace_period_us(duration_us / 10000);
    out.whole = sim.run(duration_us);
    const Result &r = out.whole;
    if (with_half) {
        Simulator again(topo, params);
        build(again);
        out.half = again.run(duration_us / 2);
    }

    // Samples at about half time and at the end bound the measured window.
    size_t mid = 0, last = r.trace.empty() ? 0 : r.trace.size() - 1;
    while (mid < last && r.trace[mid].t_us < duration_us / 2) ++mid;
    int q = column(r, "queue:host " + std::to_string(queue_host));
    double sum = 0;
    size_t count = 0;
    for (size_t i = 0; i < r.trace.size(); ++i) {
        double v = q >= 0 ? r.trace[i].values[q] : 0;
        out.series.emplace_back(r.trace[i].t_us, v);
        out.queue_peak = std::max(out.queue_peak, v);
        if (i >= mid) {
            sum += v;
            ++count;
            out.queue_max = std::max(out.queue_max, v);
        }
    }
    out.queue_mean = count ? sum / static_cast<double>(count) : 0;
    double window = last > mid ? r.trace[last].t_us - r.trace[mid].t_us : 0;
    for (const Stream &s : streams) {
        int c = column(r, "delivered:" + std::to_string(s.src) + "->" + std::to_string(s.dst));
        double bytes = c >= 0 && window > 0 ? r.trace[last].values[c] - r.trace[mid].values[c] : 0;
        out.gbps.push_back(window > 0 ? bytes * 8 / (window * 1e3) : 0);
    }
    return out;
}

}  // namespace

static FairShareResult fair_result(const Measured &m, int flows, double link_gbps, bool dcqcn, double duration_us)
{
    FairShareResult f;
    f.flows = flows;
    f.link_gbps = link_gbps;
    f.dcqcn = dcqcn;
    f.duration_us = duration_us;
    f.gbps = m.gbps;
    for (double g : f.gbps) f.total_gbps += g;
    f.jain = jain(f.gbps);
    f.queue_mean_bytes = m.queue_mean;
    f.queue_max_bytes = m.queue_max;
    f.pause_frames = m.whole.pause_frames;
    f.ecn_marks = m.whole.ecn_marks;
    f.cnps = m.whole.cnps;
    f.packets_dropped = m.whole.packets_dropped;
    f.total_paused_us = m.whole.total_paused_us;
    return f;
}

FairShareResult fair_share(int flows, double link_gbps, bool dcqcn, double duration_us, uint64_t seed)
{
    if (duration_us <= 0) duration_us = fairness_duration(link_gbps);
    FabricParams p = params_for(link_gbps, seed);
    p.dcqcn = dcqcn;
    std::vector<Stream> streams;
    for (int i = 0; i < flows; ++i) streams.push_back({i, flows});
    Measured m = measure(Topology::single_switch(flows + 1), p, streams, flows, duration_us, false);
    return fair_result(m, flows, link_gbps, dcqcn, duration_us);
}

FairShareResult pfc_unfairness(double link_gbps, bool dcqcn, double duration_us, uint64_t seed)
{
    if (duration_us <= 0) duration_us = fairness_duration(link_gbps);
    FabricParams p = params_for(link_gbps, seed);
    p.dcqcn = dcqcn;
    // Leaf 0: hosts 0-3, leaf 1: hosts 4-7, one spine. Receiver 4; senders 0, 1, 2 (remote) and 5 (local).
    std::vector<Stream> streams = {{0, 4}, {1, 4}, {2, 4}, {5, 4}};
    Measured m = measure(Topology::two_tier(8, 4, 1), p, streams, 4, duration_us, false);
    return fair_result(m, 4, link_gbps, dcqcn, duration_us);
}

IncastResult incast(int senders, double link_gbps, bool dcqcn, bool pfc, double duration_us, uint64_t seed)
{
    if (duration_us <= 0) duration_us = queue_duration(link_gbps);
    FabricParams p = params_for(link_gbps, seed);
    p.dcqcn = dcqcn;
    p.pfc = pfc;
    std::vector<Stream> streams;
    for (int i = 0; i < senders; ++i) streams.push_back({i, senders});
    Measured m = measure(Topology::single_switch(senders + 1), p, streams, senders, duration_us, true);
    IncastResult x;
    x.senders = senders;
    x.link_gbps = link_gbps;
    x.dcqcn = dcqcn;
    x.pfc = pfc;
    x.duration_us = duration_us;
    x.kmin = p.kmin();
    x.kmax = p.kmax();
    x.xoff = p.pfc_xoff_for(senders + 1);
    x.xon = p.pfc_xon_for(senders + 1);
    x.queue_mean_bytes = m.queue_mean;
    x.queue_max_bytes = m.queue_max;
    x.queue_peak_bytes = m.queue_peak;
    for (double g : m.gbps) x.goodput_gbps += g;
    x.total_paused_us = m.whole.total_paused_us;
    x.pause_frames = m.whole.pause_frames;
    x.ecn_marks = m.whole.ecn_marks;
    x.cnps = m.whole.cnps;
    x.packets_dropped = m.whole.packets_dropped;
    x.paused_us_last_half = m.whole.total_paused_us - m.half.total_paused_us;
    x.pause_frames_last_half = m.whole.pause_frames - m.half.pause_frames;
    x.cnps_last_half = m.whole.cnps - m.half.cnps;
    x.queue_series = std::move(m.series);
    return x;
}

VictimResult victim_flow(double link_gbps, bool dcqcn, double duration_us, uint64_t seed)
{
    if (duration_us <= 0) duration_us = queue_duration(link_gbps);
    FabricParams p = params_for(link_gbps, seed);
    p.dcqcn = dcqcn;
    // Leaf 0: hosts 0-7, leaf 1: hosts 8-15, one spine. A = 8, B = 9.
    std::vector<Stream> streams = {{0, 9}};
    for (int s : {1, 2, 3, 4, 10, 11, 12, 13, 14, 15}) streams.push_back({s, 8});
    Measured m = measure(Topology::two_tier(16, 8, 1), p, streams, 8, duration_us, false);
    VictimResult v;
    v.link_gbps = link_gbps;
    v.dcqcn = dcqcn;
    v.duration_us = duration_us;
    v.victim_gbps = m.gbps[0];
    // Max-min: A's link gives each of the 10 incast senders a tenth; the spine link carries
    // four of them and leaves the rest to the victim.
    v.victim_fair_gbps = link_gbps - 4 * link_gbps / 10;
    for (size_t i = 1; i < m.gbps.size(); ++i) v.incast_gbps += m.gbps[i];
    v.victim_paused_us = m.whole.ports[0].paused_us;
    v.pause_frames = m.whole.pause_frames;
    v.packets_dropped = m.whole.packets_dropped;
    v.total_paused_us = m.whole.total_paused_us;
    return v;
}

namespace {

std::string fmt(const char *f, double v)
{
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

std::string kb(double bytes)
{
    return fmt("%.0f KiB", bytes / 1024);
}

std::string list(const std::vector<double> &v)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? " / " : "") + fmt("%.1f", v[i]);
    return s;
}

}  // namespace

std::string validation_report()
{
    std::ostringstream o;
    o << "| scenario | Gb/s | DCQCN | PFC | flows' Gb/s (last half) | Jain | queue mean / max (last half) | "
         "pauses (whole / last half) | paused us (whole / last half) | drops |\n";
    o << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (double gbps : {40.0, 400.0}) {
        for (int flows : {2, 4})
            for (bool d : {true, false}) {
                FairShareResult f = fair_share(flows, gbps, d);
                o << "| fair share " << flows << ":1 | " << gbps << " | " << (d ? "on" : "off") << " | on | "
                  << list(f.gbps) << " | " << fmt("%.3f", f.jain) << " | " << kb(f.queue_mean_bytes) << " / "
                  << kb(f.queue_max_bytes) << " | " << f.pause_frames << " / - | " << fmt("%.0f", f.total_paused_us)
                  << " / - | " << f.packets_dropped << " |\n";
            }
        for (bool d : {true, false}) {
            FairShareResult f = pfc_unfairness(gbps, d);
            o << "| PFC unfairness (3 remote + 1 local) | " << gbps << " | " << (d ? "on" : "off") << " | on | "
              << list(f.gbps) << " | " << fmt("%.3f", f.jain) << " | " << kb(f.queue_mean_bytes) << " / "
              << kb(f.queue_max_bytes) << " | " << f.pause_frames << " / - | " << fmt("%.0f", f.total_paused_us)
              << " / - | " << f.packets_dropped << " |\n";
        }
        for (int n : {8, 16, 20})
            for (bool d : {true, false}) {
                IncastResult x = incast(n, gbps, d, true);
                o << "| incast " << n << ":1 (Kmin " << kb(static_cast<double>(x.kmin)) << ", Kmax "
                  << kb(static_cast<double>(x.kmax)) << ", XOFF " << kb(static_cast<double>(x.xoff)) << ") | " << gbps
                  << " | " << (d ? "on" : "off") << " | on | total " << fmt("%.1f", x.goodput_gbps) << " | | "
                  << kb(x.queue_mean_bytes) << " / " << kb(x.queue_max_bytes) << " | " << x.pause_frames << " / "
                  << x.pause_frames_last_half << " | " << fmt("%.0f", x.total_paused_us) << " / "
                  << fmt("%.0f", x.paused_us_last_half) << " | " << x.packets_dropped << " |\n";
            }
        for (bool d : {true, false}) {
            IncastResult x = incast(16, gbps, d, false);
            o << "| incast 16:1, PFC off | " << gbps << " | " << (d ? "on" : "off") << " | off | total "
              << fmt("%.1f", x.goodput_gbps) << " | | " << kb(x.queue_mean_bytes) << " / " << kb(x.queue_max_bytes)
              << " | 0 / 0 | 0 / 0 | " << x.packets_dropped << " |\n";
        }
        for (bool d : {true, false}) {
            VictimResult v = victim_flow(gbps, d);
            o << "| victim flow (fair share " << fmt("%.0f", v.victim_fair_gbps) << ") | " << gbps << " | "
              << (d ? "on" : "off") << " | on | victim " << fmt("%.1f", v.victim_gbps) << ", incast "
              << fmt("%.1f", v.incast_gbps) << " | | | " << v.pause_frames << " / - | "
              << fmt("%.0f", v.total_paused_us) << " (victim NIC " << fmt("%.0f", v.victim_paused_us) << ") / - | "
              << v.packets_dropped << " |\n";
        }
    }
    return o.str();
}

}  // namespace gpurdma::fabric
