// Whether a host's ranks can each keep a CPU while they wait (spin) or must take
// turns (yield). A rank's own affinity mask says little: Open MPI binds each rank to
// one core at np <= 2 and to a whole package above, so the decision is made from the
// host as a whole (every rank's mask, the job's processes there, cgroup limits) and
// comes out the same on every rank of the host.
#pragma once

#include <string>
#include <vector>

namespace gpurdma::topo {

// What one rank reports about itself at set-up.
struct RankPlacement {
    std::vector<int> cpus;  // CPUs it may run on (its affinity mask), ascending
    int job_processes = 0;  // the job's processes on its host (0: unknown)
    int host_cpus = 0;  // CPUs its cgroup gives it (online, cpuset, quota)
    std::string cgroup;  // that cgroup ("" unknown): ranks in different ones add up
};

struct WaitDecision {
    bool yield = false;  // true: hand the core over as soon as a wait finds nothing to do
    int ranks = 0;  // the communicator's ranks on the host
    int processes = 0;  // the job's processes on the host (at least `ranks`)
    int cpus = 0;  // CPUs in the union of the ranks' masks
    int host_cpus = 0;  // CPUs the host gives the job (each distinct cgroup's budget, added up)
    int own_cpu = 0;  // how many ranks can each have a CPU of their own
    // "spin: 2 ranks, each on a CPU of its own (2 CPUs; 2 job processes on 2 host CPUs)".
    std::string describe() const;
};

// host_ranks: the placements of the communicator's ranks on one host (any order).
WaitDecision decide_wait(const std::vector<RankPlacement> &host_ranks);

// This process's affinity mask, ascending (empty if it cannot be read).
std::vector<int> own_cpus();

// CPUs this process's cgroup gives it: online CPUs, narrowed by the cgroup's cpuset
// and rounded-up CPU quota where they are set.
int host_cpu_budget();

// The cgroup that limits this process's CPUs (its v2 path, or v1's cpu path).
std::string own_cgroup();

// Parses a kernel CPU list such as "0-3,8,10-11" (sorted, duplicates dropped); false
// if malformed or above CPU_SETSIZE.
bool parse_cpu_list(const std::string &text, std::vector<int> *cpus);

// The inverse, compact for the set-up record: {0,1,2,3,8} -> "0-3,8".
std::string format_cpu_list(const std::vector<int> &cpus);

}  // namespace gpurdma::topo
