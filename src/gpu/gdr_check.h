// The GPUDirect RDMA check's calls: asks UCX whether it supports CUDA memory and, only
// where that, the NIC and the path allow it (gdr_decision.h), registers a small device
// range with UCX as a probe, then decides. The device range comes from the caller
// (DeviceTeam: cuMemAlloc on its context), so the check runs in the unit tests against
// a fake UCX and a fake range.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "base/status.h"
#include "gpu/gdr_decision.h"
#include "transport/ucx_memory_api.h"

namespace gpurdma::gpu {

// Accepted means ucp_mem_map and ucp_rkey_pack succeeded. UCX 1.13 does not say which of
// its memory domains took the range (the NIC's takes GPU memory only with nvidia-peermem
// or dma-buf), and a UCX without CUDA support maps even a host range typed CUDA: the
// probe can rule GPUDirect out, not prove that the NIC reads GPU memory.
constexpr size_t kGdrProbeBytes = 4096;

// Allocates `length` bytes of device memory, runs use on them and frees them; its
// Status: the allocation's failure, or use's.
using WithDeviceRange = std::function<Status(size_t length, const std::function<Status(void *address)> &use)>;

// UCX's memory type for device memory of this process's GPU runtime: ROCM under HIP,
// CUDA otherwise.
ucs_memory_type_t device_memory_type();

// in: the NIC, GPU, path and allowed level; the rest is filled here. ucx null: no UCX
// (ucx_why says why: not offered, or its start failed).
GdrDecision check_gdr(transport::UcxMemoryApi *ucx, const std::string &ucx_why, GdrInputs in,
                      const WithDeviceRange &with_range);

}  // namespace gpurdma::gpu
