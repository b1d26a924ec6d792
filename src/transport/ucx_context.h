// One UCX context and worker per process, shared by every communicator, with one
// endpoint per peer process (keyed by its worker address), kept until the context
// goes: communicators come and go (1,000 dup/free cycles) without reconnecting,
// and without the sockets a closed-and-reopened tcp endpoint leaves behind.
// Threads (MPI_THREAD_MULTIPLE): communicators driven from different threads share the
// worker, so it is made thread-safe (UCS_THREAD_MODE_MULTI: UCX serialises each call
// on it, never across a wait of ours); the endpoint and sink tables have locks of their
// own. A sink's handler then runs in whichever thread progresses the worker: the
// channels it writes are read with acquire loads (the same words RDMA puts land in).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/noncopyable.h"
#include "base/status.h"
#include "transport/landing_pool.h"
#include "transport/ucx_memory.h"

namespace gpurdma::transport {

class UcxEndpoint;

// Small messages and credits travel as UCX active messages: one send, where an
// emulated RMA put (tcp) costs a send plus an acknowledgement, and a message needs
// a data put and a flag put. The header names the receiving channel, so one handler
// serves every communicator of the process.
struct AmHeader {
    // Offer: value is the base of memory offered for arrivals, the data its packed key.
    enum Kind : uint32_t { Data = 1, Credit = 2, Offer = 3 };
    uint64_t target = 0;  // the receiving channel's id (UcxContext::new_channel_id)
    uint32_t kind = 0;
    int32_t index = -1;  // the sender's index in the receiver's peer list
    uint32_t slot = 0;  // Data: the landing slot
    uint32_t unused = 0;
    uint64_t value = 0;  // Data: the slot's flag (sequence + 1); Credit: messages consumed
};

// Whoever owns a landing region receives the active messages addressed to it.
class AmSink {
public:
    virtual ~AmSink() = default;
    virtual void on_message(const AmHeader &header, const void *data, size_t bytes) = 0;
};

// RoCE/InfiniBand settings of our own context, like NCCL_IB_GID_INDEX, NCCL_IB_TC and
// NCCL_IB_SL; -1 leaves each to UCX (its environment, or "auto"). They only change
// anything on RDMA devices.
struct UcxIbSettings {
    int gid_index = -1;  // port GID index (RoCE: which address/version)
    int tc = -1;  // IB traffic class / RoCEv2 DSCP-carrying traffic class byte
    int sl = -1;  // IB service level / RoCEv2 Ethernet priority
};

// The ucp_config_modify key and value for each setting given, in order. ucp_config_modify
// keeps keys it does not know and hands them to every UCT table: SL and TRAFFIC_CLASS sit
// in the shared "IB_" sub-table of every IB interface, so "IB_SL" matches on any UCX;
// GID_INDEX is a field of the IB memory domain's own table, matched without its "IB_"
// prefix before UCX 1.17 and only with it from 1.17 on.
std::vector<std::pair<std::string, std::string>> ucx_ib_config(const UcxIbSettings &ib, unsigned ucx_major,
                                                               unsigned ucx_minor);

// The key that reaches field `field` of a UCT component table with prefix `prefix`
// ("TCP_", "IB_") directly, for that UCX version (see ucx_ib_config).
std::string uct_table_key(const char *prefix, const char *field, unsigned ucx_major, unsigned ucx_minor);

class UcxContext : private NonCopyable {
public:
    // Starts a context and its worker, or says why not (UCX's reason).
    // tls: UCX_TLS for our context ("" = UCX's); net_devices: UCX_NET_DEVICES ("" = UCX's);
    // thread_safe: several threads call into it at once. init_bound_s: the longest wait
    // for ucp_init (ucx_init.h).
    static Status create(const std::string &tls, const std::string &net_devices, const UcxIbSettings &ib,
                         std::unique_ptr<UcxContext> *out, bool thread_safe = false, double init_bound_s = 60);
    ~UcxContext();

    ucp_context_h context() const { return context_; }
    ucp_worker_h worker() const { return worker_; }
    const std::string &address() const { return address_; }

    // Returns events processed; cheap when there is nothing to do.
    unsigned progress() { return ucp_worker_progress(worker_); }

    // Endpoint `lane` to the worker at `address`, created on first use. Lanes are
    // separate endpoints (on an RDMA NIC, separate QPs, which ECMP hashes apart).
    Status endpoint(const std::string &address, int lane, std::shared_ptr<UcxEndpoint> *out);

    // Every communicator's landing slices come from here (regions registered once).
    LandingPool &landing() { return *landing_; }

    // Ids for channels: unique for the life of the process.
    uint64_t new_channel_id() { return ++last_channel_id_; }
    // Active messages addressed to `target` go to sink until it is removed (after which
    // no handler of it is running).
    void add_sink(uint64_t target, AmSink *sink);
    void remove_sink(uint64_t target);
    bool thread_safe() const { return thread_safe_; }
    static constexpr unsigned kAmId = 0x67;  // our own context: no other user of AM ids

    // A request nobody waits for any more (a teardown's bound passed): cancelled if it
    // is still running, and freed (UCX releases it once it completes).
    void abandon(void *request);

    // The process's end, in steps that never wait: the owner runs them under its wait
    // loop (exec/ucx_close.h) before the destructor, which abandons what did not finish.
    // start_close() begins every endpoint's close (none may be used after);
    // closes_running() drives the worker once and counts the closes not yet complete;
    // worker_quiet() drives it once and says whether it found nothing to do kQuietPolls
    // times in a row (what the closes queued is done: the worker goes idle).
    void start_close();
    size_t closes_running();
    bool worker_quiet();
    static constexpr unsigned kQuietPolls = 100;

private:
    UcxContext() = default;
    Status start(const std::string &tls, const std::string &net_devices, const UcxIbSettings &ib);
    bool thread_safe_ = false;
    double init_bound_s_ = 60;
    static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data, size_t length,
                              const ucp_am_recv_param_t *param);

    ucp_context_h context_ = nullptr;
    ucp_worker_h worker_ = nullptr;
    std::string address_;
    std::unique_ptr<LandingPool> landing_;  // its regions are unmapped before the context goes
    std::mutex endpoints_lock_;  // never held while waiting for a peer
    std::map<std::pair<std::string, int>, std::shared_ptr<UcxEndpoint>> endpoints_;
    std::mutex sinks_lock_;  // held while a handler runs: remove_sink waits for it
    std::map<uint64_t, AmSink *> sinks_;
    std::atomic<uint64_t> last_channel_id_{0};
    unsigned quiet_polls_ = 0;  // worker_quiet(): polls in a row that found nothing
};

class UcxEndpoint : private NonCopyable {
public:
    UcxEndpoint(UcxContext &context, ucp_ep_h ep);
    // Abandons a close still running (starting it first if nobody did).
    ~UcxEndpoint();
    ucp_ep_h get() const { return ep_; }
    // Endpoints live until the context goes (process end), after every put has
    // completed: closed locally (FORCE), not by a flush handshake that would wait on
    // peers that may have torn down their side already. Never waits: close_done()
    // says whether the close has completed (the worker's progress moves it).
    void start_close();
    bool close_done();
    // Whether UCX has no transport doing RMA in hardware or shared memory toward this
    // peer (only tcp): then a put is a message plus an acknowledgement anyway.
    bool rma_emulated() const { return rma_emulated_; }
    // Our key for the peer's registered region at region_base (its packed key), unpacked
    // on first use and kept while the endpoint lives: every communicator whose landing
    // slice is in that region shares it (for a shared-memory transport, one mapping).
    Status remote_key(uint64_t region_base, const std::string &packed_key, std::shared_ptr<RemoteKey> *out);

private:
    UcxContext &context_;
    ucp_ep_h ep_;
    bool rma_emulated_ = false;
    bool close_started_ = false;
    void *closing_ = nullptr;  // the close's request while it runs
    std::mutex keys_lock_;  // communicators connect from any thread
    std::map<std::pair<uint64_t, std::string>, std::shared_ptr<RemoteKey>> keys_;  // released before the close
};

// From ucp_ep_print_info's text (UCX 1.13 has no query for an endpoint's transports):
// true when no lane marked rma/rma_bw uses a transport other than tcp (or no lane does
// RMA at all). Text without lanes counts as native RMA.
bool rma_emulated_in(const std::string &endpoint_info);

}  // namespace gpurdma::transport
