// GPU memory this rank offers its rail peers for arrivals from other nodes (see
// gpu/gdr_landing.h for when): allocated in the team's context with the layout of the
// UCX channels' data slots, registered with UCX and its key sent to each peer
// (UcxChannels::offer_landing). A CPU reader of a message that landed there (the odd
// call whose ranks pass different buffers) gets a synchronous copy. The destructor
// withdraws the offer (the offers' sends finish first, under the wait loop, bounded),
// then frees the memory: only with no call in flight.
#pragma once

#include <memory>

#include "base/noncopyable.h"
#include "base/status.h"
#include "exec/progress.h"
#include "gpu/device_memory.h"
#include "gpu/gpu_runtime.h"
#include "transport/transport.h"
#include "transport/ucx_channels.h"

namespace gpurdma::gpu {

class GpuLanding : private NonCopyable {
public:
    // register_as_host: UCX registers it as host memory (the stand-in driver's).
    // waits: the host's wait policy, for the withdrawal's wait.
    static Status create(CUcontext ctx, transport::UcxChannels &channels, bool register_as_host,
                         const exec::WaitPolicy &waits, std::unique_ptr<GpuLanding> *out);
    ~GpuLanding();

    transport::MemoryRange range() const { return channels_.offered(); }

    static constexpr double kWithdrawBound = 1.0;  // seconds for the offers' sends to finish

private:
    GpuLanding(transport::UcxChannels &channels, const exec::WaitPolicy &waits) : channels_(channels), waits_(waits) {}
    void withdraw();

    transport::UcxChannels &channels_;
    exec::WaitPolicy waits_;
    std::unique_ptr<DeviceMemory> memory_;
    bool offered_ = false;
};

}  // namespace gpurdma::gpu
