// The device paths' node protocol for one call, written once for the one-node device
// allreduce and the hierarchical path: each rank posts its call's buffers in its
// ControlSlot (CUDA IPC handles, offsets) with its vote (whether it can share them),
// then, once every node peer has posted (gpu/stage_words.h), reads the votes (any no:
// the node stages the call, every rank alike) and maps the peers' buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "algo/algorithm.h"
#include "algo/device_node_work.h"
#include "base/status.h"
#include "gpu/device_team.h"
#include "gpu/gpu_runtime.h"

namespace gpurdma::algo {

// Posts this rank's buffers for call `seq`, the sides its peers read or write
// (algo/device_node_work.h). local_ok: the buffers it uses are device memory of the
// team's context; the vote is no otherwise, or where an IPC handle cannot be made.
void post_buffers(gpu::DeviceTeam &team, int rank, uint64_t seq, const Call &call, const gpu::PointerInfo &src,
                  const gpu::PointerInfo &dst, bool local_ok, BufferSides shared = {true, true});

// The first of `members` that voted no for the posted call, or -1.
int refusing_member(const gpu::DeviceTeam &team, const std::vector<int> &members);

// Every member's source and result in this process, in member order (this rank's own,
// the peers' through the IPC cache; nullptr for a side a peer did not post). An error
// names the peer.
Status map_member_buffers(gpu::DeviceTeam &team, const std::vector<int> &members, int rank, const Call &call,
                          std::vector<const char *> *srcs, std::vector<char *> *dsts);

}  // namespace gpurdma::algo
