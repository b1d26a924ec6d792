// What one rank does on its GPU in a one-node device collective, once every rank of
// the node has posted its buffers (CUDA IPC) and mapped its peers': the kernels that
// reduce straight out of the peers' buffers, then the copy-engine copies out of them.
// A pure function of the call, the ranks and the mapped addresses, so that the unit
// tests check every collective's layout without a GPU:
//   Allreduce      reduce this rank's slice of every source into its own result;
//                  wait for every rank's slice; copy the other slices out of their
//                  owners' results;
//   ReduceScatter  reduce this rank's part of every source into its result (in place,
//                  where its part is not at the front: into scratch memory of this
//                  rank, then, once no peer reads the front of its buffer any more,
//                  copied there; the rest of the buffer stays as it was);
//   Allgather      copy every rank's block out of its buffer;
//   Bcast          copy the root's buffer (nothing at the root);
//   Reduce         reduce this rank's slice of every source into the root's result.
// Every rank then waits until no peer reads or writes its buffers any more.
#pragma once

#include <cstddef>
#include <vector>

#include "algo/algorithm.h"

namespace gpurdma::algo {

// Which of a rank's two buffers a call touches: its own use (each must be GPU memory
// of the team's context), and what its node peers read or write (posted as IPC handles).
struct BufferSides {
    bool src = false;  // the input (in place: the receive buffer)
    bool dst = false;  // the receive buffer
};
BufferSides used_sides(const Call &call, int rank);
BufferSides shared_sides(const Call &call, int rank);

// The GPU scratch bytes this rank's work needs (in-place reduce-scatter off the front).
size_t device_node_scratch(const Call &call, int rank);

struct DeviceReduction {
    char *dst = nullptr;
    std::vector<const void *> srcs;  // one per rank, in rank order
    size_t count = 0;  // elements
};

struct DeviceCopy {
    char *dst = nullptr;
    const char *src = nullptr;
    size_t bytes = 0;
};

struct DeviceNodeWork {
    std::vector<DeviceReduction> reductions;  // first, by kernel
    // Every rank's reductions before any rank's copies (they read or overwrite what
    // the reductions wrote or read).
    bool barrier = false;
    std::vector<DeviceCopy> copies;  // then, by copy engine
};

// The slice of `count` elements rank r reduces (allreduce, reduce): equal slices
// starting on 64-byte multiples, so that the kernel's vector loads apply; the last
// ones may be short or empty. Returns [lo, hi).
void device_slice(size_t count, size_t elem, int size, int r, size_t *lo, size_t *hi);

// This rank's work. srcs and dsts: every rank's input and receive buffer in this
// process (in place: the input is the receive buffer), nullptr where not shared;
// scratch: device_node_scratch's bytes of this rank's GPU memory.
DeviceNodeWork device_node_work(const Call &call, int size, int rank, const std::vector<const char *> &srcs,
                                const std::vector<char *> &dsts, char *scratch);

}  // namespace gpurdma::algo
