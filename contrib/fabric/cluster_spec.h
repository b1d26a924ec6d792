// A cluster as the fabric command reads it: nodes of GPUs, one NIC per rail, a two-tier
// fat tree per rail (rail-optimised: NIC r of every node on plane r, the planes alike),
// the switches' buffer and thresholds. A text file of `key = value` lines ('#' comments);
// every key has a default, so a file names only what differs (contrib/fabric/clusters/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric_model.h"

namespace gpurdma::fabric {

struct ClusterSpec {
    int nodes = 16;
    int gpus_per_node = 8;  // = rails: the node stage gives each GPU one slice, on its own NIC
    double nic_gbps = 400;  // each rail's NIC, and every link of its plane
    int hosts_per_leaf = 16;  // nodes under one leaf switch of a plane
    int spines = 16;  // spine switches of a plane (every leaf linked to every spine once)
    double link_delay_us = 1.0;  // per link traversal (cable and switch)
    double reduce_gbps = 1000;  // GB/s of the rail stage's reduction (on the GPU)
    // GB/s a GPU reads from its node peers in the node stages (NVLink/NVSwitch); 0: the node
    // stages are not modelled (taken as never the bottleneck), nor weighed by the planner.
    double nvlink_gbps = 0;
    // Which leaf each node sits under: "linear" (node i under leaf i / hosts_per_leaf, ring
    // neighbours mostly on one leaf) or "random" (a job scheduler's scattered allocation,
    // seeded by `seed`: most ring neighbours across the spines, ECMP collisions among them).
    std::string placement = "linear";
    // Whether gpurdma knows which leaf each node sits under (Slurm's topology.conf or
    // SLURM_TOPOLOGY_ADDR, coll_gpurdma_fabric_topology): it then numbers the nodes of one
    // leaf next to each other (topo/fabric_order.h). "unknown": nodes in rank order.
    bool topology_known = true;
    // A Slurm topology.conf (the file coll_gpurdma_fabric_topology reads): the job's nodes
    // are its nodes in name order, "n2" before "n10", as Slurm ranks them (`nodes` of them,
    // all by default), each under the leaf the file names; leaves numbered in the order the
    // job first meets them, each hosts_per_leaf plane hosts. Replaces `placement`.
    std::string topology_file;
    std::vector<std::string> file_nodes;  // read from it: the nodes, in name order
    std::vector<std::string> file_address;  // and each one's switches ("spine.leaf3")
    // gpurdma's coll_gpurdma_rail_qps: a rail peer's writes striped over this many QPs
    // (slot by slot), each hashed by ECMP on its own; its automatic value across hosts.
    int rail_qps = 2;
    FabricParams fabric;  // buffer, ECN, PFC, DCQCN (link rate and delay set from above)

    // The fabric parameters with the link rate and delay above filled in.
    FabricParams params() const;
    // The plane host of each node (a permutation of 0 .. nodes-1, by placement; with a
    // topology file, its leaf's next host).
    std::vector<int> host_of_node() const;
    // Hosts of a rail plane: `nodes`, or with a topology file its leaves x hosts_per_leaf.
    int plane_hosts() const;
    // After every key is set: false with *error where they do not fit together.
    bool check(std::string *error) const;
    // Each node's address as Slurm would give it ("leaf3"), by node.
    std::vector<std::string> leaf_addresses() const;
    // The order gpurdma numbers the nodes in: topo::fabric_order of the leaves when the
    // topology is known, else rank order.
    std::vector<int> node_order() const;
    // The plane host of the node gpurdma numbers k (host_of_node in node_order).
    std::vector<int> host_of_index() const;
    std::string describe() const;
};

// Reads `path` over the defaults; false with *error naming the line on a bad key or value.
bool read_cluster_spec(const std::string &path, ClusterSpec *spec, std::string *error);

// One `key = value` assignment (also for command-line overrides: --set key=value).
bool set_cluster_key(ClusterSpec *spec, const std::string &key, const std::string &value, std::string *error);

}  // namespace gpurdma::fabric
