// Set-up records exchanged among the ranks of one node only, for the hierarchical
// device path's node team: a small shared segment whose name every rank of the node
// derives from the host team's node segment (which they all attached at the host
// set-up), created by the node's lowest rank and unlinked once everyone has it. Only
// the ranks that pass GPU buffers open it, and nothing is sent on the host path's
// channels: a node peer that passes host buffers (and runs the host schedule) is
// never confused by a set-up message; the others time out waiting for it (bounded,
// the message names it). Rounds: each rank posts its record for round k, waits for
// every member's, and a record is overwritten only after every member has read it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algo/host_team.h"
#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/device_team.h"

namespace gpurdma::gpu {

// Largest record: longer ones are cut.
constexpr size_t kNodeRecordBytes = 4000;

class NodeExchange : private NonCopyable {
public:
    // Collective over the node's ranks. A node of one rank needs no segment.
    static Status open(algo::HostTeam &team, std::unique_ptr<NodeExchange> *out);
    ~NodeExchange();

    // *all: one entry per communicator rank; the node's ranks' records, "" elsewhere.
    Status allgather(const std::string &mine, std::vector<std::string> *all);

private:
    struct Slot;
    NodeExchange(algo::HostTeam &team) : team_(team) {}
    Slot &slot(size_t local) const;
    Status wait_all(uint64_t Slot::*word, uint64_t value, const char *what);

    algo::HostTeam &team_;
    std::vector<int> members_;
    size_t local_ = 0;
    std::string name_;
    char *base_ = nullptr;
    size_t bytes_ = 0;
    uint64_t round_ = 0;
    double timeout_s_ = 60;
};

// Opens the node's exchange (collective over the node's ranks) and makes it *setup's
// node_allgather, so that DeviceTeam::create runs its rounds among the node's ranks,
// without MPI: the set-up may then run from any thread's progress.
Status use_node_exchange(algo::HostTeam &team, DeviceSetup *setup);

}  // namespace gpurdma::gpu
