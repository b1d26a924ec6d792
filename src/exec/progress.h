// The one wait loop every algorithm runs under (host schedules, the node allreduce,
// the device allreduce): advance the task, drive the network, spin while the peer is
// likely running and yield when it is not, and fail with a message naming the stage,
// the peer and this rank's host once nothing has moved for the timeout.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "exec/task.h"

namespace gpurdma::exec {

struct WaitPolicy {
    // This host's ranks cannot each keep a CPU (topo/placement.h): yield at once when idle.
    bool yield_when_idle = false;
    // An idle wait longer than this yields the core for the rest of it; negative: spin.
    double spin_us = 20.0;
    // Longest time without any movement before the call fails.
    double timeout_s = 60.0;
};

// Who is waiting, for messages: "<name>: allreduce timed out after 60 s in <stage and
// peer> (this is rank <rank> on host <host>)".
struct WaitSite {
    std::string name;  // the communicator, e.g. "MPI_COMM_WORLD (cid 0)"
    int rank = 0;
    std::string host;
};

class ProgressLoop {
public:
    // poll_network drives the network once and returns how many events it handled
    // (UCX progress); empty when the call uses no network.
    ProgressLoop(WaitPolicy policy, WaitSite site, std::function<unsigned()> poll_network = {});

    // Runs task until Done (ok), Declined (unsupported), Failed (GPURDMA_ERR_TRANSPORT,
    // "<name>: " + describe_failure()) or the timeout (GPURDMA_ERR_TIMEOUT).
    Status run(Task &task) const;

    const WaitPolicy &policy() const { return policy_; }

private:
    WaitPolicy policy_;
    WaitSite site_;
    std::function<unsigned()> poll_network_;
};

}  // namespace gpurdma::exec
