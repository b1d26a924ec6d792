// Memory a receiver offers for arrivals (UcxChannels::offer_landing), between two
// forked processes over UCX's own choice of transports: the case the in-process test
// cannot show. Offered memory is registered, the landing region is UCX's allocation,
// so a message's data and its flag may take different lanes (here cma and shared
// memory), and every message must still be whole when its flag is seen. The receiver
// offers plain host memory (standing for GPU memory), the sender puts whole slots for
// a GPU reader, and the receiver checks each one byte for byte.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "exec/channel_release.h"
#include "setup/wire.h"
#include "support/fork_ranks.h"
#include "transport/ucx_channels.h"
#include "transport/ucx_context.h"

namespace {

namespace transport = gpurdma::transport;
using transport::Poll;
using transport::Reader;

constexpr size_t kSlot = 64 * 1024;
constexpr int kSlots = 4;
constexpr int kMessages = 200;
constexpr size_t kRecord = 8192;  // a rank's UcxPeerInfo, flattened

struct SharedNote {
    char skip[512];
    char failure[2][512];  // per rank
    int landed;  // rank 1: messages read in its offered memory
    int emulated;  // rank 0: UCX's RMA toward rank 1 is emulated (tcp): every message is an active message
};

// Each message's bytes differ from every other's, so a stale slot shows.
char pattern(size_t i, int message)
{
    return static_cast<char>(i * 131 + static_cast<size_t>(message) * 7 + (i >> 9));
}

// Both ranks' UcxPeerInfo through the bootstrap, as setup/wire.h records, padded to kRecord.
bool exchange(const transport::UcxPeerInfo &mine, gpurdma_bootstrap_t boot, std::vector<transport::UcxPeerInfo> *all)
{
    gpurdma::wire::Writer w;
    w.str(mine.worker_address);
    w.str(mine.region_key);
    w.u64(mine.region_base);
    w.u64(mine.channel_id);
    std::string rec = w.take();
    if (rec.size() > kRecord) return false;
    rec.resize(kRecord, '\0');
    std::string both(2 * kRecord, '\0');
    if (boot.allgather(rec.data(), both.data(), kRecord, boot.arg) != 0) return false;
    for (int r = 0; r < 2; ++r) {
        const std::string one = both.substr(static_cast<size_t>(r) * kRecord, kRecord);
        gpurdma::wire::Reader in(one);
        transport::UcxPeerInfo info;
        if (!in.str(&info.worker_address) || !in.str(&info.region_key) || !in.u64(&info.region_base) ||
            !in.u64(&info.channel_id))
            return false;
        all->push_back(info);
    }
    return true;
}

int fail(SharedNote *note, int rank, const std::string &why)
{
    std::snprintf(note->failure[rank], sizeof note->failure[rank], "rank %d: %s", rank, why.c_str());
    return 1;
}

int run_rank(int rank, gpurdma_bootstrap_t boot, SharedNote *note)
{
    std::vector<char> offered;  // rank 1's; declared first so it outlives the channels
    std::unique_ptr<transport::UcxContext> context;
    std::unique_ptr<transport::UcxChannels> ch;
    gpurdma::Status st = transport::UcxContext::create("", "", {}, &context);
    const auto peers = [](int r) { return std::vector<int>{1 - r}; };
    if (st.is_ok()) st = transport::UcxChannels::create(*context, rank, 2, peers, kSlots, kSlot, 2, &ch);
    std::vector<transport::UcxPeerInfo> info;
    // Both ranks go on to the exchange either way, so neither waits for the other.
    const bool exchanged = exchange(st.is_ok() ? ch->local_info() : transport::UcxPeerInfo{}, boot, &info);
    if (!st.is_ok()) {
        if (rank == 0) std::snprintf(note->skip, sizeof note->skip, "UCX unavailable: %s", st.message().c_str());
        return 0;
    }
    if (!exchanged) return fail(note, rank, "bootstrap exchange failed");
    st = ch->connect(info, {"rank0", "rank1"});
    if (!st.is_ok()) return fail(note, rank, "connect: " + st.message());
    std::shared_ptr<transport::UcxEndpoint> ep;
    if (rank == 0 && context->endpoint(info[1].worker_address, 0, &ep).is_ok() && ep->rma_emulated())
        note->emulated = 1;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    if (rank == 1) {
        offered.assign(ch->offered_bytes(), 0);
        const auto to_host = [](void *dst, const void *src, size_t n, std::string *) {
            std::memcpy(dst, src, n);
            return true;
        };
        st = ch->offer_landing(offered.data(), UCS_MEMORY_TYPE_HOST, to_host);
        if (!st.is_ok()) return fail(note, rank, "offer: " + st.message());
        for (int m = 0; m < kMessages; ++m) {
            const char *got = nullptr;
            while (!(got = static_cast<const char *>(ch->try_receive(0, kSlot, Reader::Gpu)))) {
                if (ch->failed()) return fail(note, rank, ch->error());
                if (std::chrono::steady_clock::now() > until)
                    return fail(note, rank, "message " + std::to_string(m) + " never came");
                context->progress();
            }
            note->landed += ch->offered().contains(got, kSlot) ? 1 : 0;
            for (size_t i = 0; i < kSlot; ++i)
                if (got[i] != pattern(i, m))
                    return fail(note, rank,
                                "message " + std::to_string(m) + " differs at byte " + std::to_string(i) +
                                    (ch->offered().contains(got, kSlot) ? " (in offered memory)" : " (in its slot)"));
            ch->release(0);
        }
    } else {
        std::vector<char> msg(kSlot);
        for (int m = 0; m < kMessages; ++m) {
            for (size_t i = 0; i < kSlot; ++i) msg[i] = pattern(i, m);
            Poll p;
            while ((p = ch->try_send(1, msg.data(), kSlot, Reader::Gpu)) == Poll::WouldBlock) {
                if (std::chrono::steady_clock::now() > until)
                    return fail(note, rank, "no credit for message " + std::to_string(m));
                context->progress();
            }
            if (p != Poll::Done) return fail(note, rank, std::string("send: ") + ch->error());
            while (ch->source_busy(msg.data(), kSlot)) context->progress();
        }
    }
    gpurdma::exec::ChannelsRelease release(nullptr, ch.get(), {"rank0", "rank1"});
    if (!gpurdma::exec::run_teardown(release, gpurdma::exec::WaitPolicy{}, 10, gpurdma::exec::WaitSite{}))
        return fail(note, rank, "drain: still waiting for " + release.describe_wait());
    // Both sides done before either goes: rank 1's offered memory outlives every put.
    char done = 1, both[2];
    if (boot.allgather(&done, both, 1, boot.arg) != 0) return fail(note, rank, "final exchange failed");
    if (rank == 1) {
        gpurdma::exec::UcxRequestsFinished sends(*ch);
        if (!gpurdma::exec::run_teardown(sends, gpurdma::exec::WaitPolicy{}, 10, gpurdma::exec::WaitSite{}))
            return fail(note, rank, "withdraw: still waiting for " + sends.describe_wait());
        ch->withdraw_landing();
    }
    return 0;
}

}  // namespace

TEST(OfferedLanding, WholeSlotsAcrossProcessesWhateverLanesUcxTakes)
{
    void *map = mmap(nullptr, sizeof(SharedNote), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    auto *note = new (map) SharedNote{};
    const auto res = gpurdma::testing::run_ranks(
        2, [&](int rank, int, gpurdma_bootstrap_t boot) { return run_rank(rank, boot, note); }, 90);
    const std::string skip = note->skip, failure = std::string(note->failure[0]) + " " + note->failure[1];
    const int landed = note->landed;
    const bool emulated = note->emulated != 0;
    munmap(map, sizeof(SharedNote));
    if (!skip.empty()) GTEST_SKIP() << skip;
    EXPECT_FALSE(res.timed_out) << res.detail;
    EXPECT_EQ(res.failed, 0) << res.detail << ": " << failure;
    if (emulated) GTEST_SKIP() << "UCX's RMA between the two processes is emulated (tcp): nothing is put";
    // The key reaches the sender within its first few messages; from then on every
    // whole slot lands in the offered memory.
    EXPECT_GT(landed, kMessages / 2) << "of " << kMessages << " messages, " << landed << " in offered memory";
}
