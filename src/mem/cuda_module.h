// The reduction kernels on one CUDA context: the embedded fatbin loaded with
// cuModuleLoadData, kernels looked up by name once, launched with cuLaunchKernel
// on a grid sized to the device. Unloaded in the destructor.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "gpurdma/gpurdma.h"
#include "mem/cuda_driver.h"

namespace gpurdma::mem {

struct EmbeddedImage {
    const void *data;
    size_t size;
};

// The fatbin built by nvcc at build time ({nullptr, 0} in a host-only build).
EmbeddedImage embedded_kernels();

class ReduceKernels {
public:
    // Loads the module into ctx; nullptr with *why set if it cannot (no kernels
    // built, no SASS/PTX for this GPU, a driver older than the toolkit, ...).
    static std::unique_ptr<ReduceKernels> load(CUcontext ctx, std::string *why);
    ~ReduceKernels();
    ReduceKernels(const ReduceKernels &) = delete;
    ReduceKernels &operator=(const ReduceKernels &) = delete;

    // dst[i] = src[0][i] OP ... OP src[nsrc-1][i], enqueued on stream (async).
    // False with *error set if the pair has no kernel or the launch fails.
    bool reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *const *src, int nsrc,
                size_t count, CUstream stream, std::string *error);

    CUcontext context() const { return ctx_; }
    int multiprocessors() const { return sms_; }

private:
    ReduceKernels(CUcontext ctx, CUmodule module, int sms) : ctx_(ctx), module_(module), sms_(sms) {}
    CUfunction function(gpurdma_op_t op, gpurdma_dtype_t dtype, std::string *error);

    CUcontext ctx_;
    CUmodule module_;
    int sms_;
    std::array<CUfunction, GPURDMA_OP_COUNT * GPURDMA_DTYPE_COUNT> functions_{};
};

}  // namespace gpurdma::mem
