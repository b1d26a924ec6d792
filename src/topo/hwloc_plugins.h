// hwloc's plugins that reach GPUs and displays through their own drivers (OpenGL's X
// displays, OpenCL's ICDs, Level Zero, CUDA, NVML, ROCm SMI). The NIC choice and the
// GPU-NIC distance need only the PCI tree and sysfs (the pci and linux components); with
// Debian 13's hwloc-plugins loaded, every other process start spent 5 s in them.
#pragma once

#include <hwloc.h>

namespace gpurdma::topo {

inline void skip_device_plugins(hwloc_topology_t t)
{
    // Unknown names (a build without that plugin) are refused by hwloc: nothing to skip.
    for (const char *name : {"gl", "opencl", "levelzero", "cuda", "nvml", "rsmi"})
        (void)hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, name);
}

}  // namespace gpurdma::topo
