#include "algo/host_team.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "algo/calibration.h"
#include "algo/selector.h"
#include "base/text.h"
#include "exec/channel_release.h"
#include "plan/neighbors.h"
#include "topo/fabric_order.h"

namespace gpurdma::algo {

namespace {

// 10: each rank's fabric address; 9: the media records of pooled memory (the node memory's
// source, a UCX landing slice's region); 8 added rail_unit and rail_algorithm to the agreed
// parameters.
constexpr uint32_t kWireVersion = 10;

// A rank's placement from its set-up record: CPU list, cgroup, job processes, host CPUs.
bool read_placement(wire::Reader &rd, topo::RankPlacement *p)
{
    std::string cpus;
    uint32_t processes = 0, host_cpus = 0;
    if (!rd.str(&cpus) || !rd.str(&p->cgroup) || !rd.u32(&processes) || !rd.u32(&host_cpus)) return false;
    // An unreadable mask (empty) still counts the rank; it just cannot claim a CPU.
    if (!cpus.empty() && !topo::parse_cpu_list(cpus, &p->cpus)) return false;
    p->job_processes = static_cast<int>(std::min<uint32_t>(processes, 1u << 20));
    p->host_cpus = static_cast<int>(std::min<uint32_t>(host_cpus, CPU_SETSIZE));
    return true;
}

}  // namespace

HostTeam::HostTeam(HostSetup setup)
    : setup_(std::move(setup)), agreement_(setup_.bootstrap, setup_.rank, setup_.size), plan_(setup_.plan)
{}

Status HostTeam::create(HostSetup setup, std::unique_ptr<HostTeam> *out)
{
    std::unique_ptr<HostTeam> team(new HostTeam(std::move(setup)));
    Status st = team->agree_on_placement();
    if (st.is_ok()) st = team->connect_media();
    // Every rank learns the calibration's outcome from the same exchange: all decline together.
    if (st.is_ok() && team->setup_.config->calibrate && team->topo_.nodes() > 1) st = calibrate(*team);
    if (st.is_ok()) *out = std::move(team);
    return st;
}

HostTeam::~HostTeam()
{
    release_channels();
    router_.reset();
    ucx_.reset();
    shm_.reset();
}

void HostTeam::release_channels()
{
    transport::SlotChannels *node = shm_ ? shm_->channels() : nullptr;
    transport::UcxChannels *net = ucx_ ? ucx_->channels() : nullptr;
    if (!node && !net) return;
    // Peers may still write credits into our regions until they have consumed all we
    // sent, and our requests read our words until they finish: both come first, under
    // the host's wait loop, bounded. A set-up that failed early has no loop yet.
    exec::WaitPolicy policy = loop_ ? loop_->policy() : exec::WaitPolicy{};
    if (!loop_) policy.spin_us = setup_.config->spin_us;
    const double bound = std::min(5.0, setup_.config->timeout_s);
    exec::ChannelsRelease release(node, net, hosts_);
    if (exec::run_teardown(release, policy, bound, exec::WaitSite{setup_.name, setup_.rank, setup_.host})) return;
    // A peer may still write into our landing slice: no other communicator gets it.
    if (net) net->keep_landing();
    setup_.log->log(1, "%s: released after %g s without progress, still waiting for %s", setup_.name.c_str(), bound,
                    release.describe_wait().c_str());
}

Status HostTeam::agree_on_placement()
{
    const gpurdma_config_t &cfg = *setup_.config;
    const auto n = static_cast<size_t>(setup_.size);
    wire::Writer w;
    w.u32(kWireVersion);
    setup_.write_agreed(w);
    w.str(setup_.host);
    w.str(setup_.node);
    w.str(setup_.rail_device);
    w.str(setup_.fabric_address);
    w.str(topo::format_cpu_list(topo::own_cpus()));
    w.str(setup_.cgroup);
    w.u32(static_cast<uint32_t>(std::max(0, cfg.local_processes)));
    w.u32(static_cast<uint32_t>(setup_.host_cpus));
    std::vector<std::string> records;
    const Status exchanged = agreement_.exchange(w.take(), &records);
    if (!exchanged.is_ok()) return exchanged;
    hosts_.assign(n, "?");
    nodes_.assign(n, "");
    rails_.assign(n, "");
    std::vector<std::string> addresses(n);
    std::vector<topo::RankPlacement> placements(n);
    for (size_t r = 0; r < n; ++r) {
        wire::Reader rd(records[r]);
        uint32_t version = 0;
        std::string differing;
        const bool readable = rd.u32(&version) && version == kWireVersion && setup_.compare_agreed(rd, &differing) &&
                              rd.str(&hosts_[r]) && rd.str(&nodes_[r]) && rd.str(&rails_[r]) && rd.str(&addresses[r]) &&
                              read_placement(rd, &placements[r]);
        if (!readable) return Status::unsupported("rank " + std::to_string(r) + " runs another gpurdma version");
        // Everything that shapes the plan must be the same on every rank.
        if (!differing.empty())
            return Status::unsupported("rank " + std::to_string(r) +
                                       " uses other slots/chunk_size/node_chunk_size/small_msg_max/algorithm/"
                                       "logical_nodes/cost model/calibrate parameters (" +
                                       differing + ")");
    }
    topo_ = topo::build_topology(nodes_);
    order_by_fabric(addresses);
    // A rail exchange's sends ahead of its receives: never more than the landing slots of
    // any channel it may use (deadlock-free; plan/halving_doubling.h).
    plan_.rail_window = std::min(rail_slots(), std::max(1, setup_.config->slots));
    // The whole host decides, from every rank's placement: all its ranks wait alike.
    decide_waits(placements);
    return Status::ok();
}

Status HostTeam::connect_media()
{
    const gpurdma_config_t &cfg = *setup_.config;
    const int rank = setup_.rank;
    // The segment: what the algorithm lays over it, then the call-kinds board.
    transport::ShmMedium::Request shm_request = Selector::shared_memory(topo_, rank, plan_, cfg.slots);
    const size_t board_at = (shm_request.bytes + CallKinds::kLine - 1) / CallKinds::kLine * CallKinds::kLine;
    const int node_ranks = static_cast<int>(node_members().size());
    if (node_ranks > 1) {
        shm_request.bytes = board_at + CallKinds::bytes(node_ranks);
        shm_request.cleared.emplace_back(board_at, CallKinds::bytes(node_ranks));
    }
    shm_ = std::make_unique<transport::ShmMedium>(rank, setup_.size, node_members(), std::move(shm_request),
                                                  setup_.arenas);
    ucx_ = std::make_unique<transport::UcxMedium>(
        rank, setup_.size, [this](int r) { return remote_peers(r); }, rail_slots(), cfg.chunk_size, rail_lanes(),
        setup_.ucx, hosts_);
    // Rounds 2 and 3: the media set up, exchange records, connect, vote.
    const Status connected = transport::connect_media(agreement_, {shm_.get(), ucx_.get()}, hosts_);
    if (!connected.is_ok()) return connected;
    std::vector<bool> local(static_cast<size_t>(setup_.size), false);
    for (int m : node_members()) local[static_cast<size_t>(m)] = true;
    router_ = std::make_unique<transport::Router>(std::move(local), shm_->channels(), ucx_->channels());
    if (shm_->memory()) {
        const auto &members = node_members();
        const auto index = std::lower_bound(members.begin(), members.end(), rank) - members.begin();
        kinds_.emplace(shm_->memory()->base + board_at, static_cast<int>(index));
    }

    exec::WaitPolicy policy;
    policy.yield_when_idle = waits_.at(hosts_[static_cast<size_t>(rank)]).yield;
    policy.spin_us = cfg.spin_us;
    policy.timeout_s = cfg.timeout_s;
    policy.outside_progress = cfg.outside_progress;
    std::function<unsigned()> poll;
    if (uses_ucx()) poll = [ucx = ucx_->context()] { return ucx->progress(); };
    loop_.emplace(policy, exec::WaitSite{setup_.name, rank, setup_.host}, std::move(poll));
    return Status::ok();
}

const std::vector<int> &HostTeam::node_members() const
{
    return topo_.members[static_cast<size_t>(topo_.node_of[static_cast<size_t>(setup_.rank)])];
}

std::vector<int> HostTeam::remote_peers(int r) const
{
    std::vector<int> out;
    for (int p : plan::peers(topo_, r))
        if (topo_.node_of[static_cast<size_t>(p)] != topo_.node_of[static_cast<size_t>(r)]) out.push_back(p);
    return out;
}

uint64_t HostTeam::bytes_sent() const
{
    uint64_t sent = 0;
    if (ucx_ && ucx_->channels()) sent += ucx_->channels()->bytes_sent();
    if (shm_ && shm_->channels()) sent += shm_->channels()->bytes_sent();
    return sent;
}

void HostTeam::set_calibrated(const plan::CostModel &model, double ms)
{
    plan_.model = model;
    calibration_ms_ = ms;
}

void HostTeam::order_by_fabric(const std::vector<std::string> &address_of_rank)
{
    // A node's address is its first rank's: every rank reads the same records, so every
    // rank numbers the nodes alike.
    if (topo_.nodes() < 2) return;
    std::vector<std::string> address;
    for (const auto &m : topo_.members) address.push_back(address_of_rank[static_cast<size_t>(m[0])]);
    const std::vector<int> order = topo::fabric_order(address);
    if (order.empty()) {
        const size_t known = static_cast<size_t>(
            std::count_if(address.begin(), address.end(), [](const std::string &a) { return !a.empty(); }));
        fabric_ = known == 0 ? "fabric unknown: nodes in rank order"
                             : "fabric known for " + std::to_string(known) + " of " + std::to_string(address.size()) +
                                   " nodes: nodes in rank order";
        return;
    }
    topo::reorder_nodes(&topo_, order);
    std::vector<std::string> ordered;
    for (int old : order) ordered.push_back(address[static_cast<size_t>(old)]);
    fabric_ = "nodes in fabric order: " + topo::describe_fabric(topo_, ordered);
}

int HostTeam::rail_lanes() const
{
    if (setup_.config->rail_qps > 0) return std::min(setup_.config->rail_qps, rail_slots());
    // The model's finding (docs/FABRIC.md): two QPs halve the time where the placement
    // is unknown and the rings cross the spines, and keep a second job's traffic from
    // drawing PFC pauses where it is known, for 2-9% when the job is alone; one host has
    // no spines to spread over.
    const bool one_host =
        std::all_of(hosts_.begin(), hosts_.end(), [&](const std::string &h) { return h == hosts_[0]; });
    return one_host ? 1 : std::min(2, rail_slots());
}

void HostTeam::decide_waits(const std::vector<topo::RankPlacement> &placements)
{
    std::map<std::string, std::vector<topo::RankPlacement>> by_host;
    for (size_t r = 0; r < placements.size(); ++r) by_host[hosts_[r]].push_back(placements[r]);
    waits_.clear();
    for (const auto &h : by_host) waits_.emplace(h.first, topo::decide_wait(h.second));
}

std::string HostTeam::describe_waits() const
{
    // Hosts that decided alike share one entry, so the line stays short on many hosts.
    std::map<std::string, std::vector<std::string>> hosts_by_verdict;
    for (const auto &w : waits_) hosts_by_verdict[w.second.describe()].push_back(w.first);
    std::string text;
    const double us = setup_.config->spin_us;
    for (const auto &v : hosts_by_verdict) {
        const auto &hosts = v.second;
        std::string where = hosts.size() > 3 ? std::to_string(hosts.size()) + " hosts (" + hosts[0] + ", ...)" : "";
        for (size_t i = 0; hosts.size() <= 3 && i < hosts.size(); ++i) where += (i ? ", " : "") + hosts[i];
        text += (text.empty() ? "wait on " : "; wait on ") + where + ": " + v.first;
        if (!waits_.at(hosts[0]).yield && us >= 0) {
            char budget[64];
            std::snprintf(budget, sizeof budget, "; yield after %g us", us);
            text += budget;
        }
    }
    return text;
}

}  // namespace gpurdma::algo
