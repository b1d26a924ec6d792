#include "setup/agreement.h"

#include <algorithm>
#include <cstring>

#include "base/text.h"

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
    // One allgather of blocks that carry each record's length and, if it fits, the record:
    // a set-up record does (one round where a length round and a data round took two).
    // Should any not fit, every rank sees which from the lengths, and they gather padded
    // copies of all in a second round.
    const size_t n = static_cast<size_t>(size_);
    std::string block(kBlockBytes, '\0');
    const uint64_t my_len = mine.size();
    std::memcpy(&block[0], &my_len, sizeof my_len);
    if (my_len <= kInlineBytes) std::memcpy(&block[sizeof my_len], mine.data(), mine.size());
    std::string blocks(kBlockBytes * n, '\0');
    if (bootstrap_.allgather(block.data(), blocks.data(), kBlockBytes, bootstrap_.arg) != 0) return failed;
    std::vector<uint64_t> lens(n);
    for (size_t r = 0; r < n; ++r) std::memcpy(&lens[r], &blocks[r * kBlockBytes], sizeof lens[r]);
    const uint64_t max_len = *std::max_element(lens.begin(), lens.end());
    all->resize(n);
    if (max_len <= kInlineBytes) {
        for (size_t r = 0; r < n; ++r) (*all)[r] = blocks.substr(r * kBlockBytes + sizeof(uint64_t), lens[r]);
        return Status::ok();
    }
    std::string padded = mine;
    padded.resize(max_len, '\0');
    std::string gathered(max_len * n, '\0');
    if (bootstrap_.allgather(padded.data(), gathered.data(), max_len, bootstrap_.arg) != 0) return failed;
    for (size_t r = 0; r < n; ++r) (*all)[r] = gathered.substr(r * max_len, lens[r]);
    return Status::ok();
}

Status Agreement::vote(const Status &mine, const std::vector<std::string> &hosts)
{
    // Yes or no from everyone in one small round; only a refusal costs a second one,
    // which carries each rank's reason.
    const uint32_t yes = mine.is_ok() ? 1 : 0;
    if (size_ > 1) {
        std::vector<uint32_t> votes(static_cast<size_t>(size_));
        if (bootstrap_.allgather(&yes, votes.data(), sizeof yes, bootstrap_.arg) != 0)
            return Status::error(GPURDMA_ERR_TRANSPORT, "set-up exchange failed");
        if (std::all_of(votes.begin(), votes.end(), [](uint32_t v) { return v == 1; })) return Status::ok();
    } else if (yes) {
        return Status::ok();
    }
    // A refusing rank's record: a mark, then its reason; an agreeing rank's: nothing.
    std::vector<std::string> reasons;
    const Status exchanged = exchange(mine.is_ok() ? std::string() : "!" + mine.message(), &reasons);
    if (!exchanged.is_ok()) return exchanged;
    for (int r = 0; r < size_; ++r) {
        const std::string &record = reasons[static_cast<size_t>(r)];
        if (record.empty()) continue;
        const std::string why = record.substr(1);
        return Status::unsupported(describe_rank(r, hosts) + (why.empty() ? " could not set up" : ": " + why));
    }
    // Every yes in the second round after a no in the first: a bootstrap that lost a vote.
    return Status::unsupported("the set-up votes disagree between rounds");
}

}  // namespace gpurdma::setup
