#include "topo/switch_topology.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace gpurdma::topo {
namespace {

// Splits at commas outside brackets.
std::vector<std::string> top_level_items(const std::string &text)
{
    std::vector<std::string> items(1);
    int depth = 0;
    for (char c : text) {
        if (c == '[') ++depth;
        if (c == ']') --depth;
        if (c == ',' && depth == 0) items.emplace_back();
        else items.back() += c;
    }
    return items;
}

bool all_digits(const std::string &s)
{
    if (s.empty() || s.size() > 9) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

// One item with any number of bracket groups: "r[1-2]n[01-02]".
bool expand_item(const std::string &item, std::vector<std::string> *out, size_t limit)
{
    const size_t open = item.find('[');
    if (open == std::string::npos) {
        if (item.empty() || item.find(']') != std::string::npos) return false;
        out->push_back(item);
        return out->size() <= limit;
    }
    const size_t close = item.find(']', open);
    if (close == std::string::npos) return false;
    const std::string prefix = item.substr(0, open), rest = item.substr(close + 1);
    std::vector<std::string> tails;
    if (!rest.empty() && !expand_item(rest, &tails, limit)) return false;
    if (tails.empty()) tails.emplace_back();
    std::stringstream ranges(item.substr(open + 1, close - open - 1));
    std::string range;
    bool any = false;
    while (std::getline(ranges, range, ',')) {
        const size_t dash = range.find('-');
        const std::string lo = range.substr(0, dash), hi = dash == std::string::npos ? lo : range.substr(dash + 1);
        if (!all_digits(lo) || !all_digits(hi)) return false;
        const long a = std::atol(lo.c_str()), b = std::atol(hi.c_str());
        if (b < a) return false;
        for (long v = a; v <= b; ++v) {
            std::string number = std::to_string(v);
            if (number.size() < lo.size()) number.insert(0, lo.size() - number.size(), '0');  // "01-10" keeps width
            for (const std::string &t : tails) {
                out->push_back(prefix + number + t);
                if (out->size() > limit) return false;
            }
        }
        any = true;
    }
    return any;
}

std::vector<std::string> split_dots(const std::string &s)
{
    std::vector<std::string> parts;
    std::stringstream in(s);
    std::string part;
    while (std::getline(in, part, '.')) parts.push_back(part);
    return parts;
}

std::string lower(std::string s)
{
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

bool expand_hostlist(const std::string &text, std::vector<std::string> *names, size_t limit)
{
    names->clear();
    for (const std::string &item : top_level_items(text))
        if (!expand_item(item, names, limit)) return false;
    return !names->empty();
}

bool SwitchTopology::read(const std::string &path, std::string *error)
{
    std::ifstream in(path);
    if (!in) {
        *error = "cannot read " + path;
        return false;
    }
    std::stringstream text;
    text << in.rdbuf();
    if (!parse(text.str(), error)) {
        *error = path + ": " + *error;
        return false;
    }
    return true;
}

bool SwitchTopology::parse(const std::string &text, std::string *error)
{
    leaf_of_.clear();
    parent_of_.clear();
    node_order_.clear();
    std::istringstream lines(text);
    std::string line;
    std::set<std::string> switches;
    for (int number = 1; std::getline(lines, line); ++number) {
        line = line.substr(0, line.find('#'));
        std::istringstream words(line);
        std::string word, name, nodes, children;
        while (words >> word) {
            const size_t eq = word.find('=');
            const std::string key = lower(word.substr(0, eq)),
                              value = eq == std::string::npos ? "" : word.substr(eq + 1);
            if (key == "switchname") name = value;
            else if (key == "nodes") nodes = value;
            else if (key == "switches") children = value;
            // LinkSpeed and keys of later Slurm versions: not ours to judge.
        }
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        auto fail = [&](const std::string &why) {
            *error = "line " + std::to_string(number) + ": " + why;
            return false;
        };
        if (name.empty()) return fail("no SwitchName=");
        if (!switches.insert(name).second) return fail("switch " + name + " named twice");
        std::vector<std::string> list;
        if (!nodes.empty()) {
            if (!expand_hostlist(nodes, &list)) return fail("Nodes=" + nodes + " is not a host list");
            for (const std::string &n : list) {
                if (!leaf_of_.emplace(n, name).second) return fail("node " + n + " under two leaf switches");
                node_order_.push_back(n);
            }
        }
        if (!children.empty()) {
            if (!expand_hostlist(children, &list)) return fail("Switches=" + children + " is not a list");
            for (const std::string &s : list)
                if (!parent_of_.emplace(s, name).second) return fail("switch " + s + " under two switches");
        }
    }
    // A cycle would make address_of loop: every chain must end within the switch count.
    for (const auto &p : parent_of_) {
        std::string s = p.first;
        size_t hops = 0;
        for (auto it = parent_of_.find(s); it != parent_of_.end(); it = parent_of_.find(s)) {
            s = it->second;
            if (++hops > parent_of_.size()) {
                *error = "switch " + p.first + " is in a cycle of Switches=";
                return false;
            }
        }
    }
    return true;
}

std::string SwitchTopology::address_of(const std::string &host) const
{
    auto it = leaf_of_.find(host);
    if (it == leaf_of_.end()) it = leaf_of_.find(host.substr(0, host.find('.')));
    if (it == leaf_of_.end()) return "";
    std::string address = it->second;
    for (auto up = parent_of_.find(it->second); up != parent_of_.end(); up = parent_of_.find(up->second))
        address = up->second + "." + address;
    return address;
}

std::string address_from_slurm(const std::string &addr, const std::string &pattern)
{
    const std::vector<std::string> parts = split_dots(addr);
    const std::vector<std::string> kinds = split_dots(pattern);
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
        const bool is_switch = kinds.size() == parts.size() ? kinds[i] == "switch" : i + 1 < parts.size();
        if (is_switch && !parts[i].empty()) out += (out.empty() ? "" : ".") + parts[i];
    }
    return out;
}

FabricAddress find_fabric_address(const std::string &topology_file, const std::string &host)
{
    FabricAddress a;
    if (!topology_file.empty()) {
        SwitchTopology file;
        std::string error;
        if (!file.read(topology_file, &error)) {
            a.warning = "coll_gpurdma_fabric_topology: " + error + "; ignored";
        } else {
            a.address = file.address_of(host);
            if (!a.address.empty()) {
                a.source = "topology file " + topology_file;
                return a;
            }
            a.warning = "coll_gpurdma_fabric_topology: " + topology_file + " lists no node " + host + "; ignored";
        }
    }
    const char *addr = std::getenv("SLURM_TOPOLOGY_ADDR");
    const char *pattern = std::getenv("SLURM_TOPOLOGY_ADDR_PATTERN");
    a.address = address_from_slurm(addr ? addr : "", pattern ? pattern : "");
    if (!a.address.empty()) a.source = "SLURM_TOPOLOGY_ADDR";
    return a;
}

}  // namespace gpurdma::topo
