// UCX slot channels in one process: two ranks' channels on one UCX worker, connected
// to each other through real UCX endpoints. Messages of every path (active message,
// put + fence + flag), credits and drain, over UCX's loopback transports and over tcp
// (where RMA is emulated and every message is an active message); active messages
// that do not fit the receiver's layout are dropped without harm; and memory a
// receiver offers (host memory here, standing for GPU memory) takes the puts meant
// for a GPU reader, the CPU reader getting a copy.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "exec/channel_release.h"
#include "exec/ucx_close.h"
#include "transport/ucx_channels.h"
#include "transport/ucx_context.h"

using gpurdma::transport::AmHeader;
using gpurdma::transport::Poll;
using gpurdma::transport::Reader;
using gpurdma::transport::UcxChannels;
using gpurdma::transport::UcxContext;
using gpurdma::transport::UcxPeerInfo;

namespace {

constexpr size_t kSlot = 64 * 1024;
constexpr int kSlots = 2;

// A request run to completion with progress, within 5 s; freed (abandoned if it did not finish).
ucs_status_t complete(UcxContext &context, ucs_status_ptr_t request)
{
    if (request == nullptr) return UCS_OK;
    if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    ucs_status_t st;
    while ((st = ucp_request_check_status(request)) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until)
        context.progress();
    if (st == UCS_INPROGRESS) context.abandon(request);
    else ucp_request_free(request);
    return st;
}

// The release's wait (exec/channel_release.h) as the host team runs it, bounded.
bool drained(UcxChannels &c, double bound_s, std::string *waiting = nullptr)
{
    gpurdma::exec::ChannelsRelease release(nullptr, &c, {"here", "there"});
    const bool done = gpurdma::exec::run_teardown(release, gpurdma::exec::WaitPolicy{}, bound_s,
                                                  gpurdma::exec::WaitSite{"test", 0, "here"});
    if (waiting) *waiting = release.describe_wait();
    return done;
}

struct Pair {
    std::unique_ptr<UcxContext> context;
    std::unique_ptr<UcxChannels> ch[2];
    std::string skip;  // why this transport is not available here

    Pair(const std::string &tls, const std::string &devices, int lanes = 1)
    {
        gpurdma::Status st = UcxContext::create(tls, devices, {}, &context);
        const auto peers = [](int r) { return std::vector<int>{1 - r}; };
        for (int r = 0; r < 2 && st.is_ok(); ++r)
            st = UcxChannels::create(*context, r, 2, peers, kSlots, kSlot, lanes, &ch[r]);
        if (st.is_ok()) {
            const std::vector<UcxPeerInfo> info{ch[0]->local_info(), ch[1]->local_info()};
            for (int r = 0; r < 2 && st.is_ok(); ++r) st = ch[r]->connect(info, {"here", "here"});
        }
        if (!st.is_ok()) skip = st.message();
    }
    ~Pair()
    {
        for (auto &c : ch)
            if (c) drained(*c, 2.0);
        ch[0].reset();
        ch[1].reset();
        gpurdma::exec::close_ucx(std::move(context), 20, nullptr);  // as at MPI_Finalize
    }

    // The endpoint the channels use (to this same worker), shared through the context.
    std::shared_ptr<gpurdma::transport::UcxEndpoint> endpoint(std::string *why, int lane = 0)
    {
        std::shared_ptr<gpurdma::transport::UcxEndpoint> ep;
        const gpurdma::Status st = context->endpoint(context->address(), lane, &ep);
        *why = st.message();
        return ep;
    }

    // The next message from `from` to `to`, with progress, within 5 s.
    const char *receive(int to, size_t bytes, Reader reader = Reader::Cpu)
    {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < until) {
            if (const void *p = ch[to]->try_receive(1 - to, bytes, reader)) return static_cast<const char *>(p);
            context->progress();
        }
        return nullptr;
    }
    Poll send(int from, const void *src, size_t bytes, Reader receiver = Reader::Cpu)
    {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (;;) {
            const Poll p = ch[from]->try_send(1 - from, src, bytes, receiver);
            if (p != Poll::WouldBlock || std::chrono::steady_clock::now() > until) return p;
            context->progress();
        }
    }
};

std::vector<char> pattern(size_t n, int seed)
{
    std::vector<char> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 131 + seed * 7 + (i >> 8));
    return v;
}

// Both directions, sizes on either side of the active-message limit, more messages
// than slots (so credits must come back), each checked byte for byte.
void exchange_all_sizes(Pair &p)
{
    const size_t sizes[] = {
        0, 8, 48, 1000, UcxChannels::kActiveMessageMax, UcxChannels::kActiveMessageMax + 8, kSlot - 64, kSlot};
    int seed = 0;
    for (int round = 0; round < 3; ++round)
        for (size_t bytes : sizes)
            for (int from = 0; from < 2; ++from) {
                const auto msg = pattern(bytes, ++seed);
                ASSERT_EQ(p.send(from, msg.data(), bytes), Poll::Done) << p.ch[from]->error();
                const char *got = p.receive(1 - from, bytes);
                ASSERT_NE(got, nullptr) << bytes << " bytes from rank " << from << " never arrived";
                if (bytes > 0) {
                    ASSERT_EQ(std::memcmp(got, msg.data(), bytes), 0) << bytes << " bytes from rank " << from;
                }
                p.ch[1 - from]->release(from);
                // The source may change once no send reads it any more.
                while (p.ch[from]->source_busy(msg.data(), bytes)) p.context->progress();
            }
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(drained(*p.ch[r], 5.0)) << "credits did not all come back";
}

}  // namespace

namespace {

// One transport set-up: the path UCX gives toward the peer, then every size both ways.
void check_transport(const std::string &tls, const std::string &devices, bool expect_emulated, const char *path,
                     int lanes = 1)
{
    Pair p(tls, devices, lanes);
    if (!p.skip.empty()) GTEST_SKIP() << "UCX (" << (tls.empty() ? "default" : tls) << ") unavailable: " << p.skip;
    std::string why;
    const auto ep = p.endpoint(&why);
    ASSERT_TRUE(ep) << why;
    EXPECT_EQ(ep->rma_emulated(), expect_emulated) << path;
    EXPECT_EQ(p.ch[0]->lanes(), lanes);
    if (lanes > 1) {  // a lane of its own is an endpoint of its own (on a NIC, a QP)
        const auto second = p.endpoint(&why, 1);
        ASSERT_TRUE(second) << why;
        EXPECT_NE(second->get(), ep->get());
    }
    exchange_all_sizes(p);
}

}  // namespace

TEST(UcxChannels, LoopbackEveryPath)
{
    check_transport("", "", false, "loopback RMA should be native: puts above the active-message limit");
}

TEST(UcxChannels, TcpEveryMessageAsActiveMessage)
{
    check_transport("tcp", "lo", true, "tcp only: RMA is emulated, every message goes as an active message");
}

// Slots striped over two endpoints (coll_gpurdma_rail_qps 2): slot 1's data and flag on
// the second, every size both ways, credits back on the first.
TEST(UcxChannels, TwoLanesEveryPath)
{
    check_transport("", "", false, "loopback RMA over two endpoints", 2);
}

TEST(UcxChannels, TwoLanesOverTcp)
{
    check_transport("tcp", "lo", true, "tcp over two endpoints: active messages on both", 2);
}

TEST(UcxChannels, MalformedActiveMessagesAreDropped)
{
    Pair p("", "");
    if (!p.skip.empty()) GTEST_SKIP() << "UCX unavailable: " << p.skip;
    std::string why;
    const auto ep = p.endpoint(&why);
    ASSERT_TRUE(ep) << why;
    const UcxPeerInfo target = p.ch[1]->local_info();
    const std::vector<char> junk(kSlot + 64, 'x');
    auto send_raw = [&](AmHeader h, size_t bytes) {
        ucp_request_param_t param{};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = UCP_AM_SEND_FLAG_EAGER;
        const ucs_status_t st = complete(
            *p.context, ucp_am_send_nbx(ep->get(), UcxContext::kAmId, &h, sizeof h, junk.data(), bytes, &param));
        ASSERT_EQ(st, UCS_OK);
        for (int i = 0; i < 100; ++i) p.context->progress();
    };
    AmHeader h;
    h.target = target.channel_id;
    h.kind = AmHeader::Data;
    h.value = 1;  // what the first real message's flag would be
    h.index = 5;  // no such peer
    send_raw(h, 8);
    h.index = -1;
    send_raw(h, 8);
    h.index = 0;
    h.slot = kSlots;  // no such slot
    send_raw(h, 8);
    h.slot = 0;
    send_raw(h, kSlot + 64);  // larger than a slot
    h.kind = 77;  // no such kind
    send_raw(h, 8);
    h.kind = AmHeader::Data;
    h.target = target.channel_id + 1000;  // no such channel
    send_raw(h, 8);
    // None of it may look like a message, and the channels still work.
    EXPECT_EQ(p.ch[1]->try_receive(0, 8, Reader::Cpu), nullptr);
    exchange_all_sizes(p);
}

namespace {

// One message from rank 0 to rank 1, sent for `receiver`, read by `reader`: its bytes,
// and whether they were read in rank 1's offered memory.
struct Arrival {
    bool ok = false;
    bool in_offered = false;
};
Arrival one_message(Pair &p, size_t bytes, Reader receiver, Reader reader, int seed)
{
    Arrival a;
    const auto msg = pattern(bytes, seed);
    EXPECT_EQ(p.send(0, msg.data(), bytes, receiver), Poll::Done) << p.ch[0]->error();
    const char *got = p.receive(1, bytes, reader);
    if (!got) {
        ADD_FAILURE() << bytes << " bytes never arrived: " << p.ch[1]->error();
        return a;
    }
    a.ok = std::memcmp(got, msg.data(), bytes) == 0;
    a.in_offered = p.ch[1]->offered().contains(got, bytes);
    p.ch[1]->release(0);
    while (p.ch[0]->source_busy(msg.data(), bytes)) p.context->progress();
    return a;
}

}  // namespace

TEST(UcxChannels, OfferedMemoryTakesPutsForAGpuReader)
{
    Pair p("", "", 2);  // two lanes: the offered key is unpacked on both
    if (!p.skip.empty()) GTEST_SKIP() << "UCX unavailable: " << p.skip;
    std::vector<char> offered(p.ch[1]->offered_bytes());
    int copies = 0;
    const auto to_host = [&copies](void *dst, const void *src, size_t n, std::string *) {
        ++copies;
        std::memcpy(dst, src, n);
        return true;
    };
    ASSERT_TRUE(p.ch[1]->offer_landing(offered.data(), UCS_MEMORY_TYPE_HOST, to_host).is_ok()) << p.ch[1]->error();
    EXPECT_FALSE(p.ch[1]->offer_landing(offered.data(), UCS_MEMORY_TYPE_HOST, to_host).is_ok()) << "offered twice";
    const size_t big = UcxChannels::kActiveMessageMax + 8;
    // The key arrives with progress; until the sender has it, its puts go to the slots.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int seed = 0;
    while (p.ch[0]->peers_offering() == 0 && std::chrono::steady_clock::now() < until) {
        p.context->progress();
        ASSERT_TRUE(one_message(p, big, Reader::Gpu, Reader::Gpu, ++seed).ok);
    }
    ASSERT_EQ(p.ch[0]->peers_offering(), 1) << "the offer never reached rank 0";
    const uint64_t before = p.ch[1]->offered_arrivals();
    for (int round = 0; round < 2 * kSlots; ++round) {  // every slot, twice
        Arrival a = one_message(p, big, Reader::Gpu, Reader::Gpu, ++seed);
        EXPECT_TRUE(a.ok && a.in_offered) << "a put for a GPU reader, round " << round;
        a = one_message(p, kSlot, Reader::Gpu, Reader::Gpu, ++seed);
        EXPECT_TRUE(a.ok && a.in_offered) << "a whole slot for a GPU reader, round " << round;
        a = one_message(p, big, Reader::Cpu, Reader::Cpu, ++seed);
        EXPECT_TRUE(a.ok && !a.in_offered) << "a put for a CPU reader lands in the slot";
        a = one_message(p, 1000, Reader::Gpu, Reader::Gpu, ++seed);
        EXPECT_TRUE(a.ok && !a.in_offered) << "an active message lands in the slot";
    }
    EXPECT_EQ(p.ch[1]->offered_arrivals() - before, static_cast<uint64_t>(4 * kSlots));
    // A mixed call: sent for a GPU reader, read by the CPU: a host copy.
    const Arrival mixed = one_message(p, big, Reader::Gpu, Reader::Cpu, ++seed);
    EXPECT_TRUE(mixed.ok && !mixed.in_offered);
    EXPECT_EQ(copies, 1);
    EXPECT_EQ(p.ch[1]->offered_copies(), 1u);
    // Withdrawn: a message that lands there now is an error, not a read of freed memory.
    gpurdma::exec::UcxRequestsFinished sends(*p.ch[1]);
    EXPECT_TRUE(gpurdma::exec::run_teardown(sends, gpurdma::exec::WaitPolicy{}, 5, gpurdma::exec::WaitSite{}));
    p.ch[1]->withdraw_landing();
    EXPECT_EQ(p.ch[1]->offered().bytes, 0u);
    const auto msg = pattern(big, ++seed);
    ASSERT_EQ(p.send(0, msg.data(), big, Reader::Gpu), Poll::Done);
    const auto until_failed = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!p.ch[1]->failed() && std::chrono::steady_clock::now() < until_failed) {
        EXPECT_EQ(p.ch[1]->try_receive(0, big, Reader::Gpu), nullptr);
        p.context->progress();
    }
    EXPECT_TRUE(p.ch[1]->failed());
    EXPECT_NE(std::string(p.ch[1]->error()).find("withdrawn"), std::string::npos) << p.ch[1]->error();
    while (p.ch[0]->sends_pending()) p.context->progress();
    // Rank 1's channel failed and rank 0's last message is never consumed: no drain.
    p.ch[1].reset();
    p.ch[0].reset();
}

// Releasing is one look at a time: a slot the peer still holds keeps the release
// waiting (bounded, named), never failing; once returned the release completes.
TEST(UcxChannels, ReleaseWaitsForSlotsPeersHoldAndNamesThem)
{
    Pair p("", "");
    if (!p.skip.empty()) GTEST_SKIP() << "UCX unavailable: " << p.skip;
    const auto msg = pattern(100, 1);
    ASSERT_EQ(p.send(0, msg.data(), msg.size()), Poll::Done) << p.ch[0]->error();
    ASSERT_NE(p.receive(1, msg.size()), nullptr);
    EXPECT_FALSE(p.ch[0]->drained()) << "rank 1 holds the slot";
    EXPECT_EQ(p.ch[0]->slots_held(), 1u);
    EXPECT_EQ(p.ch[0]->peers_holding_slots(), std::vector<int>{1});
    std::string waiting;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(drained(*p.ch[0], 0.05, &waiting));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
    EXPECT_NE(waiting.find("peers' return of landing slots (rank 1 on host there)"), std::string::npos) << waiting;
    p.ch[1]->release(0);
    EXPECT_TRUE(drained(*p.ch[0], 5.0, &waiting)) << waiting;
    EXPECT_EQ(p.ch[0]->slots_held(), 0u);
    EXPECT_TRUE(p.ch[0]->requests_finished());
}

// The context's end in steps that never wait: every endpoint's close completes, then
// the worker goes idle.
TEST(UcxContext, ClosesInStepsThatNeverWait)
{
    Pair p("", "");
    if (!p.skip.empty()) GTEST_SKIP() << "UCX unavailable: " << p.skip;
    for (auto &c : p.ch) {
        EXPECT_TRUE(drained(*c, 5.0));
        c.reset();
    }
    p.context->start_close();
    size_t running = 1;
    for (int i = 0; i < 1000000 && running > 0; ++i) running = p.context->closes_running();
    EXPECT_EQ(running, 0u);
    bool quiet = false;
    for (int i = 0; i < 1000000 && !quiet; ++i) quiet = p.context->worker_quiet();
    EXPECT_TRUE(quiet);
}
