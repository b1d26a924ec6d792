// The fabric model's topology builders and its event engine; see fabric_model.h.
//
// Time is integer picoseconds, so ties are exact and runs repeat bit for bit; events with
// the same time run in the order they were scheduled. Packets live in one pool reused
// through a free list, egress queues are intrusive lists through that pool, and the event
// heap is one vector: the hot path allocates nothing once the pool and heap have grown.
#include "fabric_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

namespace gpurdma::fabric {

// ---- parameters ----------------------------------------------------------------------

uint64_t FabricParams::kmin() const
{
    if (ecn_kmin) return ecn_kmin;
    return static_cast<uint64_t>(std::llround(5.0 * 1024 * link_gbps / 40));
}

uint64_t FabricParams::kmax() const
{
    if (ecn_kmax) return ecn_kmax;
    return static_cast<uint64_t>(std::llround(200.0 * 1024 * link_gbps / 40));
}

uint64_t FabricParams::pfc_headroom() const
{
    double delay_bytes = link_delay_us * link_gbps * 1000 / 8;
    return static_cast<uint64_t>(std::llround(2 * delay_bytes)) + 2ull * (mtu + header_bytes);
}

uint64_t FabricParams::pfc_xoff_for(int switch_ports) const
{
    if (pfc_xoff) return pfc_xoff;
    // Kmax, so ECN marks (probability 1 above Kmax) come before PAUSE for any fan-in; but no
    // more than lets every ingress hold XOFF plus its headroom at once: no drop with PFC on.
    uint64_t share = switch_buffer / static_cast<uint64_t>(std::max(1, switch_ports));
    uint64_t room = share > pfc_headroom() ? share - pfc_headroom() : 0;
    uint64_t floor = 2ull * (mtu + header_bytes);
    return std::max(floor, std::min(kmax(), room));
}

uint64_t FabricParams::pfc_xon_for(int switch_ports) const
{
    uint64_t xoff = pfc_xoff_for(switch_ports);
    if (pfc_xon) return std::min(pfc_xon, xoff);
    // Hysteresis of a round trip's worth, so a resumed port refills before the ingress drains.
    return xoff - std::min(pfc_headroom(), xoff / 2);
}

// ---- topology ------------------------------------------------------------------------

Topology Topology::single_switch(int hosts)
{
    Topology t;
    t.hosts = hosts;
    t.kind = "single switch";
    t.switch_names = {"switch"};
    t.ports.assign(hosts + 1, {});
    for (int h = 0; h < hosts; ++h) {
        t.ports[h].push_back({hosts, h});
        t.ports[hosts].push_back({h, 0});
    }
    t.routes.assign(1, std::vector<std::vector<int>>(hosts));
    for (int d = 0; d < hosts; ++d) t.routes[0][d] = {d};
    return t;
}

Topology Topology::two_tier(int hosts, int hosts_per_leaf, int spines)
{
    Topology t;
    t.hosts = hosts;
    t.kind = "two tier";
    if (hosts <= 0 || hosts_per_leaf <= 0 || spines < 0) return t;  // check() reports it
    int leaves = (hosts + hosts_per_leaf - 1) / hosts_per_leaf;
    for (int l = 0; l < leaves; ++l) t.switch_names.push_back("leaf " + std::to_string(l));
    for (int s = 0; s < spines; ++s) t.switch_names.push_back("spine " + std::to_string(s));
    t.ports.assign(hosts + leaves + spines, {});
    auto leaf_node = [&](int l) { return hosts + l; };
    auto spine_node = [&](int s) { return hosts + leaves + s; };
    auto on_leaf = [&](int l) { return std::min(hosts_per_leaf, hosts - l * hosts_per_leaf); };
    for (int h = 0; h < hosts; ++h) {
        int l = h / hosts_per_leaf;
        t.ports[h].push_back({leaf_node(l), h - l * hosts_per_leaf});
    }
    for (int l = 0; l < leaves; ++l) {
        for (int i = 0; i < on_leaf(l); ++i) t.ports[leaf_node(l)].push_back({l * hosts_per_leaf + i, 0});
        for (int s = 0; s < spines; ++s) t.ports[leaf_node(l)].push_back({spine_node(s), l});
    }
    for (int s = 0; s < spines; ++s)
        for (int l = 0; l < leaves; ++l) t.ports[spine_node(s)].push_back({leaf_node(l), on_leaf(l) + s});
    t.routes.assign(leaves + spines, std::vector<std::vector<int>>(hosts));
    for (int d = 0; d < hosts; ++d) {
        int dl = d / hosts_per_leaf;
        for (int l = 0; l < leaves; ++l) {
            auto &r = t.routes[l][d];
            if (l == dl) r = {d - l * hosts_per_leaf};
            else
                for (int s = 0; s < spines; ++s) r.push_back(on_leaf(l) + s);
        }
        for (int s = 0; s < spines; ++s) t.routes[leaves + s][d] = {dl};
    }
    return t;
}

std::string Topology::node_name(int node) const
{
    if (node < 0 || node >= nodes()) return "node " + std::to_string(node);
    if (node < hosts) return "host " + std::to_string(node);
    return switch_names[node - hosts];
}

std::string Topology::describe() const
{
    std::ostringstream s;
    s << kind << ": " << hosts << " hosts, " << switches() << " switch" << (switches() == 1 ? "" : "es");
    int leaves = 0, spines = 0;
    for (auto &n : switch_names) {
        if (n.rfind("leaf", 0) == 0) ++leaves;
        if (n.rfind("spine", 0) == 0) ++spines;
    }
    if (leaves) s << " (" << leaves << " leaves, " << spines << " spines, every leaf linked to every spine once)";
    return s.str();
}

std::string Topology::check() const
{
    if (hosts <= 0) return "no hosts";
    if (static_cast<int>(ports.size()) != nodes()) return "ports do not cover every node";
    if (static_cast<int>(routes.size()) != switches()) return "routes do not cover every switch";
    for (int n = 0; n < nodes(); ++n) {
        if (n < hosts && ports[n].size() != 1) return node_name(n) + " does not have exactly one port";
        if (n < hosts && ports[n][0].peer_node < hosts) return node_name(n) + " is not linked to a switch";
        for (size_t p = 0; p < ports[n].size(); ++p) {
            const Port &q = ports[n][p];
            if (q.peer_node < 0 || q.peer_node >= nodes() || q.peer_port < 0 ||
                q.peer_port >= static_cast<int>(ports[q.peer_node].size()))
                return node_name(n) + " port " + std::to_string(p) + " leads nowhere";
            const Port &back = ports[q.peer_node][q.peer_port];
            if (back.peer_node != n || back.peer_port != static_cast<int>(p))
                return node_name(n) + " port " + std::to_string(p) + " is not linked both ways";
        }
    }
    for (int s = 0; s < switches(); ++s) {
        if (static_cast<int>(routes[s].size()) != hosts) return switch_names[s] + " lacks routes";
        for (int d = 0; d < hosts; ++d) {
            if (routes[s][d].empty())
                return switch_names[s] + " has no route to host " + std::to_string(d) + " (no spines?)";
            for (int p : routes[s][d])
                if (p < 0 || p >= static_cast<int>(ports[hosts + s].size()))
                    return switch_names[s] + " routes to a port it lacks";
        }
    }
    return {};
}

// ---- simulator front -----------------------------------------------------------------

Simulator::Simulator(const Topology &topology, const FabricParams &params) : topology_(topology), params_(params) {}

MessageId Simulator::add(const Message &message)
{
    messages_.push_back(message);
    return static_cast<MessageId>(messages_.size() - 1);
}

void Simulator::trace_queue_to_host(int host)
{
    trace_queue_hosts_.push_back(host);
}
void Simulator::trace_rates_of(int src_host)
{
    trace_rate_hosts_.push_back(src_host);
}
void Simulator::trace_delivered_of(int src_host)
{
    trace_delivered_hosts_.push_back(src_host);
}
void Simulator::set_trace_period_us(double period_us)
{
    trace_period_us_ = period_us;
}

// ---- the engine ----------------------------------------------------------------------

namespace {

using Time = int64_t;  // picoseconds
constexpr Time kNever = std::numeric_limits<Time>::max();

Time ps(double us)
{
    return static_cast<Time>(std::llround(us * 1e6));
}
double us(Time t)
{
    return static_cast<double>(t) / 1e6;
}

uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

enum Kind : uint32_t { kArrive, kTxDone, kPause, kResume, kCnp, kRateTimer, kReady, kNicWake, kSample };

struct Event {
    Time t;
    uint64_t seq;
    uint32_t kind;
    int32_t a, b;
};

// A 4-ary min-heap of events by (time, sequence): shallower than a binary heap, and the
// four children sit in one or two cache lines.
class EventQueue {
public:
    bool empty() const { return v_.empty(); }
    const Event &top() const { return v_[0]; }
    const std::vector<Event> &items() const { return v_; }
    void push(const Event &e)
    {
        size_t i = v_.size();
        v_.push_back(e);
        while (i > 0) {
            size_t parent = (i - 1) / 4;
            if (!before(e, v_[parent])) break;
            v_[i] = v_[parent];
            i = parent;
        }
        v_[i] = e;
    }
    Event pop()
    {
        Event first = v_[0], last = v_.back();
        v_.pop_back();
        size_t n = v_.size(), i = 0;
        if (n == 0) return first;
        for (;;) {
            size_t c = 4 * i + 1;
            if (c >= n) break;
            size_t best = c, end = std::min(c + 4, n);
            for (size_t k = c + 1; k < end; ++k)
                if (before(v_[k], v_[best])) best = k;
            if (!before(v_[best], last)) break;
            v_[i] = v_[best];
            i = best;
        }
        v_[i] = last;
        return first;
    }

private:
    // Without branches: which of two events comes first is as good as random to a predictor.
    static bool before(const Event &a, const Event &b)
    {
        return static_cast<bool>((a.t < b.t) | ((a.t == b.t) & (a.seq < b.seq)));
    }
    std::vector<Event> v_;
};

struct Packet {
    int32_t flow, msg;
    uint32_t payload, wire;
    int32_t in_port;  // the switch port it entered by (for PFC accounting)
    int32_t next;  // the next packet in its egress queue, or in the free list
    bool ecn;
};

// The packets on one link's wire, in order. They arrive in the order they left (one delay,
// serialised one after another), so only the first needs an event in the heap: the heap
// stays about as large as the number of busy links, not the number of packets in flight.
class Wire {
public:
    bool empty() const { return count_ == 0; }
    Time front_time() const { return ring_[head_].first; }
    int32_t pop()
    {
        int32_t pk = ring_[head_].second;
        head_ = (head_ + 1) & (ring_.size() - 1);
        --count_;
        return pk;
    }
    void push(Time t, int32_t pk)
    {
        if (count_ == ring_.size()) grow();
        ring_[(head_ + count_) & (ring_.size() - 1)] = {t, pk};
        ++count_;
    }
    template <class F> void each(F f) const
    {
        for (size_t i = 0; i < count_; ++i) f(ring_[(head_ + i) & (ring_.size() - 1)].second);
    }

private:
    void grow()
    {
        std::vector<std::pair<Time, int32_t>> bigger(std::max<size_t>(16, ring_.size() * 2));
        for (size_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) & (ring_.size() - 1)];
        ring_.swap(bigger);
        head_ = 0;
    }
    std::vector<std::pair<Time, int32_t>> ring_;  // a power of two long
    size_t head_ = 0, count_ = 0;
};

// One physical port, full duplex: the egress toward the peer, and (on a switch) the PFC
// accounting of what came in from the peer.
struct PortState {
    int node = 0, peer = 0;  // peer: the global id of the port at the other end
    bool host = false;
    int32_t head = -1, tail = -1;
    uint64_t queued = 0;  // bytes waiting, not counting the packet on the wire
    bool busy = false, paused = false;
    Time blocked_since = -1;  // paused while holding data since then
    uint32_t tx_wire = 0;
    int32_t tx_in = -1;
    uint64_t ingress = 0;  // bytes in this switch that came in here
    bool pause_sent = false;
};

struct SwitchState {
    uint64_t used = 0, peak = 0, xoff = 0, xon = 0;
    int first_port = 0;
};

struct Qp {
    int src = 0, dst = 0, label = -1;
    uint64_t hash = 0;
    Time cnp_delay = 0;
    std::vector<int> msgs;  // in the order they were added
    size_t cursor = 0;
    uint64_t sent_of_current = 0;
    Time last_start = 0, next_send = 0;
    uint32_t last_wire = 0;
    bool active = false;
    ReactionPoint rp;
    NotificationPoint np;
    int32_t timer_gen = 0;
    uint64_t delivered = 0, cnps = 0;
};

struct Nic {
    std::vector<int> active;  // QPs whose current message is ready, in round-robin order
    size_t rr = 0;
    Time wake_at = -1;
};

struct MsgState {
    int qp = -1;
    uint32_t packets = 1, sent = 0, received = 0;
    int pending = 0;
    bool ready = false;
    Time ready_t = -1, start_t = -1, done_t = -1;
};

class Engine {
public:
    Engine(const Topology &topo, const FabricParams &params, const std::vector<Message> &messages)
        : topo_(topo), p_(params), msgs_in_(messages)
    {}

    Result run(double limit_us, const std::vector<int> &queue_hosts, const std::vector<int> &rate_hosts,
               const std::vector<int> &delivered_hosts, double period_us);

private:
    bool setup(Result &r);
    void build_flows();
    void build_trace(const std::vector<int> &queue_hosts, const std::vector<int> &rate_hosts,
                     const std::vector<int> &delivered_hosts);
    void finish(Result &r);

    void push(Time t, uint32_t kind, int32_t a = 0, int32_t b = 0) { heap_.push({t, seq_++, kind, a, b}); }
    Time ser(uint32_t bytes) const
    {
        return bytes == full_wire_ ? full_ser_ : static_cast<Time>(std::llround(bytes * ps_per_byte_));
    }
    Time ser_at(uint32_t bytes, double gbps) const { return static_cast<Time>(std::llround(bytes * 8000.0 / gbps)); }
    double uniform()
    {
        rng_ = mix64(rng_);
        return static_cast<double>(rng_ >> 11) * (1.0 / 9007199254740992.0);
    }
    int32_t alloc_packet()
    {
        if (free_ < 0) {
            pool_.push_back({});
            return static_cast<int32_t>(pool_.size() - 1);
        }
        int32_t i = free_;
        free_ = pool_[i].next;
        return i;
    }
    void free_packet(int32_t i)
    {
        pool_[i].next = free_;
        free_ = i;
    }

    int route_for(int sw, const Qp &q) const;
    void make_ready(int m, Time when);
    void complete(int m);
    void on_ready(int m);
    void transmit(int port, int32_t pk);
    void try_start(int port);
    void nic_try_start(int host);
    void send_from(int host, size_t index);
    void switch_try_start(int port);
    void on_tx_done(int port);
    void on_arrive(int port);
    void switch_arrive(int32_t pk, int in_port);
    void deliver(int32_t pk, int host);
    void on_pause(int port, bool on);
    void on_cnp(int flow);
    void on_rate_timer(int flow, int32_t gen);
    void repace(Qp &q);
    bool has_data(const PortState &p) const;
    void sample();

    const Topology &topo_;
    FabricParams p_;
    const std::vector<Message> &msgs_in_;

    Time now_ = 0;
    uint64_t seq_ = 0;
    EventQueue heap_;
    std::vector<Packet> pool_;
    int32_t free_ = -1;
    uint64_t rng_ = 0;

    double ps_per_byte_ = 0;
    uint32_t full_wire_ = 0;
    Time full_ser_ = 0, delay_ = 0, rate_timer_ = 0;
    uint64_t kmin_ = 0, kmax_ = 0;

    std::vector<PortState> ports_;
    std::vector<Wire> wires_;  // per port: what it sent that has not arrived yet
    std::vector<PortStats> stats_;
    std::vector<SwitchState> switches_;
    std::vector<int> node_first_port_;
    // routes flattened: for switch s and host d, route_ports_[route_off_[s*H+d] ..+route_n_[s*H+d]]
    std::vector<int> route_off_, route_n_, route_ports_;

    std::vector<Qp> qps_;
    std::vector<Nic> nics_;
    std::vector<MsgState> ms_;
    std::vector<int> dep_off_, dep_list_;
    size_t done_count_ = 0;

    uint64_t injected_ = 0, delivered_ = 0, dropped_bytes_ = 0, dropped_packets_ = 0;
    uint64_t marks_ = 0, cnps_ = 0, pauses_ = 0, resumes_ = 0, events_ = 0;

    // tracing
    Time period_ = 0;
    std::vector<int> trace_ports_, trace_rate_qps_, trace_delivered_qps_;
    Result *out_ = nullptr;
};

bool Engine::setup(Result &r)
{
    std::string bad = topo_.check();
    if (!bad.empty()) {
        r.error = "topology: " + bad;
        return false;
    }
    if (!(p_.link_gbps > 0) || p_.mtu == 0 || p_.link_delay_us < 0) {
        r.error = "params: link_gbps and mtu must be positive, link_delay_us not negative";
        return false;
    }
    const int n = static_cast<int>(msgs_in_.size());
    for (int m = 0; m < n; ++m) {
        const Message &msg = msgs_in_[m];
        if (msg.src < 0 || msg.src >= topo_.hosts || msg.dst < 0 || msg.dst >= topo_.hosts) {
            r.error = "message " + std::to_string(m) + ": host out of range";
            return false;
        }
        for (MessageId a : msg.after)
            if (a < 0 || a >= n) {
                r.error = "message " + std::to_string(m) + ": `after` names no message (" + std::to_string(a) + ")";
                return false;
            }
    }

    ps_per_byte_ = 8000.0 / p_.link_gbps;
    full_wire_ = p_.mtu + p_.header_bytes;
    full_ser_ = static_cast<Time>(std::llround(full_wire_ * ps_per_byte_));
    delay_ = ps(p_.link_delay_us);
    rate_timer_ = std::max<Time>(1, ps(p_.dcqcn_params.rate_timer_us));
    kmin_ = p_.kmin();
    kmax_ = std::max(p_.kmax(), kmin_);
    rng_ = mix64(p_.seed ^ 0x5ca1ab1eull);

    // Ports: every node's ports in a row, hosts first, so host h's NIC port is port h.
    node_first_port_.assign(topo_.nodes() + 1, 0);
    for (int v = 0; v < topo_.nodes(); ++v)
        node_first_port_[v + 1] = node_first_port_[v] + static_cast<int>(topo_.ports[v].size());
    ports_.assign(node_first_port_.back(), {});
    stats_.assign(ports_.size(), {});
    wires_.assign(ports_.size(), {});
    for (int v = 0; v < topo_.nodes(); ++v)
        for (size_t i = 0; i < topo_.ports[v].size(); ++i) {
            const Topology::Port &tp = topo_.ports[v][i];
            int g = node_first_port_[v] + static_cast<int>(i);
            ports_[g].node = v;
            ports_[g].host = v < topo_.hosts;
            ports_[g].peer = node_first_port_[tp.peer_node] + tp.peer_port;
            stats_[g].name =
                v < topo_.hosts ? topo_.node_name(v) : topo_.node_name(v) + " -> " + topo_.node_name(tp.peer_node);
        }
    const int H = topo_.hosts, S = topo_.switches();
    switches_.assign(S, {});
    route_off_.assign(static_cast<size_t>(S) * H, 0);
    route_n_.assign(static_cast<size_t>(S) * H, 0);
    for (int s = 0; s < S; ++s) {
        int nports = static_cast<int>(topo_.ports[H + s].size());
        switches_[s].first_port = node_first_port_[H + s];
        switches_[s].xoff = p_.pfc_xoff_for(nports);
        switches_[s].xon = p_.pfc_xon_for(nports);
        for (int d = 0; d < H; ++d) {
            route_off_[static_cast<size_t>(s) * H + d] = static_cast<int>(route_ports_.size());
            route_n_[static_cast<size_t>(s) * H + d] = static_cast<int>(topo_.routes[s][d].size());
            for (int lp : topo_.routes[s][d]) route_ports_.push_back(switches_[s].first_port + lp);
        }
    }

    ms_.assign(n, {});
    build_flows();

    // Dependencies, flattened; then a cycle check over them and each QP's order (a message
    // waits for the one before it on its QP to be sent, so both kinds of edge can deadlock).
    std::vector<int> count(n + 1, 0);
    for (int m = 0; m < n; ++m)
        for (MessageId a : msgs_in_[m].after) ++count[a + 1];
    dep_off_.assign(n + 1, 0);
    for (int m = 0; m < n; ++m) dep_off_[m + 1] = dep_off_[m] + count[m + 1];
    dep_list_.assign(dep_off_.back(), 0);
    std::vector<int> fill(dep_off_.begin(), dep_off_.end() - 1);
    for (int m = 0; m < n; ++m) {
        ms_[m].pending = static_cast<int>(msgs_in_[m].after.size());
        for (MessageId a : msgs_in_[m].after) dep_list_[fill[a]++] = m;
    }
    std::vector<int> indeg(n, 0), next_on_qp(n, -1), order;
    for (int m = 0; m < n; ++m) indeg[m] = ms_[m].pending;
    for (const Qp &q : qps_)
        for (size_t i = 1; i < q.msgs.size(); ++i) {
            next_on_qp[q.msgs[i - 1]] = q.msgs[i];
            ++indeg[q.msgs[i]];
        }
    order.reserve(n);
    for (int m = 0; m < n; ++m)
        if (indeg[m] == 0) order.push_back(m);
    for (size_t i = 0; i < order.size(); ++i) {
        int m = order[i];
        for (int k = dep_off_[m]; k < dep_off_[m + 1]; ++k)
            if (--indeg[dep_list_[k]] == 0) order.push_back(dep_list_[k]);
        if (next_on_qp[m] >= 0 && --indeg[next_on_qp[m]] == 0) order.push_back(next_on_qp[m]);
    }
    if (static_cast<int>(order.size()) != n) {
        r.error = "dependency cycle among " + std::to_string(n - order.size()) +
                  " messages (their `after` lists and the order of each QP)";
        return false;
    }
    for (int m = 0; m < n; ++m) {
        const Message &msg = msgs_in_[m];
        uint64_t packets = msg.bytes == 0 ? 1 : (msg.bytes + p_.mtu - 1) / p_.mtu;
        ms_[m].packets = static_cast<uint32_t>(packets);
        if (ms_[m].pending == 0) make_ready(m, 0);
    }
    return true;
}

// One QP per (src, dst, qp), in order of first use; its ECMP hash and its CNP's path delay.
// A local message (src == dst) takes no QP: it never touches the fabric.
void Engine::build_flows()
{
    std::map<std::tuple<int, int, int>, int> index;
    const int H = topo_.hosts;
    nics_.assign(H, {});
    for (size_t m = 0; m < msgs_in_.size(); ++m) {
        const Message &msg = msgs_in_[m];
        if (msg.src == msg.dst) continue;
        auto key = std::make_tuple(msg.src, msg.dst, msg.qp);
        auto it = index.find(key);
        int f;
        if (it == index.end()) {
            f = static_cast<int>(qps_.size());
            index.emplace(key, f);
            Qp q;
            q.src = msg.src;
            q.dst = msg.dst;
            q.label = msg.qp;
            q.hash = mix64(mix64(p_.seed) ^ (static_cast<uint64_t>(msg.src) << 40) ^
                           (static_cast<uint64_t>(msg.dst) << 20) ^ static_cast<uint64_t>(msg.qp + 1));
            q.rp = ReactionPoint(p_.dcqcn_params, p_.link_gbps);
            q.np = NotificationPoint(p_.dcqcn_params.cnp_interval_us);
            // The CNP takes the data path back: each link's delay plus a header's serialisation.
            int hops = 1;
            for (int node = topo_.ports[msg.src][0].peer_node; node >= H && hops < 64; ++hops)
                node = ports_[ports_[route_for(node - H, q)].peer].node;
            q.cnp_delay = hops * (delay_ + ser(p_.header_bytes));
            qps_.push_back(q);
        } else {
            f = it->second;
        }
        qps_[f].msgs.push_back(static_cast<int>(m));
        ms_[m].qp = f;
    }
}

int Engine::route_for(int sw, const Qp &q) const
{
    size_t at = static_cast<size_t>(sw) * topo_.hosts + q.dst;
    int n = route_n_[at];
    int pick = n == 1 ? 0 : static_cast<int>(mix64(q.hash + static_cast<uint64_t>(sw)) % static_cast<uint64_t>(n));
    return route_ports_[route_off_[at] + pick];
}

void Engine::make_ready(int m, Time when)
{
    const Message &msg = msgs_in_[m];
    Time t = std::max(when + ps(msg.delay_us), ps(msg.not_before_us));
    push(std::max(t, now_), kReady, m);
}

void Engine::on_ready(int m)
{
    MsgState &s = ms_[m];
    s.ready = true;
    s.ready_t = now_;
    const Message &msg = msgs_in_[m];
    if (msg.src == msg.dst) {  // local: nothing crosses the fabric
        s.start_t = now_;
        complete(m);
        return;
    }
    Qp &q = qps_[s.qp];
    if (q.msgs[q.cursor] == m && !q.active) {
        q.active = true;
        nics_[q.src].active.push_back(s.qp);
        nic_try_start(q.src);
    }
}

void Engine::complete(int m)
{
    MsgState &s = ms_[m];
    s.done_t = now_;
    ++done_count_;
    for (int k = dep_off_[m]; k < dep_off_[m + 1]; ++k) {
        int d = dep_list_[k];
        if (--ms_[d].pending == 0) make_ready(d, now_);
    }
}

bool Engine::has_data(const PortState &p) const
{
    return p.host ? !nics_[p.node].active.empty() : p.head >= 0;
}

void Engine::try_start(int port)
{
    if (ports_[port].host) nic_try_start(ports_[port].node);
    else switch_try_start(port);
}

void Engine::transmit(int port, int32_t pk)
{
    PortState &p = ports_[port];
    const Packet &P = pool_[pk];
    Time t = ser(P.wire);
    p.busy = true;
    p.tx_wire = P.wire;
    p.tx_in = P.in_port;
    stats_[port].bytes_sent += P.wire;
    push(now_ + t, kTxDone, port);
    Wire &w = wires_[port];
    if (w.empty()) push(now_ + t + delay_, kArrive, port);
    w.push(now_ + t + delay_, pk);
}

// The NIC picks the next QP round-robin among those with a ready message whose pacing
// allows a packet now; if pacing holds them all, it wakes at the earliest allowed time.
void Engine::nic_try_start(int host)
{
    PortState &p = ports_[host];
    if (p.busy) return;
    Nic &nic = nics_[host];
    if (nic.active.empty()) return;
    if (p.paused) {
        if (p.blocked_since < 0) p.blocked_since = now_;
        return;
    }
    size_t n = nic.active.size();
    Time earliest = kNever;
    for (size_t k = 0; k < n; ++k) {
        size_t i = nic.rr + k;
        if (i >= n) i -= n;
        const Qp &q = qps_[nic.active[i]];
        if (q.next_send <= now_) {
            send_from(host, i);
            return;
        }
        earliest = std::min(earliest, q.next_send);
    }
    if (nic.wake_at <= now_ || earliest < nic.wake_at) {
        nic.wake_at = earliest;
        push(earliest, kNicWake, host);
    }
}

void Engine::send_from(int host, size_t index)
{
    Nic &nic = nics_[host];
    int f = nic.active[index];
    Qp &q = qps_[f];
    int m = q.msgs[q.cursor];
    MsgState &s = ms_[m];
    uint64_t left = msgs_in_[m].bytes - q.sent_of_current;
    uint32_t payload = static_cast<uint32_t>(std::min<uint64_t>(p_.mtu, left));
    if (s.sent == 0) s.start_t = now_;
    int32_t pk = alloc_packet();
    pool_[pk] = Packet{f, m, payload, payload + p_.header_bytes, -1, -1, false};
    q.sent_of_current += payload;
    ++s.sent;
    injected_ += payload;
    uint32_t wire = payload + p_.header_bytes;
    transmit(host, pk);

    q.last_start = now_;
    q.last_wire = wire;
    if (p_.dcqcn) {
        q.rp.on_bytes_sent(wire);
        q.next_send = now_ + ser_at(wire, q.rp.rate_gbps());
    } else {
        q.next_send = now_;  // the port's own serialisation paces it
    }
    bool stays = true;
    if (s.sent == s.packets) {
        ++q.cursor;
        q.sent_of_current = 0;
        stays = q.cursor < q.msgs.size() && ms_[q.msgs[q.cursor]].ready;
    }
    if (stays) {
        nic.rr = index + 1 >= nic.active.size() ? 0 : index + 1;
    } else {
        q.active = false;
        nic.active.erase(nic.active.begin() + static_cast<std::ptrdiff_t>(index));
        nic.rr = index >= nic.active.size() ? 0 : index;
    }
}

void Engine::switch_try_start(int port)
{
    PortState &p = ports_[port];
    if (p.busy || p.head < 0) return;
    if (p.paused) {
        if (p.blocked_since < 0) p.blocked_since = now_;
        return;
    }
    int32_t pk = p.head;
    p.head = pool_[pk].next;
    if (p.head < 0) p.tail = -1;
    p.queued -= pool_[pk].wire;
    transmit(port, pk);
}

void Engine::on_tx_done(int port)
{
    PortState &p = ports_[port];
    p.busy = false;
    if (!p.host) {
        // The packet has left: its bytes leave the shared buffer and its ingress's count.
        SwitchState &S = switches_[p.node - topo_.hosts];
        S.used -= p.tx_wire;
        PortState &in = ports_[p.tx_in];
        in.ingress -= p.tx_wire;
        if (in.pause_sent && in.ingress <= S.xon) {
            in.pause_sent = false;
            ++resumes_;
            push(now_ + delay_, kResume, in.peer);
        }
    }
    try_start(port);
}

// The first packet on the wire out of `from` reaches the port at the other end.
void Engine::on_arrive(int from)
{
    Wire &w = wires_[from];
    int32_t pk = w.pop();
    if (!w.empty()) push(w.front_time(), kArrive, from);
    int port = ports_[from].peer;
    if (ports_[port].host) deliver(pk, ports_[port].node);
    else switch_arrive(pk, port);
}

void Engine::switch_arrive(int32_t pk, int in_port)
{
    int sw = ports_[in_port].node - topo_.hosts;
    SwitchState &S = switches_[sw];
    Packet &P = pool_[pk];
    if (S.used + P.wire > p_.switch_buffer) {
        ++dropped_packets_;
        dropped_bytes_ += P.payload;
        free_packet(pk);
        return;
    }
    int out = route_for(sw, qps_[P.flow]);
    PortState &e = ports_[out];
    // The DCQCN paper's CP: marking probability by the egress queue at enqueue.
    if (p_.ecn && e.queued > kmin_) {
        bool mark = e.queued > kmax_ || uniform() < p_.ecn_pmax * static_cast<double>(e.queued - kmin_) /
                                                        static_cast<double>(kmax_ - kmin_);
        if (mark) {
            if (!P.ecn) ++marks_;
            P.ecn = true;
        }
    }
    P.in_port = in_port;
    P.next = -1;
    if (e.tail >= 0) pool_[e.tail].next = pk;
    else e.head = pk;
    e.tail = pk;
    e.queued += P.wire;
    stats_[out].peak_queue = std::max(stats_[out].peak_queue, e.queued);
    S.used += P.wire;
    S.peak = std::max(S.peak, S.used);
    PortState &in = ports_[in_port];
    in.ingress += P.wire;
    if (p_.pfc && !in.pause_sent && in.ingress > S.xoff) {
        in.pause_sent = true;
        ++pauses_;
        push(now_ + delay_, kPause, in.peer);
    }
    switch_try_start(out);
}

void Engine::deliver(int32_t pk, int /*host*/)
{
    const Packet &P = pool_[pk];
    Qp &q = qps_[P.flow];
    q.delivered += P.payload;
    delivered_ += P.payload;
    if (P.ecn && p_.dcqcn && q.np.on_marked(us(now_))) {
        ++cnps_;
        ++q.cnps;
        push(now_ + q.cnp_delay, kCnp, P.flow);
    }
    int m = P.msg;
    free_packet(pk);
    if (++ms_[m].received == ms_[m].packets) complete(m);
}

void Engine::on_pause(int port, bool on)
{
    PortState &p = ports_[port];
    if (on) {
        p.paused = true;
        ++stats_[port].pauses_received;
        if (p.blocked_since < 0 && has_data(p)) p.blocked_since = now_;
        return;
    }
    p.paused = false;
    if (p.blocked_since >= 0) {
        stats_[port].paused_us += us(now_ - p.blocked_since);
        p.blocked_since = -1;
    }
    try_start(port);
}

// A new rate applies to the gap after the last packet sent.
void Engine::repace(Qp &q)
{
    if (q.last_wire) q.next_send = q.last_start + ser_at(q.last_wire, q.rp.rate_gbps());
    if (q.active) nic_try_start(q.src);
}

void Engine::on_cnp(int flow)
{
    Qp &q = qps_[flow];
    q.rp.on_cnp(us(now_));
    ++q.timer_gen;  // the rate timer restarts
    push(now_ + rate_timer_, kRateTimer, flow, q.timer_gen);
    repace(q);
}

void Engine::on_rate_timer(int flow, int32_t gen)
{
    Qp &q = qps_[flow];
    if (gen != q.timer_gen) return;
    q.rp.on_timer();
    repace(q);
    if (q.rp.recovering()) push(now_ + rate_timer_, kRateTimer, flow, gen);
}

void Engine::build_trace(const std::vector<int> &queue_hosts, const std::vector<int> &rate_hosts,
                         const std::vector<int> &delivered_hosts)
{
    auto qp_name = [&](const char *what, const Qp &q) {
        std::string s = std::string(what) + ":" + std::to_string(q.src) + "->" + std::to_string(q.dst);
        if (q.label >= 0) s += "/" + std::to_string(q.label);
        return s;
    };
    for (int h : queue_hosts) {
        if (h < 0 || h >= topo_.hosts) continue;
        trace_ports_.push_back(ports_[h].peer);
        out_->trace_columns.push_back("queue:host " + std::to_string(h));
    }
    for (int h : rate_hosts)
        for (size_t f = 0; f < qps_.size(); ++f)
            if (qps_[f].src == h && qps_[f].src != qps_[f].dst) {
                trace_rate_qps_.push_back(static_cast<int>(f));
                out_->trace_columns.push_back(qp_name("rate", qps_[f]));
            }
    for (int h : delivered_hosts)
        for (size_t f = 0; f < qps_.size(); ++f)
            if (qps_[f].src == h && qps_[f].src != qps_[f].dst) {
                trace_delivered_qps_.push_back(static_cast<int>(f));
                out_->trace_columns.push_back(qp_name("delivered", qps_[f]));
            }
}

void Engine::sample()
{
    Result::Sample s;
    s.t_us = us(now_);
    s.values.reserve(out_->trace_columns.size());
    for (int port : trace_ports_) s.values.push_back(static_cast<double>(ports_[port].queued));
    for (int f : trace_rate_qps_) s.values.push_back(p_.dcqcn ? qps_[f].rp.rate_gbps() : p_.link_gbps);
    for (int f : trace_delivered_qps_) s.values.push_back(static_cast<double>(qps_[f].delivered));
    out_->trace.push_back(std::move(s));
    // Keep sampling while anything else can still happen.
    if (!heap_.empty()) push(now_ + period_, kSample);
}

Result Engine::run(double limit_us, const std::vector<int> &queue_hosts, const std::vector<int> &rate_hosts,
                   const std::vector<int> &delivered_hosts, double period_us)
{
    Result r;
    out_ = &r;
    if (!setup(r)) return r;
    build_trace(queue_hosts, rate_hosts, delivered_hosts);
    if (!r.trace_columns.empty()) {
        period_ = std::max<Time>(1, ps(period_us > 0 ? period_us : 10));
        push(0, kSample);
    }
    const Time limit = ps(limit_us);
    while (!heap_.empty()) {
        if (heap_.top().t > limit) {  // leave it queued: its packet counts as in flight
            r.time_limit_reached = true;
            now_ = limit;
            break;
        }
        Event e = heap_.pop();
        now_ = e.t;
        ++events_;
        switch (e.kind) {
            case kArrive: on_arrive(e.a); break;
            case kTxDone: on_tx_done(e.a); break;
            case kPause: on_pause(e.a, true); break;
            case kResume: on_pause(e.a, false); break;
            case kCnp: on_cnp(e.a); break;
            case kRateTimer: on_rate_timer(e.a, e.b); break;
            case kReady: on_ready(e.a); break;
            case kNicWake:
                if (nics_[e.a].wake_at == e.t) nics_[e.a].wake_at = -1;
                nic_try_start(e.a);
                break;
            case kSample: sample(); break;
        }
    }
    finish(r);
    return r;
}

void Engine::finish(Result &r)
{
    const size_t n = msgs_in_.size();
    r.ready_us.assign(n, -1);
    r.start_us.assign(n, -1);
    r.done_us.assign(n, -1);
    r.tags.assign(n, 0);
    double end = 0;
    for (size_t m = 0; m < n; ++m) {
        r.tags[m] = msgs_in_[m].tag;
        if (ms_[m].ready_t >= 0) r.ready_us[m] = us(ms_[m].ready_t);
        if (ms_[m].start_t >= 0) r.start_us[m] = us(ms_[m].start_t);
        if (ms_[m].done_t >= 0) {
            r.done_us[m] = us(ms_[m].done_t);
            end = std::max(end, r.done_us[m]);
        }
    }
    r.end_us = end;
    // In flight, counted where the packets are (not by subtraction): on a wire or in a queue.
    uint64_t flying = 0;
    for (const Wire &w : wires_) w.each([&](int32_t pk) { flying += pool_[pk].payload; });
    for (const PortState &p : ports_)
        for (int32_t pk = p.head; pk >= 0; pk = pool_[pk].next) flying += pool_[pk].payload;
    r.bytes_injected = injected_;
    r.bytes_delivered = delivered_;
    r.bytes_in_flight_at_end = flying;
    r.bytes_dropped = dropped_bytes_;
    r.packets_dropped = dropped_packets_;
    r.ecn_marks = marks_;
    r.cnps = cnps_;
    r.pause_frames = pauses_;
    r.resume_frames = resumes_;
    r.events = events_;
    for (size_t i = 0; i < ports_.size(); ++i) {
        PortState &p = ports_[i];
        if (p.blocked_since >= 0) stats_[i].paused_us += us(now_ - p.blocked_since);
        r.total_paused_us += stats_[i].paused_us;
        if (!p.host) r.peak_queue = std::max(r.peak_queue, stats_[i].peak_queue);
    }
    for (const SwitchState &s : switches_) r.peak_switch_buffer = std::max(r.peak_switch_buffer, s.peak);
    r.ports = std::move(stats_);
    for (const Qp &q : qps_)
        r.flows.push_back({q.src, q.dst, q.label, q.delivered, q.cnps, p_.dcqcn ? q.rp.rate_gbps() : p_.link_gbps});
    r.ok = done_count_ == n;
    if (!r.ok) {
        std::string what = std::to_string(n - done_count_) + " of " + std::to_string(n) + " messages did not complete";
        if (r.time_limit_reached) r.error = "time limit reached: " + what;
        else if (dropped_packets_)
            r.error = std::to_string(dropped_packets_) + " packets dropped (PFC off; no retransmission): " + what;
        else r.error = "stalled: " + what;
    }
}

}  // namespace

Result Simulator::run(double time_limit_us)
{
    Engine engine(topology_, params_, messages_);
    return engine.run(time_limit_us, trace_queue_hosts_, trace_rate_hosts_, trace_delivered_hosts_, trace_period_us_);
}

}  // namespace gpurdma::fabric
