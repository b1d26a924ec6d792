// The scenarios that hold the fabric model against the DCQCN paper (Y. Zhu et al.,
// "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015): they build the
// paper's small experiments on the model, run them, and return the numbers. The tests
// bound them, `gpurdma-fabric validate` prints them, docs/FABRIC-MODEL.md tabulates them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fabric_model.h"

namespace gpurdma::fabric {

// Throughput and queue statistics are taken over the second half of each run (the first
// half is left to the start-up transient). duration_us 0 picks the default: 100 ms for the
// fairness scenarios (DCQCN's shares take tens of milliseconds to settle), 100 ms for the
// others at 40 Gb/s and 40 ms at 400 Gb/s. seed: FabricParams::seed (ECN's coin flips).

struct FairShareResult {
    int flows = 0;
    double link_gbps = 0;
    bool dcqcn = false;
    double duration_us = 0;
    std::vector<double> gbps;  // per flow: payload delivered over the last half
    double total_gbps = 0;
    double jain = 0;  // Jain's fairness index of gbps: 1 is fair, 1/n is one flow taking all
    double queue_mean_bytes = 0, queue_max_bytes = 0;  // the bottleneck egress
    uint64_t pause_frames = 0, ecn_marks = 0, cnps = 0, packets_dropped = 0;
    double total_paused_us = 0;
};

// N senders into one receiver on one switch: 12 MB of switch buffer at 40 Gb/s (the
// paper's Trident II), the default 64 MiB otherwise.
FairShareResult fair_share(int flows, double link_gbps, bool dcqcn, double duration_us = 0, uint64_t seed = 1);

// The paper's PFC unfairness: three flows reach the bottleneck switch through one ingress
// (the spine link) and one through another (a local host). PFC pauses per ingress port,
// so without DCQCN the lone flow gets about half; with DCQCN each gets about a quarter.
// Flows 0-2 are the remote ones, flow 3 the local one.
FairShareResult pfc_unfairness(double link_gbps, bool dcqcn, double duration_us = 0, uint64_t seed = 1);

struct IncastResult {
    int senders = 0;
    double link_gbps = 0;
    bool dcqcn = false, pfc = false;
    double duration_us = 0;
    uint64_t kmin = 0, kmax = 0, xoff = 0, xon = 0;  // the thresholds in effect (bytes)
    double queue_mean_bytes = 0, queue_max_bytes = 0;  // bottleneck egress, settled (last half)
    double queue_peak_bytes = 0;  // over the whole run, start-up included
    double goodput_gbps = 0;  // into the receiver, last half
    double total_paused_us = 0;  // all ports, whole run
    uint64_t pause_frames = 0, ecn_marks = 0, cnps = 0, packets_dropped = 0;  // whole run
    // The last half alone (the run repeated to half time, which it repeats exactly, and subtracted).
    double paused_us_last_half = 0;
    uint64_t pause_frames_last_half = 0, cnps_last_half = 0;
    std::vector<std::pair<double, double>> queue_series;  // (t_us, bytes), every sample
};

// N:1 incast on one switch, every sender streaming for the whole run.
IncastResult incast(int senders, double link_gbps, bool dcqcn, bool pfc, double duration_us = 0, uint64_t seed = 1);

struct VictimResult {
    double link_gbps = 0;
    bool dcqcn = false;
    double duration_us = 0;
    double victim_gbps = 0;  // last half
    double victim_fair_gbps = 0;  // its max-min fair share
    double incast_gbps = 0;  // into the incast receiver, last half
    double victim_paused_us = 0;  // the victim's NIC, whole run
    uint64_t pause_frames = 0, packets_dropped = 0;
    double total_paused_us = 0;
};

// Pause spreading: two leaves under one spine. An incast into host A (8) from four hosts on
// the other leaf and six on A's own leaf; an unrelated flow from host 0 to host B (9), on
// the same spine link as the four remote incast senders but to an idle port. PFC pauses
// the spine link for A's queue and, with it, the victim.
VictimResult victim_flow(double link_gbps, bool dcqcn, double duration_us = 0, uint64_t seed = 1);

// Every scenario above at 40 and 400 Gb/s, as a Markdown table (what `validate` prints).
std::string validation_report();

}  // namespace gpurdma::fabric
