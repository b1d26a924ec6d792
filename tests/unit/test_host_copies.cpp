// Host copies of a call's buffers (what the shims give the previous module for GPU
// buffers), on host memory here: the span a datatype covers, placed as the buffers are,
// the gaps kept on the way back, and nothing copied back when the call fails.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gpurdma/gpurdma.h"

namespace {

// MPI_Type_vector(2, 1, 2, MPI_INT) resized to an extent of 16 bytes: extent 16,
// true lower bound 0, true extent 12 (ints 0 and 2 of each element; ints 1 and 3 gaps).
constexpr ptrdiff_t kExtent = 16, kTrueLb = 0, kTrueExtent = 12;

TEST(HostCopies, SpanPlacedAndGapsKept)
{
    std::vector<int> send(16), recv(16, -1);
    for (int i = 0; i < 16; ++i) send[i] = i;
    const size_t count = 3;  // span: 2 * 16 + 12 = 44 bytes = 11 ints
    gpurdma_host_copies_t *c = nullptr;
    ASSERT_EQ(gpurdma_host_copies_create(send.data(), recv.data(), count, kExtent, kTrueLb, kTrueExtent, &c),
              GPURDMA_OK);
    const int *hs = static_cast<const int *>(gpurdma_host_copies_send(c));
    int *hr = static_cast<int *>(gpurdma_host_copies_recv(c));
    for (int i = 0; i < 11; ++i) {
        EXPECT_EQ(hs[i], i);
        EXPECT_EQ(hr[i], -1);  // the receive span too: the operand in place, the gaps
    }
    for (int i = 0; i < 11; ++i)
        if (i % 4 != 1 && i % 4 != 3) hr[i] = 100 + i;  // the "previous module" writes elements only
    ASSERT_EQ(gpurdma_host_copies_copy_back(c), GPURDMA_OK);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(recv[i], i < 11 && i % 4 != 1 && i % 4 != 3 ? 100 + i : -1) << "int " << i;
    // A persistent call's next start takes the data as it is then.
    send[0] = 42;
    ASSERT_EQ(gpurdma_host_copies_fill(c), GPURDMA_OK);
    EXPECT_EQ(hs[0], 42);
    EXPECT_EQ(hr[0], 100);
    gpurdma_host_copies_destroy(c);
    gpurdma_host_copies_destroy(nullptr);
}

TEST(HostCopies, InPlaceHasNoSendCopy)
{
    std::vector<int> recv(4, 7);
    gpurdma_host_copies_t *c = nullptr;
    ASSERT_EQ(gpurdma_host_copies_create(nullptr, recv.data(), 4, 4, 0, 4, &c), GPURDMA_OK);
    EXPECT_EQ(gpurdma_host_copies_send(c), nullptr);
    EXPECT_EQ(static_cast<int *>(gpurdma_host_copies_recv(c))[3], 7);
    gpurdma_host_copies_destroy(c);
}

int doubled(const void *send, void *recv, void *arg)
{
    const int n = *static_cast<int *>(arg);
    for (int i = 0; i < n; ++i) static_cast<int *>(recv)[i] = 2 * static_cast<const int *>(send)[i];
    return 0;
}

int failing(const void *, void *recv, void *)
{
    static_cast<int *>(recv)[0] = 99;
    return 5;
}

TEST(HostCopies, StagedCallCopiesBackOnlyOnSuccess)
{
    int n = 4, rc = -1;
    std::vector<int> send{1, 2, 3, 4}, recv(4, 0);
    ASSERT_EQ(gpurdma_staged_host_call(send.data(), recv.data(), 4, 4, 0, 4, doubled, &n, &rc), GPURDMA_OK);
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(recv, (std::vector<int>{2, 4, 6, 8}));
    ASSERT_EQ(gpurdma_staged_host_call(send.data(), recv.data(), 4, 4, 0, 4, failing, nullptr, &rc), GPURDMA_OK);
    EXPECT_EQ(rc, 5);
    EXPECT_EQ(recv, (std::vector<int>{2, 4, 6, 8}));
}

}  // namespace
