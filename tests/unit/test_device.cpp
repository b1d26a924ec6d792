// The GPU path's host-side logic (kernel coverage, embedded fatbin, IPC cache,
// GPU-NIC distance) everywhere; the kernels themselves only where a CUDA driver and
// a GPU exist (skipped with the reason otherwise).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "config.h"
#include "gpurdma/gpurdma.h"
#include "mem/cuda_driver.h"
#include "mem/cuda_module.h"
#include "mem/gdr.h"
#include "mem/ipc_cache.h"
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
    const mem::EmbeddedImage image = mem::embedded_kernels();
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
    if (mem::CudaDriver::instance().available()) GTEST_SKIP() << "a CUDA driver is present";
    std::string why;
    EXPECT_EQ(mem::ReduceKernels::load(nullptr, &why), nullptr);
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(mem::CudaDriver::instance().query(&why).kind, mem::MemoryKind::Host);
}

// ---- IPC cache with fake open/close

namespace {
struct FakeIpc {
    std::map<uintptr_t, int> open;  // base -> times opened
    uintptr_t next = 0x1000;
    int closes = 0;
    mem::IpcCache::Ops ops()
    {
        return {[this](const mem::CUipcMemHandle &h, uintptr_t *base, std::string *error) {
                    if (h.data[0] == 0xff) {
                        *error = "refused";
                        return false;
                    }
                    *base = next;
                    ++open[next];
                    next += 0x1000;
                    return true;
                },
                [this](uintptr_t base) {
                    ++closes;
                    open.erase(base);
                }};
    }
};
mem::CUipcMemHandle handle(unsigned char tag)
{
    mem::CUipcMemHandle h{};
    h.data[0] = tag;
    return h;
}
}  // namespace

TEST(IpcCache, HitsByPeerAndBufferIdAndNeverServesAReallocatedBuffer)
{
    FakeIpc fake;
    mem::IpcCache cache(8, fake.ops());
    uintptr_t a = 0, b = 0, c = 0, d = 0;
    std::string err;
    cache.begin_call();
    ASSERT_TRUE(cache.map(1, 100, handle(1), &a, &err));
    ASSERT_TRUE(cache.map(1, 100, handle(1), &b, &err));
    EXPECT_EQ(a, b);
    EXPECT_EQ(cache.opens(), 1u);
    // Same address freed and reallocated by the peer: a new buffer ID, a new mapping.
    ASSERT_TRUE(cache.map(1, 101, handle(1), &c, &err));
    EXPECT_NE(c, a);
    // Another peer's buffer with the same ID is another allocation.
    ASSERT_TRUE(cache.map(2, 100, handle(2), &d, &err));
    EXPECT_NE(d, a);
    EXPECT_EQ(cache.opens(), 3u);
    EXPECT_FALSE(cache.map(3, 7, handle(0xff), &d, &err));
    EXPECT_EQ(err, "refused");
}

TEST(IpcCache, BoundedLeastRecentlyUsedButNeverTheCurrentCall)
{
    FakeIpc fake;
    {
        mem::IpcCache cache(2, fake.ops());
        uintptr_t p = 0;
        std::string err;
        cache.begin_call();
        ASSERT_TRUE(cache.map(1, 1, handle(1), &p, &err));
        ASSERT_TRUE(cache.map(1, 2, handle(1), &p, &err));
        ASSERT_TRUE(cache.map(1, 3, handle(1), &p, &err));  // all in use by this call: over the bound
        EXPECT_EQ(cache.size(), 3u);
        EXPECT_EQ(fake.closes, 0);
        cache.begin_call();
        ASSERT_TRUE(cache.map(1, 1, handle(1), &p, &err));  // hit, now most recent
        ASSERT_TRUE(cache.map(1, 4, handle(1), &p, &err));  // evicts 2 and 3 (oldest, not in this call)
        EXPECT_EQ(cache.size(), 2u);
        EXPECT_EQ(fake.closes, 2);
        const uint64_t opens = cache.opens();
        ASSERT_TRUE(cache.map(1, 1, handle(1), &p, &err));
        EXPECT_EQ(cache.opens(), opens);  // 1 survived
    }
    EXPECT_TRUE(fake.open.empty()) << "the destructor closes every mapping";
}

// ---- GPU-NIC distance (NCCL_NET_GDR_LEVEL scale)

TEST(GdrLevel, ParsesNamesAnyCase)
{
    mem::PathLevel l;
    ASSERT_TRUE(mem::parse_path_level("pxb", &l));
    EXPECT_EQ(l, mem::PathLevel::PXB);
    ASSERT_TRUE(mem::parse_path_level("SYS", &l));
    EXPECT_EQ(l, mem::PathLevel::SYS);
    EXPECT_FALSE(mem::parse_path_level("NVL", &l));
    EXPECT_FALSE(mem::parse_path_level("", &l));
    EXPECT_EQ(gpurdma_gdr_level_valid("Phb"), 1);
    EXPECT_EQ(gpurdma_gdr_level_valid("3"), 0);
    EXPECT_EQ(gpurdma_gdr_level_valid(nullptr), 0);
    gpurdma_config_t c;
    gpurdma_config_default(&c);
    EXPECT_EQ(gpurdma_gdr_level_valid(c.gdr_level), 1);
}

TEST(GdrLevel, ClassifiesWhereTheDevicesMeet)
{
    using mem::classify_path;
    using mem::PathLevel;
    EXPECT_EQ(classify_path(true, true, false, 0, 1), PathLevel::LOC);
    EXPECT_EQ(classify_path(false, true, false, 1, 1), PathLevel::PIX);  // one switch
    EXPECT_EQ(classify_path(false, true, false, 3, 1), PathLevel::PXB);  // nested switches
    EXPECT_EQ(classify_path(false, true, true, 2, 1), PathLevel::PHB);   // same host bridge
    EXPECT_EQ(classify_path(false, false, false, 2, 1), PathLevel::PHB); // two host bridges, one CPU
    EXPECT_EQ(classify_path(false, false, false, 2, 2), PathLevel::SYS); // across NUMA nodes
    EXPECT_LT(PathLevel::PIX, PathLevel::SYS);
}

TEST(GdrLevel, UnknownDevicesAreFarthest)
{
    std::string why;
    EXPECT_EQ(mem::gpu_nic_level("0000:ff:1f.7", "nosuchnic0", &why), mem::PathLevel::SYS);
    EXPECT_FALSE(why.empty());
}

// ---- the kernels on a real GPU

TEST(DeviceKernels, MatchTheHostForEveryPair)
{
    const auto &drv = mem::CudaDriver::instance();
    if (!drv.available()) GTEST_SKIP() << "no GPU: " << drv.why_unavailable();
    const auto &api = drv.api();
    mem::CUdevice dev = 0;
    mem::CUcontext ctx = nullptr;
    ASSERT_EQ(api.device_get(&dev, 0), 0);
    ASSERT_EQ(api.primary_ctx_retain(&ctx, dev), 0);
    std::string why;
    auto kernels = mem::ReduceKernels::load(ctx, &why);
    ASSERT_NE(kernels, nullptr) << why;
    mem::ContextScope scope(ctx);
    mem::CUstream stream = nullptr;
    ASSERT_EQ(api.stream_create(&stream, mem::kStreamNonBlocking), 0);
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
                mem::CUdeviceptr dptr[kSrc + 1] = {};
                const void *srcs[kSrc];
                for (int s = 0; s <= kSrc; ++s) ASSERT_EQ(api.mem_alloc(&dptr[s], bytes), 0);
                for (int s = 0; s < kSrc; ++s) {
                    ASSERT_EQ(api.memcpy_sync(dptr[s], reinterpret_cast<mem::CUdeviceptr>(in[size_t(s)].data()), bytes), 0);
                    srcs[s] = reinterpret_cast<const void *>(dptr[s] + shift * es);
                }
                void *dst = reinterpret_cast<void *>(dptr[kSrc] + shift * es);
                const size_t n = count - (shift && count > 1 ? 1 : 0);
                ASSERT_TRUE(kernels->reduce(op, d, dst, srcs, kSrc, n, stream, &why)) << why;
                ASSERT_EQ(api.stream_synchronize(stream), 0);
                std::vector<unsigned char> want(in[0]), got(bytes);
                for (int s = 1; s < kSrc; ++s)
                    ASSERT_EQ(gpurdma_reduce_local(op, d, want.data() + shift * es, want.data() + shift * es,
                                                   in[size_t(s)].data() + shift * es, n), GPURDMA_OK);
                ASSERT_EQ(api.memcpy_sync(reinterpret_cast<mem::CUdeviceptr>(got.data()), dptr[kSrc], bytes), 0);
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
