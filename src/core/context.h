// The process-wide state behind gpurdma_context_t.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "algo/host_team.h"
#include "base/log.h"
#include "base/status.h"
#include "exec/progress_engine.h"
#include "gpurdma/gpurdma.h"
#include "plan/planner.h"
#include "transport/shm_arena.h"
#include "transport/ucx_context.h"

struct gpurdma_context {
    gpurdma_config_t config;  // string fields point into the members below
    std::string algorithm_text;
    std::string ucx_tls;
    std::string logical_nodes;
    std::string net_devices;  // coll_gpurdma_net_devices as given
    std::string gdr_level;  // coll_gpurdma_gdr_level as given
    std::string rail_reduce;  // coll_gpurdma_rail_reduce as given
    std::string rail_algorithm;  // coll_gpurdma_rail_algorithm as given
    std::string dump_dir;  // coll_gpurdma_dump_dir as given
    std::string dump_trigger;  // coll_gpurdma_dump_trigger as given
    std::string trace_dir;  // coll_gpurdma_trace_dir as given
    std::string fabric_topology;  // coll_gpurdma_fabric_topology as given
    std::string rail_device;  // the NIC this process uses between nodes ("" = UCX's choice)
    std::string host;  // this host's name
    std::string node;  // this process's node: the host, or its logical node ("host#k")
    std::string fabric_address;  // the switches above this host ("s0.s3"; "" unknown)
    int host_cpus = 0;  // CPUs this process's cgroup gives it (cpuset, quota), for the wait policy
    std::string cgroup;  // that cgroup: ranks in different ones have budgets of their own
    gpurdma::plan::PlanParams plan;
    gpurdma::Logger log;
    std::unique_ptr<gpurdma::transport::UcxContext> ucx;  // started by the first set-up
    // The node shared memory of every communicator of the process (outlives them all).
    std::unique_ptr<gpurdma::transport::ShmArenas> arenas;
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
    bool on_progress_thread() const { return engine.on_thread(); }

    // Whether another thread may drive or start calls at the same time as this one: a
    // threaded caller, or our progress thread once it runs. Below MPI_THREAD_MULTIPLE and
    // before any queued call, the latency path needs no lock or atomic.
    bool concurrent() const { return config.threads != 0 || engine.thread_started(); }

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

public:
    // The communicators' calls: MPI's progress and the progress thread. Declared last:
    // its thread stops before UCX goes.
    gpurdma::exec::ProgressEngine engine;
};
