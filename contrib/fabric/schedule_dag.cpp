#include "schedule_dag.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "plan/planner.h"
#include "plan/rail.h"
#include "plan/rail_choice.h"
#include "topo/fabric_order.h"
#include "topo/topology.h"

namespace gpurdma::fabric {

namespace {

constexpr size_t kElem = 4;  // float elements, the common case
constexpr uint64_t kCreditBytes = 8;  // the credit word written back to the sender

// One plane rank's program: the rail stage of every unit of slice 0 in the component's
// order (plan/rail.h), peers given as nodes, and where each unit's steps begin.
struct PlaneProgram {
    std::vector<plan::Step> steps;
    std::vector<size_t> unit_begin;  // first step of each unit
    std::vector<size_t> unit_bytes;
};

std::vector<PlaneProgram> plane_programs(const ClusterSpec &spec, const plan::PlanParams &params, size_t bytes)
{
    const topo::Topology t = cluster_topology(spec);
    const size_t count = bytes / kElem;
    std::vector<PlaneProgram> out(static_cast<size_t>(spec.nodes));
    for (int n = 0; n < spec.nodes; ++n) {
        PlaneProgram &p = out[static_cast<size_t>(n)];
        const int rank = plan::slice_owner(t, n, 0);
        for (const plan::RailUnit &u : plan::hierarchical_units(t, count, kElem, params)) {
            if (u.slice != 0) continue;
            const plan::Schedule s = plan::build_rail_allreduce(t, rank, 0, u.count, kElem, params);
            p.unit_begin.push_back(p.steps.size());
            p.unit_bytes.push_back(u.count * kElem);
            p.steps.insert(p.steps.end(), s.steps.begin(), s.steps.end());
        }
        for (plan::Step &s : p.steps)
            if (s.peer >= 0) s.peer = t.node_of[static_cast<size_t>(s.peer)];
    }
    return out;
}

}  // namespace

topo::Topology cluster_topology(const ClusterSpec &spec)
{
    std::vector<std::string> nodes;
    for (int n = 0; n < spec.nodes; ++n)
        for (int g = 0; g < spec.gpus_per_node; ++g) nodes.push_back("node" + std::to_string(n));
    topo::Topology t = topo::build_topology(nodes);
    topo::reorder_nodes(&t, spec.node_order());  // as the component numbers them (algo/host_team.cpp)
    return t;
}

size_t slice_bytes_of(const ClusterSpec &spec, size_t bytes)
{
    return (bytes / kElem + static_cast<size_t>(spec.gpus_per_node) - 1) / static_cast<size_t>(spec.gpus_per_node) *
           kElem;
}

plan::PlanParams planner_params(const ClusterSpec &spec, size_t chunk, int rail_slots, const RailPlan &rail,
                                size_t bytes)
{
    plan::PlanParams params;
    params.chunk_size = chunk;
    params.model.net = {4 * spec.link_delay_us + 2.0, spec.nic_gbps / 8};
    // The node stages: the GPU reads its node peers' units (one kernel a unit, no cost per
    // piece), or, not modelled, free.
    params.model.shm = {0.0, spec.nvlink_gbps > 0 ? spec.nvlink_gbps : 1e9};
    // Not modelled, the node stages' reductions are free too (the rail's, at a GPU's
    // rate, are a few percent of a piece's wire time either way).
    params.model.reduce_gbps = spec.nvlink_gbps > 0 ? spec.reduce_gbps : 1e9;
    params.rail_window = std::max(1, rail_slots);
    params.rail_algorithm = rail.algorithm;
    params.rail_unit = rail.unit == kWholeSlice ? std::max(slice_bytes_of(spec, bytes), kElem) : rail.unit;
    return params;
}

size_t planned_unit_bytes(const ClusterSpec &spec, const plan::PlanParams &params, size_t bytes)
{
    const topo::Topology t = cluster_topology(spec);
    return std::min(slice_bytes_of(spec, bytes), plan::rail_unit_elems(t, bytes / kElem, kElem, params) * kElem);
}

std::string RailPlan::name() const
{
    if (algorithm == plan::Algorithm::Auto && unit == 0) return "hier";
    const std::string a = algorithm == plan::Algorithm::Auto                ? "auto"
                          : algorithm == plan::Algorithm::Ring              ? "ring"
                          : algorithm == plan::Algorithm::RecursiveDoubling ? "rd"
                                                                            : "rhd";
    const std::string u = unit == 0 ? "auto" : unit == kWholeSlice ? "slice" : std::to_string(unit >> 10) + "K";
    return a + "/" + u;
}

bool parse_rail_plan(const std::string &text, RailPlan *out)
{
    if (text == "hier") return *out = RailPlan{}, true;
    if (text == "ring") return *out = RailPlan{plan::Algorithm::Ring, kWholeSlice}, true;
    if (text == "rhd") return *out = RailPlan{plan::Algorithm::HalvingDoubling, kWholeSlice}, true;
    if (text == "hier-rd") return *out = RailPlan{plan::Algorithm::RecursiveDoubling, 0}, true;
    const size_t slash = text.find('/');
    const std::string a = text.substr(0, slash), u = slash == std::string::npos ? "auto" : text.substr(slash + 1);
    RailPlan r;
    if (!plan::parse_algorithm(a, &r.algorithm) || !plan::is_rail_algorithm(r.algorithm)) return false;
    if (u == "slice") {
        r.unit = kWholeSlice;
    } else if (u != "auto") {
        char *end = nullptr;
        const double v = std::strtod(u.c_str(), &end);
        const std::string suffix = end;
        const double scale = suffix == "K" ? 1024.0 : suffix == "M" ? 1048576.0 : suffix.empty() ? 1.0 : 0.0;
        if (end == u.c_str() || v <= 0 || scale == 0) return false;
        r.unit = static_cast<size_t>(v * scale);
    }
    *out = r;
    return true;
}

double ideal_us(const ClusterSpec &spec, size_t bytes)
{
    const double n = spec.nodes;
    const double slice = static_cast<double>(bytes) / spec.gpus_per_node;
    return 2 * (n - 1) / n * slice * 8 / (spec.nic_gbps * 1e3);
}

ScheduleDag build_rail_dag(const ClusterSpec &spec, const RailPlan &rail, size_t bytes, size_t chunk, int rail_slots,
                           int host_base, int host_stride, int tag_base)
{
    const plan::PlanParams params = planner_params(spec, chunk, rail_slots, rail, bytes);
    const std::vector<PlaneProgram> programs = plane_programs(spec, params, bytes);
    const std::vector<int> place = spec.host_of_index();
    const int hosts = spec.nodes;
    ScheduleDag dag;
    dag.slice_bytes = bytes / static_cast<size_t>(spec.gpus_per_node);
    auto add = [&dag](Message m, MessageKind kind, int step) {
        dag.messages.push_back(std::move(m));
        dag.kinds.push_back(kind);
        dag.step_of.push_back(step);
        return static_cast<MessageId>(dag.messages.size() - 1);
    };
    // Pass 1: an id for every message, in each rank's program order (so that every QP's
    // messages are in the order the rank issues them).
    struct Slot {
        MessageId post = -1, data = -1;  // a send: its posting (local) and its write
        MessageId done = -1, credit = -1;  // a receive: reduced (local) and the credit back
    };
    std::vector<std::vector<Slot>> at(static_cast<size_t>(hosts));
    std::map<std::pair<int, int>, std::vector<MessageId>> sent, credited;  // (src, dst) -> ids in order
    // A peer's k-th write lands in slot k % rail_slots and goes on that slot's QP
    // (coll_gpurdma_rail_qps; transport/ucx_channels.cpp): each QP is hashed onto its own
    // spine path. Credits go back on one QP of their own.
    const int qps = std::max(1, std::min(spec.rail_qps, rail_slots));
    for (int h = 0; h < hosts; ++h) {
        const auto &steps = programs[static_cast<size_t>(h)].steps;
        dag.steps = std::max(dag.steps, static_cast<int>(steps.size()));
        at[static_cast<size_t>(h)].resize(steps.size());
        for (size_t i = 0; i < steps.size(); ++i) {
            const plan::Step &s = steps[i];
            Slot &slot = at[static_cast<size_t>(h)][i];
            const int me = host_base + place[static_cast<size_t>(h)] * host_stride;
            const int peer = host_base + place[static_cast<size_t>(s.peer)] * host_stride;
            const int tag = tag_base + static_cast<int>(i);
            switch (s.kind) {
                case plan::StepKind::Send: {
                    slot.post = add(Message{me, me, 0, {}, 0, 0, -1, tag}, MessageKind::Local, static_cast<int>(i));
                    auto &to_peer = sent[{h, s.peer}];
                    const int qp = 2 * static_cast<int>(to_peer.size() % static_cast<size_t>(rail_slots) %
                                                        static_cast<size_t>(qps));
                    slot.data =
                        add(Message{me, peer, s.bytes, {}, 0, 0, qp, tag}, MessageKind::Data, static_cast<int>(i));
                    to_peer.push_back(slot.data);
                    ++dag.data_messages;
                    break;
                }
                case plan::StepKind::RecvReduce:
                case plan::StepKind::RecvCopy:
                    slot.done = add(Message{me, me, 0, {}, 0, 0, -1, tag}, MessageKind::Local, static_cast<int>(i));
                    slot.credit = add(Message{me, peer, kCreditBytes, {}, 0, 0, 1, tag}, MessageKind::Credit,
                                      static_cast<int>(i));
                    credited[{h, s.peer}].push_back(slot.credit);
                    break;
                default:  // local copies: no time on the fabric's scale
                    slot.done = add(Message{me, me, 0, {}, 0, 0, -1, tag}, MessageKind::Local, static_cast<int>(i));
                    break;
            }
        }
    }
    // Pass 2: the dependencies, and the node stages of each unit on lanes of their own
    // (the GPU path's streams): the node reduce-scatter of a unit before its rail (that of
    // the next unit meanwhile), its node allgather after it, each at the node's rate.
    const double node_peers = spec.gpus_per_node - 1;
    auto node_us = [&](size_t unit, bool reduce) {
        const double b = static_cast<double>(unit) * node_peers;
        return b / (spec.nvlink_gbps * 1e3) + (reduce ? b / (spec.reduce_gbps * 1e3) : 0);
    };
    for (int h = 0; h < hosts; ++h) {
        const PlaneProgram &program = programs[static_cast<size_t>(h)];
        const auto &steps = program.steps;
        const int me = host_base + place[static_cast<size_t>(h)] * host_stride;
        auto after = [&](MessageId m, MessageId dep) {
            if (dep >= 0) dag.messages[static_cast<size_t>(m)].after.push_back(dep);
        };
        auto node_stage = [&](size_t unit, bool reduce, size_t step, std::initializer_list<MessageId> deps) {
            if (spec.nvlink_gbps <= 0) return MessageId(-1);  // not modelled
            Message m{me, me, 0, {}, node_us(unit, reduce), 0, -1, tag_base + static_cast<int>(step)};
            const MessageId id = add(std::move(m), MessageKind::Local, static_cast<int>(step));
            for (MessageId d : deps) after(id, d);
            return id;
        };
        MessageId previous = -1;  // the step before, done
        MessageId scattered = -1, gathered = -1;  // the node lanes' last
        size_t unit = 0;
        std::map<int, size_t> sends_to, receives_from;
        for (size_t i = 0; i < steps.size(); ++i) {
            const plan::Step &s = steps[i];
            Slot &slot = at[static_cast<size_t>(h)][i];
            const bool unit_starts = unit < program.unit_begin.size() && program.unit_begin[unit] == i;
            if (unit_starts) scattered = node_stage(program.unit_bytes[unit], true, i, {scattered});
            const bool unit_ends =
                unit + 1 < program.unit_begin.size() ? program.unit_begin[unit + 1] == i + 1 : i + 1 == steps.size();
            if (s.kind == plan::StepKind::Send) {
                const size_t k = sends_to[s.peer]++;
                after(slot.post, previous);
                if (k >= static_cast<size_t>(rail_slots)) {
                    // The receiver's credit for message k - slots (its landing slot free again).
                    const auto &credits = credited[{s.peer, h}];
                    const size_t j = k - static_cast<size_t>(rail_slots);
                    if (j < credits.size()) after(slot.post, credits[j]);
                }
                after(slot.data, slot.post);
                previous = slot.post;
            } else if (s.kind == plan::StepKind::RecvReduce || s.kind == plan::StepKind::RecvCopy) {
                const size_t j = receives_from[s.peer]++;
                const auto &arrivals = sent[{s.peer, h}];
                after(slot.done, previous);
                if (j < arrivals.size()) after(slot.done, arrivals[j]);
                if (s.kind == plan::StepKind::RecvReduce)
                    dag.messages[static_cast<size_t>(slot.done)].delay_us =
                        static_cast<double>(s.bytes) / (spec.reduce_gbps * 1e3);
                after(slot.credit, slot.done);
                previous = slot.done;
            } else {
                after(slot.done, previous);
                previous = slot.done;
            }
            if (unit_starts) after(s.kind == plan::StepKind::Send ? slot.post : slot.done, scattered);
            if (unit_ends) gathered = node_stage(program.unit_bytes[unit++], false, i, {previous, gathered});
        }
        dag.last.push_back(gathered >= 0 ? gathered : previous);
    }
    std::ostringstream d;
    d << rail.name() << ": " << dag.steps << " steps per plane rank, " << dag.data_messages << " writes in all, slice "
      << dag.slice_bytes << " B, chunk " << chunk << " B, " << rail_slots << " in flight per peer";
    dag.describe = d.str();
    return dag;
}

}  // namespace gpurdma::fabric
