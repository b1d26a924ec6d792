#include "plan/rail_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "plan/halving_doubling.h"
#include "plan/neighbors.h"
#include "plan/planner.h"
#include "plan/recursive_doubling.h"
#include "plan/ring.h"
#include "plan/step_helpers.h"

namespace gpurdma::plan {

namespace {

// One pairwise transfer of `bytes` in pieces of at most chunk: the first piece's
// latency, then each further piece at the link's rate or, where the window is too
// small to cover a credit's round trip, a window's worth per round trip.
double transfer_us(const PlanParams &p, int nodes, double bytes, bool reduce)
{
    if (bytes <= 0) return 0;
    const LinkCost &net = p.model.net;
    const double chunk = static_cast<double>(std::max<size_t>(p.chunk_size, 1));
    const double pieces = std::ceil(bytes / chunk), piece = bytes / pieces;
    const double wire = piece / (net.gbps * 1e3), fold = reduce ? p.model.reduce_us(piece) : 0;
    const double window = rail_window_for(p, nodes, static_cast<size_t>(piece));
    const double per_piece = std::max(wire, (2 * net.alpha_us + wire + fold) / window);
    return net.alpha_us + wire + fold + (pieces - 1) * per_piece;
}

double ring_rail_us(const PlanParams &p, int n, double bytes)
{
    const double segment = bytes / n;
    return (n - 1) * (transfer_us(p, n, segment, true) + transfer_us(p, n, segment, false));
}

double doubling_rail_us(const PlanParams &p, int n, double bytes)
{
    const int p2 = power_of_two_floor(n);
    double us = 0;
    for (int d = 1; d < p2; d <<= 1) us += transfer_us(p, n, bytes, true);
    if (n > p2) us += transfer_us(p, n, bytes, true) + transfer_us(p, n, bytes, false);
    return us;
}

double halving_rail_us(const PlanParams &p, int n, double bytes)
{
    const int p2 = power_of_two_floor(n);
    double us = 0;
    for (int d = 2; d <= p2; d *= 2) us += transfer_us(p, n, bytes / d, true) + transfer_us(p, n, bytes / d, false);
    if (n > p2) us += transfer_us(p, n, bytes, true) + transfer_us(p, n, bytes, false);
    return us;
}

bool fits_doubling(const PlanParams &p, size_t bytes)
{
    return bytes <= p.chunk_size && bytes <= p.small_msg_max;
}

}  // namespace

int rail_window_for(const PlanParams &p, int nodes, size_t write_bytes)
{
    const int window = std::max(1, p.rail_window);
    return nodes >= kCollidingNodes && write_bytes >= kLargeRailWrite ? std::min(2, window) : window;
}

double rail_us(const PlanParams &p, Algorithm a, int nodes, size_t bytes)
{
    if (nodes < 2 || bytes == 0) return 0;
    const double b = static_cast<double>(bytes);
    switch (a) {
        case Algorithm::RecursiveDoubling: return doubling_rail_us(p, nodes, b);
        case Algorithm::HalvingDoubling: return halving_rail_us(p, nodes, b);
        default: return ring_rail_us(p, nodes, b);
    }
}

Algorithm choose_rail_algorithm(const PlanParams &p, int nodes, size_t bytes)
{
    switch (p.rail_algorithm) {
        case Algorithm::Ring: return Algorithm::Ring;
        case Algorithm::HalvingDoubling: return Algorithm::HalvingDoubling;
        case Algorithm::RecursiveDoubling:
            return fits_doubling(p, bytes) ? Algorithm::RecursiveDoubling : Algorithm::HalvingDoubling;
        default: break;
    }
    // Ties go to recursive doubling, then the ring: fewer messages.
    Algorithm best = Algorithm::Ring;
    double best_us = rail_us(p, Algorithm::Ring, nodes, bytes);
    const double halving = rail_us(p, Algorithm::HalvingDoubling, nodes, bytes);
    if (halving < best_us) best = Algorithm::HalvingDoubling, best_us = halving;
    if (fits_doubling(p, bytes) && rail_us(p, Algorithm::RecursiveDoubling, nodes, bytes) <= best_us)
        best = Algorithm::RecursiveDoubling;
    return best;
}

size_t rail_unit_elems(const topo::Topology &t, size_t count, size_t elem, const PlanParams &p)
{
    const size_t slices = static_cast<size_t>(std::max(1, t.max_ppn()));
    const size_t slice = (count + slices - 1) / slices;
    const size_t chunk_elems = std::max<size_t>(1, p.chunk_size / elem);
    if (p.rail_unit > 0) return std::max<size_t>(1, p.rail_unit / elem);
    const int nodes = t.nodes();
    // Few nodes: at most 6 exchanges per unit, and units of one chunk (still hot in the
    // cache between the stages) measured fastest here (docs/PERFORMANCE.md).
    if (nodes < kCollidingNodes || slice <= chunk_elems) return chunk_elems;
    // Units of 1, 2, 4, ... chunks, and the whole slice, each as a pipeline of three
    // stages per unit (the node's reduce-scatter, the rail, the node's allgather): the
    // first unit through all three, then one unit per slowest stage. Small units overlap
    // the node with the rail; each unit pays the rail's latency once.
    const int k = std::max(1, t.max_ppn());
    const LinkCost &shm = p.model.shm;
    std::vector<std::pair<size_t, double>> options;
    for (size_t unit = chunk_elems;; unit *= 2) {
        const size_t u = std::min(unit, slice);
        const double units = static_cast<double>((slice + u - 1) / u), bytes = static_cast<double>(u * elem);
        const double pieces = std::ceil(bytes / static_cast<double>(std::max<size_t>(p.chunk_size, 1)));
        const double gather = (k - 1) * (pieces * shm.alpha_us + bytes / (shm.gbps * 1e3));
        const double scatter = gather + (k - 1) * p.model.reduce_us(bytes);
        const double rail = rail_us(p, choose_rail_algorithm(p, nodes, u * elem), nodes, u * elem);
        options.emplace_back(u, scatter + rail + gather + (units - 1) * std::max({scatter, rail, gather}));
        if (u == slice) break;
    }
    double best = options.front().second;
    for (const auto &o : options) best = std::min(best, o.second);
    // Ties go to the larger unit: fewer units, fewer rounds of the rail's latency.
    for (auto o = options.rbegin(); o != options.rend(); ++o)
        if (o->second <= 1.02 * best) return o->first;
    return options.back().first;
}

double rail_stage_us(const topo::Topology &t, size_t bytes, const PlanParams &p)
{
    const int nodes = t.nodes();
    if (nodes < 2 || bytes == 0) return 0;
    const size_t slices = static_cast<size_t>(std::max(1, t.max_ppn()));
    const size_t slice = (bytes + slices - 1) / slices;
    const size_t unit = std::min(slice, rail_unit_elems(t, bytes, 1, p));
    const size_t units = (slice + unit - 1) / unit;
    return static_cast<double>(units) * rail_us(p, choose_rail_algorithm(p, nodes, unit), nodes, unit);
}

std::string describe_rail_plan(const topo::Topology &t, const PlanParams &p)
{
    std::string text;
    const size_t slices = static_cast<size_t>(std::max(1, t.max_ppn()));
    for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20, size_t{256} << 20}) {
        const size_t slice = (bytes / 4 + slices - 1) / slices * 4;
        const size_t unit = std::min(slice, rail_unit_elems(t, bytes / 4, 4, p) * 4);
        const Algorithm a = choose_rail_algorithm(p, t.nodes(), unit);
        char part[160];
        std::snprintf(part, sizeof part, "%s%zu KiB: %zu unit(s) of %zu KiB by %s, %d ahead", text.empty() ? "" : "; ",
                      bytes >> 10, (slice + unit - 1) / unit, unit >> 10, algorithm_name(a),
                      rail_window_for(p, t.nodes(), std::min(p.chunk_size, unit / 2)));
        text += part;
    }
    return text;
}

void append_rail(std::vector<Step> &steps, const Group &g, Buf own, size_t first, size_t count, size_t elem,
                 const PlanParams &p)
{
    if (g.size() < 2 || count == 0) return;
    switch (choose_rail_algorithm(p, g.size(), count * elem)) {
        case Algorithm::RecursiveDoubling:
            // In place on Recv: the contribution must be there first.
            if (own != Buf::Recv)
                steps.push_back(Step{StepKind::Copy, Phase::Local, false, -1, Buf::Recv, own, first * elem,
                                     first * elem, count * elem});
            append_recursive_doubling(steps, g, first, count, elem);
            break;
        case Algorithm::HalvingDoubling:
            append_halving_doubling(steps, g, own, first, count, elem, p.chunk_size,
                                    rail_window_for(p, g.size(), std::min(p.chunk_size, count * elem / 2)));
            break;
        default: append_ring(steps, g, own, first, count, elem, p.chunk_size); break;
    }
}

}  // namespace gpurdma::plan
