// The state behind gpurdma_comm_t: the communicator's dispatch. A call is checked,
// its memory kind found (GPU buffers go to the device path, or through host staging),
// then the host team is set up on first use, the selector names the algorithm, and
// the algorithm runs under the host team's progress loop. Nothing here knows an
// algorithm's insides.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "base/status.h"
#include "core/context.h"
#include "exec/progress.h"
#include "gpu/device_allreduce.h"
#include "gpu/host_staging.h"
#include "gpurdma/gpurdma.h"

namespace gpurdma::algo {
class HostTeam;
class Selector;
}  // namespace gpurdma::algo

struct gpurdma_comm {
    gpurdma_comm(gpurdma_context *context, const gpurdma_comm_params_t &params);
    ~gpurdma_comm();

    gpurdma_status_t allreduce(const void *sendbuf, void *recvbuf, size_t count, gpurdma_dtype_t dtype,
                               gpurdma_op_t op);

    gpurdma_context *context;
    int rank;
    int size;
    gpurdma_bootstrap_t bootstrap;
    std::string name;
    std::string last_error;
    gpurdma_comm_stats_t stats{};

private:
    // Host buffers, more than one rank: the host team, the selector's algorithm, the loop.
    gpurdma::Status host_allreduce(const gpurdma::algo::Call &call);
    // The host team on first use; unsupported (now and for every later call) if it declined.
    gpurdma::Status ensure_host_team();
    // The communicator breaks: every later call answers GPURDMA_ERR_BROKEN.
    gpurdma_status_t fail(gpurdma_status_t status, const std::string &message);
    // Adds n to a counter of this communicator and to the process totals.
    void tally(uint64_t gpurdma_comm_stats_t::*field, uint64_t n = 1);

    bool declined_ = false;
    bool broken_ = false;
    std::unique_ptr<gpurdma::algo::HostTeam> team_;
    std::unique_ptr<gpurdma::algo::Selector> selector_;  // released before the team it uses
    // GPU buffers: the device allreduce, or host staging where it declines (the same on every rank).
    gpurdma_status_t device_allreduce(const gpurdma::algo::Call &call);
    // The device path's wait loop, made once (and again once the host team has decided the host's policy).
    const gpurdma::exec::ProgressLoop &device_loop();
    std::optional<gpurdma::exec::ProgressLoop> device_loop_;
    bool device_loop_from_team_ = false;
    gpurdma::gpu::HostStaging staging_;  // host copies of GPU buffers, kept between calls
    std::unique_ptr<gpurdma::gpu::DeviceAllreduce> device_;  // last: released first
};
