// Set-up records exchanged among the ranks of one node only, for the device paths' node
// team: a small shared segment whose name every rank of the node derives from the host
// team's node segment (which they all attached at the host set-up), created by the
// node's lowest rank and unlinked once everyone has it. Only the ranks that pass GPU
// buffers open it, and nothing is sent on the host path's channels: a node peer that
// passes host buffers (and runs the host schedule) is never confused by a set-up
// message. Rounds: each rank posts its record for round k, then collects every
// member's; a record is overwritten only after every member has read it.
//
// Nothing here waits: each call posts or polls once and says whether it got through,
// and the caller (a task of the progress loop) calls again. The loop's idle clock and
// timeout bound the wait; position() and describe_wait() feed them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algo/host_team.h"
#include "base/noncopyable.h"
#include "base/status.h"

namespace gpurdma::algo {

// Largest record: longer ones are cut.
constexpr size_t kNodeRecordBytes = 4000;

class NodeExchange : private NonCopyable {
public:
    // The team must outlive this object. suffix: after the host segment's name, one per
    // device path that sets up a team of its own (two exchanges never share a name).
    explicit NodeExchange(HostTeam &team, const std::string &suffix = "-dev");
    ~NodeExchange();

    // Attaches the node's segment, then a first round as the barrier after which its
    // creator unlinks it. *done once that round is through. A node of one rank needs no
    // segment.
    Status open_step(bool *done);
    // This rank's record of the next round: *posted false while a member has not read
    // the previous round (call again).
    Status post(const std::string &mine, bool *posted);
    // The round posted last: *done once every member has posted it; *all then holds one
    // entry per communicator rank, the node's ranks' records, "" elsewhere.
    Status collect(std::vector<std::string> *all, bool *done);

    // Grows whenever a member moves (for the wait's idle clock).
    uint64_t position() const;
    // What this rank waits for, naming the member.
    std::string describe_wait() const;

private:
    struct Slot;
    enum class Phase { Attach, Ready, Barrier, BarrierCollect, Open };
    Slot &slot(size_t local) const;
    Status attach();
    bool member_reached(uint64_t Slot::*word, uint64_t value, const char *what);

    HostTeam &team_;
    std::vector<int> members_;
    size_t local_ = 0;
    std::string name_;
    char *base_ = nullptr;
    size_t bytes_ = 0;
    bool linked_ = false;  // created by this rank and not yet unlinked
    Phase phase_ = Phase::Attach;
    uint64_t round_ = 0;  // the round posted last
    std::string mine_;
    size_t awaited_ = 0;  // the member waited for
    const char *awaited_what_ = "";
};

}  // namespace gpurdma::algo
