#include "algo/route.h"

namespace gpurdma::algo {

Route route(const RouteFacts &f)
{
    // Without a host path (its set-up declined) there is no node board to agree the
    // buffer kinds on, nor a host algorithm to stage through: every call goes back, on
    // every rank, whatever its buffers.
    if (f.size > 1 && !f.host_path) return {Path::Decline, "no host path (its set-up declined)"};
    if (!f.device_buffers) return {Path::Host, ""};
    const auto staged = [](const char *why) { return Route{Path::Staged, why}; };
    if (f.other_vendor) return staged("a buffer of the other GPU vendor's runtime");
    if (!f.node_all_device) return staged("a node peer passes host buffers");
    if (!f.device_kernel) return staged("no device kernel (long double)");
    // Small messages: two copies and the host latency path cost less than the device
    // path's barriers, kernel and copies. (An allreduce across nodes: the host plan's
    // size rule below decides.)
    if ((!f.across_nodes || !f.allreduce) && f.size > 1 && f.bytes <= f.device_stage_max)
        return staged("small message (coll_gpurdma_device_stage_max)");
    if (f.device == DeviceSetUp::Staged) return staged("this communicator stages GPU buffers");
    if (!f.across_nodes) return {Path::DeviceOneNode, ""};
    if (!f.allreduce) return {Path::DeviceHierarchical, ""};  // algo/device_node_rail.h
    // The rail's messages must be the host hierarchical schedule's, which runs only for
    // the sizes the host plan gives it.
    if (!f.host_hierarchical) return staged("the host path runs this size flat");
    return {Path::DeviceHierarchical, ""};
}

const char *path_name(Path path)
{
    switch (path) {
        case Path::Host: return "host";
        case Path::DeviceOneNode: return "device, one node";
        case Path::DeviceHierarchical: return "device, hierarchical";
        case Path::Staged: return "staged";
        case Path::Decline: return "declined";
    }
    return "?";
}

}  // namespace gpurdma::algo
