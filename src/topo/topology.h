// Who is where: node membership and local ranks, from each rank's host name and
// an optional logical-node override that splits one host into several virtual
// nodes (so the hierarchical path runs on a single machine too).
#pragma once

#include <string>
#include <vector>

namespace gpurdma::topo {

struct Topology {
    int size = 0;
    std::vector<int> node_of;  // rank -> node index (by lowest rank, or topo/fabric_order.h)
    std::vector<int> local_rank;  // rank -> index within its node (by rank)
    std::vector<std::vector<int>> members;  // node -> its ranks, ascending
    std::vector<std::string> node_names;  // host name, with "#k" for virtual nodes

    int nodes() const { return static_cast<int>(members.size()); }
    int max_ppn() const;
    int min_ppn() const;
    bool regular() const { return max_ppn() == min_ppn(); }
    // "2 nodes x 4 ranks" or "3 nodes (3+1+2 ranks)".
    std::string summary() const;
};

// The node a process belongs to: its host, or with logical_nodes one of the host's
// virtual nodes ("host#k"). The virtual node follows the process, not a
// communicator: it is chosen by the process's local rank among the job's
// local_processes on the host, so dup'ed and split communicators see the same map.
// logical_nodes: "" (the host), "K" (nodes of K processes, in local-rank order) or
// "a,b,c" (sizes of consecutive nodes, summing to local_processes). A malformed or
// non-fitting override, or an unknown local rank (< 0), sets *warning and gives the host.
std::string logical_node(const std::string &host, const std::string &logical_nodes, int local_rank, int local_processes,
                         std::string *warning);

// nodes[r] is rank r's node (host or logical node name): ranks with the same name
// form a node, nodes ordered by their lowest rank.
Topology build_topology(const std::vector<std::string> &nodes);

// For tests and tools that describe a whole job at once: hosts[r] is rank r's host,
// and each rank's local rank is its position among the ranks of its host.
Topology build_topology(const std::vector<std::string> &hosts, const std::string &logical_nodes, std::string *warning);

// This host's name ("unknown-host" if it cannot be read).
std::string this_host();

// Parses "K" or "a,b,c" into positive sizes; false if malformed.
bool parse_node_sizes(const std::string &text, std::vector<int> *sizes);

}  // namespace gpurdma::topo
