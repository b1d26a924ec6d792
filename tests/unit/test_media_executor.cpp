// Executor + Router + the real media together, in forked ranks with the MPI-free
// bootstrap: two logical nodes on this host, peers on the same node through slot
// channels in a real shared segment, the others through UCX slot channels (UCX's own
// choice of transport here, and tcp over loopback where every message is an active
// message). Each rank sets the media up the way the communicator does (today's
// classes; test_media_setup.cpp does it through transport::Medium), then runs ring,
// hierarchical and recursive-doubling schedules under exec::ProgressLoop, each
// element checked (support/schedule_check.h).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/status.h"
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
#include "transport/shm_segment.h"
#include "transport/ucx_channels.h"
#include "transport/ucx_context.h"

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

struct MediaCase {
    std::vector<std::string> nodes;  // rank -> logical node (also its "host" in messages)
    std::string tls;                 // UCX_TLS for the context ("" = UCX's choice)
    std::string devices;             // UCX_NET_DEVICES
    bool tcp_only = false;           // then UCX must emulate RMA toward every peer
};

// Written by rank 0 for the parent: why UCX cannot start here (then the test is
// skipped), and how UCX reaches the other node.
struct SharedNote {
    char skip[512];
    char ucx_path[64];
};

// The media of one rank, released in reverse order: router, channels, UCX, segment.
struct RankMedia {
    std::unique_ptr<transport::ShmSegment> segment;
    std::unique_ptr<transport::UcxContext> context;
    std::unique_ptr<transport::ShmChannels> shm;
    std::unique_ptr<transport::UcxChannels> ucx;
    std::unique_ptr<transport::Router> router;
    int rma_emulated = -1;  // toward the first UCX peer: 1 tcp only, 0 RMA in shared memory or hardware
};

// Ranks a schedule on this topology talks to on other nodes (UCX's peers).
std::vector<int> remote_peers(const topo::Topology &t, int rank)
{
    std::vector<int> out;
    for (int p : plan::peers(t, rank))
        if (t.node_of[static_cast<size_t>(p)] != t.node_of[static_cast<size_t>(rank)]) out.push_back(p);
    return out;
}

// Local resources, one exchange of records (segment name, UCX address and region),
// attach + connect, then the vote; the segment's name goes once every rank has it.
Status set_up(const MediaCase &c, const topo::Topology &t, int rank, setup::Agreement &agreement, RankMedia *m)
{
    const int size = t.size;
    const auto &members = t.members[static_cast<size_t>(t.node_of[static_cast<size_t>(rank)])];
    const auto ucx_peers = [&t](int r) { return remote_peers(t, r); };
    Status local;
    try {
        if (members.size() > 1 && members[0] == rank)
            m->segment = transport::ShmSegment::create(
                transport::ShmChannels::segment_bytes(static_cast<int>(members.size()), kSlots, kChunk));
        if (!ucx_peers(rank).empty()) {
            try {
                m->context = std::make_unique<transport::UcxContext>(c.tls, c.devices);
            } catch (const std::exception &e) {
                local = Status::unsupported(kNoUcx + std::string(e.what()));
            }
            if (m->context)
                m->ucx = std::make_unique<transport::UcxChannels>(*m->context, rank, size, ucx_peers, kSlots, kChunk);
        }
    } catch (const std::exception &e) {
        local = Status::error(GPURDMA_ERR_TRANSPORT, e.what());
    }
    wire::Writer w;
    w.str(m->segment ? m->segment->name() : std::string());
    const transport::UcxPeerInfo me = m->ucx ? m->ucx->local_info() : transport::UcxPeerInfo{};
    w.str(me.worker_address);
    w.u64(me.region_base);
    w.str(me.region_key);
    w.u64(me.channel_id);
    std::vector<std::string> records;
    const Status exchanged = agreement.exchange(w.take(), &records);
    if (!exchanged.is_ok()) return exchanged;
    if (local.is_ok()) {
        std::vector<std::string> segment_names(static_cast<size_t>(size));
        std::vector<transport::UcxPeerInfo> info(static_cast<size_t>(size));
        for (int r = 0; r < size && local.is_ok(); ++r) {
            wire::Reader rd(records[static_cast<size_t>(r)]);
            auto &i = info[static_cast<size_t>(r)];
            if (!rd.str(&segment_names[static_cast<size_t>(r)]) || !rd.str(&i.worker_address) ||
                !rd.u64(&i.region_base) || !rd.str(&i.region_key) || !rd.u64(&i.channel_id))
                local = Status::error(GPURDMA_ERR_TRANSPORT, "unreadable record of rank " + std::to_string(r));
        }
        try {
            if (local.is_ok() && members.size() > 1) {
                if (!m->segment)
                    m->segment = transport::ShmSegment::attach(
                        segment_names[static_cast<size_t>(members[0])],
                        transport::ShmChannels::segment_bytes(static_cast<int>(members.size()), kSlots, kChunk));
                m->shm = std::make_unique<transport::ShmChannels>(rank, size, members, kSlots, kChunk, *m->segment);
            }
            if (local.is_ok() && m->ucx) {
                m->ucx->connect(info, c.nodes);
                std::string why;
                const int peer = ucx_peers(rank)[0];
                const auto ep = m->context->endpoint(info[static_cast<size_t>(peer)].worker_address, &why);
                if (ep) m->rma_emulated = ep->rma_emulated() ? 1 : 0;
                else local = Status::error(GPURDMA_ERR_TRANSPORT, why);
            }
        } catch (const std::exception &e) {
            local = Status::error(GPURDMA_ERR_TRANSPORT, e.what());
        }
    }
    const Status verdict = agreement.vote(local, c.nodes);
    if (!verdict.is_ok()) return verdict;
    if (m->segment) m->segment->unlink();
    std::vector<bool> is_local(static_cast<size_t>(size), false);
    for (int r : members) is_local[static_cast<size_t>(r)] = true;
    m->router = std::make_unique<transport::Router>(std::move(is_local), m->shm.get(), m->ucx.get());
    return Status::ok();
}

int run_rank(const MediaCase &c, int rank, int size, gpurdma_bootstrap_t boot, SharedNote *note)
{
    RankCheck check(rank);
    const topo::Topology t = topo::build_topology(c.nodes);
    setup::Agreement agreement(boot, rank, size);
    RankMedia media;
    const Status up = set_up(c, t, rank, agreement, &media);
    if (up.is_unsupported() && up.message().find(kNoUcx) != std::string::npos) {
        if (rank == 0) std::snprintf(note->skip, sizeof note->skip, "%s", up.message().c_str());
        return 0;
    }
    if (!check.expect(up.is_ok(), "set-up: " + up.message())) return check.result();
    if (c.tcp_only) check.expect(media.rma_emulated == 1, "tcp only: RMA emulated, every message an active message");
    if (rank == 0)
        std::snprintf(note->ucx_path, sizeof note->ucx_path, "%s",
                      media.rma_emulated == 1 ? "emulated RMA (active messages)" : "native RMA (puts)");

    exec::WaitPolicy policy;
    policy.yield_when_idle = true;  // more ranks than cores here
    policy.timeout_s = 20;
    const exec::ProgressLoop loop(policy, exec::WaitSite{"media test", rank, c.nodes[static_cast<size_t>(rank)]},
                                  [&media] { return media.context ? media.context->progress() : 0u; });
    gpurdma::testing::check_schedule_allreduces(t, c.nodes, rank, kChunk, *media.router, loop, check);
    if (check.failures() > 0) return check.result();  // peers may be stuck in a call: no drain
    // Every landing slot comes back; no rank releases its memory while a peer may
    // still write into it.
    if (media.shm) check.expect(media.shm->drain(10), "shared-memory channels drained");
    if (media.ucx) check.expect(media.ucx->drain(10), "UCX channels drained");
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
    const std::string skip = note->skip, path = note->ucx_path;
    munmap(map, sizeof(SharedNote));
    EXPECT_FALSE(res.timed_out) << res.detail;
    EXPECT_EQ(res.failed, 0) << res.detail;
    if (!skip.empty()) GTEST_SKIP() << skip;
    ::testing::Test::RecordProperty("ucx_path", path);  // in --gtest_output reports: which UCX path the messages took
}

}  // namespace

TEST(MediaExecutor, TwoNodesOfTwoOverSharedMemoryAndUcx)
{
    run_case({{"node-a", "node-a", "node-b", "node-b"}, "", ""});
}

TEST(MediaExecutor, TwoNodesOfTwoOverSharedMemoryAndUcxTcp)
{
    // tcp emulates RMA: every inter-node message is an active message.
    run_case({{"node-a", "node-a", "node-b", "node-b"}, "tcp", "lo", true});
}

TEST(MediaExecutor, UnevenNodesThreeAndOne)
{
    run_case({{"node-a", "node-b", "node-a", "node-a"}, "", ""});
}
