// Network devices near this process, from hwloc's PCI tree: each rank drives its
// rail through the NIC closest to its CPUs (and, once GPUs arrive, its GPU), not a
// NIC picked by local rank.
#pragma once

#include <string>
#include <vector>

namespace gpurdma::topo {

struct Nic {
    std::string name;  // hwloc OS device name: "mlx5_0" (RDMA) or "eth0"
    bool rdma = false;  // an OpenFabrics (verbs) device
    int distance = 0;  // topology levels between our CPU binding and the NIC's locality
};

// Every network device hwloc sees, nearest first (RDMA before plain Ethernet at
// equal distance). Empty with *why set if hwloc cannot tell.
std::vector<Nic> local_nics(std::string *why);

// "mlx5_0:1,mlx5_1:1" or "^mlx5_2" (NCCL_IB_HCA style; the port suffix is kept for
// UCX). False if malformed.
bool parse_device_list(const std::string &text, std::vector<std::string> *devices, bool *exclude);

// The UCX device ("mlx5_0:1") for this process: the nearest RDMA NIC allowed by the
// list, or "" to leave UCX's own choice (no RDMA NIC, or none allowed).
std::string choose_rail_device(const std::vector<Nic> &nics, const std::vector<std::string> &devices, bool exclude);

}  // namespace gpurdma::topo
