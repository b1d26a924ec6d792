#include "schedule_dag.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "plan/planner.h"
#include "plan/rail.h"
#include "topo/topology.h"

namespace gpurdma::fabric {

namespace {

constexpr size_t kElem = 4;  // float elements, the common case
constexpr uint64_t kCreditBytes = 8;  // the credit word written back to the sender

// The steps of each plane rank (index: node), peers given as nodes.
std::vector<std::vector<plan::Step>> plane_steps(const ClusterSpec &spec, RailAlgorithm algorithm, size_t bytes,
                                                 size_t chunk)
{
    const topo::Topology t = cluster_topology(spec);
    const plan::PlanParams params = planner_params(spec, chunk);
    const size_t count = bytes / kElem;
    std::vector<std::vector<plan::Step>> out(static_cast<size_t>(spec.nodes));
    plan::Group g;
    for (int n = 0; n < spec.nodes; ++n) g.ranks.push_back(plan::slice_owner(t, n, 0));
    // Slice 0's share of the whole message (the node stage's first slice).
    const size_t slice_count = (count + static_cast<size_t>(spec.gpus_per_node) - 1) / spec.gpus_per_node;
    for (int n = 0; n < spec.nodes; ++n) {
        std::vector<plan::Step> &steps = out[static_cast<size_t>(n)];
        g.me = n;
        switch (algorithm) {
            case RailAlgorithm::Hierarchical:
                for (const plan::RailUnit &u : plan::hierarchical_units(t, count, kElem, params)) {
                    if (u.slice != 0) continue;
                    const plan::Schedule s =
                        plan::build_rail_allreduce(t, g.ranks[static_cast<size_t>(n)], 0, u.count, kElem, params);
                    steps.insert(steps.end(), s.steps.begin(), s.steps.end());
                }
                break;
            case RailAlgorithm::HierarchicalRd:
                for (const plan::RailUnit &u : plan::hierarchical_units(t, count, kElem, params))
                    if (u.slice == 0) plan::append_recursive_doubling(steps, g, 0, u.count, kElem);
                break;
            case RailAlgorithm::Ring: plan::append_ring(steps, g, plan::Buf::Recv, 0, slice_count, kElem, chunk); break;
            case RailAlgorithm::RecursiveDoubling:
                plan::append_recursive_doubling(steps, g, 0, slice_count, kElem);
                break;
        }
        for (plan::Step &s : steps)
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
    return topo::build_topology(nodes);
}

plan::PlanParams planner_params(const ClusterSpec &spec, size_t chunk)
{
    plan::PlanParams params;
    params.chunk_size = chunk;
    params.model.net = {4 * spec.link_delay_us + 2.0, spec.nic_gbps / 8};
    params.model.shm = {1.0, 150.0};
    params.model.reduce_gbps = spec.reduce_gbps;
    return params;
}

const char *rail_algorithm_name(RailAlgorithm a)
{
    switch (a) {
        case RailAlgorithm::Hierarchical: return "hier";
        case RailAlgorithm::HierarchicalRd: return "hier-rd";
        case RailAlgorithm::Ring: return "ring";
        case RailAlgorithm::RecursiveDoubling: return "rd";
    }
    return "?";
}

bool parse_rail_algorithm(const std::string &name, RailAlgorithm *out)
{
    for (RailAlgorithm a : {RailAlgorithm::Hierarchical, RailAlgorithm::HierarchicalRd, RailAlgorithm::Ring,
                            RailAlgorithm::RecursiveDoubling})
        if (name == rail_algorithm_name(a)) {
            *out = a;
            return true;
        }
    return false;
}

double ideal_us(const ClusterSpec &spec, size_t bytes)
{
    const double n = spec.nodes;
    const double slice = static_cast<double>(bytes) / spec.gpus_per_node;
    return 2 * (n - 1) / n * slice * 8 / (spec.nic_gbps * 1e3);
}

ScheduleDag build_rail_dag(const ClusterSpec &spec, RailAlgorithm algorithm, size_t bytes, size_t chunk, int rail_slots,
                           int host_base, int host_stride, int tag_base)
{
    const std::vector<std::vector<plan::Step>> program = plane_steps(spec, algorithm, bytes, chunk);
    const std::vector<int> place = spec.host_of_node();
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
    for (int h = 0; h < hosts; ++h) {
        const auto &steps = program[static_cast<size_t>(h)];
        dag.steps = std::max(dag.steps, static_cast<int>(steps.size()));
        at[static_cast<size_t>(h)].resize(steps.size());
        for (size_t i = 0; i < steps.size(); ++i) {
            const plan::Step &s = steps[i];
            Slot &slot = at[static_cast<size_t>(h)][i];
            const int me = host_base + place[static_cast<size_t>(h)] * host_stride;
            const int peer = host_base + place[static_cast<size_t>(s.peer)] * host_stride;
            const int tag = tag_base + static_cast<int>(i);
            switch (s.kind) {
                case plan::StepKind::Send:
                    slot.post = add(Message{me, me, 0, {}, 0, 0, -1, tag}, MessageKind::Local, static_cast<int>(i));
                    slot.data =
                        add(Message{me, peer, s.bytes, {}, 0, 0, 0, tag}, MessageKind::Data, static_cast<int>(i));
                    sent[{h, s.peer}].push_back(slot.data);
                    ++dag.data_messages;
                    break;
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
    // Pass 2: the dependencies.
    for (int h = 0; h < hosts; ++h) {
        const auto &steps = program[static_cast<size_t>(h)];
        MessageId previous = -1;  // the step before, done
        std::map<int, size_t> sends_to, receives_from;
        for (size_t i = 0; i < steps.size(); ++i) {
            const plan::Step &s = steps[i];
            Slot &slot = at[static_cast<size_t>(h)][i];
            auto after = [&](MessageId m, MessageId dep) {
                if (dep >= 0) dag.messages[static_cast<size_t>(m)].after.push_back(dep);
            };
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
        }
        dag.last.push_back(previous);
    }
    std::ostringstream d;
    d << rail_algorithm_name(algorithm) << ": " << dag.steps << " steps per plane rank, " << dag.data_messages
      << " writes in all, slice " << dag.slice_bytes << " B, chunk " << chunk << " B, " << rail_slots
      << " in flight per peer";
    dag.describe = d.str();
    return dag;
}

}  // namespace gpurdma::fabric
