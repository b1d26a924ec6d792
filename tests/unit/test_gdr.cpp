// GPUDirect RDMA's decision and its UCX registration calls, against a fake UCX that
// records every call and fails any on demand: the development machine's UCX has no
// CUDA support and it has no RDMA NIC, so none of this has run against a real
// CUDA-capable UCX. The last tests run the real calls on this machine's UCX.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/gdr_check.h"
#include "gpu/gdr_decision.h"
#include "transport/registered_range.h"
#include "transport/ucx_context.h"
#include "transport/ucx_memory_api.h"

using gpurdma::Status;
using gpurdma::gpu::Answer;
using gpurdma::gpu::check_gdr;
using gpurdma::gpu::decide_gdr;
using gpurdma::gpu::GdrInputs;
using gpurdma::gpu::kGdrProbeBytes;
using gpurdma::gpu::Probe;
using gpurdma::topo::PathLevel;
using gpurdma::transport::RegisteredRange;
using gpurdma::transport::UcxMemoryApi;

namespace {

constexpr uint64_t kHostAndCuda = UCS_BIT(UCS_MEMORY_TYPE_HOST) | UCS_BIT(UCS_MEMORY_TYPE_CUDA);

struct FakeUcx : UcxMemoryApi {
    uint64_t types = kHostAndCuda;
    ucs_status_t query_status = UCS_OK, map_status = UCS_OK, pack_status = UCS_OK;
    std::vector<std::string> calls;
    std::vector<ucp_mem_map_params_t> maps;
    std::vector<ucp_mem_h> unmapped;
    std::vector<void *> released;
    int mapping = 0;  // its address is the handle
    char key[4] = {'k', 0, 'y', 1};  // binary, as a packed rkey is

    ucp_mem_h handle() { return reinterpret_cast<ucp_mem_h>(&mapping); }

    ucs_status_t memory_types(uint64_t *out) override
    {
        calls.push_back("memory_types");
        if (query_status == UCS_OK) *out = types;
        return query_status;
    }
    ucs_status_t mem_map(const ucp_mem_map_params_t &params, ucp_mem_h *memh) override
    {
        calls.push_back("mem_map");
        maps.push_back(params);
        if (map_status == UCS_OK) *memh = handle();
        return map_status;
    }
    ucs_status_t rkey_pack(ucp_mem_h memh, void **buffer, size_t *length) override
    {
        calls.push_back("rkey_pack");
        EXPECT_EQ(memh, handle());
        if (pack_status != UCS_OK) return pack_status;
        *buffer = key;
        *length = sizeof key;
        return UCS_OK;
    }
    void rkey_buffer_release(void *buffer) override
    {
        calls.push_back("rkey_buffer_release");
        released.push_back(buffer);
    }
    ucs_status_t mem_unmap(ucp_mem_h memh) override
    {
        calls.push_back("mem_unmap");
        unmapped.push_back(memh);
        return UCS_OK;
    }
};

void *const kDevicePtr = reinterpret_cast<void *>(uintptr_t(0x7f0000200000));

using Calls = std::vector<std::string>;

}  // namespace

// ---------------------------------------------------------------- registration

TEST(GdrRegistration, MapsTheGivenDeviceRangeWithItsTypeAndNothingElse)
{
    FakeUcx ucx;
    std::unique_ptr<RegisteredRange> range;
    const Status st = RegisteredRange::create(ucx, kDevicePtr, 8192, UCS_MEMORY_TYPE_CUDA, &range);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_EQ(ucx.maps.size(), 1u);
    const ucp_mem_map_params_t &p = ucx.maps[0];
    // Exactly these fields: no FLAGS, so no UCP_MEM_MAP_ALLOCATE (the range exists).
    EXPECT_EQ(p.field_mask, uint64_t(UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                                     UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE));
    EXPECT_EQ(p.flags & UCP_MEM_MAP_ALLOCATE, 0u);
    EXPECT_EQ(p.memory_type, UCS_MEMORY_TYPE_CUDA);
    EXPECT_EQ(p.address, kDevicePtr);
    EXPECT_EQ(p.length, 8192u);
    EXPECT_EQ(range->packed_key(), std::string(ucx.key, sizeof ucx.key));
    EXPECT_EQ(ucx.released, std::vector<void *>{ucx.key});  // the packed buffer, once
    EXPECT_EQ(ucx.calls, (Calls{"mem_map", "rkey_pack", "rkey_buffer_release"}));
}

TEST(GdrRegistration, DestructorUnmapsExactlyOnce)
{
    FakeUcx ucx;
    std::unique_ptr<RegisteredRange> range;
    ASSERT_TRUE(RegisteredRange::create(ucx, kDevicePtr, 4096, UCS_MEMORY_TYPE_CUDA, &range).is_ok());
    EXPECT_TRUE(ucx.unmapped.empty());
    range.reset();
    EXPECT_EQ(ucx.unmapped, std::vector<ucp_mem_h>{ucx.handle()});
}

TEST(GdrRegistration, FailedMapNamesTheCallAndLeavesNothing)
{
    FakeUcx ucx;
    ucx.map_status = UCS_ERR_UNSUPPORTED;
    std::unique_ptr<RegisteredRange> range;
    const Status st = RegisteredRange::create(ucx, kDevicePtr, 4096, UCS_MEMORY_TYPE_CUDA, &range);
    EXPECT_FALSE(st.is_ok());
    EXPECT_EQ(st.message(), "ucp_mem_map(cuda, 4096 bytes at 0x7f0000200000): " +
                                std::string(ucs_status_string(UCS_ERR_UNSUPPORTED)));
    EXPECT_EQ(range, nullptr);
    EXPECT_EQ(ucx.calls, Calls{"mem_map"});  // nothing mapped, so nothing to unmap
}

TEST(GdrRegistration, FailedPackUnmapsOnce)
{
    FakeUcx ucx;
    ucx.pack_status = UCS_ERR_NO_MEMORY;
    std::unique_ptr<RegisteredRange> range;
    const Status st = RegisteredRange::create(ucx, kDevicePtr, 4096, UCS_MEMORY_TYPE_CUDA, &range);
    EXPECT_FALSE(st.is_ok());
    EXPECT_EQ(st.message(), "ucp_rkey_pack: " + std::string(ucs_status_string(UCS_ERR_NO_MEMORY)));
    EXPECT_EQ(range, nullptr);
    EXPECT_EQ(ucx.calls, (Calls{"mem_map", "rkey_pack", "mem_unmap"}));  // no buffer to release
    EXPECT_EQ(ucx.unmapped, std::vector<ucp_mem_h>{ucx.handle()});
}

// ---------------------------------------------------------------- the check's calls

namespace {

// Inputs where everything but UCX's answer and the probe allows GPUDirect.
GdrInputs near_nic()
{
    GdrInputs in;
    in.nic = "mlx5_0";
    in.gpu = "0000:3b:00.0";
    in.path = PathLevel::PIX;
    in.path_known = true;
    in.allowed = PathLevel::PXB;
    return in;
}

// A device range that records its use: the calls go to the fake's log too, so the
// order of allocation, registration and free is one list.
struct FakeRange {
    FakeUcx &ucx;
    Status alloc_status;
    std::vector<size_t> lengths;

    gpurdma::gpu::WithDeviceRange fn()
    {
        return [this](size_t length, const std::function<Status(void *)> &use) {
            lengths.push_back(length);
            if (!alloc_status.is_ok()) return alloc_status;
            ucx.calls.push_back("cuMemAlloc");
            const Status st = use(kDevicePtr);
            ucx.calls.push_back("cuMemFree");
            return st;
        };
    }
};

}  // namespace

TEST(GdrCheck, NoCudaSupportCallsNothingButTheQuery)
{
    FakeUcx ucx;
    ucx.types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    FakeRange range{ucx, Status::ok(), {}};
    const auto d = check_gdr(&ucx, "", near_nic(), range.fn());
    EXPECT_FALSE(d.eligible);
    EXPECT_EQ(d.reason, "UCX has no CUDA memory support (its memory types: host)");
    EXPECT_EQ(ucx.calls, Calls{"memory_types"});
    EXPECT_TRUE(range.lengths.empty());
}

TEST(GdrCheck, NoUcxCallsNothing)
{
    FakeUcx ucx;
    FakeRange range{ucx, Status::ok(), {}};
    const auto d = check_gdr(nullptr, "cannot start UCX: no transport", near_nic(), range.fn());
    EXPECT_FALSE(d.eligible);
    EXPECT_EQ(d.reason, "UCX's CUDA memory support is unknown (cannot start UCX: no transport)");
    EXPECT_TRUE(ucx.calls.empty());
    EXPECT_TRUE(range.lengths.empty());
}

TEST(GdrCheck, FailedQueryIsUnknownAndProbesNothing)
{
    FakeUcx ucx;
    ucx.query_status = UCS_ERR_INVALID_PARAM;
    FakeRange range{ucx, Status::ok(), {}};
    const auto d = check_gdr(&ucx, "", near_nic(), range.fn());
    EXPECT_EQ(d.reason, "UCX's CUDA memory support is unknown (ucp_context_query: " +
                            std::string(ucs_status_string(UCS_ERR_INVALID_PARAM)) + ")");
    EXPECT_EQ(ucx.calls, Calls{"memory_types"});
}

TEST(GdrCheck, FarNicProbesNothing)
{
    FakeUcx ucx;
    FakeRange range{ucx, Status::ok(), {}};
    GdrInputs in = near_nic();
    in.path = PathLevel::SYS;
    const auto d = check_gdr(&ucx, "", in, range.fn());
    EXPECT_FALSE(d.eligible);
    EXPECT_EQ(ucx.calls, Calls{"memory_types"});
}

TEST(GdrCheck, AcceptedProbeRegistersACudaRangeAndUnmapsBeforeTheFree)
{
    FakeUcx ucx;
    FakeRange range{ucx, Status::ok(), {}};
    const auto d = check_gdr(&ucx, "", near_nic(), range.fn());
    EXPECT_TRUE(d.eligible) << d.reason;
    EXPECT_EQ(d.reason,
              "UCX supports CUDA memory, GPU 0000:3b:00.0 to NIC mlx5_0 is PIX within "
              "coll_gpurdma_gdr_level PXB, and UCX registered a device range");
    EXPECT_EQ(range.lengths, std::vector<size_t>{kGdrProbeBytes});
    EXPECT_EQ(ucx.calls, (Calls{"memory_types", "cuMemAlloc", "mem_map", "rkey_pack", "rkey_buffer_release",
                                "mem_unmap", "cuMemFree"}));
    ASSERT_EQ(ucx.maps.size(), 1u);
    EXPECT_EQ(ucx.maps[0].memory_type, UCS_MEMORY_TYPE_CUDA);
    EXPECT_EQ(ucx.maps[0].address, kDevicePtr);
    EXPECT_EQ(ucx.maps[0].length, kGdrProbeBytes);
}

TEST(GdrCheck, RefusedProbeNamesUcxsStatusAndFreesTheRange)
{
    FakeUcx ucx;
    ucx.map_status = UCS_ERR_IO_ERROR;
    FakeRange range{ucx, Status::ok(), {}};
    const auto d = check_gdr(&ucx, "", near_nic(), range.fn());
    EXPECT_FALSE(d.eligible);
    EXPECT_EQ(d.reason, "UCX refused to register device memory: ucp_mem_map(cuda, 4096 bytes at 0x7f0000200000): " +
                            std::string(ucs_status_string(UCS_ERR_IO_ERROR)));
    EXPECT_EQ(ucx.calls, (Calls{"memory_types", "cuMemAlloc", "mem_map", "cuMemFree"}));
}

TEST(GdrCheck, FailedAllocationIsNotAProbe)
{
    FakeUcx ucx;
    FakeRange range{ucx, Status::unsupported("cuMemAlloc failed: out of memory (error 2)"), {}};
    const auto d = check_gdr(&ucx, "", near_nic(), range.fn());
    EXPECT_FALSE(d.eligible);
    EXPECT_EQ(d.reason, "device memory registration was not probed (cuMemAlloc failed: out of memory (error 2))");
    EXPECT_EQ(ucx.calls, Calls{"memory_types"});
}

// ---------------------------------------------------------------- the decision's table

namespace {

// Everything allows GPUDirect.
GdrInputs all_yes()
{
    GdrInputs in = near_nic();
    in.ucx_cuda = Answer::Yes;
    in.ucx_why = "its memory types: host, cuda";
    in.probe = Probe::Accepted;
    return in;
}

}  // namespace

TEST(GdrDecision, EachInputThatRulesItOutIsTheOneNamed)
{
    struct Row {
        const char *what;
        void (*change)(GdrInputs *);
        const char *reason;
    };
    const Row rows[] = {
        {"UCX without CUDA",
         [](GdrInputs *in) {
             in->ucx_cuda = Answer::No;
             in->ucx_why = "its memory types: host";
         },
         "UCX has no CUDA memory support (its memory types: host)"},
        {"UCX unknown",
         [](GdrInputs *in) {
             in->ucx_cuda = Answer::Unknown;
             in->ucx_why = "UCX not offered";
         },
         "UCX's CUDA memory support is unknown (UCX not offered)"},
        {"no NIC", [](GdrInputs *in) { in->nic.clear(); },
         "no RDMA NIC is chosen for this process (UCX picks its devices)"},
        {"far NIC", [](GdrInputs *in) { in->path = PathLevel::PHB; },
         "GPU 0000:3b:00.0 to NIC mlx5_0 is PHB, beyond coll_gpurdma_gdr_level PXB"},
        {"unknown path",
         [](GdrInputs *in) {
             in->path_known = false;
             in->path_why = "hwloc has no PCI device 0000:3b:00.0";
         },
         "GPU 0000:3b:00.0 to NIC mlx5_0: path unknown (hwloc has no PCI device 0000:3b:00.0), taken as SYS, "
         "beyond coll_gpurdma_gdr_level PXB"},
        {"stricter level", [](GdrInputs *in) { in->allowed = PathLevel::LOC; },
         "GPU 0000:3b:00.0 to NIC mlx5_0 is PIX, beyond coll_gpurdma_gdr_level LOC"},
        {"not probed",
         [](GdrInputs *in) {
             in->probe = Probe::NotRun;
             in->probe_why = "CUDA driver lacks cuMemAlloc";
         },
         "device memory registration was not probed (CUDA driver lacks cuMemAlloc)"},
        {"refused",
         [](GdrInputs *in) {
             in->probe = Probe::Refused;
             in->probe_why = "ucp_mem_map(cuda, 4096 bytes at 0x1000): Input/output error";
         },
         "UCX refused to register device memory: ucp_mem_map(cuda, 4096 bytes at 0x1000): Input/output error"},
    };
    EXPECT_TRUE(decide_gdr(all_yes()).eligible);
    for (const Row &row : rows) {
        GdrInputs in = all_yes();
        row.change(&in);
        const auto d = decide_gdr(in);
        EXPECT_FALSE(d.eligible) << row.what;
        EXPECT_EQ(d.reason, row.reason) << row.what;
        // Only the probe's own rows leave the probe worth running.
        EXPECT_EQ(gpurdma::gpu::gdr_probe_worthwhile(in), in.probe != Probe::Accepted) << row.what;
    }
}

TEST(GdrDecision, FirstInputInOrderDecides)
{
    GdrInputs in = all_yes();
    in.probe = Probe::Refused;
    in.path = PathLevel::SYS;
    in.nic.clear();
    in.ucx_cuda = Answer::No;
    in.ucx_why = "its memory types: host";
    EXPECT_EQ(decide_gdr(in).reason, "UCX has no CUDA memory support (its memory types: host)");
    in.ucx_cuda = Answer::Yes;
    EXPECT_EQ(decide_gdr(in).reason, "no RDMA NIC is chosen for this process (UCX picks its devices)");
    in.nic = "mlx5_0";
    EXPECT_EQ(decide_gdr(in).reason, "GPU 0000:3b:00.0 to NIC mlx5_0 is SYS, beyond coll_gpurdma_gdr_level PXB");
}

TEST(GdrDecision, LevelIsInclusiveAndAnUnknownPathPassesOnlySys)
{
    GdrInputs in = all_yes();
    in.path = PathLevel::PXB;  // == allowed
    EXPECT_TRUE(decide_gdr(in).eligible);
    in.path_known = false;
    in.path_why = "no hwloc";
    in.allowed = PathLevel::SYS;
    const auto d = decide_gdr(in);
    EXPECT_TRUE(d.eligible);
    EXPECT_EQ(d.reason,
              "UCX supports CUDA memory, GPU 0000:3b:00.0 to NIC mlx5_0: path unknown (no hwloc), taken as "
              "SYS within coll_gpurdma_gdr_level SYS, and UCX registered a device range");
}

// ---------------------------------------------------------------- this machine's UCX

namespace {

// Whether UCX's CUDA transport module is installed beside libucp (UCX loads its
// modules from <libdir>/ucx); where it is, CUDA support depends on the GPU found.
bool ucx_cuda_module_installed(std::string *where)
{
    void *ucp = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
    link_map *map = nullptr;
    const bool found = ucp && dlinfo(ucp, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name;
    const std::string lib = found ? map->l_name : "";
    if (ucp) dlclose(ucp);
    if (lib.empty()) return false;
    const std::string dir = lib.substr(0, lib.rfind('/')) + "/ucx/";
    struct stat st;
    for (const char *name : {"libuct_cuda.so.0", "libuct_cuda.so"}) {
        *where = dir + name;
        if (stat(where->c_str(), &st) == 0) return true;
    }
    return false;
}

// The real calls, counted, with unmap's status kept: the destructor's unmap is
// otherwise invisible.
struct CountingUcx : UcxMemoryApi {
    UcxMemoryApi &real;
    int maps = 0, unmaps = 0;
    ucs_status_t unmap_status = UCS_ERR_LAST;
    explicit CountingUcx(UcxMemoryApi &r) : real(r) {}
    ucs_status_t memory_types(uint64_t *t) override { return real.memory_types(t); }
    ucs_status_t mem_map(const ucp_mem_map_params_t &p, ucp_mem_h *m) override
    {
        ++maps;
        return real.mem_map(p, m);
    }
    ucs_status_t rkey_pack(ucp_mem_h m, void **b, size_t *l) override { return real.rkey_pack(m, b, l); }
    void rkey_buffer_release(void *b) override { real.rkey_buffer_release(b); }
    ucs_status_t mem_unmap(ucp_mem_h m) override
    {
        ++unmaps;
        return unmap_status = real.mem_unmap(m);
    }
};

}  // namespace

// UCX 1.13 as installed here (no CUDA module): ucp_context_query reports host memory only.
TEST(GdrRealUcx, QueryReportsNoCudaMemoryHere)
{
    std::string module;
    if (ucx_cuda_module_installed(&module)) GTEST_SKIP() << "UCX has its CUDA module here: " << module;
    std::unique_ptr<gpurdma::transport::UcxContext> context;
    const Status st = gpurdma::transport::UcxContext::create("", "", {}, &context);
    ASSERT_TRUE(st.is_ok()) << st.message();
    gpurdma::transport::UcpMemoryApi ucx(context->context());
    uint64_t types = 0;
    ASSERT_EQ(ucx.memory_types(&types), UCS_OK);
    EXPECT_EQ(types, uint64_t(UCS_BIT(UCS_MEMORY_TYPE_HOST)));
    // And so the check asks nothing more of UCX.
    const auto d = check_gdr(&ucx, "", near_nic(), [](size_t, const std::function<Status(void *)> &) {
        ADD_FAILURE() << "probed without CUDA support";
        return Status::ok();
    });
    EXPECT_EQ(d.reason, "UCX has no CUDA memory support (its memory types: host)");
}

TEST(GdrRealUcx, HostRangeMapsPacksAndUnmapsThroughTheSeam)
{
    std::unique_ptr<gpurdma::transport::UcxContext> context;
    const Status st = gpurdma::transport::UcxContext::create("", "", {}, &context);
    ASSERT_TRUE(st.is_ok()) << st.message();
    gpurdma::transport::UcpMemoryApi real(context->context());
    CountingUcx ucx(real);
    std::vector<char> host(kGdrProbeBytes);
    std::unique_ptr<RegisteredRange> range;
    const Status mapped = RegisteredRange::create(ucx, host.data(), host.size(), UCS_MEMORY_TYPE_HOST, &range);
    ASSERT_TRUE(mapped.is_ok()) << mapped.message();
    EXPECT_FALSE(range->packed_key().empty());
    range.reset();
    EXPECT_EQ(ucx.maps, 1);
    EXPECT_EQ(ucx.unmaps, 1);
    EXPECT_EQ(ucx.unmap_status, UCS_OK);
}
