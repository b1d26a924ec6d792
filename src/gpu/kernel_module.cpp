#include "gpu/kernel_module.h"

#include <algorithm>
#include <string>

#include "reduce/reduce_device.h"

namespace gpurdma::gpu {

namespace {
constexpr unsigned kThreads = reduce::device::kThreadsPerBlock;  // the kernels' __launch_bounds__
constexpr unsigned kBlocksPerSm = 4;  // enough loads in flight to cover memory latency

Status cannot_load(const std::string &why)
{
    return Status::unsupported(why);
}
}  // namespace

Status ReduceKernels::load(CUcontext ctx, std::unique_ptr<ReduceKernels> *kernels)
{
    const auto &d = GpuRuntime::instance();
    const auto &a = d.api();
    if (!d.available()) return cannot_load(d.why_unavailable());
    const bool hip = d.vendor() == Vendor::Hip;
    EmbeddedImage image = hip ? embedded_hip_kernels() : embedded_kernels();
    if (!image.size && a.stand_in_kernel_image) a.stand_in_kernel_image(&image.data, &image.size);
    if (!image.size)
        return cannot_load(hip ? "built without AMD GPU kernels (configure found no hipcc)"
                               : "built without CUDA kernels (configure found no nvcc)");
    if (!a.module_load_data || !a.module_get_function || !a.launch_kernel || !a.device_get_attribute ||
        !a.ctx_get_device || !a.module_unload)
        return cannot_load(std::string(d.vendor_name()) + " runtime lacks module/launch entry points");
    ContextScope scope(ctx);
    CUdevice dev = 0;
    int rc = a.ctx_get_device(&dev);
    if (rc != 0) return cannot_load(d.error_text("cuCtxGetDevice", rc));
    int sms = 0;
    rc = a.device_get_attribute(&sms, kDevAttrMultiprocessorCount, dev);
    if (rc != 0 || sms <= 0) return cannot_load(d.error_text("cuDeviceGetAttribute(multiprocessor count)", rc));
    CUmodule module = nullptr;
    rc = a.module_load_data(&module, image.data);
    if (rc != 0)
        return cannot_load(d.error_text(hip ? "cuModuleLoadData (embedded gfx90a/gfx942 code objects)"
                                            : "cuModuleLoadData (embedded sm_80/sm_90/sm_100 + compute_90 fatbin)",
                                        rc));
    kernels->reset(new ReduceKernels(ctx, module, sms));
    return Status::ok();
}

ReduceKernels::~ReduceKernels()
{
    ContextScope scope(ctx_);
    GpuRuntime::instance().api().module_unload(module_);
}

Status ReduceKernels::function(gpurdma_op_t op, gpurdma_dtype_t dtype, CUfunction *f)
{
    if (!reduce::device::device_supported(op, dtype))
        return Status::error(GPURDMA_ERR_TRANSPORT, std::string("no device kernel for ") + gpurdma_op_name(op) +
                                                        " on " + gpurdma_dtype_name(dtype));
    CUfunction &cached = functions_[static_cast<size_t>(op) * GPURDMA_DTYPE_COUNT + dtype];
    if (!cached) {
        char name[32];
        reduce::device::kernel_name(op, dtype, name);
        const auto &d = GpuRuntime::instance();
        const int rc = d.api().module_get_function(&cached, module_, name);
        if (rc != 0) {
            cached = nullptr;
            return d.failure((std::string("cuModuleGetFunction(") + name + ")").c_str(), rc);
        }
    }
    *f = cached;
    return Status::ok();
}

unsigned ReduceKernels::grid_blocks(gpurdma_dtype_t dtype, size_t count) const
{
    // A grid-stride loop: enough blocks to fill the device, never more than the work.
    const size_t per_block = size_t(kThreads) * 16 / gpurdma_dtype_size(dtype);
    const size_t wanted = (count + per_block - 1) / per_block;
    return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(wanted, size_t(sms_) * kBlocksPerSm)));
}

Status ReduceKernels::reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *const *src, int nsrc,
                             size_t count, CUstream stream)
{
    return reduce_on_grid(op, dtype, dst, src, nsrc, count, grid_blocks(dtype, count), kThreads, stream);
}

Status ReduceKernels::reduce_on_grid(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *const *src,
                                     int nsrc, size_t count, unsigned blocks, unsigned threads, CUstream stream)
{
    if (count == 0) return Status::ok();
    if (nsrc < 1 || nsrc > reduce::device::kMaxSources)
        return Status::error(GPURDMA_ERR_TRANSPORT, "device reduce of " + std::to_string(nsrc) + " sources (1 to " +
                                                        std::to_string(reduce::device::kMaxSources) + " supported)");
    CUfunction f = nullptr;
    const Status found = function(op, dtype, &f);
    if (!found.is_ok()) return found;
    reduce::device::ReduceArgs args{};
    for (int s = 0; s < nsrc; ++s) args.src[s] = src[s];
    args.dst = dst;
    args.count = count;
    args.nsrc = nsrc;
    void *params[] = {&args};
    ContextScope scope(ctx_);
    const auto &d = GpuRuntime::instance();
    const int rc = d.api().launch_kernel(f, blocks, 1, 1, threads, 1, 1, 0, stream, params, nullptr);
    if (rc != 0) return d.failure("cuLaunchKernel(reduce)", rc);
    return Status::ok();
}

}  // namespace gpurdma::gpu
