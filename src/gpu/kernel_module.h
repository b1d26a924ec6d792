// The kernel loader: the reduction kernels on one context, from the image that the
// vendor's compiler built and fatbin_blob.cpp embeds (nvcc's fatbin under CUDA, hipcc's
// code-object bundle under HIP), loaded with cuModuleLoadData (hipModuleLoadData);
// kernels looked up by name once, launched on a grid sized to the device. Unloaded in
// the destructor.
#pragma once

#include <array>
#include <cstddef>
#include <memory>

#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/gpu_runtime.h"
#include "gpurdma/gpurdma.h"

namespace gpurdma::gpu {

struct EmbeddedImage {
    const void *data;
    size_t size;
};

// The fatbin built by nvcc at build time ({nullptr, 0} in a build without nvcc).
EmbeddedImage embedded_kernels();
// The AMD code objects (a clang offload bundle) built by hipcc ({nullptr, 0} without hipcc).
EmbeddedImage embedded_hip_kernels();

class ReduceKernels : private NonCopyable {
public:
    // Loads the module into ctx. Fails (GPURDMA_ERR_UNSUPPORTED, with the reason) if it
    // cannot: no kernels built, no SASS/PTX for this GPU, a driver older than the toolkit, ...
    static Status load(CUcontext ctx, std::unique_ptr<ReduceKernels> *kernels);
    ~ReduceKernels();

    // dst[i] = src[0][i] OP ... OP src[nsrc-1][i], enqueued on stream (async), on the
    // grid grid_blocks() gives. Fails if the pair has no kernel or the launch fails.
    Status reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *const *src, int nsrc, size_t count,
                  CUstream stream);
    // The same on a grid of `blocks` x `threads` (tests/gpu/kernel_check's geometries).
    Status reduce_on_grid(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *const *src, int nsrc,
                          size_t count, unsigned blocks, unsigned threads, CUstream stream);
    // The blocks reduce() launches for count elements of dtype: enough to fill the
    // device (a few per multiprocessor), never more than the work.
    unsigned grid_blocks(gpurdma_dtype_t dtype, size_t count) const;

    CUcontext context() const { return ctx_; }
    int multiprocessors() const { return sms_; }

private:
    ReduceKernels(CUcontext ctx, CUmodule module, int sms) : ctx_(ctx), module_(module), sms_(sms) {}
    Status function(gpurdma_op_t op, gpurdma_dtype_t dtype, CUfunction *f);

    CUcontext ctx_;
    CUmodule module_;
    int sms_;
    std::array<CUfunction, GPURDMA_OP_COUNT * GPURDMA_DTYPE_COUNT> functions_{};
};

}  // namespace gpurdma::gpu
