// Ranks without MPI, for tests: N forked processes and a bootstrap allgather over a
// shared anonymous mapping (what gpurdma's core asks of its caller at set-up).
#pragma once

#include <functional>
#include <string>

#include "gpurdma/gpurdma.h"

namespace gpurdma::testing {

struct RankResult {
    int failed = 0;  // ranks that exited non-zero, died on a signal or were killed
    bool timed_out = false;
    std::string detail;  // "rank 1: exit 3; rank 2: signal 9"
};

// Runs body(rank, size, bootstrap) in `size` forked processes; a rank passes when body
// returns 0. A rank that dies makes the others' bootstrap calls fail instead of hang;
// after timeout_s every rank still running is killed. Call it before anything starts
// threads (gtest's own are fine; UCX must not have started in the parent).
RankResult run_ranks(int size, const std::function<int(int rank, int size, gpurdma_bootstrap_t bootstrap)> &body,
                     double timeout_s = 60);

}  // namespace gpurdma::testing
