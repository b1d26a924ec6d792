// GPU-NIC distance, for GPUDirect RDMA eligibility: how far a GPU is from the NIC,
// on NCCL_NET_GDR_LEVEL's scale, from hwloc's PCI tree. A NIC reading GPU memory across a host bridge or
// the SMP interconnect is often slower than staging through host memory, so RMA
// from GPU memory is allowed only up to coll_gpurdma_gdr_level.
#pragma once

#include <string>

#include "base/status.h"

namespace gpurdma::topo {

// Nearest first. LOC same device, PIX at most one PCIe bridge, PXB several bridges
// (no host bridge), PHB through the PCIe host bridge (same CPU), SYS across the SMP
// interconnect (another NUMA node).
enum class PathLevel { LOC = 0, PIX, PXB, PHB, SYS };

bool parse_path_level(const std::string &text, PathLevel *level);  // case-insensitive
const char *path_level_name(PathLevel level);

// The path type from where the two devices meet in the tree (pure, for tests):
// same_device; meet_in_io (a PCI bridge or host bridge is the common ancestor);
// meet_is_host_bridge; bridges (bridges crossed on the way from one to the other);
// numa_nodes (NUMA nodes under the common ancestor when it is not an I/O object).
PathLevel classify_path(bool same_device, bool meet_in_io, bool meet_is_host_bridge, int bridges, int numa_nodes);

// The level between the GPU (PCI bus id "0000:3b:00.0") and the NIC (hwloc OS device
// name "mlx5_0", a ":port" suffix is ignored) in *level. If hwloc cannot tell: *level
// is SYS (the farthest) and the status says why.
Status gpu_nic_level(const std::string &gpu_bus_id, const std::string &nic, PathLevel *level);

}  // namespace gpurdma::topo
