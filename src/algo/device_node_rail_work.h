// What one rank does in a reduce-scatter, allgather, bcast or reduce on GPU buffers
// across nodes (algo/device_node_rail.h): the stage within its node on the GPUs, over
// CUDA IPC, and the rail between nodes run by the host schedule's rail part
// (plan::build_collective_rail) on page-locked buffers. A pure function of the call,
// the topology and the mapped addresses, so that the unit tests run every layout on
// host memory without a GPU:
//   ReduceScatter  kernels reduce, out of every node member's input, the blocks this
//                  rank carries on its rails (into GPU scratch), copied out to the
//                  rail's Send; the rail's result copied back into the receive buffer;
//   Allgather      this rank's block copied out to the rail's Recv (and into its own
//                  receive buffer); the rails' blocks copied back; then every node
//                  member's rail blocks copied out of its receive buffer;
//   Bcast          the node's head (on the root's rail) copies the message out (the
//                  root) or back (the others); the other members copy it out of the
//                  head's receive buffer;
//   Reduce         the node's head reduces every member's input (into GPU scratch),
//                  copied out to the rail's Send; the root copies the result back.
#pragma once

#include <cstddef>
#include <vector>

#include "algo/algorithm.h"
#include "algo/device_node_work.h"
#include "topo/topology.h"

namespace gpurdma::algo {

// The page-locked buffers the rail's schedule addresses, and the GPU scratch, in bytes.
struct NodeRailSizes {
    size_t rail_send = 0;  // the rail's Send (reduce-scatter: the vector; reduce: the message)
    size_t rail_recv = 0;  // its Recv
    size_t scratch = 0;  // GPU memory for the node's partials
};
NodeRailSizes node_rail_sizes(const topo::Topology &topo, int rank, const Call &call);

// Which of a rank's buffers its node peers read (posted as IPC handles).
BufferSides node_rail_shared(const topo::Topology &topo, int rank, const Call &call);

struct NodeRailWork {
    std::vector<DeviceReduction> reductions;  // the node's partials, by kernel, first
    std::vector<DeviceCopy> local;  // GPU to GPU within this rank (allgather's own block)
    std::vector<DeviceCopy> out;  // GPU to page-locked: the rail's input
    std::vector<DeviceCopy> in;  // page-locked to GPU: the rail's result
    std::vector<DeviceCopy> gather;  // after every member's copies back: out of their receive buffers
    // Reduce-scatter and reduce: the node members read each other's inputs before the
    // rail (their word "reduced" follows the kernels), and nothing is written where a
    // member reads before every member has passed it. Allgather and bcast: they read
    // each other's results after the rail (the word follows the copies back).
    bool reads_before_rail = false;
};

// This rank's work. srcs and dsts: every node member's input and receive buffer in this
// process (member order; in place, the input is the receive buffer; nullptr where not
// shared); rail_send, rail_recv, scratch: node_rail_sizes' buffers.
NodeRailWork node_rail_work(const topo::Topology &topo, int rank, const Call &call,
                            const std::vector<const char *> &srcs, const std::vector<char *> &dsts, char *rail_send,
                            char *rail_recv, char *scratch);

}  // namespace gpurdma::algo
