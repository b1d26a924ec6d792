// Where the rail stage of a GPU-buffer call reduces the arrivals from other nodes, as
// a pure function of what this rank found, so that every branch is unit-tested here.
// Each rank decides for itself: the messages on the wire are the same either way (the
// same schedule, the same bytes; host and GPU reduce with the same functors, in the
// same order), so neither its rail peers nor its node peers need to know.
//   host:   the slice is copied once to a page-locked chunk, the rail runs there and
//           the CPU reduces; one copy back (two PCIe crossings per slice, the CPU's
//           memory bandwidth per arrival).
//   device: the rail runs on the slice in GPU memory; the GPU reduces each arrival
//           straight out of its landing slot; sends go straight from GPU memory where
//           the network can read it (GPUDirect RDMA), else from a copy staged to
//           page-locked memory (a PCIe crossing per message, a kernel launch and an
//           event per step).
// auto takes the mode whose estimated time per unit is lower (gpu/rail_cost.h: one
// unit's rail schedule counted, this node's copy rates and GPU step cost measured at
// set-up, the CPU's reduction rate from the cost model). Without an estimate (the
// measurement failed) it takes device where sends can go straight from GPU memory,
// else host.
#pragma once

#include <optional>
#include <string>

#include "gpu/rail_cost.h"

namespace gpurdma::gpu {

enum class RailReduce { Host, Device };

struct RailModeInputs {
    std::string requested = "auto";  // coll_gpurdma_rail_reduce: auto, host or device (anything else: auto)
    bool direct_sends = false;  // the network may read this GPU's memory
    std::string direct_why;  // why (not): the GPUDirect RDMA verdict
    std::optional<RailCost> cost;  // auto's estimate of each mode, if there is one
};

struct RailMode {
    RailReduce reduce = RailReduce::Host;
    bool direct_sends = false;  // Device only
    std::string reason;  // one sentence for verbose 1
};

RailMode choose_rail_mode(const RailModeInputs &in);

// "host": the CPU reduces; "device, sends straight from GPU memory"; "device, sends
// staged through page-locked memory".
std::string rail_mode_name(const RailMode &mode);

}  // namespace gpurdma::gpu
