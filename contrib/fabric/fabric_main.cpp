// gpurdma-fabric: what gpurdma's schedules do to a lossless RoCE/InfiniBand fabric, in the
// fabric model (fabric_model.h; docs/FABRIC.md and docs/FABRIC-MODEL.md). A model, not a
// measurement: its numbers say how the schedules and the admission limit interact with
// PFC, ECN and DCQCN, not what a given cluster will do.
//
//   gpurdma-fabric validate
//   gpurdma-fabric speed [--mtu BYTES]   (the model's own speed: docs/FABRIC-MODEL.md)
//   gpurdma-fabric plan CLUSTER --size BYTES[,BYTES..] [--chunks A,..] [--slots A,..] [--rails R,..]
//                       [--second-job] [--out DIR]
//   gpurdma-fabric sweep CLUSTER --size BYTES [--chunks A,B,..] [--slots A,B,..] [--rails R,..]
//                        [--second-job] [--out DIR]
// Rails (schedule_dag.h's RailPlan): hier (the planner's unit and algorithm), ring, rhd (one
// unit of the whole slice), hier-rd, or ALGORITHM/UNIT (auto|ring|rd|rhd / auto|slice|size).
// plan: per size, gpurdma's defaults beside every rail setting it can run, and a summary line.
// CLUSTER: a file of `key = value` lines (contrib/fabric/clusters/*.conf); --set key=value
// overrides one key. --out DIR writes the table as CSV and, with python3-matplotlib, a plot.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "algo/rail_admission.h"
#include "cluster_spec.h"
#include "fabric_model.h"
#include "plan/planner.h"
#include "plan/rail_choice.h"
#include "schedule_dag.h"
#include "topo/topology.h"
#include "validation.h"

using namespace gpurdma::fabric;

namespace {

struct Options {
    std::string command, cluster, out;
    std::vector<size_t> sizes;
    std::vector<size_t> chunks;
    std::vector<int> slots;
    std::vector<RailPlan> rails;
    bool second_job = false;
    std::vector<std::string> sets;
};

constexpr size_t kDefaultChunk = 256u << 10;  // coll_gpurdma_chunk_size's default
constexpr int kDefaultSlots = 4;  // coll_gpurdma_slots's; coll_gpurdma_rail_slots's is automatic

// What one configuration gave in the model.
struct Point {
    RailPlan rail;
    size_t size = 0;
    size_t unit = 0;  // bytes of a slice per rail unit, as planned
    size_t chunk = 0;
    int slots = 0;
    bool ok = false;
    std::string error;
    double time_us = 0, ideal_us = 0;
    double paused_us = 0;  // all ports, summed
    uint64_t peak_queue = 0, pause_frames = 0, ecn_marks = 0, cnps = 0, writes = 0, drops = 0;
    double second_job_us = 0;  // the other job's completion, when there is one
    std::string describe;
    std::vector<double> step_done_us;  // per schedule step: when the last rank finished it
};

bool parse_size(const std::string &text, size_t *out)
{
    char *end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || v <= 0) return false;
    const std::string unit = end;
    double scale = 1;
    if (unit == "K" || unit == "KiB") scale = 1024;
    else if (unit == "M" || unit == "MiB") scale = 1024.0 * 1024;
    else if (unit == "G" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
    else if (!unit.empty()) return false;
    *out = static_cast<size_t>(v * scale);
    return true;
}

std::string bytes_text(size_t b)
{
    char buf[32];
    if (b >= (1u << 30) && b % (1u << 30) == 0) std::snprintf(buf, sizeof buf, "%zu GiB", b >> 30);
    else if (b >= (1u << 20) && b % (1u << 20) == 0) std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
    else if (b >= 1024 && b % 1024 == 0) std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
    else std::snprintf(buf, sizeof buf, "%zu B", b);
    return buf;
}

std::vector<std::string> split(const std::string &s)
{
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

int usage()
{
    std::cerr << "usage: gpurdma-fabric validate\n"
                 "       gpurdma-fabric speed [--mtu BYTES]\n"
                 "       gpurdma-fabric plan CLUSTER --size BYTES[,BYTES..] [--chunks A,..] [--slots A,..] "
                 "[--rails R,..] [--second-job] [--out DIR] [--set key=value]...\n"
                 "       gpurdma-fabric sweep CLUSTER --size BYTES [--chunks A,B,..] [--slots A,B,..] "
                 "[--rails R,..] [--second-job] [--out DIR] [--set key=value]...\n"
                 "  rails: hier, ring, rhd, hier-rd, or ALGORITHM/UNIT (auto|ring|rd|rhd / auto|slice|256K|4M)\n";
    return 2;
}

// The allreduce on the cluster's rail plane 0 (and, with second_job, the same job again on
// hosts interleaved with ours under the same leaves, started together): the model's result.
Point run_point(const ClusterSpec &spec, const RailPlan &rail, size_t size, size_t chunk, int slots, bool second_job)
{
    Point p;
    p.rail = rail;
    p.size = size;
    p.unit = planned_unit_bytes(spec, planner_params(spec, chunk, slots, rail, size), size);
    p.chunk = chunk;
    p.slots = slots;
    p.ideal_us = ideal_us(spec, size);
    const int stride = second_job ? 2 : 1;
    const int hosts = spec.plane_hosts() * stride;
    const Topology topo = Topology::two_tier(hosts, spec.hosts_per_leaf * stride, spec.spines);
    Simulator sim(topo, spec.params());
    const ScheduleDag ours = build_rail_dag(spec, rail, size, chunk, slots, 0, stride, 0);
    constexpr int kSecondJobTags = 1 << 24;
    for (const Message &m : ours.messages) sim.add(m);
    size_t second_first = ours.messages.size();
    if (second_job) {
        const ScheduleDag theirs = build_rail_dag(spec, rail, size, chunk, slots, 1, stride, kSecondJobTags);
        for (Message m : theirs.messages) {
            for (MessageId &a : m.after) a += static_cast<MessageId>(second_first);
            sim.add(m);
        }
    }
    p.describe = ours.describe;
    p.writes = ours.data_messages;
    const Result r = sim.run(120e6);
    p.ok = r.ok;
    p.error = r.error;
    p.paused_us = r.total_paused_us;
    p.peak_queue = r.peak_queue;
    p.pause_frames = r.pause_frames;
    p.ecn_marks = r.ecn_marks;
    p.cnps = r.cnps;
    p.drops = r.packets_dropped;
    p.step_done_us.assign(static_cast<size_t>(ours.steps), 0);
    for (size_t m = 0; m < r.done_us.size(); ++m) {
        if (m < second_first) {
            p.time_us = std::max(p.time_us, r.done_us[m]);
            const int step = ours.step_of[m];
            p.step_done_us[static_cast<size_t>(step)] =
                std::max(p.step_done_us[static_cast<size_t>(step)], r.done_us[m]);
        } else {
            p.second_job_us = std::max(p.second_job_us, r.done_us[m]);
        }
    }
    return p;
}

void print_header(bool second_job)
{
    std::printf(
        "| rail | unit | chunk | in flight | time (us) | x ideal | PFC paused (us, all ports) | pauses | peak queue "
        "| ECN marks | CNPs |%s\n",
        second_job ? " other job (us) |" : "");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|%s\n", second_job ? "---|" : "");
}

void print_point(const Point &p, bool second_job)
{
    if (!p.ok) {
        std::printf("| %s | %s | %s | %d | failed: %s |\n", p.rail.name().c_str(), bytes_text(p.unit).c_str(),
                    bytes_text(p.chunk).c_str(), p.slots, p.error.c_str());
        return;
    }
    std::printf("| %s | %s | %s | %d | %.1f | %.2f | %.0f | %llu | %s | %llu | %llu |", p.rail.name().c_str(),
                bytes_text(p.unit).c_str(), bytes_text(p.chunk).c_str(), p.slots, p.time_us, p.time_us / p.ideal_us,
                p.paused_us, static_cast<unsigned long long>(p.pause_frames), bytes_text(p.peak_queue).c_str(),
                static_cast<unsigned long long>(p.ecn_marks), static_cast<unsigned long long>(p.cnps));
    if (second_job) std::printf(" %.0f |", p.second_job_us);
    std::printf("\n");
    std::fflush(stdout);
}

// The fastest configuration; within 2% of it, the one with the least pause time, then the
// fewest slots and smallest chunk (less memory per peer).
const Point *recommend(const std::vector<Point> &points)
{
    const Point *best = nullptr;
    for (const Point &p : points)
        if (p.ok && (!best || p.time_us < best->time_us)) best = &p;
    if (!best) return nullptr;
    const Point *pick = best;
    for (const Point &p : points) {
        if (!p.ok || p.time_us > best->time_us * 1.02) continue;
        const auto key = [](const Point &q) { return std::make_tuple(q.paused_us, q.slots * q.chunk, q.chunk); };
        if (key(p) < key(*pick)) pick = &p;
    }
    return pick;
}

bool write_csv(const std::string &path, const ClusterSpec &spec, const std::vector<Point> &points)
{
    std::ofstream o(path);
    o << "# " << spec.describe() << "\n";
    o << "size,algorithm,unit,chunk,slots,time_us,ideal_us,paused_us,pause_frames,peak_queue,ecn_marks,cnps,writes,"
         "drops,second_job_us,ok\n";
    for (const Point &p : points)
        o << p.size << ',' << p.rail.name() << ',' << p.unit << ',' << p.chunk << ',' << p.slots << ',' << p.time_us
          << ',' << p.ideal_us << ',' << p.paused_us << ',' << p.pause_frames << ',' << p.peak_queue << ','
          << p.ecn_marks << ',' << p.cnps << ',' << p.writes << ',' << p.drops << ',' << p.second_job_us << ','
          << (p.ok ? 1 : 0) << '\n';
    return static_cast<bool>(o);
}

bool write_steps_csv(const std::string &path, const Point &p)
{
    std::ofstream o(path);
    o << "step,done_us\n";
    for (size_t i = 0; i < p.step_done_us.size(); ++i) o << i << ',' << p.step_done_us[i] << '\n';
    return static_cast<bool>(o);
}

// The plot script beside this program's source (installed next to it), if matplotlib is there.
void plot(const std::string &dir, const std::string &title)
{
    // Installed beside the program's data, else (an uninstalled build) in the source tree.
    std::string script = std::getenv("GPURDMA_FABRIC_PLOT") ? std::getenv("GPURDMA_FABRIC_PLOT") : "";
    for (const char *candidate : {GPURDMA_FABRIC_PLOT_SCRIPT, GPURDMA_FABRIC_PLOT_SOURCE})
        if (script.empty() && std::ifstream(candidate)) script = candidate;
    // The first python3 with matplotlib: the one on the PATH, else Debian's.
    std::string python;
    for (const char *candidate : {"python3", "/usr/bin/python3"})
        if (python.empty() &&
            std::system((std::string(candidate) + " -c 'import matplotlib' 2>/dev/null").c_str()) == 0)
            python = candidate;
    if (python.empty()) {
        std::printf("plot: skipped (no python3 with matplotlib; Debian: apt-get install python3-matplotlib)\n");
        return;
    }
    const std::string cmd = python + " '" + script + "' '" + dir + "' '" + title + "' 2>&1 | tail -n 1";
    if (std::system(cmd.c_str()) != 0) std::printf("plot: %s failed\n", cmd.c_str());
}

// What gpurdma's planner picks for the whole communicator on this cluster (schedule_dag.h's
// planner_params: the cost model a calibrated run would have), with its rail unit and the
// rail algorithm of a unit.
std::string planner_choice(const ClusterSpec &spec, size_t size, size_t chunk, int slots)
{
    const gpurdma::topo::Topology t = cluster_topology(spec);
    const gpurdma::plan::PlanParams params = planner_params(spec, chunk, slots, RailPlan{}, size);
    const auto a = gpurdma::plan::choose_algorithm(t, size, params);
    std::string text = gpurdma::plan::algorithm_name(a);
    if (a != gpurdma::plan::Algorithm::Hierarchical) return text;
    const size_t unit = planned_unit_bytes(spec, params, size);
    return text + " (rail units of " + bytes_text(unit) + ", each by " +
           gpurdma::plan::algorithm_name(gpurdma::plan::choose_rail_algorithm(params, spec.nodes, unit)) + ")";
}

// Memory per rank at these settings, in MiB: the shared-memory slots (a channel per node
// peer, coll_gpurdma_slots of chunk each) and the UCX landing slots (a channel per peer
// on another node that any schedule may use, rail_slots of chunk each).
double memory_per_rank_mib(const ClusterSpec &spec, size_t chunk, int rail_slots)
{
    const gpurdma::topo::Topology t = cluster_topology(spec);
    size_t remote = 0;
    for (int p : gpurdma::plan::peers(t, 0))
        if (t.node_of[static_cast<size_t>(p)] != t.node_of[0]) ++remote;
    const double shm = static_cast<double>(spec.gpus_per_node - 1) * kDefaultSlots * static_cast<double>(chunk);
    const double net = static_cast<double>(remote) * rail_slots * static_cast<double>(chunk);
    return (shm + net) / (1 << 20);
}

int run_validate()
{
    std::printf("%s", validation_report().c_str());
    return 0;
}

// The model's own speed: a ring on 128 hosts (two tiers, 16 and 32 per leaf), 127 steps
// of 0.5 MiB to the next host, each step after the previous one arrived.
int run_speed(uint32_t mtu)
{
    const int hosts = 128;
    for (int per_leaf : {16, 32}) {
        FabricParams p;
        if (mtu > 0) p.mtu = mtu;
        Simulator sim(Topology::two_tier(hosts, per_leaf, per_leaf), p);
        std::vector<MessageId> prev(hosts, -1);
        for (int step = 0; step < hosts - 1; ++step) {
            std::vector<MessageId> cur(hosts);
            for (int h = 0; h < hosts; ++h) {
                Message m;
                m.src = h;
                m.dst = (h + 1) % hosts;
                m.bytes = 512 << 10;
                const MessageId from = prev[(h + hosts - 1) % hosts];
                if (from >= 0) m.after = {from};
                m.tag = step;
                cur[h] = sim.add(m);
            }
            prev = cur;
        }
        const auto t0 = std::chrono::steady_clock::now();
        const Result r = sim.run();
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!r.ok) {
            std::fprintf(stderr, "gpurdma-fabric speed: %s\n", r.error.c_str());
            return 1;
        }
        std::printf("ring of %d hosts, %d per leaf, %d spines, mtu %u: simulated %.0f us in %.2f s, %llu events\n",
                    hosts, per_leaf, per_leaf, p.mtu, r.end_us, wall, static_cast<unsigned long long>(r.events));
    }
    return 0;
}

bool prepare_out(const std::string &dir)
{
    if (dir.empty()) return true;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir)) {
        std::fprintf(stderr, "gpurdma-fabric: --out %s: cannot create the folder (%s)\n", dir.c_str(),
                     ec ? ec.message().c_str() : "not a folder");
        return false;
    }
    return true;
}

void finish_out(const Options &o, const ClusterSpec &spec, const std::vector<Point> &points, const Point *steps_of)
{
    if (o.out.empty()) return;
    if (steps_of && !write_steps_csv(o.out + "/steps.csv", *steps_of))
        std::printf("steps: could not write %s/steps.csv\n", o.out.c_str());
    if (!write_csv(o.out + "/sweep.csv", spec, points)) {
        std::printf("table: could not write %s/sweep.csv\n", o.out.c_str());
        return;
    }
    std::printf("table: %s/sweep.csv\n", o.out.c_str());
    plot(o.out, spec.describe());
}

void print_size_header(const ClusterSpec &spec, size_t size, int default_slots)
{
    std::printf(
        "\n== allreduce of %s: each rail plane allreduces a %s slice across %d nodes; ideal (2(n-1)/n x slice / "
        "%.0f Gb/s) %.1f us\n",
        bytes_text(size).c_str(), bytes_text(size / spec.gpus_per_node).c_str(), spec.nodes, spec.nic_gbps,
        ideal_us(spec, size));
    std::printf("gpurdma's planner (cost model from this cluster) chooses: %s\n\n",
                planner_choice(spec, size, kDefaultChunk, default_slots).c_str());
}

// sweep: one size, every rail x chunk x in-flight setting, and a recommendation.
int run_sweep(const Options &o, const ClusterSpec &spec)
{
    if (!prepare_out(o.out)) return 1;
    const size_t size = o.sizes.front();
    std::printf("cluster: %s\n", spec.describe().c_str());
    const int default_slots = gpurdma::algo::rail_slots_for(0, kDefaultSlots, kDefaultChunk, spec.nodes);
    print_size_header(spec, size, default_slots);
    print_header(o.second_job);
    std::vector<Point> points;
    for (const RailPlan &r : o.rails)
        for (size_t chunk : o.chunks)
            for (int slots : o.slots) {
                points.push_back(run_point(spec, r, size, chunk, slots, o.second_job));
                print_point(points.back(), o.second_job);
            }
    const Point *best = recommend(points);
    if (best) {
        std::printf(
            "\nrecommended: --mca coll_gpurdma_chunk_size %zu --mca coll_gpurdma_rail_slots %d (%s, units of %s: %.0f "
            "us, %.2f x ideal, PFC paused %.0f us)\n",
            best->chunk, best->slots, best->rail.name().c_str(), bytes_text(best->unit).c_str(), best->time_us,
            best->time_us / best->ideal_us, best->paused_us);
        std::printf("  memory per rank at that chunk size: %.1f MiB of shared-memory and landing slots\n",
                    memory_per_rank_mib(spec, best->chunk, best->slots));
    }
    finish_out(o, spec, points, best);
    return 0;
}

// plan: per size, gpurdma's defaults beside every rail setting, the best the model found,
// and one summary line.
int run_plan(const Options &o, const ClusterSpec &spec)
{
    if (!prepare_out(o.out)) return 1;
    std::printf("cluster: %s\n", spec.describe().c_str());
    const int default_slots = gpurdma::algo::rail_slots_for(0, kDefaultSlots, kDefaultChunk, spec.nodes);
    std::vector<Point> points;
    std::vector<std::string> summaries;
    const Point *last_best = nullptr;
    for (size_t size : o.sizes) {
        const auto t0 = std::chrono::steady_clock::now();
        print_size_header(spec, size, default_slots);
        print_header(o.second_job);
        const size_t first = points.size();
        points.push_back(run_point(spec, RailPlan{}, size, kDefaultChunk, default_slots, o.second_job));
        print_point(points.back(), o.second_job);
        for (const RailPlan &r : o.rails)
            for (size_t chunk : o.chunks)
                for (int slots : o.slots) {
                    if (r.name() == "hier" && chunk == kDefaultChunk && slots == default_slots) continue;
                    points.push_back(run_point(spec, r, size, chunk, slots, o.second_job));
                    print_point(points.back(), o.second_job);
                }
        const Point &mine = points[first];
        const Point *best = &mine;
        for (size_t i = first; i < points.size(); ++i)
            if (points[i].ok && (!best->ok || points[i].time_us < best->time_us)) best = &points[i];
        last_best = best;
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const std::string choice = planner_choice(spec, size, kDefaultChunk, default_slots);
        std::printf(
            "\nwith gpurdma's defaults (%s: %s chunks, %d in flight per rail peer): %.1f us, %.2f x ideal; best "
            "the model found: %s, units of %s, %s chunks, %d in flight: %.1f us (%.2f x ideal); %.0f s\n",
            choice.c_str(), bytes_text(kDefaultChunk).c_str(), default_slots, mine.time_us,
            mine.time_us / mine.ideal_us, best->rail.name().c_str(), bytes_text(best->unit).c_str(),
            bytes_text(best->chunk).c_str(), best->slots, best->time_us, best->time_us / best->ideal_us, secs);
        char line[512];
        std::snprintf(
            line, sizeof line,
            "summary: size=%zu choice=%s time_us=%.1f ideal_us=%.1f best=%s/%zu/%zu/%d best_us=%.1f "
            "mem_per_rank_mib=%.1f pfc_pause_us=%.0f order=%s",
            size,
            gpurdma::plan::algorithm_name(gpurdma::plan::choose_algorithm(
                cluster_topology(spec), size, planner_params(spec, kDefaultChunk, default_slots, RailPlan{}, size))),
            mine.ok ? mine.time_us : -1.0, mine.ideal_us, best->rail.name().c_str(), best->unit, best->chunk,
            best->slots, best->ok ? best->time_us : -1.0, memory_per_rank_mib(spec, kDefaultChunk, default_slots),
            mine.paused_us, spec.topology_known ? "fabric" : "rank");
        summaries.push_back(line);
    }
    std::printf("\n");
    for (const std::string &l : summaries) std::printf("%s\n", l.c_str());
    finish_out(o, spec, points, last_best);
    return 0;
}

}  // namespace

int main(int argc, char **argv)
{
    Options o;
    if (argc < 2) return usage();
    o.command = argv[1];
    if (o.command == "validate") return run_validate();
    if (o.command == "speed") {
        if (argc == 2) return run_speed(0);
        size_t mtu = 0;
        if (argc != 4 || std::string(argv[2]) != "--mtu" || !parse_size(argv[3], &mtu) || mtu < 64 || mtu > (1u << 20))
            return usage();
        return run_speed(static_cast<uint32_t>(mtu));
    }
    if (o.command != "plan" && o.command != "sweep") return usage();
    if (argc < 3) return usage();
    o.cluster = argv[2];
    for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "--size" && has) {
            for (const std::string &c : split(argv[++i])) {
                size_t v;
                if (!parse_size(c, &v)) return usage();
                o.sizes.push_back(v);
            }
        } else if ((a == "--chunk" || a == "--chunks") && has) {
            for (const std::string &c : split(argv[++i])) {
                size_t v;
                if (!parse_size(c, &v)) return usage();
                o.chunks.push_back(v);
            }
        } else if (a == "--slots" && has) {
            for (const std::string &c : split(argv[++i])) o.slots.push_back(std::atoi(c.c_str()));
        } else if ((a == "--rails" || a == "--algorithms") && has) {
            for (const std::string &c : split(argv[++i])) {
                RailPlan r;
                if (!parse_rail_plan(c, &r)) return usage();
                o.rails.push_back(r);
            }
        } else if (a == "--second-job") {
            o.second_job = true;
        } else if (a == "--out" && has) {
            o.out = argv[++i];
        } else if (a == "--set" && has) {
            o.sets.push_back(argv[++i]);
        } else {
            return usage();
        }
    }
    ClusterSpec spec;
    std::string error;
    if (!read_cluster_spec(o.cluster, &spec, &error)) {
        std::cerr << "gpurdma-fabric: " << error << "\n";
        return 1;
    }
    for (const std::string &s : o.sets) {
        const size_t eq = s.find('=');
        if (eq == std::string::npos || !set_cluster_key(&spec, s.substr(0, eq), s.substr(eq + 1), &error)) {
            std::cerr << "gpurdma-fabric: --set " << s << ": " << (eq == std::string::npos ? "not key=value" : error)
                      << "\n";
            return 1;
        }
    }
    if (!spec.check(&error)) {
        std::cerr << "gpurdma-fabric: " << error << "\n";
        return 1;
    }
    for (int s : o.slots)
        if (s < 1 || s > 64) return usage();
    if (o.sizes.empty()) o.sizes = {256u << 20};
    if (o.command == "plan") {
        // The rail settings the component can run, at the default chunk, beside its defaults.
        if (o.chunks.empty()) o.chunks = {kDefaultChunk};
        if (o.slots.empty()) o.slots = {2, 4, 8};
        if (o.rails.empty())
            for (const char *r : {"hier", "auto/256K", "ring", "rhd", "rhd/4M"}) {
                RailPlan p;
                parse_rail_plan(r, &p);
                o.rails.push_back(p);
            }
        return run_plan(o, spec);
    }
    if (o.sizes.size() != 1) return usage();
    if (o.chunks.empty()) o.chunks = {256u << 10, 1u << 20, 4u << 20, 16u << 20};
    if (o.slots.empty()) o.slots = {1, 2, 4, 8, 16};
    if (o.rails.empty()) o.rails = {RailPlan{}, RailPlan{gpurdma::plan::Algorithm::Ring, kWholeSlice}};
    return run_sweep(o, spec);
}
