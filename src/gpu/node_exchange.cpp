#include "gpu/node_exchange.h"

#include <cstdint>
#include <cstring>

#include "base/text.h"
#include "exec/task.h"

namespace gpurdma::gpu {

namespace {

// Each record travels as a fixed-size message: 4 bytes of length, then the bytes.
class NodeAllgather : public exec::Task {
public:
    NodeAllgather(algo::HostTeam &team, const std::string &mine, std::vector<std::string> *all)
        : team_(team), all_(*all), message_(kNodeRecordBytes, 0)
    {
        const uint32_t n = static_cast<uint32_t>(std::min(mine.size(), kNodeRecordBytes - sizeof(uint32_t)));
        std::memcpy(message_.data(), &n, sizeof n);
        std::memcpy(message_.data() + sizeof n, mine.data(), n);
        all_.assign(static_cast<size_t>(team.size()), std::string());
        all_[static_cast<size_t>(team.rank())] = mine.substr(0, n);
        for (int r : team.node_members())
            if (r != team.rank()) peers_.push_back(r);
        sent_.assign(peers_.size(), false);
        got_.assign(peers_.size(), false);
    }

    exec::State advance() override
    {
        transport::PeerTransport &router = team_.router();
        for (size_t i = 0; i < peers_.size(); ++i) {
            if (!sent_[i]) {
                const transport::Poll p = router.try_send(peers_[i], message_.data(), message_.size());
                if (p == transport::Poll::Failed) return fail(peers_[i], router.error());
                if (p == transport::Poll::Done) sent_[i] = true, ++position_;
            }
            if (!got_[i]) {
                const auto *p = static_cast<const char *>(router.try_receive(peers_[i], message_.size()));
                if (p) {
                    uint32_t n = 0;
                    std::memcpy(&n, p, sizeof n);
                    n = static_cast<uint32_t>(std::min<size_t>(n, kNodeRecordBytes - sizeof n));
                    all_[static_cast<size_t>(peers_[i])].assign(p + sizeof n, n);
                    router.release(peers_[i]);
                    got_[i] = true;
                    ++position_;
                }
            }
        }
        if (router.failed()) return fail(-1, router.error());
        for (size_t i = 0; i < peers_.size(); ++i)
            if (!sent_[i] || !got_[i]) {
                waiting_ = peers_[i];
                return exec::State::Running;
            }
        return router.sends_pending() ? exec::State::Running : exec::State::Done;
    }
    uint64_t position() const override { return position_; }
    std::string describe_wait() const override
    {
        return "device set-up within the node, waiting for " + describe_rank(waiting_, team_.hosts());
    }
    std::string describe_failure() const override { return failure_; }

private:
    exec::State fail(int peer, const std::string &why)
    {
        failure_ = "device set-up within the node failed with " + describe_rank(peer, team_.hosts()) + ": " + why;
        return exec::State::Failed;
    }

    algo::HostTeam &team_;
    std::vector<std::string> &all_;
    std::string message_;
    std::vector<int> peers_;
    std::vector<bool> sent_, got_;
    uint64_t position_ = 0;
    int waiting_ = -1;
    std::string failure_;
};

}  // namespace

Status node_allgather(algo::HostTeam &team, const std::string &mine, std::vector<std::string> *all)
{
    NodeAllgather task(team, mine, all);
    return team.loop().run(task);
}

}  // namespace gpurdma::gpu
