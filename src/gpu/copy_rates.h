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

// Times copies of `bytes` each way; fails (naming the call) where the driver cannot,
// or where a copy has not finished within timeout_s.
Status measure_copy_rates(CUcontext ctx, size_t bytes, double timeout_s, CopyRates *out);

}  // namespace gpurdma::gpu
