// A schedule is the plan as data: the ordered steps one rank executes for one
// allreduce shape. The same schedule runs on the real transports and in the
// in-process simulator, which is how large shapes are checked on a small machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plan/algorithms.h"

namespace gpurdma::plan {

// Which buffer a step addresses. In place, Send aliases Recv. Stage: a staging buffer
// the executor is given (a GPU unit's page-locked chunk). Node: the node members'
// send buffers, the sources of a NodeReduce (the executor is given their bases).
enum class Buf : uint8_t { Send, Recv, Stage, Node };

enum class StepKind : uint8_t {
    Copy,  // dst <- src, local
    Send,  // put src bytes into the next landing slot of peer
    RecvReduce,  // wait for the next message of peer; dst = combine(landed, local operand)
    RecvCopy,  // wait for the next message of peer; dst <- landed
    NodeReduce,  // dst = the node members' spans at src_off folded in member order, local
};

// Named stages for messages ("timeout in ring reduce-scatter waiting on rank 3").
enum class Phase : uint8_t {
    Local,
    RingReduceScatter,
    RingAllgather,
    RdFoldIn,
    RdExchange,
    RdFoldOut,
    NodeReduceScatter,  // hierarchical stage 1: slices to their owners on the node
    NodeAllgather,  // hierarchical stage 3: reduced slices back to the node
    Calibration,  // set-up: ping-pong that measures the cost model's links
    StageOut,  // a GPU unit's copy into host memory for the rail
    StageBack,  // the rail's result copied back into GPU memory
    TreeBcast,  // bcast down a tree (plan/coll_trees.h)
    TreeReduce,  // reduce up a tree
    HalvingReduceScatter,  // Rabenseifner's reduce-scatter by recursive halving (plan/halving_doubling.h)
    DoublingAllgather,  // and its allgather by recursive doubling
};

const char *phase_name(Phase phase);
const char *step_kind_name(StepKind kind);

struct Step {
    StepKind kind;
    Phase phase;
    // RecvReduce only: true computes landed OP local, false computes local OP landed.
    // Fixing the order per pair is what makes floating-point results bit-identical.
    bool landed_first;
    int peer;  // rank in the communicator, -1 for local steps
    Buf dst_buf;  // Copy, RecvReduce, RecvCopy
    Buf src_buf;  // Copy, Send; RecvReduce: the local operand
    size_t dst_off;  // byte offsets into the user buffers
    size_t src_off;
    size_t bytes;
};

struct Schedule {
    // Ring, RecursiveDoubling or Hierarchical; Auto for a local copy, nothing to do,
    // or set-up's calibration ping-pong.
    Algorithm algorithm = Algorithm::Auto;
    int rank = 0;
    int size = 1;
    size_t bytes = 0;  // message size
    size_t elem_size = 1;  // bytes per element, for reductions
    size_t stage_bytes = 0;  // the Stage buffer the executor must be given (collectives' accumulator)
    std::vector<Step> steps;
};

}  // namespace gpurdma::plan
