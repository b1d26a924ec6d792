// Alpha-beta cost model for choosing the allreduce algorithm: a message of b bytes
// over a medium costs alpha + b / bandwidth, a reduction b / reduce bandwidth. The
// parameters come from MCA variables and are agreed by all ranks at set-up, so every
// rank picks the same algorithm. The defaults were measured on the development
// machine: between nodes, two network namespaces over UCX tcp (recursive doubling of
// 4 KiB took 32 us, of 256 KiB 143 us); on a real fabric set the net values to its own.
#pragma once

#include <cstddef>
#include <string>

#include "topo/topology.h"

namespace gpurdma::plan {

struct LinkCost {
    double alpha_us = 1.0;  // per message
    double gbps = 10.0;  // GB/s (1e9 bytes per second)
    double us(double bytes) const { return alpha_us + bytes / (gbps * 1e3); }
};

struct CostModel {
    LinkCost shm{0.5, 10.0};  // between ranks of one node (shared-memory slots)
    LinkCost net{30.0, 3.0};  // between nodes (UCX)
    double reduce_gbps = 15.0;
    double reduce_us(double bytes) const { return bytes / (reduce_gbps * 1e3); }
};

// Estimated microseconds of each schedule for `bytes` on this topology, as the planner
// builds it: pieces of at most chunk_size per message.
double recursive_doubling_us(const CostModel &m, const topo::Topology &t, size_t bytes);
double ring_us(const CostModel &m, const topo::Topology &t, size_t bytes, size_t chunk_size);
// The hierarchical schedule: its node stages by `params.model`, its rail stage as
// plan/rail_choice.h plans it.
struct PlanParams;
double hierarchical_us(const topo::Topology &t, size_t bytes, const PlanParams &params);

// "shm 0.5 us + 10 GB/s, net 10 us + 3 GB/s, reduce 15 GB/s", for the set-up line.
std::string describe(const CostModel &m);

}  // namespace gpurdma::plan
