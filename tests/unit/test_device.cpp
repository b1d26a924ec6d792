// The GPU path's host-side logic (kernel coverage, embedded fatbin, IPC cache)
// everywhere (the GPU-NIC distance is in test_nic.cpp); the kernels themselves only where a CUDA driver and
// a GPU exist (skipped with the reason otherwise).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "config.h"
#include "gpu/gpu_runtime.h"
#include "gpu/ipc_cache.h"
#include "gpu/kernel_module.h"
#include "gpurdma/gpurdma.h"
#include "reduce/reduce_device.h"

using namespace gpurdma;

namespace {

std::vector<std::pair<gpurdma_op_t, gpurdma_dtype_t>> all_pairs()
{
    std::vector<std::pair<gpurdma_op_t, gpurdma_dtype_t>> v;
    for (int o = 0; o < GPURDMA_OP_COUNT; ++o)
        for (int d = 0; d < GPURDMA_DTYPE_COUNT; ++d) v.emplace_back(gpurdma_op_t(o), gpurdma_dtype_t(d));
    return v;
}

}  // namespace

TEST(DeviceKernels, CoverEveryHostPairExceptLongDouble)
{
    int device_pairs = 0;
    for (auto [op, d] : all_pairs()) {
        const bool want = gpurdma_op_supported(op, d) && !reduce::device::is_long_double(d);
        EXPECT_EQ(reduce::device::device_supported(op, d), want) << gpurdma_op_name(op) << " " << gpurdma_dtype_name(d);
        device_pairs += want;
    }
    EXPECT_EQ(device_pairs, 112);
}

TEST(DeviceKernels, ElementSizesFitTheVectorAndSliceAlignment)
{
    for (int d = 0; d < GPURDMA_DTYPE_COUNT; ++d) {
        if (reduce::device::kind_of(gpurdma_dtype_t(d)) == reduce::device::Kind::None) continue;
        const size_t s = gpurdma_dtype_size(gpurdma_dtype_t(d));
        EXPECT_EQ(16 % s, 0u) << gpurdma_dtype_name(gpurdma_dtype_t(d));
        EXPECT_EQ(64 % s, 0u) << gpurdma_dtype_name(gpurdma_dtype_t(d));
    }
}

TEST(DeviceKernels, FatbinIsEmbeddedWithEveryKernel)
{
    const gpu::EmbeddedImage image = gpu::embedded_kernels();
#ifdef GPURDMA_HAVE_CUDA
    ASSERT_GT(image.size, 16u);
    uint32_t magic = 0;
    std::memcpy(&magic, image.data, sizeof magic);
    EXPECT_EQ(magic, 0xBA55ED50u) << "not a CUDA fatbin";
    const std::string bytes(static_cast<const char *>(image.data), image.size);
    for (auto [op, d] : all_pairs()) {
        if (!reduce::device::device_supported(op, d)) continue;
        char name[32];
        reduce::device::kernel_name(op, d, name);
        EXPECT_NE(bytes.find(std::string(name) + '\0'), std::string::npos) << name;
    }
#else
    EXPECT_EQ(image.size, 0u);
    GTEST_SKIP() << "host-only build (--without-cuda): no fatbin";
#endif
}

TEST(DeviceKernels, LoadDeclinesWithAReasonWithoutADriver)
{
    if (gpu::GpuRuntime::instance().available()) GTEST_SKIP() << "a CUDA driver is present";
    std::unique_ptr<gpu::ReduceKernels> kernels;
    const Status loaded = gpu::ReduceKernels::load(nullptr, &kernels);
    EXPECT_EQ(kernels, nullptr);
    EXPECT_FALSE(loaded.message().empty());
    EXPECT_EQ(gpu::GpuRuntime::instance().query(&kernels).kind, gpu::MemoryKind::Host);
}

// ---- IPC cache with fake open/close

namespace {
struct FakeIpc {
    std::map<uintptr_t, int> open;  // base -> times opened
    uintptr_t next = 0x1000;
    int closes = 0;
    gpu::IpcCache::Ops ops()
    {
        return {[this](const gpu::CUipcMemHandle &h, uintptr_t *base) {
                    if (h.data[0] == 0xff) return Status::error(GPURDMA_ERR_TRANSPORT, "refused");
                    *base = next;
                    ++open[next];
                    next += 0x1000;
                    return Status::ok();
                },
                [this](uintptr_t base) {
                    ++closes;
                    open.erase(base);
                }};
    }
};
gpu::CUipcMemHandle handle(unsigned char tag)
{
    gpu::CUipcMemHandle h{};
    h.data[0] = tag;
    return h;
}
}  // namespace

TEST(IpcCache, HitsByPeerAndBufferIdAndNeverServesAReallocatedBuffer)
{
    FakeIpc fake;
    gpu::IpcCache cache(8, fake.ops());
    uintptr_t a = 0, b = 0, c = 0, d = 0;
    cache.begin_call();
    ASSERT_TRUE(cache.map(1, 100, handle(1), &a).is_ok());
    ASSERT_TRUE(cache.map(1, 100, handle(1), &b).is_ok());
    EXPECT_EQ(a, b);
    EXPECT_EQ(cache.opens(), 1u);
    // Same address freed and reallocated by the peer: a new buffer ID, a new mapping.
    ASSERT_TRUE(cache.map(1, 101, handle(1), &c).is_ok());
    EXPECT_NE(c, a);
    // Another peer's buffer with the same ID is another allocation.
    ASSERT_TRUE(cache.map(2, 100, handle(2), &d).is_ok());
    EXPECT_NE(d, a);
    EXPECT_EQ(cache.opens(), 3u);
    const Status refused = cache.map(3, 7, handle(0xff), &d);
    EXPECT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.message(), "refused");
}

TEST(IpcCache, BoundedLeastRecentlyUsedButNeverTheCurrentCall)
{
    FakeIpc fake;
    {
        gpu::IpcCache cache(2, fake.ops());
        uintptr_t p = 0;
        cache.begin_call();
        ASSERT_TRUE(cache.map(1, 1, handle(1), &p).is_ok());
        ASSERT_TRUE(cache.map(1, 2, handle(1), &p).is_ok());
        ASSERT_TRUE(cache.map(1, 3, handle(1), &p).is_ok());  // all in use by this call: over the bound
        EXPECT_EQ(cache.size(), 3u);
        EXPECT_EQ(fake.closes, 0);
        cache.begin_call();
        ASSERT_TRUE(cache.map(1, 1, handle(1), &p).is_ok());  // hit, now most recent
        ASSERT_TRUE(cache.map(1, 4, handle(1), &p).is_ok());  // evicts 2 and 3 (oldest, not in this call)
        EXPECT_EQ(cache.size(), 2u);
        EXPECT_EQ(fake.closes, 2);
        const uint64_t opens = cache.opens();
        ASSERT_TRUE(cache.map(1, 1, handle(1), &p).is_ok());
        EXPECT_EQ(cache.opens(), opens);  // 1 survived
    }
    EXPECT_TRUE(fake.open.empty()) << "the destructor closes every mapping";
}

// ---- the kernels on a real GPU

TEST(DeviceKernels, MatchTheHostForEveryPair)
{
    const auto &drv = gpu::GpuRuntime::instance();
    if (!drv.available()) GTEST_SKIP() << "no GPU: " << drv.why_unavailable();
    const auto &api = drv.api();
    gpu::CUdevice dev = 0;
    gpu::CUcontext ctx = nullptr;
    ASSERT_EQ(api.device_get(&dev, 0), 0);
    ASSERT_EQ(api.primary_ctx_retain(&ctx, dev), 0);
    std::unique_ptr<gpu::ReduceKernels> kernels;
    const Status loaded = gpu::ReduceKernels::load(ctx, &kernels);
    ASSERT_NE(kernels, nullptr) << loaded.message();
    gpu::ContextScope scope(ctx);
    gpu::CUstream stream = nullptr;
    ASSERT_EQ(api.stream_create(&stream, gpu::kStreamNonBlocking), 0);
    constexpr int kSrc = 3;
    std::mt19937 rng(7);
    for (size_t count : {size_t(1), size_t(37), size_t(4099)}) {
        for (int shift : {0, 1}) {  // aligned (vector loads) and misaligned by one element
            for (auto [op, d] : all_pairs()) {
                if (!reduce::device::device_supported(op, d)) continue;
                const size_t es = gpurdma_dtype_size(d), bytes = (count + 1) * es;
                std::vector<std::vector<unsigned char>> in(kSrc, std::vector<unsigned char>(bytes));
                for (auto &v : in)
                    for (auto &b : v) b = static_cast<unsigned char>(rng() % 7);  // small: exact in any order
                gpu::CUdeviceptr dptr[kSrc + 1] = {};
                const void *srcs[kSrc];
                for (int s = 0; s <= kSrc; ++s) ASSERT_EQ(api.mem_alloc(&dptr[s], bytes), 0);
                for (int s = 0; s < kSrc; ++s) {
                    ASSERT_EQ(api.memcpy_sync(dptr[s], reinterpret_cast<gpu::CUdeviceptr>(in[size_t(s)].data()), bytes),
                              0);
                    srcs[s] = reinterpret_cast<const void *>(dptr[s] + shift * es);
                }
                void *dst = reinterpret_cast<void *>(dptr[kSrc] + shift * es);
                const size_t n = count - (shift && count > 1 ? 1 : 0);
                const Status launched = kernels->reduce(op, d, dst, srcs, kSrc, n, stream);
                ASSERT_TRUE(launched.is_ok()) << launched.message();
                ASSERT_EQ(api.stream_synchronize(stream), 0);
                std::vector<unsigned char> want(in[0]), got(bytes);
                for (int s = 1; s < kSrc; ++s)
                    ASSERT_EQ(gpurdma_reduce_local(op, d, want.data() + shift * es, want.data() + shift * es,
                                                   in[size_t(s)].data() + shift * es, n),
                              GPURDMA_OK);
                ASSERT_EQ(api.memcpy_sync(reinterpret_cast<gpu::CUdeviceptr>(got.data()), dptr[kSrc], bytes), 0);
                for (size_t i = 0; i < n; ++i) {
                    const size_t at = (i + shift) * es;
                    ASSERT_TRUE(reduce::device::same_element(d, got.data() + at, want.data() + at, es))
                        << gpurdma_op_name(op) << " " << gpurdma_dtype_name(d) << " count " << n << " at " << i;
                }
                for (auto p : dptr) api.mem_free(p);
            }
        }
    }
    api.stream_destroy(stream);
    kernels.reset();
    api.primary_ctx_release(dev);
}
