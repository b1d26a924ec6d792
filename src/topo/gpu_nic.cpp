#include "topo/gpu_nic.h"

#include <hwloc.h>
#include <strings.h>

#include "gpurdma/gpurdma.h"
#include "topo/hwloc_plugins.h"

namespace gpurdma::topo {

namespace {
constexpr const char *kNames[] = {"LOC", "PIX", "PXB", "PHB", "SYS"};

bool is_bridge(hwloc_obj_t o)
{
    return o && o->type == HWLOC_OBJ_BRIDGE;
}
bool is_host_bridge(hwloc_obj_t o)
{
    return is_bridge(o) && o->attr && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}
int bridges_up_to(hwloc_obj_t from, hwloc_obj_t stop)
{
    int n = 0;
    for (hwloc_obj_t o = from->parent; o && o != stop; o = o->parent)
        if (is_bridge(o)) ++n;
    return n;
}
}  // namespace

bool parse_path_level(const std::string &text, PathLevel *level)
{
    for (int i = 0; i <= static_cast<int>(PathLevel::SYS); ++i) {
        if (strcasecmp(text.c_str(), kNames[i]) == 0) {
            *level = static_cast<PathLevel>(i);
            return true;
        }
    }
    return false;
}

const char *path_level_name(PathLevel level)
{
    const auto i = static_cast<unsigned>(level);
    return i < 5 ? kNames[i] : "?";
}

PathLevel classify_path(bool same_device, bool meet_in_io, bool meet_is_host_bridge, int bridges, int numa_nodes)
{
    if (same_device) return PathLevel::LOC;
    if (meet_in_io) {
        if (meet_is_host_bridge) return PathLevel::PHB;
        return bridges <= 1 ? PathLevel::PIX : PathLevel::PXB;
    }
    // Different host bridges: one CPU (one NUMA node under the meeting point) or several.
    return numa_nodes <= 1 ? PathLevel::PHB : PathLevel::SYS;
}

Status gpu_nic_level(const std::string &gpu_bus_id, const std::string &nic_in, PathLevel *level)
{
    *level = PathLevel::SYS;
    const std::string nic = nic_in.substr(0, nic_in.find(':'));
    auto unknown = [](const std::string &why) { return Status::error(GPURDMA_ERR_UNSUPPORTED, why); };
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) return unknown("hwloc_topology_init failed");
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
    skip_device_plugins(t);
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return unknown("hwloc_topology_load failed");
    }
    Status found;
    hwloc_obj_t gpu = hwloc_get_pcidev_by_busidstring(t, gpu_bus_id.c_str());
    hwloc_obj_t nic_pci = nullptr;
    for (hwloc_obj_t os = hwloc_get_next_osdev(t, nullptr); os; os = hwloc_get_next_osdev(t, os))
        if (os->name && nic == os->name) nic_pci = os->parent;
    if (!gpu) {
        found = unknown("GPU " + gpu_bus_id + " not in hwloc's PCI tree");
    } else if (!nic_pci || nic_pci->type != HWLOC_OBJ_PCI_DEVICE) {
        found = unknown("NIC '" + nic + "' not in hwloc's PCI tree");
    } else {
        hwloc_obj_t meet = hwloc_get_common_ancestor_obj(t, gpu, nic_pci);
        const bool in_io = meet && hwloc_obj_type_is_io(meet->type);
        const int bridges = bridges_up_to(gpu, meet) + bridges_up_to(nic_pci, meet) + (is_bridge(meet) ? 1 : 0);
        const int numa = (!in_io && meet && meet->nodeset) ? hwloc_bitmap_weight(meet->nodeset) : 1;
        *level = classify_path(gpu == nic_pci, in_io, is_host_bridge(meet), bridges, numa);
    }
    hwloc_topology_destroy(t);
    return found;
}

}  // namespace gpurdma::topo

extern "C" int gpurdma_gdr_level_valid(const char *level)
{
    gpurdma::topo::PathLevel l;
    return level && gpurdma::topo::parse_path_level(level, &l) ? 1 : 0;
}
