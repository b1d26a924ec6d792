#include "gpu/gdr_landing.h"

#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

GdrLanding decide_gdr_landing(const GdrLandingInputs &in)
{
    GdrLanding l;
    if (!in.allowed) {
        l.reason = "arrivals land in host memory: coll_gpurdma_gdr_recv 0";
        return l;
    }
    if (!in.rail_on_gpu) {
        l.reason = "arrivals land in host memory: the CPU reduces them";
        return l;
    }
    if (!in.net_channels) {
        l.reason = "arrivals land in host memory: no UCX channels to other nodes";
        return l;
    }
    if (!in.gdr_eligible && !in.stand_in_host_memory) {
        l.reason = "arrivals land in host memory: GPUDirect RDMA not eligible (" + in.gdr_why + ")";
        return l;
    }
    l.register_as_host = in.stand_in_host_memory;
    const std::string what = in.stand_in_host_memory ? "the stand-in driver's device memory is host memory"
                                                     : "GPUDirect RDMA eligible (" + in.gdr_why + ")";
    if (in.writes_ordering >= kGdrWritesOrderingOwner) {
        l.offer = true;
        l.reason = "arrivals land in GPU memory: " + what + "; the GPU orders GPUDirect RDMA writes for itself";
        return l;
    }
    if (in.flush_options >= 0 && (in.flush_options & kGdrFlushOptionHost) && in.flush_entry) {
        l.offer = l.flush = true;
        l.reason = "arrivals land in GPU memory: " + what +
                   "; GPUDirect RDMA writes flushed (cuFlushGPUDirectRDMAWrites) before the GPU reads them";
        return l;
    }
    l.reason = "arrivals land in host memory: " + what +
               ", but the GPU neither orders GPUDirect RDMA writes nor can flush them (writes ordering " +
               std::to_string(in.writes_ordering) + ", flush options " + std::to_string(in.flush_options) +
               (in.flush_entry ? "" : ", no cuFlushGPUDirectRDMAWrites") + ")";
    return l;
}

}  // namespace gpurdma::gpu
