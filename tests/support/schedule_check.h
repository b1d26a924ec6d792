// Schedules run over real media, checked: for tests that set the media up in forked
// ranks (support/fork_ranks.h) and hand over the router. Every rank calls it with the
// same arguments; it runs ring, hierarchical and recursive-doubling schedules of
// several sizes (one element to many pipelined slots), float SUM and int32 SUM/MAX,
// in place and not, each under the given progress loop, and compares every element
// with a reference computed here (not by the library's reduction kernels).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "exec/progress.h"
#include "support/rank_check.h"
#include "topo/topology.h"
#include "transport/transport.h"

namespace gpurdma::testing {

// chunk_size: the media's landing slot size. hosts[r] names rank r in messages.
void check_schedule_allreduces(const topo::Topology &topology, const std::vector<std::string> &hosts, int rank,
                               size_t chunk_size, transport::PeerTransport &router, const exec::ProgressLoop &loop,
                               RankCheck &check);

}  // namespace gpurdma::testing
