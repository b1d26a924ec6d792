// GPU memory this rank offers its rail peers for arrivals from other nodes (see
// gpu/gdr_landing.h for when): allocated in the team's context with the layout of the
// UCX channels' data slots, registered with UCX and its key sent to each peer
// (UcxChannels::offer_landing). A CPU reader of a message that landed there (the odd
// call whose ranks pass different buffers) gets a synchronous copy. The destructor
// withdraws the offer, then frees the memory: only with no call in flight.
#pragma once

#include <memory>

#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/cuda_driver.h"
#include "gpu/device_memory.h"
#include "transport/transport.h"
#include "transport/ucx_channels.h"

namespace gpurdma::gpu {

class GpuLanding : private NonCopyable {
public:
    // register_as_host: UCX registers it as host memory (the stand-in driver's).
    static Status create(CUcontext ctx, transport::UcxChannels &channels, bool register_as_host,
                         std::unique_ptr<GpuLanding> *out);
    ~GpuLanding();

    transport::MemoryRange range() const { return channels_.offered(); }

private:
    explicit GpuLanding(transport::UcxChannels &channels) : channels_(channels) {}

    transport::UcxChannels &channels_;
    std::unique_ptr<DeviceMemory> memory_;
    bool offered_ = false;
};

}  // namespace gpurdma::gpu
