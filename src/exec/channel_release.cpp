#include "exec/channel_release.h"

#include <utility>

#include "base/text.h"

namespace gpurdma::exec {

WaitPolicy teardown_policy(WaitPolicy calls, double bound_s)
{
    calls.timeout_s = bound_s;
    calls.outside_progress = nullptr;
    return calls;
}

bool run_teardown(Task &task, const WaitPolicy &calls, double bound_s, const WaitSite &site)
{
    // No network poll of the loop's own: the tasks drive UCX themselves, and a worker
    // kept busy by others' traffic must not hold the teardown past its bound.
    return ProgressLoop(teardown_policy(calls, bound_s), site).run(task).is_ok();
}

ChannelsRelease::ChannelsRelease(transport::SlotChannels *node, transport::UcxChannels *net,
                                 std::vector<std::string> hosts)
    : node_(node), net_(net), hosts_(std::move(hosts))
{
    last_outstanding_ = outstanding();
}

uint64_t ChannelsRelease::outstanding() const
{
    uint64_t n = 0;
    if (node_) n += node_->slots_held();
    if (net_) n += net_->slots_held() + net_->requests_outstanding();
    return n;
}

State ChannelsRelease::advance()
{
    const bool node_done = !node_ || node_->drained();
    const bool net_done = !net_ || net_->drained();
    const uint64_t now = outstanding();
    if (now != last_outstanding_) {
        last_outstanding_ = now;
        ++moves_;
    }
    return node_done && net_done ? State::Done : State::Running;
}

std::string ChannelsRelease::describe_wait() const
{
    std::string peers;
    for (transport::SlotChannels *c : {node_, static_cast<transport::SlotChannels *>(net_)}) {
        if (!c) continue;
        for (int r : c->peers_holding_slots()) peers += (peers.empty() ? "" : ", ") + describe_rank(r, hosts_);
    }
    std::string text;
    if (!peers.empty()) text = "peers' return of landing slots (" + peers + ")";
    const size_t requests = net_ ? net_->requests_outstanding() : 0;
    if (requests > 0)
        text += (text.empty() ? "" : "; ") + std::to_string(requests) + " UCX requests (sends, flushes) to finish";
    return text.empty() ? "the channels' release" : text;
}

State UcxRequestsFinished::advance()
{
    const bool done = channels_.requests_finished();
    const size_t now = channels_.requests_outstanding();
    if (now != last_outstanding_) {
        last_outstanding_ = now;
        ++moves_;
    }
    return done ? State::Done : State::Running;
}

std::string UcxRequestsFinished::describe_wait() const
{
    return std::to_string(channels_.requests_outstanding()) + " UCX requests (sends, flushes) to finish";
}

}  // namespace gpurdma::exec
