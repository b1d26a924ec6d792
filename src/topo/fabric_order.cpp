#include "topo/fabric_order.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace gpurdma::topo {
namespace {

// "s0.s3" -> {"s0", "s0.s3"}: the address's prefixes, top switch first.
std::vector<std::string> prefixes(const std::string &address)
{
    std::vector<std::string> out;
    for (size_t dot = address.find('.'); dot != std::string::npos; dot = address.find('.', dot + 1))
        out.push_back(address.substr(0, dot));
    out.push_back(address);
    return out;
}

std::string leaf_of(const std::string &address)
{
    const size_t dot = address.rfind('.');
    return dot == std::string::npos ? address : address.substr(dot + 1);
}

}  // namespace

std::vector<int> fabric_order(const std::vector<std::string> &address)
{
    const int n = static_cast<int>(address.size());
    if (std::any_of(address.begin(), address.end(), [](const std::string &a) { return a.empty(); })) return {};
    // Each prefix ranks by the lowest node under it; a node's key is those ranks from the
    // top down, then its own index. Sorting by the keys keeps every switch's nodes together.
    std::map<std::string, int> first_under;
    for (int k = 0; k < n; ++k)
        for (const std::string &p : prefixes(address[static_cast<size_t>(k)])) first_under.emplace(p, k);
    std::vector<std::vector<int>> key(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
        for (const std::string &p : prefixes(address[static_cast<size_t>(k)]))
            key[static_cast<size_t>(k)].push_back(first_under[p]);
        key[static_cast<size_t>(k)].push_back(k);
    }
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return key[static_cast<size_t>(a)] < key[static_cast<size_t>(b)]; });
    return order;
}

void reorder_nodes(Topology *t, const std::vector<int> &order)
{
    std::vector<std::vector<int>> members;
    std::vector<std::string> names;
    for (int old : order) {
        members.push_back(t->members[static_cast<size_t>(old)]);
        names.push_back(t->node_names[static_cast<size_t>(old)]);
    }
    t->members = std::move(members);
    t->node_names = std::move(names);
    for (int k = 0; k < t->nodes(); ++k)
        for (int r : t->members[static_cast<size_t>(k)]) t->node_of[static_cast<size_t>(r)] = k;
}

std::string describe_fabric(const Topology &t, const std::vector<std::string> &address)
{
    // Leaves in node order (which, ordered, is the ring's order).
    std::vector<std::pair<std::string, int>> leaves;
    for (int k = 0; k < t.nodes(); ++k) {
        const std::string &a = address[static_cast<size_t>(k)];
        if (leaves.empty() || leaves.back().first != a) leaves.emplace_back(a, 0);
        ++leaves.back().second;
    }
    std::string s = std::to_string(t.nodes()) + " nodes under " + std::to_string(leaves.size()) +
                    (leaves.size() == 1 ? " leaf switch (" : " leaf switches (");
    const size_t shown = std::min<size_t>(leaves.size(), 8);
    for (size_t i = 0; i < shown; ++i)
        s += (i ? ", " : "") + leaf_of(leaves[i].first) + ": " + std::to_string(leaves[i].second);
    if (shown < leaves.size()) s += ", ...";
    return s + ")";
}

}  // namespace gpurdma::topo
