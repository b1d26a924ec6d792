// This node's copy rates between page-locked host memory and GPU memory, and the
// fixed cost of one piece of GPU work, for auto's choice of where the rail reduces
// (gpu/rail_cost.h). Measured once per process and device at the device set-up, as
// steps that never wait (gpu/copy_rate_probe.h); here what they give and how a rate
// is read from two times.
#pragma once

#include <cstddef>

namespace gpurdma::gpu {

struct CopyRates {
    double d2h_gbps = 0;  // GB/s
    double h2d_gbps = 0;
    // One piece of GPU work as the rail's executor pays for it: the host's time to queue
    // a 64-byte copy between two event records (CPU time in the driver's calls, which
    // return without waiting) plus the GPU's own time for that copy (the events' elapsed
    // time); best of several tries. The executor's polling until it sees the work done
    // is the progress loop's cost, not the GPU's, and is not in it.
    double step_us = 0;
};

// Copies are timed at this size, or at the caller's unit if larger, so that the rate,
// not a copy's fixed cost, dominates their time.
constexpr size_t kRateBytes = 4 << 20;

// GB/s of a copy of `bytes` that took copy_us, a step's fixed cost (step_us) taken off
// but never more than half the copy: two noisy times (a rank descheduled while its
// step was timed) then err by at most 2x, towards the slower, rather than give an
// absurd rate. At most 1000 GB/s.
double copy_gbps(size_t bytes, double copy_us, double step_us);

}  // namespace gpurdma::gpu
