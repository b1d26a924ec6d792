// Whether GPU buffers could go between nodes by GPUDirect RDMA (RMA straight from GPU
// memory), as a pure function of what was found, so that every branch is unit-tested
// on a machine with neither a CUDA-capable UCX nor an RDMA NIC. The inputs are checked
// in order (UCX, NIC, path, registration); the first that rules GPUDirect out is the
// one the reason names.
#pragma once

#include <string>

#include "topo/gpu_nic.h"

namespace gpurdma::gpu {

enum class Answer { Yes, No, Unknown };
enum class Probe { NotRun, Accepted, Refused };

struct GdrInputs {
    Answer ucx_cuda = Answer::Unknown;  // the GPU's memory type (CUDA, ROCm) in ucp_context_query's memory_types
    std::string memory = "CUDA";  // that memory type's name, for the reason (gdr_check: ROCm under HIP)
    std::string ucx_why;  // No: what UCX reported; Unknown: why it could not tell
    std::string nic;  // the RDMA NIC chosen for this process ("" = none: UCX's choice)
    std::string gpu;  // the GPU's PCI bus id
    topo::PathLevel path = topo::PathLevel::SYS;  // GPU to NIC
    bool path_known = false;  // false: hwloc could not tell (path_why), taken as SYS
    std::string path_why;
    topo::PathLevel allowed = topo::PathLevel::PXB;  // coll_gpurdma_gdr_level
    Probe probe = Probe::NotRun;  // UCX registering a device range (ucp_mem_map, ucp_rkey_pack)
    std::string probe_why;  // NotRun / Refused: why
};

struct GdrDecision {
    bool eligible = false;
    std::string reason;  // one sentence, printed at verbose 1
};

// Whether everything but the probe allows GPUDirect, i.e. whether a probe is worth running.
bool gdr_probe_worthwhile(const GdrInputs &in);

GdrDecision decide_gdr(const GdrInputs &in);

}  // namespace gpurdma::gpu
