#include "topo/placement.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace gpurdma::topo {
namespace {

std::string read_line(const std::string &path)
{
    std::ifstream in(path);
    std::string line;
    if (in) std::getline(in, line);
    return line;
}

// The cgroup paths of this process: v2's "0::/path" and v1's per-controller lines.
std::string cgroup_path(const std::string &controller)
{
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1);
        std::stringstream list(controllers);
        std::string c;
        bool match = controller.empty() ? controllers.empty() : false;
        while (!match && std::getline(list, c, ',')) match = c == controller;
        if (match) return line.substr(b + 1);
    }
    return "";
}

// First readable file among dir/path/name and dir/name (a container often sees its
// own cgroup at the mount's root while /proc/self/cgroup names the host's path).
std::string read_cgroup_file(const std::string &dir, const std::string &path, const std::string &name)
{
    for (const std::string &p : {dir + path + "/" + name, dir + "/" + name}) {
        const std::string v = read_line(p);
        if (!v.empty()) return v;
    }
    return "";
}

// CPUs allowed by the CPU quota, rounded up (0: no quota).
int quota_cpus()
{
    const std::string v2 = read_cgroup_file("/sys/fs/cgroup", cgroup_path(""), "cpu.max");
    if (!v2.empty()) {
        std::istringstream in(v2);
        std::string quota;
        double period = 0;
        if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
        const double q = std::strtod(quota.c_str(), nullptr);
        return q > 0 ? std::max(1, static_cast<int>(std::ceil(q / period))) : 0;
    }
    for (const std::string dir : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
        const std::string path = cgroup_path("cpu");
        const std::string quota = read_cgroup_file(dir, path, "cpu.cfs_quota_us");
        const std::string period = read_cgroup_file(dir, path, "cpu.cfs_period_us");
        if (quota.empty() || period.empty()) continue;
        const double q = std::strtod(quota.c_str(), nullptr), p = std::strtod(period.c_str(), nullptr);
        return q > 0 && p > 0 ? std::max(1, static_cast<int>(std::ceil(q / p))) : 0;
    }
    return 0;
}

// CPUs in the job's cpuset (0: none set or unreadable).
int cpuset_cpus()
{
    std::string list = read_cgroup_file("/sys/fs/cgroup", cgroup_path(""), "cpuset.cpus.effective");
    if (list.empty()) list = read_cgroup_file("/sys/fs/cgroup/cpuset", cgroup_path("cpuset"), "cpuset.effective_cpus");
    if (list.empty()) list = read_cgroup_file("/sys/fs/cgroup/cpuset", cgroup_path("cpuset"), "cpuset.cpus");
    std::vector<int> cpus;
    return parse_cpu_list(list, &cpus) ? static_cast<int>(cpus.size()) : 0;
}

// Kuhn's augmenting paths: can rank r take a CPU, moving others to spare ones?
bool augment(int r, const std::vector<RankPlacement> &ranks, std::vector<int> *cpu_owner, std::set<int> *visited)
{
    for (int cpu : ranks[static_cast<size_t>(r)].cpus) {
        if (!visited->insert(cpu).second) continue;
        const int owner = (*cpu_owner)[static_cast<size_t>(cpu)];
        if (owner < 0 || augment(owner, ranks, cpu_owner, visited)) {
            (*cpu_owner)[static_cast<size_t>(cpu)] = r;
            return true;
        }
    }
    return false;
}

}  // namespace

bool parse_cpu_list(const std::string &text, std::vector<int> *cpus)
{
    cpus->clear();
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
        const size_t dash = item.find('-');
        const std::string lo_text = item.substr(0, dash);
        const std::string hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
        auto number = [](const std::string &s, int *v) {
            const auto digit = [](unsigned char c) { return std::isdigit(c) != 0; };
            if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), digit)) return false;
            *v = std::atoi(s.c_str());
            return *v < CPU_SETSIZE;
        };
        int lo = 0, hi = 0;
        if (!number(lo_text, &lo) || !number(hi_text, &hi) || hi < lo) return false;
        for (int c = lo; c <= hi; ++c) cpus->push_back(c);
    }
    std::sort(cpus->begin(), cpus->end());
    cpus->erase(std::unique(cpus->begin(), cpus->end()), cpus->end());
    return !cpus->empty();
}

std::string format_cpu_list(const std::vector<int> &cpus)
{
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        out += (out.empty() ? "" : ",") + std::to_string(cpus[i]);
        if (j > i) out += "-" + std::to_string(cpus[j]);
        i = j + 1;
    }
    return out;
}

std::string own_cgroup()
{
    const std::string v2 = cgroup_path("");
    return v2.empty() ? cgroup_path("cpu") : v2;
}

std::vector<int> own_cpus()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> out;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) out.push_back(c);
    return out;
}

int host_cpu_budget()
{
    int cpus = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
    if (const int set = cpuset_cpus(); set > 0) cpus = std::min(cpus, set);
    if (const int quota = quota_cpus(); quota > 0) cpus = std::min(cpus, quota);
    return cpus;
}

WaitDecision decide_wait(const std::vector<RankPlacement> &host_ranks)
{
    WaitDecision d;
    d.ranks = static_cast<int>(host_ranks.size());
    d.processes = d.ranks;
    std::set<int> all;
    std::map<std::string, int> budgets;  // cgroup -> its CPUs (ranks of one cgroup share them)
    for (const auto &r : host_ranks) {
        all.insert(r.cpus.begin(), r.cpus.end());
        d.processes = std::max(d.processes, r.job_processes);
        if (r.host_cpus <= 0) continue;
        const auto it = budgets.emplace(r.cgroup, r.host_cpus).first;
        it->second = std::min(it->second, r.host_cpus);
    }
    for (const auto &b : budgets) d.host_cpus += b.second;
    d.cpus = static_cast<int>(all.size());
    const int max_cpu = all.empty() ? -1 : *all.rbegin();
    if (d.host_cpus == 0) d.host_cpus = d.cpus;
    std::vector<int> cpu_owner(static_cast<size_t>(max_cpu + 1), -1);
    for (int r = 0; r < d.ranks; ++r) {
        std::set<int> visited;
        if (augment(r, host_ranks, &cpu_owner, &visited)) ++d.own_cpu;
    }
    // A quota narrower than the masks caps how many can run at once.
    d.own_cpu = std::min(d.own_cpu, d.host_cpus);
    d.yield = d.own_cpu < d.ranks || d.processes > d.host_cpus;
    return d;
}

std::string WaitDecision::describe() const
{
    std::ostringstream s;
    s << (yield ? "yield when idle: " : "spin: ") << ranks << (ranks == 1 ? " rank" : " ranks");
    if (own_cpu < ranks) s << ", only " << own_cpu << " with a CPU of their own (masks cover " << cpus << " CPUs)";
    else
        s << (ranks == 1 ? " on a CPU of its own" : ", each on a CPU of its own") << " (masks cover " << cpus
          << " CPUs)";
    s << "; " << processes << " job processes on " << host_cpus << " host CPUs";
    if (processes > host_cpus) s << " (more processes than CPUs)";
    return s.str();
}

}  // namespace gpurdma::topo
