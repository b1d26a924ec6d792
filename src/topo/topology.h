// Who is where: node membership and local ranks, from each rank's host name and
// an optional logical-node override that splits one host into several virtual
// nodes (so the hierarchical path runs on a single machine too).
#pragma once

#include <string>
#include <vector>

namespace gpurdma::topo {

struct Topology {
    int size = 0;
    std::vector<int> node_of;               // rank -> node index (nodes ordered by lowest rank)
    std::vector<int> local_rank;            // rank -> index within its node (by rank)
    std::vector<std::vector<int>> members;  // node -> its ranks, ascending
    std::vector<std::string> node_names;    // host name, with "#k" for virtual nodes

    int nodes() const { return static_cast<int>(members.size()); }
    int max_ppn() const;
    int min_ppn() const;
    bool regular() const { return max_ppn() == min_ppn(); }
    // "2 nodes x 4 ranks" or "3 nodes (3+1+2 ranks)".
    std::string summary() const;
};

// hosts[r] is rank r's host name. logical_nodes: "" (one node per host), "K" (split
// each host's ranks, in rank order, into virtual nodes of K), or "a,b,c" (sizes of
// consecutive virtual nodes on each host, summing to that host's rank count). A
// malformed or non-fitting override sets *warning and is ignored.
Topology build_topology(const std::vector<std::string> &hosts, const std::string &logical_nodes,
                        std::string *warning);

// Parses "K" or "a,b,c" into positive sizes; false if malformed.
bool parse_node_sizes(const std::string &text, std::vector<int> *sizes);

}  // namespace gpurdma::topo
