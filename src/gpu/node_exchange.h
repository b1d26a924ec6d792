// An allgather of set-up records among the ranks of one node only, over the host
// team's shared-memory channels (one landing-slot message to each node peer), under
// the host team's progress loop (bounded by the timeout). The hierarchical device
// path sets its node team up with it instead of the communicator's bootstrap, so that
// only the ranks that pass GPU buffers take part: a node whose ranks pass host
// buffers runs the host path meanwhile, and never joins a collective it knows
// nothing of. Every rank of the node must call it at the same point (the same call).
#pragma once

#include <string>
#include <vector>

#include "algo/host_team.h"
#include "base/status.h"

namespace gpurdma::gpu {

// Largest record (a landing slot holds at least 4096 bytes): longer ones are cut.
constexpr size_t kNodeRecordBytes = 4096;

// *all: one entry per communicator rank; the node's ranks' records, "" elsewhere.
Status node_allgather(algo::HostTeam &team, const std::string &mine, std::vector<std::string> *all);

}  // namespace gpurdma::gpu
