#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "plan/neighbors.h"
#include "plan/planner.h"
#include "plan/rail_choice.h"

namespace gpurdma::plan {

namespace {

bool same_node(const topo::Topology &t, int a, int b)
{
    return t.node_of[static_cast<size_t>(a)] == t.node_of[static_cast<size_t>(b)];
}

// A round is as slow as its slowest pair: the network if any pair crosses nodes.
const LinkCost &round_link(const CostModel &m, bool crosses)
{
    return crosses ? m.net : m.shm;
}

// Ring of `ranks` (in order) on `bytes`: 2(n-1) steps of bytes/n in pieces of at most
// chunk, the slowest neighbor link setting the pace; (n-1) reductions of bytes/n.
double ring_of(const CostModel &m, int n, bool crosses, double bytes, size_t chunk)
{
    if (n < 2) return 0.0;
    const double segment = bytes / n;
    const double pieces = std::max(1.0, std::ceil(segment / static_cast<double>(chunk)));
    const LinkCost &link = round_link(m, crosses);
    return 2.0 * (n - 1) * (pieces * link.alpha_us + segment / (link.gbps * 1e3)) + (n - 1) * m.reduce_us(segment);
}

// Recursive doubling among n ranks whose rounds cross nodes as `crosses(mask)` says,
// with fold-in/out rounds for the ranks beyond the largest power of two.
template <typename Crosses>
double doubling_of(const CostModel &m, int n, double bytes, Crosses crosses, bool fold_crosses)
{
    if (n < 2) return 0.0;
    const int p2 = power_of_two_floor(n);
    double us = 0.0;
    for (int mask = 1; mask < p2; mask <<= 1) us += round_link(m, crosses(mask)).us(bytes) + m.reduce_us(bytes);
    if (n > p2) us += 2.0 * round_link(m, fold_crosses).us(bytes) + m.reduce_us(bytes);
    return us;
}

}  // namespace

double recursive_doubling_us(const CostModel &m, const topo::Topology &t, size_t bytes)
{
    const int n = t.size;
    const int p2 = n >= 1 ? power_of_two_floor(n) : 1;
    auto crosses = [&](int mask) {
        for (int r = 0; r < p2; ++r)
            if (!same_node(t, r, r ^ mask)) return true;
        return false;
    };
    bool fold = false;
    for (int r = p2; r < n; ++r) fold = fold || !same_node(t, r, r - p2);
    return doubling_of(m, n, static_cast<double>(bytes), crosses, fold);
}

double ring_us(const CostModel &m, const topo::Topology &t, size_t bytes, size_t chunk_size)
{
    bool crosses = false;
    for (int r = 0; r < t.size; ++r) crosses = crosses || !same_node(t, r, (r + 1) % t.size);
    return ring_of(m, t.size, crosses, static_cast<double>(bytes), chunk_size);
}

double hierarchical_us(const topo::Topology &t, size_t bytes, const PlanParams &params)
{
    // Node stage on the largest node: each slice owner takes k-1 slices in and sends
    // its reduced slice back to k-1 ranks; between nodes one rail per slice, the
    // rails side by side (each slice on its own NIC where there are several).
    const CostModel &m = params.model;
    const int k = t.max_ppn();
    const double slice = static_cast<double>(bytes) / k;
    const double pieces = std::max(1.0, std::ceil(slice / static_cast<double>(params.chunk_size)));
    const double node_stage = (k - 1) * (pieces * m.shm.alpha_us + slice / (m.shm.gbps * 1e3));
    const double reduce = (k - 1) * m.reduce_us(slice);
    return 2.0 * node_stage + reduce + rail_stage_us(t, bytes, params);
}

std::string describe(const CostModel &m)
{
    char text[160];
    std::snprintf(text, sizeof text, "shm %g us + %g GB/s, net %g us + %g GB/s, reduce %g GB/s", m.shm.alpha_us,
                  m.shm.gbps, m.net.alpha_us, m.net.gbps, m.reduce_gbps);
    return text;
}

}  // namespace gpurdma::plan
