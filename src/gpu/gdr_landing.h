// Whether arrivals from other nodes land straight in this rank's GPU memory (the
// receive half of GPUDirect RDMA: the NIC writes the GPU's memory, the GPU reduces
// there), as a pure function of what was found, so every branch is unit-tested here.
// The rank then offers GPU memory to its rail peers (gpu/gpu_landing.h); a peer's
// message for it lands there when the peer's GPU reads too, and in the host slot
// otherwise, so the choice is this rank's alone. The GPU must see those writes before
// a kernel reads them: some GPUs order them for their own context, others need
// cuFlushGPUDirectRDMAWrites after the flag arrived; a GPU with neither gets none.
#pragma once

#include <string>

namespace gpurdma::gpu {

struct GdrLandingInputs {
    bool allowed = true;  // coll_gpurdma_gdr_recv
    bool rail_on_gpu = false;  // this rank's GPU reads its arrivals (its rail reduces there)
    bool net_channels = false;  // UCX channels to other nodes exist
    bool gdr_eligible = false;  // the GPUDirect RDMA verdict (gdr_decision.h)
    std::string gdr_why;
    bool stand_in_host_memory = false;  // the stand-in driver's "device memory" is host memory
    int writes_ordering = -1;  // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, -1: unknown
    int flush_options = -1;  // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, -1: unknown
    bool flush_entry = false;  // the driver has cuFlushGPUDirectRDMAWrites
};

struct GdrLanding {
    bool offer = false;  // arrivals may land in GPU memory
    bool flush = false;  // flush GPUDirect writes before a kernel or copy reads them
    bool register_as_host = false;  // UCX registers it as host memory (the stand-in's)
    std::string reason;  // one sentence for verbose 1
};

GdrLanding decide_gdr_landing(const GdrLandingInputs &in);

}  // namespace gpurdma::gpu
