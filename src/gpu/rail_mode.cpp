#include "gpu/rail_mode.h"

namespace gpurdma::gpu {

RailMode choose_rail_mode(const RailModeInputs &in)
{
    RailMode m;
    const std::string sends = in.direct_sends ? "sends can go straight from GPU memory (" + in.direct_why + ")"
                                              : "sends cannot go straight from GPU memory (" + in.direct_why + ")";
    if (in.requested == "host") {
        m.reason = "coll_gpurdma_rail_reduce host";
        return m;
    }
    if (in.requested == "device") {
        m.reduce = RailReduce::Device;
        m.direct_sends = in.direct_sends;
        m.reason = "coll_gpurdma_rail_reduce device; " + sends;
        return m;
    }
    if (in.cost) {
        const bool device = in.cost->device_us < in.cost->host_us;
        m.reduce = device ? RailReduce::Device : RailReduce::Host;
        m.direct_sends = device && in.direct_sends;
        m.reason = std::string("auto: ") + (device ? "the GPU" : "the host") + " is estimated faster, " +
                   in.cost->detail + "; " + sends;
        return m;
    }
    if (in.direct_sends) {
        m.reduce = RailReduce::Device;
        m.direct_sends = true;
        m.reason = "auto, no estimate: " + sends;
        return m;
    }
    m.reason = "auto, no estimate: " + sends +
               ": one copy each way per slice rather than one per message (coll_gpurdma_rail_reduce device "
               "reduces on the GPU anyway)";
    return m;
}

std::string rail_mode_name(const RailMode &mode)
{
    if (mode.reduce == RailReduce::Host) return "host";
    return mode.direct_sends ? "device, sends straight from GPU memory"
                             : "device, sends staged through page-locked memory";
}

}  // namespace gpurdma::gpu
