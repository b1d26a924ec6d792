#include "algo/selector.h"

#include <algorithm>
#include <set>

#include "base/text.h"
#include "plan/planner.h"
#include "plan/rail_choice.h"
#include "reduce/reduce.h"
#include "transport/shm_channels.h"

namespace gpurdma::algo {

transport::ShmMedium::Request Selector::shared_memory(const topo::Topology &topo, int rank,
                                                      const plan::PlanParams &plan, int slots)
{
    const auto &members = topo.members[static_cast<size_t>(topo.node_of[static_cast<size_t>(rank)])];
    const int ranks = static_cast<int>(members.size());
    transport::ShmMedium::Request request;
    request.slots = slots;
    request.slot_size = plan.chunk_size;
    // The segment holds the slot channels (schedules) or the node arena, never both.
    if (plan::uses_node_allreduce(topo, plan)) {
        const NodeArenaLayout layout = NodeAllreduce::layout(ranks, slots, plan.node_chunk);
        request.bytes = layout.bytes();
        request.cleared.emplace_back(0, layout.data_start());  // counters and mailboxes
    } else if (ranks > 1) {
        request.bytes = transport::ShmChannels::segment_bytes(ranks, slots, plan.chunk_size);
        request.slot_channels = true;
        request.cleared = transport::ShmChannels::cleared(ranks, slots, plan.chunk_size);
    }
    return request;
}

Selector::Selector(HostTeam &team) : team_(team)
{
    const auto &cfg = *team.setup().config;
    const plan::PlanParams &plan = team.plan();
    if (!plan::uses_node_allreduce(team.topology(), plan)) {
        schedules_ = std::make_unique<ScheduleAllreduce>(team);
        collectives_ = std::make_unique<ScheduleCollective>(team);
        return;
    }
    const auto &members = team.node_members();
    const int ranks = static_cast<int>(members.size());
    const int index = static_cast<int>(std::lower_bound(members.begin(), members.end(), team.rank()) - members.begin());
    const NodeArena arena(team.node_memory()->base, NodeAllreduce::layout(ranks, cfg.slots, plan.node_chunk));
    sequence_ = std::make_unique<NodeSequence>(ranks);
    node_ = std::make_unique<NodeAllreduce>(arena, *sequence_, members, index,
                                            NodeAllreduce::direct_max(ranks, plan.small_msg_max), team.hosts());
    // Reduce's direct form as the allreduce's: at two ranks the root folding whole blocks
    // while its peer only posts took 0.4-0.5x the time of the sliced form from 128 KiB to 4 MiB (osu_reduce).
    node_collectives_ = std::make_unique<NodeCollective>(arena, *sequence_, members, index, team.hosts(),
                                                         NodeAllreduce::direct_max(ranks, plan.small_msg_max));
}

Algorithm &Selector::choose(const Call &call)
{
    if (call.coll != plan::Coll::Allreduce) {
        if (node_collectives_) return *node_collectives_;
        return *collectives_;
    }
    if (node_) return *node_;
    schedules_->set_algorithm(
        plan::choose_algorithm(team_.topology(), call.count * reduce::dtype_size(call.dtype), team_.plan()));
    return *schedules_;
}

std::string Selector::describe_choices() const
{
    std::string choices;
    plan::Algorithm current{};
    bool changed = false;
    for (size_t b = 8; b <= (size_t{1} << 30); b *= 2) {
        const auto a = plan::choose_algorithm(team_.topology(), b, team_.plan());
        if (b > 8 && a == current) continue;
        if (b > 8) choices += " up to " + format_bytes(b / 2) + ", ";
        changed = changed || b > 8;
        choices += plan::algorithm_name(a);
        current = a;
    }
    return choices + (changed ? " above" : " at every size");
}

void Selector::log_summary(double ms) const
{
    const HostSetup &s = team_.setup();
    const Logger &log = *s.log;
    const plan::PlanParams &p = team_.plan();
    const topo::Topology &topo = team_.topology();
    const int slots = s.config->slots;
    if (node_) {
        const size_t direct = NodeAllreduce::direct_max(static_cast<int>(team_.node_members().size()), p.small_msg_max);
        log.log(1,
                "%s: %d ranks on 1 host, %s; shared memory, no UCX; node allreduce in %s blocks x %d slots: %s; %s; "
                "set-up %.1f ms",
                s.name.c_str(), s.size, topo.summary().c_str(), format_bytes(p.node_chunk).c_str(), slots,
                direct == SIZE_MAX ? "direct at every size (one wait per block, everyone reduces all)"
                                   : ("direct up to " + format_bytes(direct) +
                                      " (one wait, everyone reduces all), above: reduce-scatter/allgather (two waits)")
                                         .c_str(),
                team_.describe_waits().c_str(), ms);
        return;
    }
    const std::set<std::string> distinct(team_.hosts().begin(), team_.hosts().end());
    const double calibration = team_.calibration_ms();
    log.log(1,
            "%s: %d ranks on %zu host(s), %s; intra-node: shared memory, inter-node: UCX; %s (cost model%s: %s); %s "
            "chunks x %d slots, %d in flight per rail peer over %d endpoint(s); %s; set-up %.1f ms",
            s.name.c_str(), s.size, distinct.size(), topo.summary().c_str(), describe_choices().c_str(),
            calibration >= 0
                ? (", calibrated in " + std::to_string(static_cast<int>(calibration + 0.5)) + " ms").c_str()
                : "",
            plan::describe(p.model).c_str(), format_bytes(p.chunk_size).c_str(), slots, team_.rail_slots(),
            team_.rail_lanes(), team_.describe_waits().c_str(), ms);
    if (topo.nodes() < 2) return;
    log.log(1, "%s: %s", s.name.c_str(), team_.describe_fabric().c_str());
    if (topo.max_ppn() > 1)
        log.log(1, "%s: rail stage between nodes (a float message's slices): %s", s.name.c_str(),
                plan::describe_rail_plan(topo, p).c_str());
    // One line per node: its ranks and which rank carries each slice (rail) between nodes.
    const auto &rails = team_.rails();
    for (int k = 0; k < topo.nodes(); ++k) {
        const auto &m = topo.members[static_cast<size_t>(k)];
        std::string ranks, owners;
        for (size_t i = 0; i < m.size(); ++i) ranks += (i ? "," : "") + std::to_string(m[i]);
        for (int sl = 0; sl < topo.max_ppn(); ++sl) {
            const int o = m[static_cast<size_t>(sl) % m.size()];
            owners += (sl ? " " : "") + std::to_string(sl) + ":" + std::to_string(o);
            if (!rails[static_cast<size_t>(o)].empty()) owners += "(" + rails[static_cast<size_t>(o)] + ")";
        }
        log.log(1, "%s:   node %d (%s): ranks %s; rail owners %s", s.name.c_str(), k,
                topo.node_names[static_cast<size_t>(k)].c_str(), ranks.c_str(), owners.c_str());
    }
}

}  // namespace gpurdma::algo
