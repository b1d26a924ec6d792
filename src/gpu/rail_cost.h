// What auto weighs when it picks where the rail stage reduces (gpu/rail_mode.h): the
// time of one unit's rail in each mode, estimated from the work of the rail schedule
// itself (plan/rail.h, counted step by step) and this node's rates, measured at set-up
// (gpu/copy_rates.h) or taken from the host cost model (plan/cost_model.h). The network
// time is the same in both modes; what differs is where the bytes cross PCIe, who
// reduces, and how the work overlaps:
//   host:   the slice is copied out and back once (the copy engine, on the team's
//           stream), and the copies of neighbouring units run while this unit is on
//           the network (three chunk buffers): per unit, the larger of the copies and
//           the rail with the CPU reducing and copying each arrival.
//   device: each local step of the rail (a reduction, a copy of an arrival, a staged
//           send) is a piece of GPU work the executor waits for before the step that
//           needs it: a fixed cost per step (queued, then seen done), the arrivals read
//           over PCIe from their landing slots (not where they land in GPU memory), and
//           each staged send copied out first (not where sends go straight).
// A pure function of its inputs, so that every branch is unit-tested here.
#pragma once

#include <cstddef>
#include <string>

#include "plan/cost_model.h"
#include "plan/schedule.h"

namespace gpurdma::gpu {

// One unit's rail schedule at this rank, counted.
struct RailWorkload {
    size_t slice_bytes = 0;  // the unit's slice: what host mode copies out and back
    size_t sends = 0, send_bytes = 0;
    size_t reduces = 0, reduce_bytes = 0;  // arrivals reduced into the slice
    size_t arrival_copies = 0, arrival_copy_bytes = 0;  // arrivals copied into the slice
    size_t local_copies = 0, local_copy_bytes = 0;  // within the slice
    double net_us = 0;  // the sends on the network link (the same in both modes)
};

// Counts schedule (one unit's rail; its message is the slice) with the network's cost.
RailWorkload count_rail_work(const plan::Schedule &schedule, const plan::LinkCost &net);

// This node's rates.
struct RailRates {
    double d2h_gbps = 0;  // GPU memory -> page-locked host memory, GB/s
    double h2d_gbps = 0;  // page-locked host memory -> GPU memory (and a kernel reading a landing slot)
    double step_us = 0;  // one piece of GPU work: the host queueing it, plus its GPU time
    double host_reduce_gbps = 0;  // the CPU reducing (and copying) an arrival
};

struct RailCost {
    double host_us = 0;
    double device_us = 0;
    std::string detail;  // the terms of each, for verbose 1
};

RailCost estimate_rail_cost(const RailWorkload &work, const RailRates &rates, bool direct_sends, bool arrivals_in_gpu);

}  // namespace gpurdma::gpu
