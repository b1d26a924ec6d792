// Releasing channels is a wait like any other: a task under the one wait loop
// (exec/progress.h), the teardown's bound its timeout. Until peers have consumed all
// we sent they write credits into our regions, and until our UCX requests finish they
// read our words (a put, the caller's buffer too): both must be done before that
// memory goes. A timeout fails nothing: the owner logs it and releases anyway (a
// request still running is then cancelled).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/progress.h"
#include "exec/task.h"
#include "transport/slot_channels.h"
#include "transport/ucx_channels.h"

namespace gpurdma::exec {

// The calls' wait policy for a teardown: bound_s as the timeout, and no caller
// progress (a teardown runs inside MPI's own release of a communicator, or finalize).
WaitPolicy teardown_policy(WaitPolicy calls, double bound_s);

// A communicator's channels drained (SlotChannels::drained): the node's and the
// network's, either may be null. hosts names the peers in describe_wait().
class ChannelsRelease final : public Task {
public:
    ChannelsRelease(transport::SlotChannels *node, transport::UcxChannels *net, std::vector<std::string> hosts);
    State advance() override;
    uint64_t position() const override { return moves_; }
    // "peers' return of landing slots (rank 3 on host b); 2 UCX requests (sends, flushes)"
    std::string describe_wait() const override;
    std::string describe_failure() const override { return describe_wait(); }

private:
    uint64_t outstanding() const;

    transport::SlotChannels *node_;
    transport::UcxChannels *net_;
    std::vector<std::string> hosts_;
    uint64_t last_outstanding_ = 0;
    uint64_t moves_ = 0;  // changes of outstanding(): the loop's idle clock restarts
};

// The UCX channels' own requests finished (UcxChannels::requests_finished): before
// memory they read goes, such as the key of GPU memory offered for arrivals.
class UcxRequestsFinished final : public Task {
public:
    explicit UcxRequestsFinished(transport::UcxChannels &channels) : channels_(channels) {}
    State advance() override;
    uint64_t position() const override { return moves_; }
    std::string describe_wait() const override;
    std::string describe_failure() const override { return describe_wait(); }

private:
    transport::UcxChannels &channels_;
    size_t last_outstanding_ = 0;
    uint64_t moves_ = 0;
};

// Runs task under a loop of the calls' policy with bound_s as its timeout. False: the
// bound passed first (the task's describe_wait() says what was still outstanding).
bool run_teardown(Task &task, const WaitPolicy &calls, double bound_s, const WaitSite &site);

}  // namespace gpurdma::exec
