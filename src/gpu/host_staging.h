// GPU buffers through host memory, for calls the device path does not take (between
// nodes: the small messages that take the host latency path, and the calls the host
// path runs flat): copy the GPU data to host buffers, run the host allreduce on them,
// copy the result back. The host copies are page-locked (gpu/pinned_buffer.h), so a
// copy is one DMA rather than the driver's own staging through a bounce buffer, and are
// kept between calls (grown by doubling), so repeated calls allocate nothing. One call
// at a time (a communicator runs its calls in order).
#pragma once

#include <memory>
#include <string>

#include "algo/algorithm.h"
#include "base/status.h"
#include "gpu/cuda_driver.h"
#include "gpu/pinned_buffer.h"

namespace gpurdma::gpu {

class HostStaging {
public:
    explicit HostStaging(std::string name) : name_(std::move(name)) {}

    // Copies the call's GPU data to the host copies: *host is the same call on them. A
    // failed copy names the direction.
    Status stage_in(const algo::Call &call, algo::Call *host);
    // After the host call: copies its result to the call's receive buffer.
    Status stage_out(const algo::Call &call);

    // Whether the host copies are page-locked (false before the first call, or where
    // the driver could not pin them: then the reason is in why_not_pinned()).
    bool pinned() const { return recv_ && recv_->pinned(); }
    const std::string &why_not_pinned() const { return why_; }

private:
    // *buffer holds at least `bytes` (a new one at least twice the old size).
    void reserve(std::unique_ptr<PinnedBuffer> *buffer, size_t bytes, CUcontext ctx);

    std::string name_;  // the communicator, for messages
    std::string why_;  // why the last host copy allocated is not page-locked ("" if it is)
    PointerInfo rinfo_;  // the staged call's receive buffer
    std::unique_ptr<PinnedBuffer> send_;
    std::unique_ptr<PinnedBuffer> recv_;
};

}  // namespace gpurdma::gpu
