// The one set-up agreement every path uses: set-up records exchanged over the
// caller's bootstrap (an allgather of equal sizes, used only at set-up), and a vote
// that carries each refusing rank's reason, so that every rank reaches the same
// verdict and names the same rank and cause.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpurdma/gpurdma.h"

namespace gpurdma::setup {

class Agreement {
public:
    Agreement(gpurdma_bootstrap_t bootstrap, int rank, int size);

    int rank() const { return rank_; }
    int size() const { return size_; }

    // Every rank's record in rank order; records may differ in length (wire.h builds them).
    // Fails (GPURDMA_ERR_TRANSPORT, "set-up exchange failed") if the bootstrap does.
    Status exchange(const std::string &mine, std::vector<std::string> *all);

    // Each rank says whether it can go on (ok) or why not. Every rank returns the same:
    // ok if all can, else unsupported with the lowest refusing rank's message, named
    // through `hosts` when given ("rank 3 on host b: <why>").
    Status vote(const Status &mine, const std::vector<std::string> &hosts = {});

    // An exchange's first round: each rank's record length and, up to kInlineBytes, the
    // record itself (set-up records fit; longer ones take a second round).
    static constexpr size_t kBlockBytes = 512;
    static constexpr size_t kInlineBytes = kBlockBytes - sizeof(uint64_t);

private:
    gpurdma_bootstrap_t bootstrap_;
    int rank_;
    int size_;
};

}  // namespace gpurdma::setup
