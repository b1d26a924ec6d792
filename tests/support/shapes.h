// What the unit tests' schedules run on: topologies of given node sizes and random
// inputs. Test support only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "topo/topology.h"

namespace gpurdma::testing {

// Nodes of the given sizes ("node0", "node1", ...), ranks numbered node by node, or
// interleaved: consecutive ranks on different nodes.
inline topo::Topology nodes_of(const std::vector<int> &sizes, bool interleave = false)
{
    std::vector<std::string> hosts;
    if (!interleave) {
        for (size_t k = 0; k < sizes.size(); ++k)
            for (int i = 0; i < sizes[k]; ++i) hosts.push_back("node" + std::to_string(k));
    } else {
        std::vector<int> left = sizes;
        for (bool any = true; any;) {
            any = false;
            for (size_t k = 0; k < left.size(); ++k)
                if (left[k]-- > 0) {
                    hosts.push_back("node" + std::to_string(k));
                    any = true;
                }
        }
    }
    std::string warn;
    return topo::build_topology(hosts, "", &warn);
}

// n buffers of count random int32 (their sums wrap).
inline std::vector<std::vector<char>> int_inputs(int n, size_t count, uint32_t seed)
{
    std::vector<std::vector<char>> in(static_cast<size_t>(n), std::vector<char>(count * 4));
    std::mt19937 rng(seed);
    for (auto &buf : in) {
        auto *p = reinterpret_cast<int32_t *>(buf.data());
        for (size_t i = 0; i < count; ++i) p[i] = static_cast<int32_t>(rng());
    }
    return in;
}

// n buffers of count doubles in [-1000, 1000]: their sums are inexact, so the order of
// a reduction shows in the bits.
inline std::vector<std::vector<char>> double_inputs(int n, size_t count, uint32_t seed)
{
    std::vector<std::vector<char>> in(static_cast<size_t>(n), std::vector<char>(count * sizeof(double)));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> dist(-1e3, 1e3);
    for (auto &buf : in) {
        auto *p = reinterpret_cast<double *>(buf.data());
        for (size_t i = 0; i < count; ++i) p[i] = dist(rng);
    }
    return in;
}

}  // namespace gpurdma::testing
