// The cost model's links measured at set-up (coll_gpurdma_calibrate): ping-pong
// between rank 0 and a rank on another node, and one on its own node, plus a timed
// reduction; every rank then takes rank 0's numbers, so the plan stays the same on
// every rank.
#pragma once

#include "algo/host_team.h"
#include "base/status.h"

namespace gpurdma::algo {

// Every rank calls it once the team is connected (several nodes). Not ok: the same
// verdict on every rank ("cost-model calibration failed on rank 3 on host b").
Status calibrate(HostTeam &team);

}  // namespace gpurdma::algo
