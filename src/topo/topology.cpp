#include "topo/topology.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

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

Topology build_topology(const std::vector<std::string> &hosts, const std::string &logical_nodes,
                        std::string *warning)
{
    Topology t;
    t.size = static_cast<int>(hosts.size());
    // Ranks per host, in rank order, hosts in order of first appearance.
    std::vector<std::string> host_order;
    std::map<std::string, std::vector<int>> by_host;
    for (int r = 0; r < t.size; ++r) {
        auto &v = by_host[hosts[r]];
        if (v.empty()) host_order.push_back(hosts[r]);
        v.push_back(r);
    }
    std::vector<int> sizes;
    bool split = false;
    if (!logical_nodes.empty()) {
        if (!parse_node_sizes(logical_nodes, &sizes)) {
            *warning = "logical_nodes '" + logical_nodes + "' is not K or a comma-separated list of sizes; ignored";
        } else if (sizes.size() > 1) {
            const long sum = std::accumulate(sizes.begin(), sizes.end(), 0L);
            bool fits = true;
            for (const auto &h : host_order)
                if (static_cast<long>(by_host[h].size()) != sum) fits = false;
            if (fits) split = true;
            else *warning = "logical_nodes '" + logical_nodes + "' does not add up to the ranks on every host; ignored";
        } else {
            split = true;
        }
    }
    for (const auto &h : host_order) {
        const auto &ranks = by_host[h];
        if (!split) {
            t.members.push_back(ranks);
            t.node_names.push_back(h);
            continue;
        }
        size_t pos = 0;
        for (int k = 0; pos < ranks.size(); ++k) {
            const size_t n = sizes.size() == 1 ? static_cast<size_t>(sizes[0]) : static_cast<size_t>(sizes[k]);
            const size_t end = std::min(ranks.size(), pos + n);
            t.members.emplace_back(ranks.begin() + static_cast<long>(pos), ranks.begin() + static_cast<long>(end));
            t.node_names.push_back(h + "#" + std::to_string(k));
            pos = end;
        }
    }
    // Nodes ordered by their lowest rank, so every rank numbers them alike.
    std::vector<size_t> order(t.members.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.members[a][0] < t.members[b][0]; });
    Topology sorted = t;
    for (size_t i = 0; i < order.size(); ++i) {
        sorted.members[i] = t.members[order[i]];
        sorted.node_names[i] = t.node_names[order[i]];
    }
    sorted.node_of.assign(static_cast<size_t>(t.size), -1);
    sorted.local_rank.assign(static_cast<size_t>(t.size), -1);
    for (size_t n = 0; n < sorted.members.size(); ++n)
        for (size_t i = 0; i < sorted.members[n].size(); ++i) {
            sorted.node_of[sorted.members[n][i]] = static_cast<int>(n);
            sorted.local_rank[sorted.members[n][i]] = static_cast<int>(i);
        }
    return sorted;
}

}  // namespace gpurdma::topo
