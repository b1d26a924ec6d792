// Which path takes an allreduce: the rule every rank must apply alike, from facts every
// rank holds alike (the call's size, op and type, the node's agreed buffer kinds, the
// communicator's team). Ranks that disagree would wait for a path their peers do not
// run, until the timeout; so the rule is one pure function, and the unit tests check
// it over synthetic teams and every boundary. The communicator gathers the facts and
// asks; the paths (host algorithms, device paths, staging) only carry the call out.
#pragma once

#include <cstddef>

namespace gpurdma::algo {

enum class Path {
    Host,  // the host algorithm on the buffers (host memory)
    DeviceOneNode,  // GPU buffers, one node: kernels and copies over CUDA IPC on the GPUs
    DeviceHierarchical,  // GPU buffers across nodes: node stages on the GPUs, the rail between
    Staged,  // GPU buffers through page-locked host copies and the host algorithm
    Decline,  // back to the previous module: no host path (its set-up declined)
};

// The device path's set-up on the communicator (run by the first call that takes it).
enum class DeviceSetUp { NotYet, Ready, Staged /* declined once: every GPU call stages */ };

struct RouteFacts {
    // The call: its bytes, and this rank's buffers (GPU memory or not).
    size_t bytes = 0;
    bool device_buffers = false;
    // One of them is the other GPU vendor's memory (gpu::MemoryKind::OtherVendor): no
    // device path reads it; this rank posts host buffers on the node's board.
    bool other_vendor = false;
    // Agreed on the node's buffer-kind board: every rank of this node passes GPU memory.
    bool node_all_device = true;
    // A device kernel exists for the op and type (not long double).
    bool device_kernel = true;
    // The call is an allreduce: across nodes, the device path's rail is the host
    // hierarchical schedule's, run only for the sizes the host plan gives it; the
    // other collectives' host schedules are hierarchical at every size.
    bool allreduce = true;
    // The host path's plan runs this size hierarchically (only asked across nodes).
    bool host_hierarchical = false;
    // The communicator.
    int size = 1;
    bool host_path = true;  // the host team is set up (a single rank needs none)
    bool across_nodes = false;
    // coll_gpurdma_device_stage_max (one node; across nodes, collectives but allreduce)
    size_t device_stage_max = 0;
    DeviceSetUp device = DeviceSetUp::NotYet;
};

struct Route {
    Path path;
    const char *why;  // the reason for staging or declining; "" for the natural path
};

Route route(const RouteFacts &facts);

const char *path_name(Path path);

}  // namespace gpurdma::algo
