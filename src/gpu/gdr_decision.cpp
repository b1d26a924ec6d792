#include "gpu/gdr_decision.h"

namespace gpurdma::gpu {

namespace {

std::string level_name(topo::PathLevel level)
{
    return topo::path_level_name(level);
}

// "GPU 0000:3b:00.0 to NIC mlx5_0 is PIX" or "... path unknown (why), taken as SYS".
std::string path_text(const GdrInputs &in)
{
    const std::string ends = "GPU " + (in.gpu.empty() ? std::string("(bus id unknown)") : in.gpu) + " to NIC " + in.nic;
    if (in.path_known) return ends + " is " + level_name(in.path);
    return ends + ": path unknown (" + in.path_why + "), taken as " + level_name(topo::PathLevel::SYS);
}

topo::PathLevel effective_path(const GdrInputs &in)
{
    return in.path_known ? in.path : topo::PathLevel::SYS;
}

GdrDecision no(std::string reason)
{
    return GdrDecision{false, std::move(reason)};
}

}  // namespace

bool gdr_probe_worthwhile(const GdrInputs &in)
{
    return in.ucx_cuda == Answer::Yes && !in.nic.empty() && effective_path(in) <= in.allowed;
}

GdrDecision decide_gdr(const GdrInputs &in)
{
    if (in.ucx_cuda == Answer::No) return no("UCX has no " + in.memory + " memory support (" + in.ucx_why + ")");
    if (in.ucx_cuda == Answer::Unknown)
        return no("UCX's " + in.memory + " memory support is unknown (" + in.ucx_why + ")");
    if (in.nic.empty()) return no("no RDMA NIC is chosen for this process (UCX picks its devices)");
    const std::string gdr_level = "coll_gpurdma_gdr_level " + level_name(in.allowed);
    if (effective_path(in) > in.allowed) return no(path_text(in) + ", beyond " + gdr_level);
    if (in.probe == Probe::NotRun) return no("device memory registration was not probed (" + in.probe_why + ")");
    if (in.probe == Probe::Refused) return no("UCX refused to register device memory: " + in.probe_why);
    return GdrDecision{true, "UCX supports " + in.memory + " memory, " + path_text(in) + " within " + gdr_level +
                                 ", and UCX registered a device range"};
}

}  // namespace gpurdma::gpu
