#include "topo/nic.h"

#include <hwloc.h>

#include <algorithm>
#include <cctype>

#include "topo/hwloc_plugins.h"

namespace gpurdma::topo {

namespace {

int depth_between(hwloc_topology_t t, hwloc_obj_t from, hwloc_obj_t to)
{
    // Levels from `from` up to the closest ancestor shared with `to`.
    hwloc_obj_t common = hwloc_get_common_ancestor_obj(t, from, to);
    return common ? static_cast<int>(from->depth) - static_cast<int>(common->depth) : 1 << 20;
}

std::string base_name(const std::string &device)
{
    const auto colon = device.find(':');
    return colon == std::string::npos ? device : device.substr(0, colon);
}

}  // namespace

std::vector<Nic> local_nics(std::string *why)
{
    std::vector<Nic> out;
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) {
        *why = "hwloc_topology_init failed";
        return out;
    }
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    skip_device_plugins(t);
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        *why = "hwloc_topology_load failed";
        return out;
    }
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    hwloc_obj_t here = hwloc_get_root_obj(t);
    if (hwloc_get_cpubind(t, bound, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound))
        here = hwloc_get_obj_covering_cpuset(t, bound);
    if (!here) here = hwloc_get_root_obj(t);
    for (hwloc_obj_t os = hwloc_get_next_osdev(t, nullptr); os; os = hwloc_get_next_osdev(t, os)) {
        const auto type = os->attr->osdev.type;
        if (type != HWLOC_OBJ_OSDEV_OPENFABRICS && type != HWLOC_OBJ_OSDEV_NETWORK) continue;
        if (!os->name) continue;
        Nic n;
        n.name = os->name;
        n.rdma = type == HWLOC_OBJ_OSDEV_OPENFABRICS;
        n.distance = depth_between(t, here, hwloc_get_non_io_ancestor_obj(t, os));
        out.push_back(n);
    }
    hwloc_bitmap_free(bound);
    hwloc_topology_destroy(t);
    std::stable_sort(out.begin(), out.end(), [](const Nic &a, const Nic &b) {
        return a.distance != b.distance ? a.distance < b.distance : a.rdma > b.rdma;
    });
    return out;
}

bool parse_device_list(const std::string &text, std::vector<std::string> *devices, bool *exclude)
{
    devices->clear();
    *exclude = false;
    std::string s = text;
    if (!s.empty() && s[0] == '^') {
        *exclude = true;
        s.erase(0, 1);
    }
    size_t pos = 0;
    while (pos <= s.size() && !s.empty()) {
        const size_t comma = s.find(',', pos);
        const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (item.empty()) return false;
        for (char c : item)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':'))
                return false;
        devices->push_back(item);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return !devices->empty() || (text.empty());
}

std::string choose_rail_device(const std::vector<Nic> &nics, const std::vector<std::string> &devices, bool exclude)
{
    for (const auto &n : nics) {
        if (!n.rdma) continue;
        auto listed =
            std::find_if(devices.begin(), devices.end(), [&n](const std::string &d) { return base_name(d) == n.name; });
        const bool in_list = listed != devices.end();
        if (!devices.empty() && in_list == exclude) continue;
        // UCX names verbs devices with their port; port 1 unless the list says otherwise.
        return (in_list && listed->find(':') != std::string::npos) ? *listed : n.name + ":1";
    }
    return "";
}

}  // namespace gpurdma::topo
