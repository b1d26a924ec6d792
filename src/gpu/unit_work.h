// One unit's local work on the hierarchical device path: the exec::LocalWork of a
// unit's schedule (plan/device_unit.h), one per chunk. Work that touches the call's
// GPU buffers (the node reduce kernel, the copy into the chunk's page-locked buffer and
// back, a node of one's copy into its receive buffer) goes on the team's stream,
// fenced by this chunk's own event, so a unit waits for its own work and not for the
// next unit's; the rail's work goes where this rank reduces it: on the CPU at once (in
// the page-locked chunk), or to the GPU's rail work (in place in the receive buffer).
#pragma once

#include <cstddef>
#include <memory>

#include "base/noncopyable.h"
#include "base/status.h"
#include "exec/local_work.h"
#include "gpu/copy_fence.h"
#include "gpu/device_rail_work.h"
#include "gpu/gpu_runtime.h"
#include "gpu/kernel_module.h"

namespace gpurdma::gpu {

class UnitWork final : public exec::LocalWork, private NonCopyable {
public:
    // rail: the GPU's rail work where the GPU reduces the rail; null: the CPU does.
    UnitWork(CUcontext ctx, CUstream stream, ReduceKernels &kernels, DeviceRailWork *rail);

    // The call's GPU buffers (send may equal recv), bytes each: what goes on the stream.
    void set_call(const void *send, const void *recv, size_t bytes);

    Status copy(void *dst, const void *src, size_t bytes) override;
    Status reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                  size_t count) override;
    Status reduce_many(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *const *srcs, int n, size_t count,
                       size_t elem_size) override;
    Status send_source(const void *src, size_t bytes, const void **from) override;
    Status finished(bool *done) override;
    transport::Reader reader() const override { return rail_ ? rail_->reader() : transport::Reader::Cpu; }

private:
    bool on_device(const void *p) const;
    Status queued(int rc, const char *call);

    CUcontext ctx_;
    CUstream stream_;
    ReduceKernels &kernels_;
    DeviceRailWork *rail_;
    CopyFence fence_;
    const char *send_ = nullptr;
    const char *recv_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace gpurdma::gpu
