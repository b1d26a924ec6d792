#include "core/comm.h"

#include <sched.h>

#include <map>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <thread>

#include "setup/wire.h"
#include "exec/executor.h"
#include "exec/node_allreduce.h"
#include "exec/progress.h"
#include "plan/neighbors.h"
#include "plan/planner.h"
#include "reduce/reduce.h"
#include "topo/placement.h"

using gpurdma::plan::Schedule;

namespace {

constexpr uint32_t kWireVersion = 6;
constexpr size_t kMaxCachedSchedules = 32;

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// The cost model as bit patterns: every rank must hold exactly the same numbers.
std::vector<uint64_t> model_bits(const gpurdma::plan::CostModel &m)
{
    std::vector<uint64_t> out;
    for (double v : {m.net.alpha_us, m.net.gbps, m.shm.alpha_us, m.shm.gbps, m.reduce_gbps}) {
        uint64_t b;
        std::memcpy(&b, &v, sizeof b);
        out.push_back(b);
    }
    return out;
}

// A rank's placement from its set-up record: CPU list, cgroup, job processes, host CPUs.
bool read_placement(gpurdma::wire::Reader &rd, gpurdma::topo::RankPlacement *p)
{
    std::string cpus;
    uint32_t processes = 0, host_cpus = 0;
    if (!rd.str(&cpus) || !rd.str(&p->cgroup) || !rd.u32(&processes) || !rd.u32(&host_cpus)) return false;
    // An unreadable mask (empty) still counts the rank; it just cannot claim a CPU.
    if (!cpus.empty() && !gpurdma::topo::parse_cpu_list(cpus, &p->cpus)) return false;
    p->job_processes = static_cast<int>(std::min<uint32_t>(processes, 1u << 20));
    p->host_cpus = static_cast<int>(std::min<uint32_t>(host_cpus, CPU_SETSIZE));
    return true;
}

std::string format_bytes(size_t bytes)
{
    char text[64];
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0) std::snprintf(text, sizeof text, "%zu KiB", bytes >> 10);
    else std::snprintf(text, sizeof text, "%zu B", bytes);
    return text;
}

}  // namespace

gpurdma_comm::gpurdma_comm(gpurdma_context *ctx, const gpurdma_comm_params_t &params)
    : context(ctx),
      rank(params.rank),
      size(params.size),
      bootstrap(params.bootstrap),
      name(params.name ? params.name : "communicator"),
      staging_(name)
{
}

gpurdma_comm::~gpurdma_comm()
{
    // Per-communicator counters: set-up work happens once, never per call.
    if (stats.calls > 0 && context->log.enabled(rank == 0 ? 1 : 2))
        context->log.log(rank == 0 ? 1 : 2,
                         "%s: rank %d freed after %llu calls (node %llu, ring %llu, recursive doubling %llu, "
                         "hierarchical %llu); set-ups %llu, UCX registrations %llu, shared segments %llu, bytes sent %llu",
                         name.c_str(), rank, static_cast<unsigned long long>(stats.calls),
                         static_cast<unsigned long long>(stats.node_calls),
                         static_cast<unsigned long long>(stats.ring_calls),
                         static_cast<unsigned long long>(stats.rd_calls),
                         static_cast<unsigned long long>(stats.hier_calls),
                         static_cast<unsigned long long>(stats.setups),
                         static_cast<unsigned long long>(stats.registrations),
                         static_cast<unsigned long long>(stats.shm_segments),
                         static_cast<unsigned long long>(stats.bytes_put));
    release_transports();
}

void gpurdma_comm::decide_waits(const std::vector<gpurdma::topo::RankPlacement> &placements)
{
    std::map<std::string, std::vector<gpurdma::topo::RankPlacement>> by_host;
    for (int r = 0; r < size; ++r) by_host[hosts_[static_cast<size_t>(r)]].push_back(placements[static_cast<size_t>(r)]);
    waits_.clear();
    for (const auto &h : by_host) waits_.emplace(h.first, gpurdma::topo::decide_wait(h.second));
    oversubscribed_ = waits_.at(hosts_[static_cast<size_t>(rank)]).yield;
}

std::string gpurdma_comm::wait_policies() const
{
    // Hosts that decided alike share one entry, so the line stays short on many hosts.
    std::map<std::string, std::vector<std::string>> hosts_by_verdict;
    for (const auto &w : waits_) hosts_by_verdict[w.second.describe()].push_back(w.first);
    std::string text;
    const double us = context->config.spin_us;
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

void gpurdma_comm::log_summary(std::chrono::steady_clock::time_point t0) const
{
    using gpurdma::plan::algorithm_name;
    using gpurdma::plan::choose_algorithm;
    const auto &cfg = context->config;
    const auto &p = plan_;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::set<std::string> distinct(hosts_.begin(), hosts_.end());
    if (node_path_) {
        context->log.log(1,
                         "%s: %d ranks on 1 host, %s; shared memory, no UCX; node allreduce in %s blocks x %d "
                         "slots: %s; %s; set-up %.1f ms",
                         name.c_str(), size, topo_.summary().c_str(), format_bytes(p.node_chunk).c_str(), cfg.slots,
                         node_direct_max_ == SIZE_MAX
                             ? "direct at every size (one wait per block, everyone reduces all)"
                             : ("direct up to " + format_bytes(node_direct_max_) +
                                " (one wait, everyone reduces all), above: reduce-scatter/allgather (two waits)")
                                   .c_str(),
                         wait_policies().c_str(), ms);
        return;
    }
    // Auto's choices over the sizes, as ranges: "recursive-doubling up to 32 KiB, hierarchical above".
    std::string choices;
    gpurdma::plan::Algorithm current{};
    bool changed = false;
    for (size_t b = 8; b <= (size_t{1} << 30); b *= 2) {
        const auto a = choose_algorithm(topo_, b, p);
        if (b > 8 && a == current) continue;
        if (b > 8) choices += " up to " + format_bytes(b / 2) + ", ";
        changed = changed || b > 8;
        choices += algorithm_name(a);
        current = a;
    }
    choices += changed ? " above" : " at every size";
    context->log.log(1,
                     "%s: %d ranks on %zu host(s), %s; intra-node: shared memory, inter-node: UCX; %s (cost model%s: "
                     "%s); %s chunks x %d slots; %s; set-up %.1f ms",
                     name.c_str(), size, distinct.size(), topo_.summary().c_str(), choices.c_str(),
                     calibration_ms_ >= 0 ? (", calibrated in " + std::to_string(static_cast<int>(calibration_ms_ + 0.5)) +
                                             " ms").c_str()
                                          : "",
                     gpurdma::plan::describe(p.model).c_str(), format_bytes(p.chunk_size).c_str(), cfg.slots,
                     wait_policies().c_str(), ms);
    if (topo_.nodes() < 2) return;
    // One line per node: its ranks and which rank carries each slice (rail) between nodes.
    for (int k = 0; k < topo_.nodes(); ++k) {
        const auto &m = topo_.members[static_cast<size_t>(k)];
        std::string ranks, rails;
        for (size_t i = 0; i < m.size(); ++i) ranks += (i ? "," : "") + std::to_string(m[i]);
        for (int sl = 0; sl < topo_.max_ppn(); ++sl) {
            const int o = m[static_cast<size_t>(sl) % m.size()];
            rails += (sl ? " " : "") + std::to_string(sl) + ":" + std::to_string(o);
            if (!devices_[static_cast<size_t>(o)].empty()) rails += "(" + devices_[static_cast<size_t>(o)] + ")";
        }
        context->log.log(1, "%s:   node %d (%s): ranks %s; rail owners %s", name.c_str(), k,
                         topo_.node_names[static_cast<size_t>(k)].c_str(), ranks.c_str(), rails.c_str());
    }
}

std::vector<int> gpurdma_comm::remote_peers(int r) const
{
    // The schedules' peers of r that live on other nodes (symmetric, sorted).
    std::vector<int> out;
    for (int p : gpurdma::plan::peers(topo_, r))
        if (topo_.node_of[p] != topo_.node_of[r]) out.push_back(p);
    return out;
}

std::string gpurdma_comm::describe_peer(int peer) const
{
    std::string text = "rank " + std::to_string(peer);
    if (peer >= 0 && static_cast<size_t>(peer) < hosts_.size()) text += " on host " + hosts_[peer];
    return text;
}

void gpurdma_comm::tally(uint64_t gpurdma_comm_stats_t::*field, uint64_t n)
{
    stats.*field += n;
    context->totals.*field += n;
}

gpurdma_status_t gpurdma_comm::fail(gpurdma_status_t status, const std::string &message)
{
    last_error = message;
    broken_ = true;
    context->log.log(0, "%s", message.c_str());
    return status;
}

bool gpurdma_comm::exchange(const std::string &mine, std::vector<std::string> *all)
{
    // Blobs differ in size: agree on the largest first, then gather padded copies.
    const uint64_t my_len = mine.size();
    std::vector<uint64_t> lens(static_cast<size_t>(size));
    if (bootstrap.allgather(&my_len, lens.data(), sizeof my_len, bootstrap.arg) != 0) return false;
    uint64_t max_len = 0;
    for (uint64_t l : lens) max_len = std::max(max_len, l);
    std::string padded = mine;
    padded.resize(max_len, '\0');
    std::string gathered(max_len * static_cast<size_t>(size), '\0');
    if (max_len > 0 && bootstrap.allgather(padded.data(), gathered.data(), max_len, bootstrap.arg) != 0)
        return false;
    all->resize(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) (*all)[r] = gathered.substr(r * max_len, lens[r]);
    return true;
}

void gpurdma_comm::release_transports()
{
    // Peers may still write credits into our regions until they have consumed all
    // we sent: wait for that (bounded) before the regions go.
    const double bound = std::min(5.0, context->config.timeout_s);
    bool drained = true;
    if (shm_) drained = shm_->drain(bound) && drained;
    if (ucx_) drained = ucx_->drain(bound) && drained;
    if (!drained) context->log.log(1, "%s: peers did not return all landing slots before release", name.c_str());
    router_.reset();
    ucx_.reset();
    shm_.reset();
    segment_.reset();
}

// The node segment holds the slot channels (schedules) or the node arena (one-node
// path), never both: each path uses only its own.
size_t gpurdma_comm::channel_bytes() const
{
    const auto &members = topo_.members[static_cast<size_t>(topo_.node_of[rank])];
    if (node_path_ || members.size() < 2) return 0;
    return gpurdma::transport::ShmChannels::segment_bytes(static_cast<int>(members.size()), context->config.slots,
                                                          context->config.chunk_size);
}

gpurdma::transport::NodeArenaLayout gpurdma_comm::arena_layout() const
{
    gpurdma::transport::NodeArenaLayout l;
    l.ranks = static_cast<int>(topo_.members[static_cast<size_t>(topo_.node_of[rank])].size());
    l.slots = context->config.slots;
    l.block = context->plan.node_chunk;
    return l;
}

// Local part of set-up once the host names are known: topology, then the node's
// shared segment (created by the node's first rank) and this rank's UCX region.
bool gpurdma_comm::setup_local(const std::vector<std::string> &nodes, std::string *why)
{
    topo_ = gpurdma::topo::build_topology(nodes);
    const auto &members = topo_.members[static_cast<size_t>(topo_.node_of[rank])];
    node_path_ = gpurdma::plan::uses_node_allreduce(topo_, context->plan);
    // The node allreduce's direct form (everyone reduces all, one wait). With two ranks
    // it moves the same bytes per rank as reduce-scatter/allgather and waits half as
    // often: measured faster at every size here (1 MiB: 91 against 126 us), so it takes
    // everything unless the latency path is off (small_msg_max 0).
    const size_t small = context->plan.small_msg_max;
    node_direct_max_ = members.size() == 2 && small > 0 ? SIZE_MAX : small;
    node_index_ = static_cast<int>(std::lower_bound(members.begin(), members.end(), rank) - members.begin());
    const size_t segment_bytes = channel_bytes() + (node_path_ ? arena_layout().bytes() : 0);
    const auto &cfg = context->config;
    const auto peers = [this](int r) { return remote_peers(r); };
    try {
        if (members.size() > 1 && members[0] == rank)
            segment_ = gpurdma::transport::ShmSegment::create(segment_bytes);
        if (!remote_peers(rank).empty()) {
            gpurdma::transport::UcxContext *ucx = context->transport(why);
            if (!ucx) return false;
            ucx_ = std::make_unique<gpurdma::transport::UcxChannels>(*ucx, rank, size, peers, cfg.slots,
                                                                      cfg.chunk_size);
        }
    } catch (const std::exception &e) {
        *why = e.what();
        return false;
    }
    return true;
}

// Attaches the node segment and connects UCX from everyone's second-round record.
// Returns "" or the reason it failed.
std::string gpurdma_comm::setup_connect(const std::vector<std::string> &blobs)
{
    using gpurdma::transport::UcxPeerInfo;
    const auto &cfg = context->config;
    const auto &members = topo_.members[static_cast<size_t>(topo_.node_of[rank])];
    std::vector<std::string> segment_names(static_cast<size_t>(size));
    std::vector<UcxPeerInfo> ucx_info(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
        gpurdma::wire::Reader rd(blobs[r]);
        uint32_t ok = 0;
        if (!rd.u32(&ok) || !ok) return describe_peer(r) + " could not set up";
        if (!rd.str(&segment_names[r]) || !rd.str(&ucx_info[r].worker_address) || !rd.u64(&ucx_info[r].region_base) ||
            !rd.u64(&ucx_info[r].channel_id) ||
            !rd.str(&ucx_info[r].region_key))
            return describe_peer(r) + " sent an unreadable set-up record";
    }
    try {
        if (members.size() > 1) {
            const size_t channels = channel_bytes();
            if (!segment_)
                segment_ = gpurdma::transport::ShmSegment::attach(
                    segment_names[members[0]], channels + (node_path_ ? arena_layout().bytes() : 0));
            if (node_path_) {
                node_arena_.emplace(segment_->base() + channels, arena_layout());
                consumed_seen_.assign(members.size(), 0);
            }
            else
                shm_ = std::make_unique<gpurdma::transport::ShmChannels>(rank, size, members, cfg.slots,
                                                                          cfg.chunk_size, *segment_);
        }
        if (ucx_) ucx_->connect(ucx_info, hosts_);
    } catch (const std::exception &e) {
        return e.what();
    }
    std::vector<bool> local(static_cast<size_t>(size), false);
    for (int m : members) local[static_cast<size_t>(m)] = true;
    router_ = std::make_unique<gpurdma::transport::Router>(std::move(local), shm_.get(), ucx_.get());
    return "";
}

gpurdma_status_t gpurdma_comm::ensure_setup()
{
    if (setup_ == SetupState::Ready) return GPURDMA_OK;
    if (setup_ == SetupState::Declined) return GPURDMA_ERR_UNSUPPORTED;
    const auto &cfg = context->config;
    const auto t0 = std::chrono::steady_clock::now();
    plan_ = context->plan;
    auto decline = [this](const std::string &why) {
        release_transports();
        setup_ = SetupState::Declined;
        context->log.log(1, "%s: declined, using the previous allreduce: %s", name.c_str(), why.c_str());
        return GPURDMA_ERR_UNSUPPORTED;
    };

    // Round 1: who is where, and the parameters every rank must share.
    gpurdma::wire::Writer w1;
    w1.u32(kWireVersion);
    w1.u32(static_cast<uint32_t>(cfg.slots));
    w1.u64(cfg.chunk_size);
    w1.u64(context->plan.node_chunk);
    w1.u64(context->plan.small_msg_max);
    const std::vector<uint64_t> model = model_bits(context->plan.model);
    for (uint64_t b : model) w1.u64(b);
    w1.u32(cfg.calibrate ? 1 : 0);
    w1.str(context->algorithm_text);
    w1.str(context->logical_nodes);
    w1.str(context->host);
    w1.str(context->node);
    w1.str(context->rail_device);
    w1.str(gpurdma::topo::format_cpu_list(gpurdma::topo::own_cpus()));
    w1.str(context->cgroup);
    w1.u32(static_cast<uint32_t>(std::max(0, cfg.local_processes)));
    w1.u32(static_cast<uint32_t>(context->host_cpus));
    std::vector<std::string> blobs;
    if (!exchange(w1.take(), &blobs)) return decline("set-up exchange failed");
    hosts_.assign(static_cast<size_t>(size), "?");
    devices_.assign(static_cast<size_t>(size), "");
    std::vector<gpurdma::topo::RankPlacement> placements(static_cast<size_t>(size));
    std::vector<std::string> nodes(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
        gpurdma::wire::Reader rd(blobs[r]);
        uint32_t version = 0, slots = 0;
        uint64_t chunk = 0, node_chunk = 0, small = 0;
        std::string algorithm, logical;
        std::vector<uint64_t> their_model(model.size());
        bool readable = rd.u32(&version) && version == kWireVersion && rd.u32(&slots) && rd.u64(&chunk) &&
                        rd.u64(&node_chunk) && rd.u64(&small);
        for (auto &b : their_model) readable = readable && rd.u64(&b);
        uint32_t calibrates = 0;
        readable = readable && rd.u32(&calibrates);
        readable = readable && rd.str(&algorithm) && rd.str(&logical) && rd.str(&hosts_[r]) && rd.str(&nodes[r]) &&
                   rd.str(&devices_[r]) && read_placement(rd, &placements[r]);
        if (!readable) return decline("rank " + std::to_string(r) + " runs another gpurdma version");
        // Everything that shapes the plan must be the same on every rank.
        if (slots != static_cast<uint32_t>(cfg.slots) || chunk != cfg.chunk_size ||
            node_chunk != context->plan.node_chunk || small != context->plan.small_msg_max ||
            algorithm != context->algorithm_text || logical != context->logical_nodes || their_model != model ||
            calibrates != (cfg.calibrate ? 1u : 0u))
            return decline("rank " + std::to_string(r) +
                           " uses other slots/chunk_size/node_chunk_size/small_msg_max/algorithm/logical_nodes/"
                           "cost model/calibrate parameters");
    }

    // The whole host decides, from every rank's placement: all its ranks wait alike.
    decide_waits(placements);

    // Round 2: local resources, then everyone's addresses. A rank that failed still
    // takes part (ok = 0) so that every rank reaches the same decision.
    std::string why;
    const bool ok = setup_local(nodes, &why);
    gpurdma::wire::Writer w2;
    w2.u32(ok ? 1 : 0);
    w2.str(segment_ ? segment_->name() : "");
    const gpurdma::transport::UcxPeerInfo me = ucx_ ? ucx_->local_info() : gpurdma::transport::UcxPeerInfo{};
    w2.str(me.worker_address);
    w2.u64(me.region_base);
    w2.u64(me.channel_id);
    w2.str(me.region_key);
    if (!exchange(w2.take(), &blobs)) return decline("set-up exchange failed");
    if (ok) why = setup_connect(blobs);

    // Round 3: agree. Only then may the node's segment name go away.
    const uint8_t vote = why.empty() ? 1 : 0;
    std::vector<uint8_t> votes(static_cast<size_t>(size));
    if (bootstrap.allgather(&vote, votes.data(), 1, bootstrap.arg) != 0) return decline("set-up exchange failed");
    for (int r = 0; r < size; ++r)
        if (!votes[r]) return decline(why.empty() ? describe_peer(r) + " could not set up" : why);
    if (segment_) segment_->unlink();

    setup_ = SetupState::Ready;
    if (cfg.calibrate && topo_.nodes() > 1) {
        // Every rank learns the outcome from the same exchange: all decline together.
        const std::string failed = calibrate();
        if (!failed.empty()) {
            broken_ = false;
            last_error.clear();
            return decline(failed);
        }
    }
    tally(&gpurdma_comm_stats_t::setups);
    if (ucx_) tally(&gpurdma_comm_stats_t::registrations);
    if (segment_) tally(&gpurdma_comm_stats_t::shm_segments);
    if (rank == 0 && context->log.enabled(1)) log_summary(t0);
    return GPURDMA_OK;
}

bool gpurdma_comm::ping_pong(int peer, bool leader, size_t bytes, int reps, double *min_rtt_us)
{
    using gpurdma::plan::Buf;
    using gpurdma::plan::Phase;
    using gpurdma::plan::StepKind;
    Schedule s;
    s.algorithm = "calibration";
    s.rank = rank;
    s.size = size;
    s.bytes = bytes;
    const gpurdma::plan::Step send{StepKind::Send, Phase::Calibration, false, peer, Buf::Recv, Buf::Recv, 0, 0, bytes};
    const gpurdma::plan::Step recv{StepKind::RecvCopy, Phase::Calibration, false, peer, Buf::Recv, Buf::Recv, 0, 0,
                                   bytes};
    s.steps = leader ? std::vector<gpurdma::plan::Step>{send, recv} : std::vector<gpurdma::plan::Step>{recv, send};
    std::vector<char> buffer(bytes, 0);
    *min_rtt_us = 1e300;
    for (int i = 0; i < reps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        if (run(s, nullptr, buffer.data(), GPURDMA_BYTE, GPURDMA_BOR) != GPURDMA_OK) return false;
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 2) *min_rtt_us = std::min(*min_rtt_us, us);  // the first ones warm up
    }
    return true;
}

std::string gpurdma_comm::calibrate()
{
    const auto t0 = std::chrono::steady_clock::now();
    const auto &members0 = topo_.members[static_cast<size_t>(topo_.node_of[0])];
    const int net_peer = remote_peers(0).front();  // rank 0 owns slice 0: it has a rail peer
    const int shm_peer = members0.size() > 1 ? members0[1] : -1;
    const size_t large = std::min<size_t>(64 * 1024, plan_.chunk_size);
    constexpr int kReps = 12;
    // values: ok, net alpha, net GB/s, shm alpha, shm GB/s, reduce GB/s (rank 0's count).
    double values[6] = {1, plan_.model.net.alpha_us, plan_.model.net.gbps, plan_.model.shm.alpha_us,
                        plan_.model.shm.gbps, plan_.model.reduce_gbps};
    auto link = [&](int peer, double *alpha, double *gbps) {
        const bool leader = rank == 0;
        if (!leader && rank != peer) return true;
        const int other = leader ? peer : 0;
        double small_rtt = 0, large_rtt = 0;
        if (!ping_pong(other, leader, 8, kReps, &small_rtt) || !ping_pong(other, leader, large, kReps, &large_rtt))
            return false;
        // Keep the MCA values unless the numbers make sense (a noisy machine can invert them).
        if (leader && large_rtt > small_rtt) {
            *alpha = small_rtt / 2;
            *gbps = static_cast<double>(large - 8) / ((large_rtt - small_rtt) / 2) / 1e3;
        }
        return true;
    };
    bool ok = link(net_peer, &values[1], &values[2]);
    if (ok && shm_peer >= 0) ok = link(shm_peer, &values[3], &values[4]);
    if (ok && rank == 0) {
        // A chunk's worth: the size the schedules reduce at a time.
        std::vector<float> a(plan_.chunk_size / sizeof(float), 1.0f), b(a.size(), 2.0f);
        double best = 1e300;
        for (int i = 0; i < kReps; ++i) {
            const auto r0 = std::chrono::steady_clock::now();
            gpurdma::reduce::apply(GPURDMA_SUM, GPURDMA_FLOAT, a.data(), a.data(), b.data(), a.size());
            best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - r0).count());
        }
        if (best > 0) values[5] = static_cast<double>(a.size() * sizeof(float)) / best / 1e3;
    }
    if (!ok) values[0] = 0;
    // Everyone takes rank 0's numbers: the plan must be the same on every rank.
    std::vector<double> all(static_cast<size_t>(size) * 6);
    if (bootstrap.allgather(values, all.data(), sizeof values, bootstrap.arg) != 0)
        return "cost-model calibration: exchange failed";
    for (int r = 0; r < size; ++r)
        if (all[static_cast<size_t>(r) * 6] == 0) return "cost-model calibration failed on " + describe_peer(r);
    plan_.model.net = {all[1], all[2]};
    plan_.model.shm = {all[3], all[4]};
    plan_.model.reduce_gbps = all[5];
    schedules_.clear();
    calibration_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return "";
}

const Schedule &gpurdma_comm::schedule_for(size_t count, size_t elem_size, bool in_place)
{
    const auto key = std::make_tuple(count, elem_size, in_place);
    auto it = schedules_.find(key);
    if (it != schedules_.end()) return it->second;
    if (schedules_.size() >= kMaxCachedSchedules) schedules_.clear();
    return schedules_
        .emplace(key, gpurdma::plan::build(topo_, rank, count, elem_size, in_place, plan_))
        .first->second;
}

template <typename Advance, typename Position, typename Waiting>
gpurdma_status_t gpurdma_comm::drive(Advance advance, Position position, Waiting waiting, const char *stage)
{
    using gpurdma::exec::State;
    const double timeout = context->config.timeout_s;
    // The clock is read only once nothing has moved for a while: a small message
    // completes without ever reading it.
    std::chrono::steady_clock::time_point idle_since{};
    bool idle_clock = false;
    auto last_pos = position();
    unsigned idle = 0;
    bool yielding = oversubscribed_;
    const double spin_s = context->config.spin_us * 1e-6;
    for (;;) {
        const State st = advance();
        if (st == State::Done) return GPURDMA_OK;
        if (st == State::Failed) return fail(GPURDMA_ERR_TRANSPORT, waiting(true));
        if (position() != last_pos) {
            last_pos = position();
            idle_clock = false;
            idle = 0;
            yielding = oversubscribed_;
            continue;
        }
        if (ucx_ && context->ucx->progress() != 0) {
            idle = 0;
            continue;
        }
        // Nothing moved. While every local rank has a core of its own, spin: a yield
        // would hand the core to any other runnable process for a whole time slice
        // (milliseconds). With more local ranks than cores, yield at once so that the
        // peer we wait for gets to run. A wait longer than the spin budget means the
        // peer is not running either (other "nodes" or jobs share the cores): yield too.
        ++idle;
        if (yielding) std::this_thread::yield();
        else if (idle > 64) cpu_relax();  // the first polls at full speed: the peer is usually close
        if (idle % 16 != 1) continue;
        const auto now = std::chrono::steady_clock::now();
        if (!idle_clock) {
            idle_since = now;
            idle_clock = true;
            continue;
        }
        const double idle_s = std::chrono::duration<double>(now - idle_since).count();
        if (!yielding && spin_s >= 0 && idle_s > spin_s) yielding = true;
        if (idle_s > timeout) {
            char secs[32];
            std::snprintf(secs, sizeof secs, "%.0f", timeout);
            return fail(GPURDMA_ERR_TIMEOUT, name + ": allreduce timed out after " + secs + " s in " + stage +
                                                 waiting(false) + " (this is rank " + std::to_string(rank) +
                                                 " on host " + context->host + ")");
        }
    }
}

gpurdma_status_t gpurdma_comm::run(const Schedule &schedule, const void *sendbuf, void *recvbuf,
                                   gpurdma_dtype_t dtype, gpurdma_op_t op)
{
    gpurdma::exec::Executor exec(schedule, *router_, op, dtype, sendbuf, recvbuf);
    // The stage is the phase of the step waited on, so it is part of the description.
    auto waiting = [&](bool failed) -> std::string {
        const gpurdma::plan::Step *step = exec.current();
        std::string phase = step ? gpurdma::plan::phase_name(step->phase) : "completion";
        if (step && step->peer >= 0)
            phase += topo_.node_of[static_cast<size_t>(step->peer)] == topo_.node_of[static_cast<size_t>(rank)]
                         ? " (intra-node)"
                         : " (inter-node)";
        if (failed)
            return name + ": allreduce failed in " + phase + " with " + describe_peer(step ? step->peer : -1) +
                   ": " + exec.error();
        if (!step) return phase + ", waiting for sends to complete";
        if (step->kind == gpurdma::plan::StepKind::Send)
            return phase + ", waiting for " + describe_peer(step->peer) + " to free a landing slot";
        return phase + ", waiting for data from " + describe_peer(step->peer);
    };
    return drive([&] { return exec.advance(); }, [&] { return exec.position(); }, waiting, "");
}

gpurdma_status_t gpurdma_comm::run_node(const void *sendbuf, void *recvbuf, size_t count, gpurdma_dtype_t dtype,
                                        gpurdma_op_t op)
{
    gpurdma::exec::NodeAllreduce node(*node_arena_, node_index_, next_block_, op, dtype, sendbuf, recvbuf, count,
                                      node_direct_max_, consumed_seen_.data());
    if (context->log.enabled(2))
        context->log.log(2, "%s: allreduce %zu x %s %s: node allreduce%s (call %llu; registrations so far %llu)",
                         name.c_str(), count, gpurdma_dtype_name(dtype), gpurdma_op_name(op),
                         node.direct() ? ", direct" : "", static_cast<unsigned long long>(stats.calls + 1),
                         static_cast<unsigned long long>(stats.registrations));
    const auto &members = topo_.members[static_cast<size_t>(topo_.node_of[rank])];
    auto waiting = [&](bool) -> std::string {
        int local = -1;
        const std::string what = node.waiting_for(&local);
        const int peer = local >= 0 ? members[static_cast<size_t>(local)] : -1;
        return ", waiting for " + describe_peer(peer) + " " + what;
    };
    const gpurdma_status_t st = drive([&] { return node.advance(); }, [&] { return node.position(); }, waiting,
                                      node.direct() ? "node allreduce (intra-node, direct)"
                                                    : "node reduce-scatter/allgather (intra-node)");
    if (st == GPURDMA_OK) next_block_ += node.blocks();
    return st;
}

// GPU buffers: the device allreduce under the progress loop, or, where it is
// unsupported or declined (the same on every rank), staging through host memory.
gpurdma_status_t gpurdma_comm::device_allreduce(const gpurdma::algo::Call &call)
{
    if (!device_) {
        gpurdma::gpu::DeviceSetup setup;
        setup.rank = rank;
        setup.size = size;
        setup.name = name;
        setup.host = context->host;
        setup.bootstrap = bootstrap;
        setup.log = &context->log;
        setup.config = &context->config;
        setup.rail_device = context->rail_device;
        setup.ucx = [ctx = context](std::string *why) { return ctx->transport(why); };
        device_ = std::make_unique<gpurdma::gpu::DeviceAllreduce>(std::move(setup));
    }
    gpurdma::Status st = device_->start(call);
    if (st.is_ok()) {
        const gpurdma::exec::ProgressLoop loop({oversubscribed_, context->config.spin_us, context->config.timeout_s},
                                               {name, rank, context->host});
        st = loop.run(*device_);
        if (st.is_ok()) {
            device_->finish();
            ++stats.calls;
            ++(stats.*device_->counter());
            return GPURDMA_OK;
        }
        if (!st.is_unsupported()) device_->abandon();
    }
    if (!st.is_unsupported()) return fail(st.code(), st.message());
    gpurdma_status_t host_status = GPURDMA_OK;  // the host path records its own failures
    st = staging_.run(call, [&](const gpurdma::algo::Call &host) {
        host_status = allreduce(host.sendbuf, host.recvbuf, host.count, host.dtype, host.op);
        return host_status == GPURDMA_OK ? gpurdma::Status::ok() : gpurdma::Status::error(host_status, last_error);
    });
    if (st.is_ok()) return GPURDMA_OK;
    return host_status != GPURDMA_OK ? host_status : fail(st.code(), st.message());
}

gpurdma_status_t gpurdma_comm::allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                         gpurdma_dtype_t dtype, gpurdma_op_t op)
{
    if (broken_) return GPURDMA_ERR_BROKEN;  // last_error still names the first failure
    if (!gpurdma::reduce::supported(op, dtype)) return GPURDMA_ERR_UNSUPPORTED;
    const size_t elem = gpurdma::reduce::dtype_size(dtype);
    const bool in_place = sendbuf == nullptr || sendbuf == recvbuf;
    if (count == 0) return GPURDMA_OK;
    // GPU buffers arrive as raw pointers from a non-CUDA-aware Open MPI: recognise them
    // before anything touches them from the CPU.
    const gpurdma::algo::Call call{in_place ? nullptr : sendbuf, recvbuf, count, dtype, op};
    if (gpurdma::gpu::touches_device_memory(call)) return device_allreduce(call);
    if (size == 1) {
        if (!in_place) std::memcpy(recvbuf, sendbuf, count * elem);
        tally(&gpurdma_comm_stats_t::calls);
        return GPURDMA_OK;
    }
    const gpurdma_status_t st = ensure_setup();
    if (st != GPURDMA_OK) return st;
    if (node_path_) {
        const gpurdma_status_t ns = run_node(in_place ? nullptr : sendbuf, recvbuf, count, dtype, op);
        if (ns != GPURDMA_OK) return ns;
        tally(&gpurdma_comm_stats_t::calls);
        tally(&gpurdma_comm_stats_t::node_calls);
        return GPURDMA_OK;
    }
    const Schedule &schedule = schedule_for(count, elem, in_place);
    if (context->log.enabled(2))
        context->log.log(2, "%s: allreduce %zu x %s %s: %s, %zu steps (call %llu; registrations so far %llu)",
                         name.c_str(), count, gpurdma_dtype_name(dtype), gpurdma_op_name(op),
                         schedule.algorithm.c_str(), schedule.steps.size(),
                         static_cast<unsigned long long>(stats.calls + 1),
                         static_cast<unsigned long long>(stats.registrations));
    const gpurdma_status_t rs = run(schedule, in_place ? nullptr : sendbuf, recvbuf, dtype, op);
    if (rs != GPURDMA_OK) return rs;
    tally(&gpurdma_comm_stats_t::calls);
    if (schedule.algorithm == "ring") tally(&gpurdma_comm_stats_t::ring_calls);
    else if (schedule.algorithm == "hierarchical") tally(&gpurdma_comm_stats_t::hier_calls);
    else tally(&gpurdma_comm_stats_t::rd_calls);
    const uint64_t sent = (ucx_ ? ucx_->bytes_sent() : 0) + (shm_ ? shm_->bytes_sent() : 0);
    tally(&gpurdma_comm_stats_t::bytes_put, sent - stats.bytes_put);
    return GPURDMA_OK;
}
