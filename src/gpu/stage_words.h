// The node-shared stage words of the device paths (ControlSlot): the scan both the
// one-node device allreduce and the hierarchical device path poll, without waiting,
// until every node peer has reached a call's stage or one has announced its failure.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "gpu/device_team.h"

namespace gpurdma::gpu {

enum class StageScan { Reached, Waiting, PeerFailed };

// Scans `members` (in order, this rank skipped) from *next, where the previous scan of
// this stage stopped, counting each peer passed into *position (progress for the
// timeout). PeerFailed: *next is the index of the member that or-ed kFail into its word
// for call `seq`.
inline StageScan scan_stage_words(const DeviceTeam &team, const std::vector<int> &members, int self,
                                  std::atomic<uint64_t> ControlSlot::*word, uint64_t seq, int *next, uint64_t *position)
{
    for (; size_t(*next) < members.size(); ++*next, ++*position) {
        const int peer = members[size_t(*next)];
        if (peer == self) continue;
        const uint64_t v = (team.slot(peer).*word).load(std::memory_order_acquire);
        if (v == (seq | ControlSlot::kFail)) return StageScan::PeerFailed;
        if ((v & ~ControlSlot::kFail) < seq) return StageScan::Waiting;
    }
    return StageScan::Reached;
}

}  // namespace gpurdma::gpu
