// UCX slot channels in one process: two ranks' channels on one UCX worker, connected
// to each other through real UCX endpoints. Messages of every path (active message,
// put + fence + flag), credits and drain, over UCX's loopback transports and over tcp
// (where RMA is emulated and every message is an active message); and active messages
// that do not fit the receiver's layout are dropped without harm.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transport/ucx_channels.h"
#include "transport/ucx_context.h"

using gpurdma::transport::AmHeader;
using gpurdma::transport::Poll;
using gpurdma::transport::UcxChannels;
using gpurdma::transport::UcxContext;
using gpurdma::transport::UcxPeerInfo;

namespace {

constexpr size_t kSlot = 64 * 1024;
constexpr int kSlots = 2;

struct Pair {
    std::unique_ptr<UcxContext> context;
    std::unique_ptr<UcxChannels> ch[2];
    std::string skip;  // why this transport is not available here

    Pair(const std::string &tls, const std::string &devices)
    {
        gpurdma::Status st = UcxContext::create(tls, devices, {}, &context);
        const auto peers = [](int r) { return std::vector<int>{1 - r}; };
        for (int r = 0; r < 2 && st.is_ok(); ++r)
            st = UcxChannels::create(*context, r, 2, peers, kSlots, kSlot, &ch[r]);
        if (st.is_ok()) {
            const std::vector<UcxPeerInfo> info{ch[0]->local_info(), ch[1]->local_info()};
            for (int r = 0; r < 2 && st.is_ok(); ++r) st = ch[r]->connect(info, {"here", "here"});
        }
        if (!st.is_ok()) skip = st.message();
    }
    ~Pair()
    {
        for (auto &c : ch)
            if (c) c->drain(2.0);
        ch[0].reset();
        ch[1].reset();
    }

    // The endpoint the channels use (to this same worker), shared through the context.
    std::shared_ptr<gpurdma::transport::UcxEndpoint> endpoint(std::string *why)
    {
        std::shared_ptr<gpurdma::transport::UcxEndpoint> ep;
        const gpurdma::Status st = context->endpoint(context->address(), &ep);
        *why = st.message();
        return ep;
    }

    // The next message from `from` to `to`, with progress, within 5 s.
    const char *receive(int to, size_t bytes)
    {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < until) {
            if (const void *p = ch[to]->try_receive(1 - to, bytes)) return static_cast<const char *>(p);
            context->progress();
        }
        return nullptr;
    }
    Poll send(int from, const void *src, size_t bytes)
    {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (;;) {
            const Poll p = ch[from]->try_send(1 - from, src, bytes);
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
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(p.ch[r]->drain(5.0)) << "credits did not all come back";
}

}  // namespace

namespace {

// One transport set-up: the path UCX gives toward the peer, then every size both ways.
void check_transport(const std::string &tls, const std::string &devices, bool expect_emulated, const char *path)
{
    Pair p(tls, devices);
    if (!p.skip.empty()) GTEST_SKIP() << "UCX (" << (tls.empty() ? "default" : tls) << ") unavailable: " << p.skip;
    std::string why;
    const auto ep = p.endpoint(&why);
    ASSERT_TRUE(ep) << why;
    EXPECT_EQ(ep->rma_emulated(), expect_emulated) << path;
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
        const ucs_status_t st = p.context->wait(
            ucp_am_send_nbx(ep->get(), UcxContext::kAmId, &h, sizeof h, junk.data(), bytes, &param), 5.0);
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
    EXPECT_EQ(p.ch[1]->try_receive(0, 8), nullptr);
    exchange_all_sizes(p);
}
