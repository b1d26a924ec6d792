// This node's copy rates between page-locked host memory and GPU memory, and the
// fixed cost of one piece of GPU work as the rail's executor sees it (queued on a
// stream, then seen done by polling its event), measured once at the device set-up
// for auto's choice of where the rail reduces (gpu/rail_cost.h). Best of a few tries
// each, on a stream of its own, so other work on the GPU only makes the rates lower.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "gpu/cuda_driver.h"

namespace gpurdma::gpu {

struct CopyRates {
    double d2h_gbps = 0;  // GB/s
    double h2d_gbps = 0;
    double step_us = 0;  // a 64-byte copy, queued to seen done
};

// Times copies each way of kRateBytes, or of `bytes` if more (so that the rate, not
// the fixed cost of a step, dominates their time; copies too slow for the set-up's
// budget are timed again smaller, down to `bytes`); fails (naming the call) where the
// driver cannot, or where a copy has not finished within timeout_s.
Status measure_copy_rates(CUcontext ctx, size_t bytes, double timeout_s, CopyRates *out);

constexpr size_t kRateBytes = 4 << 20;

// GB/s of a copy of `bytes` that took copy_us, a step's fixed cost (step_us) taken off
// but never more than half the copy: two noisy times (a rank descheduled while its
// step was timed) then err by at most 2x, towards the slower, rather than give an
// absurd rate. At most 1000 GB/s.
double copy_gbps(size_t bytes, double copy_us, double step_us);

}  // namespace gpurdma::gpu
