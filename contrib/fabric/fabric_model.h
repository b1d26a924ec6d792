// A packet-level discrete-event model of a lossless RoCE fabric: hosts with one NIC port,
// output-queued switches with a shared buffer, ECN marking, PFC pause per ingress port and
// DCQCN rate control per QP. It replays a DAG of RDMA WRITEs (a collective's schedule) and
// reports when each one finished and what the fabric went through (queues, pauses, marks).
// It stands alone: nothing here depends on the rest of gpurdma. docs/FABRIC-MODEL.md says
// what it models, what it leaves out, and how it compares with the DCQCN paper.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dcqcn.h"

namespace gpurdma::fabric {

struct FabricParams {
    double link_gbps = 400;  // every link, host<->leaf and leaf<->spine
    double link_delay_us = 1.0;  // propagation + switch latency per link traversal
    uint32_t mtu = 4096;  // payload bytes per packet (sweeps may use larger cells; docs say the effect)
    uint64_t switch_buffer = 64ull << 20;  // shared packet buffer per switch
    bool ecn = true;
    // Bytes in the egress queue; 0: the paper's 40G values (Kmin 5 KB, Kmax 200 KB) scaled by link_gbps/40.
    uint64_t ecn_kmin = 0, ecn_kmax = 0;
    double ecn_pmax = 0.01;
    bool pfc = true;
    // Bytes buffered per ingress port; 0: XOFF = Kmax, capped so that every port of the switch can
    // hold XOFF plus its headroom at once; XON = XOFF - min(headroom, XOFF/2). See pfc_xoff_for().
    uint64_t pfc_xoff = 0, pfc_xon = 0;
    bool dcqcn = true;
    DcqcnParams dcqcn_params;
    uint64_t seed = 1;  // ECN marking randomness, ECMP hash salt
    // Added: bytes on the wire per packet besides the payload (RoCEv2 headers, CRCs, and the
    // preamble and gap rounded to a round number).
    uint32_t header_bytes = 64;

    // The thresholds the model uses when the fields above are 0.
    uint64_t kmin() const;
    uint64_t kmax() const;
    // PFC headroom: what still arrives after XOFF is sent (both directions of the link
    // delay at line rate, plus a packet being sent each way).
    uint64_t pfc_headroom() const;
    uint64_t pfc_xoff_for(int switch_ports) const;
    uint64_t pfc_xon_for(int switch_ports) const;
};

// Hosts (one NIC port each) and switches. Host h's NIC is node h; switch s is node hosts + s.
struct Topology {
    int hosts = 0;

    struct Port {
        int peer_node = -1;
        int peer_port = -1;  // the index among the peer's ports
    };
    std::vector<std::string> switch_names;  // "switch", "leaf 0", "spine 3"
    std::vector<std::vector<Port>> ports;  // per node; a host has exactly one
    // routes[s][d]: the ports of switch s toward host d; several: ECMP by a hash of (src, dst, qp)
    std::vector<std::vector<std::vector<int>>> routes;
    std::string kind;  // for describe()

    static Topology single_switch(int hosts);  // N hosts on one switch (validation)
    // Leaves + spines, every leaf linked to every spine once, ECMP over spines by a hash of (src, dst, qp).
    static Topology two_tier(int hosts, int hosts_per_leaf, int spines);
    std::string describe() const;

    int switches() const { return static_cast<int>(switch_names.size()); }
    int nodes() const { return hosts + switches(); }
    std::string node_name(int node) const;
    std::string check() const;  // empty when consistent, else what is wrong
};

using MessageId = int;

// One RDMA WRITE (or a tiny control message: a credit, a notification): `bytes` from
// host src to host dst on queue pair `qp` (messages of one (src, dst, qp) go in order, one
// after another, on one DCQCN rate; -1: one QP per (src, dst) pair). It becomes ready once every
// message in `after` has been fully received at its destination, plus `delay_us` (local
// work such as a reduction), and not before `not_before_us`.
// A 0-byte message is one header-only packet; src == dst completes when ready, off the wire.
struct Message {
    int src = 0, dst = 0;
    uint64_t bytes = 0;
    std::vector<MessageId> after;
    double delay_us = 0;
    double not_before_us = 0;
    int qp = -1;
    int tag = 0;  // the caller's label (a step number, a job id), echoed in results
};

struct PortStats {  // one egress port (host NIC or switch port)
    std::string name;  // "host 3", "leaf 0 -> spine 2", "leaf 1 -> host 17", ...
    double paused_us = 0;  // time this port was held by a PFC pause while it had data
    uint64_t peak_queue = 0;  // bytes
    uint64_t pauses_received = 0;
    uint64_t bytes_sent = 0;  // on the wire: payload and headers
};

// Added: one QP's totals.
struct FlowStats {
    int src = 0, dst = 0, qp = -1;
    uint64_t bytes_delivered = 0;  // payload
    uint64_t cnps = 0;
    double final_rate_gbps = 0;
};

struct Result {
    bool ok = false;
    std::string error;  // e.g. dependency cycle, time limit reached
    bool time_limit_reached = false;  // added: the run stopped at run()'s limit
    double end_us = 0;  // when the last message was received
    std::vector<double> ready_us, start_us, done_us;  // per MessageId; -1: never got there
    std::vector<int> tags;  // added: per MessageId, Message::tag
    uint64_t bytes_injected = 0, bytes_delivered = 0, bytes_in_flight_at_end = 0;  // payload; conservation
    uint64_t bytes_dropped = 0;  // added: payload of dropped packets
    // Must stay 0 with PFC on; with PFC off a full buffer drops, the model counts it and
    // does not retransmit (the message never completes).
    uint64_t packets_dropped = 0;
    uint64_t ecn_marks = 0, cnps = 0, pause_frames = 0;
    uint64_t resume_frames = 0;  // added
    double total_paused_us = 0;  // sum over ports of paused_us
    uint64_t peak_queue = 0;  // max over switch egress ports
    uint64_t peak_switch_buffer = 0;
    std::vector<PortStats> ports;
    std::vector<FlowStats> flows;  // added
    uint64_t events = 0;  // added: events processed (for the speed of the model itself)
    // Optional time series, when Simulator::trace(...) was asked: one row per sample.
    struct Sample {
        double t_us;
        std::vector<double> values;
    };
    std::vector<std::string> trace_columns;
    std::vector<Sample> trace;
};

class Simulator {
public:
    Simulator(const Topology &topology, const FabricParams &params);
    MessageId add(const Message &message);
    // Sampling every period_us: the egress queue (bytes) of the port from switch-side into host `host` ("queue:host H"),
    // and the sending rate (Gb/s, DCQCN's current rate) of every QP whose src is in `rate_of_hosts` ("rate:S->D").
    void trace_queue_to_host(int host);
    void trace_rates_of(int src_host);
    // Added: the payload bytes delivered so far by every QP whose src is `src_host` ("delivered:S->D").
    void trace_delivered_of(int src_host);
    void set_trace_period_us(double period_us);
    Result run(double time_limit_us = 60e6);

    const Topology &topology() const { return topology_; }
    const FabricParams &params() const { return params_; }
    const std::vector<Message> &messages() const { return messages_; }

private:
    Topology topology_;
    FabricParams params_;
    std::vector<Message> messages_;
    std::vector<int> trace_queue_hosts_, trace_rate_hosts_, trace_delivered_hosts_;
    double trace_period_us_ = 10;
};

}  // namespace gpurdma::fabric
