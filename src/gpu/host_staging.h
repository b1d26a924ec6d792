// GPU buffers through host memory, for calls the device path does not take: copy the
// GPU data to host buffers, run the host allreduce on them, copy the result back. The
// host copies are kept between calls, so repeated calls allocate nothing. One call at
// a time (a communicator runs its calls in order).
#pragma once

#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "base/status.h"
#include "gpu/cuda_driver.h"

namespace gpurdma::gpu {

class HostStaging {
public:
    explicit HostStaging(std::string name) : name_(std::move(name)) {}

    // Copies the call's GPU data to the host copies: *host is the same call on them. A
    // failed copy names the direction.
    Status stage_in(const algo::Call &call, algo::Call *host);
    // After the host call: copies its result to the call's receive buffer.
    Status stage_out(const algo::Call &call);

private:
    std::string name_;  // the communicator, for messages
    PointerInfo rinfo_;  // the staged call's receive buffer
    std::vector<char> send_;
    std::vector<char> recv_;
};

}  // namespace gpurdma::gpu
