#include "gpu/copy_rates.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "gpu/copy_fence.h"
#include "gpu/device_memory.h"
#include "gpu/pinned_buffer.h"
#include "gpu/stream.h"

namespace gpurdma::gpu {

namespace {

using Clock = std::chrono::steady_clock;
// The first try warms up (first touch, driver paths). A step is short and its best
// time the one no other process interrupted: it gets more tries.
constexpr int kCopyTries = 4;
constexpr int kStepTries = 16;
// Set-up runs in a caller's call: the measured tries of one kind share this. A warm-up
// slower than a try's share is followed by copies of a size that fits it; past the
// budget, no more tries than the warm-up and one measured.
constexpr double kBudgetUs = 20e3;
constexpr size_t kStepBytes = 64;
// A copy faster than this is the stand-in's or a measurement too short to trust.
constexpr double kMaxGbps = 1000.0;

struct Timing {
    size_t bytes;  // of the measured tries
    double best_us;
};

// Best microseconds of up to `tries` runs of enqueue(n) until its fence is reached, n
// from `bytes` down to min_bytes where the warm-up took more than its share of the budget.
Status best_time(CopyFence &fence, double timeout_s, int tries, size_t bytes, size_t min_bytes,
                 const std::function<int(size_t)> &enqueue, const char *call, Timing *out)
{
    *out = {bytes, 1e300};
    double spent_us = 0;
    for (int i = 0; i < tries && !(i >= 2 && spent_us > kBudgetUs); ++i) {
        const auto t0 = Clock::now();
        const int rc = enqueue(out->bytes);
        if (rc != 0) return CudaDriver::instance().failure(call, rc);
        Status st = fence.record();
        bool done = false;
        while (st.is_ok() && !done) {
            std::this_thread::yield();  // ranks sharing a core: the one that copies (a stand-in's thread) first
            st = fence.reached(&done);
            if (!done && std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s)
                return Status::error(GPURDMA_ERR_TIMEOUT, std::string(call) + " did not finish within the timeout");
        }
        if (!st.is_ok()) return st;
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (i > 0) {
            spent_us += us;
            out->best_us = std::min(out->best_us, us);
            continue;
        }
        const double share = kBudgetUs / tries;
        if (us > share)
            out->bytes = std::max(min_bytes, static_cast<size_t>(static_cast<double>(out->bytes) * share / us));
    }
    return Status::ok();
}

}  // namespace

double copy_gbps(size_t bytes, double copy_us, double step_us)
{
    const double us = std::max(copy_us - step_us, copy_us / 2);  // the fixed cost is not bandwidth
    const double rate = us > 0 ? static_cast<double>(bytes) / (us * 1e3) : kMaxGbps;
    return std::min(rate, kMaxGbps);
}

Status measure_copy_rates(CUcontext ctx, size_t bytes, double timeout_s, CopyRates *out)
{
    const auto &d = CudaDriver::instance();
    const auto &a = d.api();
    if (!d.available()) return Status::unsupported(d.why_unavailable());
    if (!a.memcpy_dtoh_async || !a.memcpy_htod_async)
        return Status::unsupported("the CUDA driver lacks cuMemcpyDtoHAsync/cuMemcpyHtoDAsync");
    const size_t min_bytes = std::max(bytes, kStepBytes);
    const size_t max_bytes = std::max(bytes, kRateBytes);
    std::unique_ptr<Stream> stream;
    Status st = Stream::create(ctx, &stream);
    if (!st.is_ok()) return st;
    std::unique_ptr<DeviceMemory> device;
    st = DeviceMemory::create(ctx, max_bytes, &device);
    if (!st.is_ok()) return st;
    PinnedBuffer host(max_bytes, ctx);
    CopyFence fence(ctx, stream->get());
    ContextScope scope(ctx);
    const CUstream s = stream->get();
    auto to_host = [&](size_t n) { return a.memcpy_dtoh_async(host.data(), device->get(), n, s); };
    auto to_device = [&](size_t n) { return a.memcpy_htod_async(device->get(), host.data(), n, s); };
    Timing step{}, d2h{}, h2d{};
    st = best_time(fence, timeout_s, kStepTries, kStepBytes, kStepBytes, to_host, "cuMemcpyDtoHAsync", &step);
    if (st.is_ok())
        st = best_time(fence, timeout_s, kCopyTries, max_bytes, min_bytes, to_host, "cuMemcpyDtoHAsync", &d2h);
    if (st.is_ok())
        st = best_time(fence, timeout_s, kCopyTries, max_bytes, min_bytes, to_device, "cuMemcpyHtoDAsync", &h2d);
    if (!st.is_ok()) {
        // Nothing of ours may still run when the memory goes.
        if (a.stream_synchronize) a.stream_synchronize(s);
        return st;
    }
    out->step_us = step.best_us;
    out->d2h_gbps = copy_gbps(d2h.bytes, d2h.best_us, step.best_us);
    out->h2d_gbps = copy_gbps(h2d.bytes, h2d.best_us, step.best_us);
    return Status::ok();
}

}  // namespace gpurdma::gpu
