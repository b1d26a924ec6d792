#include "gpu/rail_cost.h"

#include <algorithm>
#include <cstdio>

#include "base/text.h"

namespace gpurdma::gpu {

namespace {

// Microseconds for bytes at gbps (GB/s); no time where the rate is unknown.
double us(size_t bytes, double gbps)
{
    return gbps > 0 ? static_cast<double>(bytes) / (gbps * 1e3) : 0.0;
}

std::string fixed(double v)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", v);
    return text;
}

// Rates to three digits: 0.105, 25.3, 1000.
std::string rate(double gbps)
{
    char text[32];
    std::snprintf(text, sizeof text, gbps >= 100 ? "%.0f" : "%.3g", gbps);
    return text;
}

}  // namespace

RailWorkload count_rail_work(const plan::Schedule &schedule, const plan::LinkCost &net)
{
    RailWorkload w;
    w.slice_bytes = schedule.bytes;
    for (const plan::Step &s : schedule.steps) {
        switch (s.kind) {
            case plan::StepKind::Send:
                ++w.sends;
                w.send_bytes += s.bytes;
                w.net_us += net.us(static_cast<double>(s.bytes));
                break;
            case plan::StepKind::RecvReduce:
                ++w.reduces;
                w.reduce_bytes += s.bytes;
                break;
            case plan::StepKind::RecvCopy:
                ++w.arrival_copies;
                w.arrival_copy_bytes += s.bytes;
                break;
            case plan::StepKind::NodeReduce: break;  // the node stage's, not the rail's
            case plan::StepKind::Copy:
                // In place (the rail's are) a copy onto itself is no work.
                if (s.dst_buf == s.src_buf && s.dst_off == s.src_off) break;
                ++w.local_copies;
                w.local_copy_bytes += s.bytes;
                break;
        }
    }
    return w;
}

RailCost estimate_rail_cost(const RailWorkload &w, const RailRates &r, bool direct_sends, bool arrivals_in_gpu)
{
    RailCost c;
    const size_t arrivals = w.reduce_bytes + w.arrival_copy_bytes;

    const double copies = us(w.slice_bytes, r.d2h_gbps) + us(w.slice_bytes, r.h2d_gbps);
    const double cpu = us(arrivals + w.local_copy_bytes, r.host_reduce_gbps);
    c.host_us = std::max(copies, w.net_us + cpu);

    const size_t steps = w.reduces + w.arrival_copies + w.local_copies + (direct_sends ? 0 : w.sends);
    const double fixed_cost = static_cast<double>(steps) * r.step_us;
    const double staged = direct_sends ? 0.0 : us(w.send_bytes, r.d2h_gbps);
    const double reads = arrivals_in_gpu ? 0.0 : us(arrivals, r.h2d_gbps);
    c.device_us = w.net_us + fixed_cost + staged + reads;

    c.detail = "per " + format_bytes(w.slice_bytes) + " slice: host " + fixed(c.host_us) +
               " us (the larger of copies " + fixed(copies) + " us and network " + fixed(w.net_us) + " + CPU " +
               fixed(cpu) + " us), device " + fixed(c.device_us) + " us (network " + fixed(w.net_us) + " + " +
               std::to_string(steps) + " GPU steps x " + fixed(r.step_us) + " us" +
               (direct_sends ? "" : " + staged sends " + fixed(staged)) +
               (arrivals_in_gpu ? "" : " + arrival reads " + fixed(reads)) + " us); copies " + rate(r.d2h_gbps) +
               " GB/s out, " + rate(r.h2d_gbps) + " GB/s in, CPU reduce " + rate(r.host_reduce_gbps) + " GB/s";
    return c;
}

}  // namespace gpurdma::gpu
