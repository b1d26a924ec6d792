// The process-wide state behind gpurdma_context_t.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algo/host_team.h"
#include "base/log.h"
#include "base/status.h"
#include "gpurdma/gpurdma.h"
#include "plan/planner.h"
#include "transport/ucx_context.h"

struct gpurdma_context {
    gpurdma_config_t config;  // string fields point into the members below
    std::string algorithm_text;
    std::string ucx_tls;
    std::string logical_nodes;
    std::string net_devices;  // coll_gpurdma_net_devices as given
    std::string gdr_level;  // coll_gpurdma_gdr_level as given
    std::string rail_reduce;  // coll_gpurdma_rail_reduce as given
    std::string rail_device;  // the NIC this process uses between nodes ("" = UCX's choice)
    std::string host;  // this host's name
    std::string node;  // this process's node: the host, or its logical node ("host#k")
    int host_cpus = 0;  // CPUs this process's cgroup gives it (cpuset, quota), for the wait policy
    std::string cgroup;  // that cgroup: ranks in different ones have budgets of their own
    gpurdma::plan::PlanParams plan;
    gpurdma::Logger log;
    std::unique_ptr<gpurdma::transport::UcxContext> ucx;  // started by the first set-up
    std::string ucx_failure;  // why it could not start, if so
    gpurdma_comm_stats_t totals{};  // over all communicators, for MPI_T: add_total and read_totals only

    // A context from a (checked) configuration; GPURDMA_ERR_INVALID with the reason
    // for a device list or algorithm it cannot read.
    static gpurdma::Status create(const gpurdma_config_t &config, std::unique_ptr<gpurdma_context> *out);

    // Starts UCX on first use. Each rank decides locally; a communicator's set-up
    // then agrees, so a rank without UCX makes all of its peers decline together.
    gpurdma::transport::UcxContext *transport(std::string *why);

    ~gpurdma_context();

    // Drives UCX once, then the communicators with calls queued, reporting the calls
    // that ended (any thread that may call back into the caller: an MPI thread).
    int progress();
    // Whether this is the context's own progress thread (which never reports nor logs:
    // it is not an MPI thread).
    bool on_progress_thread() const { return std::this_thread::get_id() == progress_thread_.get_id(); }
    // An MPI thread polling our calls itself (MPI_Wait, MPI_Test, opal_progress) holds
    // one of these for the poll: the progress thread keeps out of its way while any is
    // held and for a grace period after (it would take a core from a rank and the
    // engine from the thread that waits). Free when there is no progress thread.
    class CallerPolling {
    public:
        explicit CallerPolling(gpurdma_context &c)
            : c_(c.progress_thread_started_.load(std::memory_order_relaxed) ? &c : nullptr)
        {
            if (c_) c_->callers_polling_.fetch_add(1, std::memory_order_relaxed);
        }
        ~CallerPolling()
        {
            if (!c_) return;
            c_->caller_poll_ns_.store(steady_ns(), std::memory_order_relaxed);
            c_->callers_polling_.fetch_sub(1, std::memory_order_relaxed);
        }
        CallerPolling(const CallerPolling &) = delete;
        CallerPolling &operator=(const CallerPolling &) = delete;

    private:
        gpurdma_context *c_;
    };
    // A communicator with calls queued, until progress finds its queue empty (its engine held).
    void activate(gpurdma_comm *comm);
    // A communicator going away (its engine held): progress never sees it again.
    void deactivate(gpurdma_comm *comm);

    // Whether another thread may drive or start calls at the same time as this one: a
    // threaded caller, or our progress thread once it runs. Below MPI_THREAD_MULTIPLE and
    // before any queued call, the latency path needs no lock or atomic.
    bool concurrent() const { return config.threads != 0 || progress_thread_started_.load(std::memory_order_relaxed); }

    // The process totals, added to and read from any thread.
    void add_total(uint64_t gpurdma_comm_stats_t::*field, uint64_t n);
    gpurdma_comm_stats_t read_totals() const;

    // This process's part of a communicator's host set-up (the communicator adds
    // its rank, size, name and bootstrap).
    gpurdma::algo::HostSetup host_setup();

private:
    explicit gpurdma_context(const gpurdma_config_t &c);
    void choose_rail();

    std::mutex transport_lock_;  // the first set-ups of communicators in two threads
    std::atomic<gpurdma::transport::UcxContext *> ucx_started_{nullptr};  // ucx, once it runs
    // Lock order: a communicator's engine, then active_lock_, then arrivals_lock_.
    // Progress only tries active_lock_ and the engines, so it never waits for either;
    // activate() takes only arrivals_lock_ (never held across a poll), so a call being
    // started never waits behind a progress round that another thread repeats.
    std::mutex active_lock_;
    std::vector<gpurdma_comm *> active_;
    std::mutex arrivals_lock_;
    std::vector<gpurdma_comm *> arrivals_;  // activated since the last progress round
    std::atomic<size_t> active_count_{0};  // entries of active_ and arrivals_
    // Advances the active communicators; report: also the callbacks of calls that ended.
    int progress_calls(bool report);

    // The progress thread (config.progress_thread): started by the first queued call;
    // polls while calls are queued, sleeps on wake_ otherwise.
    void progress_thread_main();
    std::thread progress_thread_;
    std::atomic<bool> progress_thread_started_{false};  // set by the thread that starts it
    std::atomic<int> callers_polling_{0};  // MPI threads inside a poll now (CallerPolling)
    std::atomic<int64_t> caller_poll_ns_{0};  // when the last one ended (steady clock)
    static int64_t steady_ns()
    {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }
    std::mutex wake_lock_;
    std::condition_variable wake_;
    bool stopping_ = false;  // under wake_lock_
    std::atomic<bool> stopping_requested_{false};  // the same, for the thread while it lingers
    std::atomic<bool> waiting_{false};  // the thread sleeps on wake_ (seq_cst with active_count_)
};
