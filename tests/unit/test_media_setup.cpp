// The media set themselves up (transport/medium.h): transport::ShmMedium and
// transport::UcxMedium in forked ranks with the MPI-free bootstrap, driven through
// their contract with setup::Agreement as the host team does it (setup, one exchange
// of records, connect, vote, connected), then ring, hierarchical and recursive-
// doubling schedules over a Router on their channels, each element checked
// (support/schedule_check.h). Also: a medium that has no peers stays idle (UCX is not
// even started); one that cannot set up on one rank makes every rank decline with that
// rank's host and reason; the node segment's name is gone once everyone is connected,
// and after a decline once the media are released.
//
// Needs the engine branch's media (ShmMedium, UcxMedium, the Status factories); it
// covers every case of test_media_executor.cpp (which sets up today's classes by hand)
// and replaces it once those classes are gone.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/status.h"
#include "exec/channel_release.h"
#include "exec/progress.h"
#include "plan/planner.h"
#include "setup/agreement.h"
#include "setup/wire.h"
#include "support/fork_ranks.h"
#include "support/rank_check.h"
#include "support/schedule_check.h"
#include "topo/topology.h"
#include "transport/router.h"
#include "transport/shm_channels.h"
#include "transport/shm_medium.h"
#include "transport/ucx_context.h"
#include "transport/ucx_medium.h"

using gpurdma::Status;
using gpurdma::testing::RankCheck;

namespace {

namespace exec = gpurdma::exec;
namespace plan = gpurdma::plan;
namespace setup = gpurdma::setup;
namespace topo = gpurdma::topo;
namespace transport = gpurdma::transport;
namespace wire = gpurdma::wire;

constexpr int kSlots = 2;
constexpr size_t kChunk = 16 * 1024;  // small landing slots: the larger calls pipeline over many
const char *const kNoUcx = "UCX unavailable: ";
const char *const kUcxOff = "UCX is switched off on this rank (test)";

struct MediaCase {
    std::vector<std::string> nodes;  // rank -> logical node (also its "host" in messages)
    std::string tls;  // UCX_TLS for the context ("" = UCX's choice)
    std::string devices;  // UCX_NET_DEVICES
    int ucx_refuses = -1;  // this rank cannot start UCX: every rank must decline
};

// Written by rank 0 for the parent: why UCX cannot start here (then the test is skipped).
struct SharedNote {
    char skip[512];
};

// One rank's media, released in reverse order: router, UCX channels, the segment, UCX.
struct RankMedia {
    std::unique_ptr<transport::UcxContext> context;  // the process's, started on demand
    int ucx_starts = 0;  // how often the medium asked for it
    std::unique_ptr<transport::ShmMedium> shm;
    std::unique_ptr<transport::UcxMedium> ucx;
    std::unique_ptr<transport::Router> router;
};

std::vector<int> remote_peers(const topo::Topology &t, int rank)
{
    std::vector<int> out;
    for (int p : plan::peers(t, rank))
        if (t.node_of[static_cast<size_t>(p)] != t.node_of[static_cast<size_t>(rank)]) out.push_back(p);
    return out;
}

bool name_exists(const std::string &shm_name)
{
    const int fd = shm_open(shm_name.c_str(), O_RDONLY, 0);
    if (fd >= 0) close(fd);
    return fd >= 0 || errno != ENOENT;
}

int run_rank(const MediaCase &c, int rank, int size, gpurdma_bootstrap_t boot, SharedNote *note)
{
    RankCheck check(rank);
    const topo::Topology t = topo::build_topology(c.nodes);
    const auto &members = t.members[static_cast<size_t>(t.node_of[static_cast<size_t>(rank)])];
    const bool has_remote = !remote_peers(t, rank).empty();
    setup::Agreement agreement(boot, rank, size);
    RankMedia m;
    transport::ShmMedium::Request request;
    request.bytes = transport::ShmChannels::segment_bytes(static_cast<int>(members.size()), kSlots, kChunk);
    request.slot_channels = true;
    request.slots = kSlots;
    request.slot_size = kChunk;
    m.shm = std::make_unique<transport::ShmMedium>(rank, size, members, request);
    const transport::UcxStarter start = [&](std::string *why) -> transport::UcxContext * {
        ++m.ucx_starts;
        if (rank == c.ucx_refuses) {
            *why = kUcxOff;
            return nullptr;
        }
        if (!m.context) {
            const Status st = transport::UcxContext::create(c.tls, c.devices, {}, &m.context);
            if (!st.is_ok()) *why = kNoUcx + st.message();
        }
        return m.context.get();
    };
    m.ucx = std::make_unique<transport::UcxMedium>(
        rank, size, [&t](int r) { return remote_peers(t, r); }, kSlots, kChunk, 2, start, c.nodes);
    check.equal(m.shm->name(), "shared memory", "ShmMedium::name");
    check.equal(m.ucx->name(), "UCX", "UcxMedium::name");

    const Status up = transport::connect_media(agreement, {m.shm.get(), m.ucx.get()}, c.nodes);
    // The node's first rank created the segment; only it may remove the name.
    const bool creator = members.size() > 1 && members[0] == rank;
    const std::string segment = creator && m.shm->segment() ? m.shm->segment()->name() : std::string();
    check.expect(!creator || !segment.empty(), "the node's first rank created the segment");
    if (up.is_unsupported() && up.message().find(kNoUcx) != std::string::npos) {
        if (rank == 0) std::snprintf(note->skip, sizeof note->skip, "%s", up.message().c_str());
        return 0;
    }
    if (c.ucx_refuses >= 0) {
        // Every rank declines alike, naming the rank, its host and its reason.
        check.expect(up.is_unsupported(), "a rank without UCX: every rank declines, got \"" + up.message() + "\"");
        check.equal(up.message(),
                    "rank " + std::to_string(c.ucx_refuses) + " on host " +
                        c.nodes[static_cast<size_t>(c.ucx_refuses)] + ": " + kUcxOff,
                    "the verdict");
        check.expect(creator || !m.shm->segment(), "nobody attached after a failed set-up");
        // Released after the decline, the segment leaves no name behind.
        m.ucx.reset();
        m.shm.reset();
        if (!segment.empty()) check.expect(!name_exists(segment), "segment " + segment + " unlinked on release");
        return check.result();
    }
    if (!check.expect(up.is_ok(), "set-up through the media: " + up.message())) return check.result();
    if (creator) check.expect(!name_exists(segment), "segment name gone once everyone is connected");
    check.expect((m.shm->segment() != nullptr) == (members.size() > 1), "the segment on every rank of its node");
    check.expect((m.shm->channels() != nullptr) == (members.size() > 1), "shared-memory channels iff node peers");
    check.expect((m.ucx->channels() != nullptr) == has_remote, "UCX channels iff peers on other nodes");
    check.expect(m.ucx_starts == (has_remote ? 1 : 0), "UCX started only by a rank with peers on other nodes");

    std::vector<bool> local(static_cast<size_t>(size), false);
    for (int r : members) local[static_cast<size_t>(r)] = true;
    m.router = std::make_unique<transport::Router>(std::move(local), m.shm->channels(), m.ucx->channels());
    exec::WaitPolicy policy;
    policy.yield_when_idle = true;  // more ranks than cores here
    policy.timeout_s = 20;
    transport::UcxContext *ucx = m.ucx->context();
    const exec::ProgressLoop loop(policy, exec::WaitSite{"media test", rank, c.nodes[static_cast<size_t>(rank)]},
                                  [ucx] { return ucx ? ucx->progress() : 0u; });
    gpurdma::testing::check_schedule_allreduces(t, c.nodes, rank, kChunk, *m.router, loop, check);
    if (check.failures() > 0) return check.result();  // peers may be stuck in a call: no drain
    // The host team's release: both media under the wait loop.
    exec::ChannelsRelease release(m.shm->channels(), m.ucx->channels(), c.nodes);
    check.expect(exec::run_teardown(release, policy, 10, exec::WaitSite{"media test", rank, ""}),
                 "channels drained; still waiting for " + release.describe_wait());
    const Status done = agreement.vote(Status::ok());
    check.expect(done.is_ok(), "final vote: " + done.message());
    return check.result();
}

void run_case(const MediaCase &c)
{
    void *map = mmap(nullptr, sizeof(SharedNote), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    auto *note = new (map) SharedNote{};
    const int size = static_cast<int>(c.nodes.size());
    const auto res = gpurdma::testing::run_ranks(
        size, [&](int rank, int n, gpurdma_bootstrap_t boot) { return run_rank(c, rank, n, boot, note); }, 60);
    const std::string skip = note->skip;
    munmap(map, sizeof(SharedNote));
    EXPECT_FALSE(res.timed_out) << res.detail;
    EXPECT_EQ(res.failed, 0) << res.detail;
    if (!skip.empty()) GTEST_SKIP() << skip;
}

}  // namespace

TEST(MediaSetup, TwoNodesOfTwoThroughTheMedia)
{
    run_case({{"node-a", "node-a", "node-b", "node-b"}, "", "", -1});
}

TEST(MediaSetup, TwoNodesOfTwoThroughTheMediaUcxTcp)
{
    run_case({{"node-a", "node-a", "node-b", "node-b"}, "tcp", "lo", -1});
}

TEST(MediaSetup, UnevenNodesThreeAndOne)
{
    run_case({{"node-a", "node-b", "node-a", "node-a"}, "", "", -1});
}

TEST(MediaSetup, OneNodeLeavesUcxIdle)
{
    run_case({{"node-a", "node-a", "node-a", "node-a"}, "", "", -1});
}

TEST(MediaSetup, NodesOfOneLeaveSharedMemoryIdle)
{
    run_case({{"node-a", "node-b", "node-c", "node-d"}, "", "", -1});
}

TEST(MediaSetup, RankWithoutUcxMakesEveryRankDecline)
{
    run_case({{"node-a", "node-a", "node-b", "node-b"}, "", "", 2});
}
