// The device-resident allreduce for GPU buffers (one per communicator, lazily set
// up on its first device-buffer call):
//  - one node, GPUs that can reach each other (or one GPU shared by the ranks):
//    the buffers are exchanged as CUDA IPC handles through a node-shared control
//    block; each rank reduces its slice straight out of every peer's buffer with a
//    kernel (zero-copy reduce-scatter, lower rank first), then copies the other
//    slices out of the peers' results with the copy engine (allgather);
//  - anything else (several nodes, no peer access, long double, managed memory, a
//    buffer CUDA IPC cannot export, ...) answers GPURDMA_ERR_UNSUPPORTED on every
//    rank alike, and the communicator stages through host memory instead.
// Every resource (stream, module, IPC mappings, control segment) is released in the
// destructor, i.e. when the communicator is freed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpurdma/gpurdma.h"
#include "mem/cuda_driver.h"

struct gpurdma_context;

namespace gpurdma::transport {
class ShmSegment;
}
namespace gpurdma::mem {
class IpcCache;
class ReduceKernels;
}

namespace gpurdma::core {

class DeviceAllreduce {
public:
    DeviceAllreduce(gpurdma_context *ctx, int rank, int size, gpurdma_bootstrap_t bootstrap, std::string name);
    ~DeviceAllreduce();
    DeviceAllreduce(const DeviceAllreduce &) = delete;
    DeviceAllreduce &operator=(const DeviceAllreduce &) = delete;

    // Every rank calls it for the same call. GPURDMA_OK: the result is in recvbuf.
    // GPURDMA_ERR_UNSUPPORTED (same answer on every rank): stage through host memory.
    // Other errors: *error names the stage and the peer.
    gpurdma_status_t allreduce(const void *sendbuf, void *recvbuf, size_t count, gpurdma_dtype_t dtype,
                               gpurdma_op_t op, const mem::PointerInfo &sinfo, const mem::PointerInfo &rinfo,
                               std::string *error);

    uint64_t device_calls() const { return device_calls_; }

private:
    struct Slot;
    class Stream;
    bool setup(const mem::PointerInfo &info, std::string *error);
    std::string setup_local(const mem::PointerInfo &info);
    void decide_inter_node();
    Slot &slot(int r) const;
    bool wait_for(int what, uint64_t seq, const char *stage, std::string *error);
    std::string describe(int peer) const;

    gpurdma_context *ctx_;
    int rank_;
    int size_;
    gpurdma_bootstrap_t bootstrap_;
    std::string name_;
    enum class State { NotYet, Ready, Staged } state_ = State::NotYet;
    std::string staged_why_;  // why this communicator stages (printed once)
    mem::CUcontext cu_ctx_ = nullptr;
    std::vector<std::string> hosts_;
    // Release order (reverse of declaration): mappings, kernels, stream, then the segment.
    std::unique_ptr<transport::ShmSegment> segment_;
    std::unique_ptr<Stream> stream_;
    std::unique_ptr<mem::ReduceKernels> kernels_;
    std::unique_ptr<mem::IpcCache> ipc_;
    uint64_t seq_ = 0;
    uint64_t device_calls_ = 0;
};

}  // namespace gpurdma::core
