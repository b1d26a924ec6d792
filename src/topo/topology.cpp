#include "topo/topology.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

#include <unistd.h>

namespace gpurdma::topo {

int Topology::max_ppn() const
{
    size_t m = 0;
    for (const auto &n : members) m = std::max(m, n.size());
    return static_cast<int>(m);
}

int Topology::min_ppn() const
{
    if (members.empty()) return 0;
    size_t m = members[0].size();
    for (const auto &n : members) m = std::min(m, n.size());
    return static_cast<int>(m);
}

std::string Topology::summary() const
{
    std::string s = std::to_string(nodes()) + (nodes() == 1 ? " node" : " nodes");
    if (regular()) return s + " x " + std::to_string(max_ppn()) + (max_ppn() == 1 ? " rank" : " ranks");
    s += " (";
    for (size_t i = 0; i < members.size(); ++i) s += (i ? "+" : "") + std::to_string(members[i].size());
    return s + " ranks)";
}

std::string this_host()
{
    char buf[256] = {0};
    if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
    return buf;
}

bool parse_node_sizes(const std::string &text, std::vector<int> *sizes)
{
    sizes->clear();
    size_t i = 0;
    while (i < text.size()) {
        if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
        long v = 0;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
            v = v * 10 + (text[i] - '0');
            if (v > 1 << 20) return false;
            ++i;
        }
        if (v <= 0) return false;
        sizes->push_back(static_cast<int>(v));
        if (i < text.size()) {
            if (text[i] != ',' || i + 1 == text.size()) return false;
            ++i;
        }
    }
    return !sizes->empty();
}

std::string logical_node(const std::string &host, const std::string &logical_nodes, int local_rank, int local_processes,
                         std::string *warning)
{
    if (logical_nodes.empty()) return host;
    std::vector<int> sizes;
    if (!parse_node_sizes(logical_nodes, &sizes)) {
        *warning = "logical_nodes '" + logical_nodes + "' is not K or a comma-separated list of sizes; ignored";
        return host;
    }
    if (local_rank < 0 || local_processes <= local_rank) {
        *warning = "logical_nodes '" + logical_nodes +
                   "' needs the process's local rank and the job's processes on "
                   "the host, which are unknown; ignored";
        return host;
    }
    if (sizes.size() == 1) return host + "#" + std::to_string(local_rank / sizes[0]);
    const long sum = std::accumulate(sizes.begin(), sizes.end(), 0L);
    if (sum != local_processes) {
        *warning = "logical_nodes '" + logical_nodes + "' does not add up to the " + std::to_string(local_processes) +
                   " processes on host " + host + "; ignored";
        return host;
    }
    int k = 0;
    for (long end = sizes[0]; local_rank >= end; end += sizes[static_cast<size_t>(k)]) ++k;
    return host + "#" + std::to_string(k);
}

Topology build_topology(const std::vector<std::string> &nodes)
{
    Topology t;
    t.size = static_cast<int>(nodes.size());
    // Ranks in rank order, so nodes come out ordered by their lowest rank.
    std::map<std::string, int> index;
    t.node_of.assign(nodes.size(), -1);
    t.local_rank.assign(nodes.size(), -1);
    for (int r = 0; r < t.size; ++r) {
        const auto it = index.emplace(nodes[static_cast<size_t>(r)], t.nodes()).first;
        if (it->second == t.nodes()) {
            t.members.emplace_back();
            t.node_names.push_back(it->first);
        }
        auto &m = t.members[static_cast<size_t>(it->second)];
        t.node_of[static_cast<size_t>(r)] = it->second;
        t.local_rank[static_cast<size_t>(r)] = static_cast<int>(m.size());
        m.push_back(r);
    }
    return t;
}

Topology build_topology(const std::vector<std::string> &hosts, const std::string &logical_nodes, std::string *warning)
{
    std::map<std::string, int> on_host;
    for (const auto &h : hosts) ++on_host[h];
    std::map<std::string, int> seen;
    std::vector<std::string> nodes;
    for (const auto &h : hosts) nodes.push_back(logical_node(h, logical_nodes, seen[h]++, on_host[h], warning));
    return build_topology(nodes);
}

}  // namespace gpurdma::topo
