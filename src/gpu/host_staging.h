// GPU buffers through host memory, for calls the device path does not take: copy the
// GPU data to host buffers, run the host allreduce on them, copy the result back. The
// host copies are kept between calls, so repeated calls allocate nothing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "base/status.h"

namespace gpurdma::gpu {

class HostStaging {
public:
    explicit HostStaging(std::string name) : name_(std::move(name)) {}

    // host_allreduce runs the same call on host buffers (the communicator's host path);
    // its status is returned as it is. A failed copy names the direction.
    Status run(const algo::Call &call, const std::function<Status(const algo::Call &host_call)> &host_allreduce);

private:
    std::string name_;  // the communicator, for messages
    std::vector<char> send_;
    std::vector<char> recv_;
};

}  // namespace gpurdma::gpu
