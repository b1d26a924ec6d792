#include "cluster_spec.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include "topo/fabric_order.h"
#include "topo/switch_topology.h"

namespace gpurdma::fabric {

namespace {

std::string trim(const std::string &s)
{
    const size_t a = s.find_first_not_of(" \t\r");
    if (a == std::string::npos) return "";
    const size_t b = s.find_last_not_of(" \t\r");
    return s.substr(a, b - a + 1);
}

// Sizes may say KiB/MiB/GiB (or K/M/G, powers of two).
bool parse_bytes(const std::string &text, uint64_t *out)
{
    char *end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || v < 0) return false;
    const std::string unit = trim(end);
    double scale = 1;
    if (unit == "K" || unit == "KiB" || unit == "KB") scale = 1024;
    else if (unit == "M" || unit == "MiB" || unit == "MB") scale = 1024.0 * 1024;
    else if (unit == "G" || unit == "GiB" || unit == "GB") scale = 1024.0 * 1024 * 1024;
    else if (!unit.empty() && unit != "B") return false;
    *out = static_cast<uint64_t>(v * scale + 0.5);
    return true;
}

bool parse_number(const std::string &text, double *out)
{
    char *end = nullptr;
    *out = std::strtod(text.c_str(), &end);
    return end != text.c_str() && trim(end).empty();
}

bool parse_flag(const std::string &text, bool *out)
{
    if (text == "1" || text == "on" || text == "yes" || text == "true") *out = true;
    else if (text == "0" || text == "off" || text == "no" || text == "false") *out = false;
    else return false;
    return true;
}

}  // namespace

FabricParams ClusterSpec::params() const
{
    FabricParams p = fabric;
    p.link_gbps = nic_gbps;
    p.link_delay_us = link_delay_us;
    return p;
}

namespace {

// "n2" < "n10": runs of digits compare by value.
bool natural_less(const std::string &a, const std::string &b)
{
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
        const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
        if (da && db) {
            size_t ie = i, je = j;
            while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
            while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
            const std::string x = a.substr(i, ie - i), y = b.substr(j, je - j);
            const size_t xs = x.find_first_not_of('0'), ys = y.find_first_not_of('0');
            const std::string xv = xs == std::string::npos ? "" : x.substr(xs);
            const std::string yv = ys == std::string::npos ? "" : y.substr(ys);
            if (xv.size() != yv.size()) return xv.size() < yv.size();
            if (xv != yv) return xv < yv;
            i = ie;
            j = je;
        } else {
            if (a[i] != b[j]) return a[i] < b[j];
            ++i;
            ++j;
        }
    }
    return a.size() - i < b.size() - j;
}

// The job's nodes' leaves (their addresses), numbered in the order they first appear.
std::vector<int> file_leaf_index(const ClusterSpec &s)
{
    std::map<std::string, int> index;
    std::vector<int> out;
    for (int n = 0; n < s.nodes && n < static_cast<int>(s.file_address.size()); ++n)
        out.push_back(index.emplace(s.file_address[static_cast<size_t>(n)], static_cast<int>(index.size())).first->second);
    return out;
}

}  // namespace

int ClusterSpec::plane_hosts() const
{
    if (topology_file.empty()) return nodes;
    const std::vector<int> leaf = file_leaf_index(*this);
    return leaf.empty() ? nodes : (*std::max_element(leaf.begin(), leaf.end()) + 1) * hosts_per_leaf;
}

bool ClusterSpec::check(std::string *error) const
{
    if (topology_file.empty()) return true;
    if (nodes > static_cast<int>(file_nodes.size())) {
        *error = topology_file + " lists " + std::to_string(file_nodes.size()) + " nodes, fewer than nodes = " +
                 std::to_string(nodes);
        return false;
    }
    std::map<int, int> on_leaf;
    for (int l : file_leaf_index(*this))
        if (++on_leaf[l] > hosts_per_leaf) {
            *error = topology_file + ": a leaf has more than hosts_per_leaf = " + std::to_string(hosts_per_leaf) +
                     " of the job's nodes";
            return false;
        }
    return true;
}

std::vector<int> ClusterSpec::host_of_node() const
{
    if (!topology_file.empty()) {
        std::vector<int> hosts, used;
        for (int l : file_leaf_index(*this)) {
            if (static_cast<size_t>(l) >= used.size()) used.resize(static_cast<size_t>(l) + 1, 0);
            hosts.push_back(l * hosts_per_leaf + used[static_cast<size_t>(l)]++);
        }
        return hosts;
    }
    std::vector<int> hosts(static_cast<size_t>(nodes));
    std::iota(hosts.begin(), hosts.end(), 0);
    if (placement == "random") {
        std::mt19937_64 rng(fabric.seed);
        std::shuffle(hosts.begin(), hosts.end(), rng);
    }
    return hosts;
}

std::vector<std::string> ClusterSpec::leaf_addresses() const
{
    std::vector<std::string> out;
    if (!topology_file.empty()) return {file_address.begin(), file_address.begin() + nodes};
    for (int host : host_of_node()) out.push_back("leaf" + std::to_string(host / hosts_per_leaf));
    return out;
}

std::vector<int> ClusterSpec::node_order() const
{
    std::vector<int> order;
    if (topology_known) order = topo::fabric_order(leaf_addresses());
    if (order.empty()) {
        order.resize(static_cast<size_t>(nodes));
        std::iota(order.begin(), order.end(), 0);
    }
    return order;
}

std::vector<int> ClusterSpec::host_of_index() const
{
    const std::vector<int> host = host_of_node();
    std::vector<int> out;
    for (int n : node_order()) out.push_back(host[static_cast<size_t>(n)]);
    return out;
}

std::string ClusterSpec::describe() const
{
    std::ostringstream o;
    o << nodes << " nodes x " << gpus_per_node << " GPUs, " << gpus_per_node << " rails of " << nic_gbps
      << " Gb/s; per rail a two-tier fat tree: " << (plane_hosts() + hosts_per_leaf - 1) / hosts_per_leaf
      << " leaves of " << hosts_per_leaf << " nodes ("
      << (topology_file.empty() ? placement + " placement" : "placement from " + topology_file) << ", topology "
      << (topology_known ? "known: nodes in fabric order" : "unknown: nodes in rank order") << "), "
      << rail_qps << (rail_qps == 1 ? " QP" : " QPs") << " per rail peer, " << spines << " spines, " << link_delay_us
      << " us per link; "
      << (nvlink_gbps > 0 ? "node stages at " + std::to_string(static_cast<int>(nvlink_gbps)) + " GB/s per GPU"
                          : std::string("node stages not modelled"))
      << "; switch buffer " << (fabric.switch_buffer >> 20) << " MiB; ECN " << (fabric.ecn ? "on" : "off")
      << ", PFC " << (fabric.pfc ? "on" : "off") << ", DCQCN " << (fabric.dcqcn ? "on" : "off");
    return o.str();
}

bool set_cluster_key(ClusterSpec *s, const std::string &key, const std::string &value, std::string *error)
{
    double d = 0;
    uint64_t b = 0;
    bool f = false;
    auto integer = [&](int *field, int lo) {
        if (!parse_number(value, &d) || d < lo || d != static_cast<int>(d)) return false;
        *field = static_cast<int>(d);
        return true;
    };
    auto positive = [&](double *field) {
        if (!parse_number(value, &d) || d <= 0) return false;
        *field = d;
        return true;
    };
    auto nonnegative = [&](double *field) {
        if (!parse_number(value, &d) || d < 0) return false;
        *field = d;
        return true;
    };
    auto bytes = [&](uint64_t *field) {
        if (!parse_bytes(value, &b)) return false;
        *field = b;
        return true;
    };
    auto flag = [&](bool *field) {
        if (!parse_flag(value, &f)) return false;
        *field = f;
        return true;
    };
    FabricParams &p = s->fabric;
    const std::map<std::string, std::function<bool()>> setters = {
        {"nodes", [&] { return integer(&s->nodes, 2); }},
        {"gpus_per_node", [&] { return integer(&s->gpus_per_node, 1); }},
        {"nic_gbps", [&] { return positive(&s->nic_gbps); }},
        {"hosts_per_leaf", [&] { return integer(&s->hosts_per_leaf, 1); }},
        {"spines", [&] { return integer(&s->spines, 1); }},
        {"link_delay_us", [&] { return nonnegative(&s->link_delay_us); }},
        {"reduce_gbps", [&] { return positive(&s->reduce_gbps); }},
        {"nvlink_gbps", [&] { return nonnegative(&s->nvlink_gbps); }},
        {"placement",
         [&] {
             if (value != "linear" && value != "random") return false;
             s->placement = value;
             return true;
         }},
        {"rail_qps", [&] { return integer(&s->rail_qps, 1); }},
        {"topology_file",
         [&] {
             topo::SwitchTopology file;
             if (!file.read(value, error)) return false;
             s->topology_file = value;
             s->file_nodes = file.nodes();
             // A job's ranks follow the nodes' names (Slurm's node order, as slurm.conf
             // usually lists them): "n2" before "n10".
             std::stable_sort(s->file_nodes.begin(), s->file_nodes.end(), natural_less);
             s->file_address.clear();
             for (const std::string &n : s->file_nodes) s->file_address.push_back(file.address_of(n));
             s->nodes = static_cast<int>(s->file_nodes.size());
             return s->nodes >= 2;
         }},
        {"topology",
         [&] {
             if (value != "known" && value != "unknown") return false;
             s->topology_known = value == "known";
             return true;
         }},
        {"mtu",
         [&] {
             if (!parse_bytes(value, &b) || b < 256) return false;
             p.mtu = static_cast<uint32_t>(b);
             return true;
         }},
        {"switch_buffer", [&] { return bytes(&p.switch_buffer); }},
        {"ecn", [&] { return flag(&p.ecn); }},
        {"ecn_kmin", [&] { return bytes(&p.ecn_kmin); }},
        {"ecn_kmax", [&] { return bytes(&p.ecn_kmax); }},
        {"ecn_pmax", [&] { return nonnegative(&p.ecn_pmax); }},
        {"pfc", [&] { return flag(&p.pfc); }},
        {"pfc_xoff", [&] { return bytes(&p.pfc_xoff); }},
        {"pfc_xon", [&] { return bytes(&p.pfc_xon); }},
        {"dcqcn", [&] { return flag(&p.dcqcn); }},
        {"seed",
         [&] {
             if (!parse_number(value, &d) || d < 0) return false;
             p.seed = static_cast<uint64_t>(d);
             return true;
         }},
    };
    const auto it = setters.find(key);
    if (it == setters.end()) {
        *error = "unknown key '" + key + "'";
        return false;
    }
    error->clear();  // a setter may say why (a file it could not read)
    if (!it->second()) {
        *error = "bad value '" + value + "' for " + key + (error->empty() ? "" : " (" + *error + ")");
        return false;
    }
    return true;
}

bool read_cluster_spec(const std::string &path, ClusterSpec *spec, std::string *error)
{
    std::ifstream in(path);
    if (!in) {
        *error = path + ": cannot read";
        return false;
    }
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        line = trim(line.substr(0, line.find('#')));
        if (line.empty()) continue;
        const size_t eq = line.find('=');
        std::string why;
        if (eq == std::string::npos) why = "not 'key = value'";
        else if (!set_cluster_key(spec, trim(line.substr(0, eq)), trim(line.substr(eq + 1)), &why)) {}
        if (!why.empty()) {
            *error = path + ":" + std::to_string(n) + ": " + why;
            return false;
        }
    }
    return true;
}

}  // namespace gpurdma::fabric
