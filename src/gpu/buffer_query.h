// What the driver says about a call's buffers, asked once per call on the latency
// path: the dispatcher asks touches_device_memory() as each call arrives, and the path
// that then takes the call (the one-node or hierarchical device path, or staging
// through host memory) reads the same answers with buffer_info() instead of asking
// again (cuPointerGetAttributes costs about a microsecond per buffer).
#pragma once

#include "algo/algorithm.h"
#include "gpu/cuda_driver.h"

namespace gpurdma::gpu {

// True if the call's send or receive buffer is GPU device memory (CUDA driver loaded at
// run time). Records the answers for this thread's next buffer_info() on this call.
bool touches_device_memory(const algo::Call &call);

// The call's buffers: the answers recorded by this thread's last touches_device_memory()
// when that was about the same two addresses, else the driver's. Every call reaches
// touches_device_memory() when it arrives, so a recorded answer is about this call or an
// earlier one still pending on the same addresses (the same memory: a pending or
// persistent call's buffers may not be freed); a later call on reused addresses
// records again before anything reads its answers.
void buffer_info(const algo::Call &call, PointerInfo *sinfo, PointerInfo *rinfo);

}  // namespace gpurdma::gpu
