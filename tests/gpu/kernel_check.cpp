// The reduction kernels against the host reduction, through whichever libcuda.so.1 the
// core finds: a GPU's driver (contrib/gpu-check.sh) or the stand-in (run-gpu-tests.sh),
// which runs src/reduce/reduce_cuda.cu compiled for the host, thread by thread over the
// grid, in a shuffled order.
//
// For every (op, type) the device supports, cases that together cover: 1 to 16
// sources; in place (the destination is the first or the last source) and not;
// counts around the 16-byte vector's boundary and around the grid-stride boundary of
// the launch's geometry; every misalignment by a whole number of elements below 16
// bytes (all buffers, or one source only: the vector path or the scalar one); the
// component's own grid (ReduceKernels::reduce) and fixed ones (1 x 1, 1 x 32, 3 x 64,
// 2 x 512). Every element must have the host's bits, except that a NaN may carry
// another payload (a GPU quiets NaNs its own way), and the bytes around the
// destination must stay untouched.
//
//   kernel_check [--seed N] [--cases-per-pair N]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_runtime.h"
#include "gpu/kernel_module.h"
#include "gpurdma/gpurdma.h"
#include "reduce/reduce_device.h"

using namespace gpurdma;

namespace {

struct Geometry {
    unsigned blocks, threads;  // 0 blocks: the component's own grid
};
constexpr Geometry kGeometries[] = {{0, 0}, {1, 1}, {1, 32}, {3, 64}, {2, 512}};

// Floating-point parts of an element (offset, size in bytes), where a NaN may differ in payload.
std::vector<std::pair<size_t, size_t>> float_parts(gpurdma_dtype_t d)
{
    switch (d) {
        case GPURDMA_FLOAT: return {{0, 4}};
        case GPURDMA_DOUBLE: return {{0, 8}};
        case GPURDMA_FLOAT16: return {{0, 2}};
        case GPURDMA_FLOAT_COMPLEX: return {{0, 4}, {4, 4}};
        case GPURDMA_DOUBLE_COMPLEX: return {{0, 8}, {8, 8}};
        case GPURDMA_FLOAT_INT: return {{0, 4}};
        case GPURDMA_DOUBLE_INT: return {{0, 8}};
        default: return {};
    }
}

bool is_nan(const unsigned char *p, size_t size)
{
    if (size == 2) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    }
    if (size == 4) {
        float f;
        std::memcpy(&f, p, 4);
        return std::isnan(f);
    }
    double x;
    std::memcpy(&x, p, 8);
    return std::isnan(x);
}

// Same bits, or NaN where the host has a NaN (in a floating part); the pairs' padding aside.
bool same(gpurdma_dtype_t d, const unsigned char *got, const unsigned char *want, size_t size)
{
    if (reduce::device::same_element(d, got, want, size)) return true;
    const auto parts = float_parts(d);
    if (parts.empty()) return false;
    std::vector<unsigned char> a(got, got + size), b(want, want + size);
    for (auto [off, n] : parts)
        if (is_nan(&a[off], n) && is_nan(&b[off], n)) std::memset(&a[off], 0, n), std::memset(&b[off], 0, n);
    return reduce::device::same_element(d, a.data(), b.data(), size);
}

struct Checker {
    const gpu::DriverApi &api;
    gpu::ReduceKernels &kernels;
    gpu::CUstream stream;
    std::mt19937_64 rng;
    // Device buffers: a source each and one destination; a case uses a region of each
    // with 4 KiB of margin on both sides (a write outside the destination's span shows there).
    static constexpr size_t kMargin = 4096;
    size_t capacity = 0;
    gpu::CUdeviceptr buf[reduce::device::kMaxSources + 1] = {};
    long launches = 0;
    long mismatches = 0;

    ~Checker()
    {
        for (auto b : buf)
            if (b) api.mem_free(b);
    }

    bool ensure(size_t bytes)
    {
        if (bytes <= capacity) return true;
        for (auto &b : buf) {
            if (b) api.mem_free(b);
            b = 0;
            if (api.mem_alloc(&b, bytes) != 0) return false;
        }
        capacity = bytes;
        return true;
    }

    // One launch and its comparison; false (with a message) on a mismatch or failure.
    bool run(gpurdma_op_t op, gpurdma_dtype_t d, int nsrc, size_t count, int shift, bool one_shifted, int in_place,
             Geometry g)
    {
        const size_t es = gpurdma_dtype_size(d);
        const size_t region = (count + 16) * es + 2 * kMargin;  // what this case writes and reads back
        if (!ensure(region)) return report(op, d, nsrc, count, shift, in_place, g, "cuMemAlloc failed");
        // Host images of every buffer's region, margins included: random bits (NaN,
        // infinities and denormals among them).
        std::vector<std::vector<unsigned char>> host(size_t(nsrc) + 1, std::vector<unsigned char>(region));
        for (auto &h : host)
            for (size_t b = 0; b < region; b += 8) {
                const uint64_t r = rng();
                std::memcpy(&h[b], &r, std::min<size_t>(8, region - b));
            }
        for (int s = 0; s <= nsrc; ++s)
            if (api.memcpy_sync(buf[s], reinterpret_cast<gpu::CUdeviceptr>(host[size_t(s)].data()), region) != 0)
                return report(op, d, nsrc, count, shift, in_place, g, "cuMemcpy to the device failed");
        // From pageable memory cuMemcpy returns before the bytes land (on the null stream);
        // the kernel runs on a non-blocking stream, so the null stream is waited for first.
        if (api.stream_synchronize(nullptr) != 0)
            return report(op, d, nsrc, count, shift, in_place, g, "cuStreamSynchronize (null stream) failed");
        // Offsets into each buffer: all shifted alike, or the last source only.
        std::vector<size_t> at(size_t(nsrc) + 1, kMargin + size_t(shift) * es);
        if (one_shifted) {
            for (auto &a : at) a = kMargin;
            at[size_t(nsrc) - 1] = kMargin + es;
        }
        const void *src[reduce::device::kMaxSources];
        for (int s = 0; s < nsrc; ++s) src[s] = reinterpret_cast<const void *>(buf[s] + at[size_t(s)]);
        // In place: the destination is the first (1) or the last (2) source.
        const int dst_buf = in_place == 1 ? 0 : in_place == 2 ? nsrc - 1 : nsrc;
        void *dst = reinterpret_cast<void *>(buf[dst_buf] + at[size_t(dst_buf)]);
        std::vector<unsigned char> want(host[size_t(dst_buf)]);
        std::memcpy(want.data() + at[size_t(dst_buf)], host[0].data() + at[0], count * es);
        for (int s = 1; s < nsrc; ++s)
            if (gpurdma_reduce_local(op, d, want.data() + at[size_t(dst_buf)], want.data() + at[size_t(dst_buf)],
                                     host[size_t(s)].data() + at[size_t(s)], count) != GPURDMA_OK)
                return report(op, d, nsrc, count, shift, in_place, g, "the host reduction refused");
        const Status st = g.blocks ? kernels.reduce_on_grid(op, d, dst, src, nsrc, count, g.blocks, g.threads, stream)
                                   : kernels.reduce(op, d, dst, src, nsrc, count, stream);
        ++launches;
        if (!st.is_ok()) return report(op, d, nsrc, count, shift, in_place, g, st.message());
        if (api.stream_synchronize(stream) != 0)
            return report(op, d, nsrc, count, shift, in_place, g, "cuStreamSynchronize failed");
        std::vector<unsigned char> got(region);
        if (api.memcpy_sync(reinterpret_cast<gpu::CUdeviceptr>(got.data()), buf[dst_buf], region) != 0)
            return report(op, d, nsrc, count, shift, in_place, g, "cuMemcpy from the device failed");
        const size_t first = at[size_t(dst_buf)], end = first + count * es;
        for (size_t i = 0; i < count; ++i)
            if (!same(d, &got[first + i * es], &want[first + i * es], es))
                return report(op, d, nsrc, count, shift, in_place, g, "element " + std::to_string(i) + " differs");
        for (size_t b = 0; b < region; ++b)
            if ((b < first || b >= end) && got[b] != want[b])
                return report(op, d, nsrc, count, shift, in_place, g,
                              "byte " + std::to_string(long(b) - long(first)) + " from the destination was written");
        return true;
    }

    bool report(gpurdma_op_t op, gpurdma_dtype_t d, int nsrc, size_t count, int shift, int in_place, Geometry g,
                const std::string &what)
    {
        if (++mismatches <= 20)
            std::printf(
                "FAIL %s %s: %d sources, count %zu, shifted %d elements, %s, grid %s: %s\n", gpurdma_op_name(op),
                gpurdma_dtype_name(d), nsrc, count, shift,
                in_place ? (in_place == 1 ? "in place (first source)" : "in place (last source)") : "apart",
                g.blocks ? (std::to_string(g.blocks) + " x " + std::to_string(g.threads)).c_str() : "the component's",
                what.c_str());
        return false;
    }
};

}  // namespace

int main(int argc, char **argv)
{
    unsigned long long seed = 1;
    int cases = 160;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
        else if (std::strcmp(argv[i], "--cases-per-pair") == 0) cases = std::atoi(argv[i + 1]);
    }
    const auto &drv = gpu::GpuRuntime::instance();
    if (!drv.available()) {
        std::printf("FAIL kernel_check: no GPU runtime: %s\n", drv.why_unavailable().c_str());
        return 1;
    }
    const auto &api = drv.api();
    gpu::CUdevice dev = 0;
    gpu::CUcontext ctx = nullptr;
    if (api.device_get(&dev, 0) != 0 || api.primary_ctx_retain(&ctx, dev) != 0) {
        std::printf("FAIL kernel_check: no device 0\n");
        return 1;
    }
    int failed = 0;
    {
        std::unique_ptr<gpu::ReduceKernels> kernels;
        const Status loaded = gpu::ReduceKernels::load(ctx, &kernels);
        if (!kernels) {
            std::printf("FAIL kernel_check: kernels not loaded: %s\n", loaded.message().c_str());
            return 1;
        }
        gpu::ContextScope scope(ctx);
        gpu::CUstream stream = nullptr;
        if (api.stream_create(&stream, gpu::kStreamNonBlocking) != 0) return 1;
        Checker c{api, *kernels, stream, std::mt19937_64(seed)};
        int pairs = 0;
        for (int o = 0; o < GPURDMA_OP_COUNT; ++o) {
            for (int t = 0; t < GPURDMA_DTYPE_COUNT; ++t) {
                const auto op = gpurdma_op_t(o);
                const auto d = gpurdma_dtype_t(t);
                if (!reduce::device::device_supported(op, d)) continue;
                ++pairs;
                const size_t per_vec = 16 / gpurdma_dtype_size(d);
                for (int i = 0; i < cases; ++i) {
                    const Geometry g = kGeometries[size_t(i) % std::size(kGeometries)];
                    // Threads of the grid times the vector: where the grid-stride loop wraps.
                    const size_t wrap = (g.blocks ? size_t(g.blocks) * g.threads : 512) * per_vec;
                    const size_t counts[] = {1,        per_vec - 1, per_vec,  per_vec + 1,           2 * per_vec + 1,
                                             wrap - 1, wrap,        wrap + 1, 2 * wrap + per_vec + 1};
                    size_t count = counts[size_t(i / 3) % std::size(counts)];
                    if (count == 0) count = 1;
                    const int nsrc = 1 + i % reduce::device::kMaxSources;
                    const int shift = int(size_t(i / 7) % per_vec);
                    const bool one_shifted = per_vec > 1 && i % 11 == 5;
                    const int in_place = (i / 16) % 3;
                    if (!c.run(op, d, nsrc, count, shift, one_shifted, in_place, g)) failed = 1;
                }
            }
        }
        api.stream_destroy(stream);
        std::printf(
            "kernel_check: %d (op, type) pairs, %ld launches (1-16 sources, in place and apart, vector and "
            "grid-stride boundaries, every element misalignment below 16 bytes, 5 grids), %ld mismatches, "
            "seed %llu, through %s\n",
            pairs, c.launches, c.mismatches, seed, drv.vendor_name());
        // Which image the kernels were looked up in: the build's own, or (a build without
        // the vendor's compiler) the stand-in's.
        const gpu::EmbeddedImage image =
            drv.vendor() == gpu::Vendor::Hip ? gpu::embedded_hip_kernels() : gpu::embedded_kernels();
        if (image.size)
            std::printf("kernel_check: kernels from the embedded %s (%zu bytes)\n",
                        drv.vendor() == gpu::Vendor::Hip ? "AMD code objects" : "fatbin", image.size);
        else
            std::printf("kernel_check: kernels from the stand-in's image (no %s in this build)\n",
                        drv.vendor() == gpu::Vendor::Hip ? "hipcc" : "nvcc");
    }
    api.primary_ctx_release(dev);
    return failed;
}
