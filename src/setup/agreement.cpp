#include "setup/agreement.h"

#include <algorithm>

#include "base/text.h"
#include "setup/wire.h"

namespace gpurdma::setup {

Agreement::Agreement(gpurdma_bootstrap_t bootstrap, int rank, int size)
    : bootstrap_(bootstrap), rank_(rank), size_(size)
{}

Status Agreement::exchange(const std::string &mine, std::vector<std::string> *all)
{
    const Status failed = Status::error(GPURDMA_ERR_TRANSPORT, "set-up exchange failed");
    if (size_ == 1) {  // nothing to exchange, and no MPI call (a set-up may run from progress)
        all->assign(1, mine);
        return Status::ok();
    }
    // Records differ in size: agree on the largest first, then gather padded copies.
    const uint64_t my_len = mine.size();
    std::vector<uint64_t> lens(static_cast<size_t>(size_));
    if (bootstrap_.allgather(&my_len, lens.data(), sizeof my_len, bootstrap_.arg) != 0) return failed;
    const uint64_t max_len = *std::max_element(lens.begin(), lens.end());
    std::string padded = mine;
    padded.resize(max_len, '\0');
    std::string gathered(max_len * static_cast<size_t>(size_), '\0');
    if (max_len > 0 && bootstrap_.allgather(padded.data(), gathered.data(), max_len, bootstrap_.arg) != 0)
        return failed;
    all->resize(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
        const size_t at = static_cast<size_t>(r) * max_len;
        (*all)[static_cast<size_t>(r)] = gathered.substr(at, std::min<uint64_t>(lens[static_cast<size_t>(r)], max_len));
    }
    return Status::ok();
}

Status Agreement::vote(const Status &mine, const std::vector<std::string> &hosts)
{
    // A vote is a record: 1 or 0, then the reason (the message of a refusal).
    wire::Writer w;
    w.u32(mine.is_ok() ? 1 : 0);
    w.str(mine.is_ok() ? std::string() : mine.message());
    std::vector<std::string> votes;
    const Status exchanged = exchange(w.take(), &votes);
    if (!exchanged.is_ok()) return exchanged;
    for (int r = 0; r < size_; ++r) {
        wire::Reader rd(votes[static_cast<size_t>(r)]);
        uint32_t yes = 0;
        std::string why;
        if (!rd.u32(&yes) || !rd.str(&why))
            return Status::unsupported(describe_rank(r, hosts) + " sent an unreadable set-up vote");
        if (!yes)
            return Status::unsupported(describe_rank(r, hosts) + (why.empty() ? " could not set up" : ": " + why));
    }
    return Status::ok();
}

}  // namespace gpurdma::setup
