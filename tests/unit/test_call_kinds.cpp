// The call-kinds board (algo/call_kinds.h): what a node peer posted for a call reads
// as not yet, host, GPU or a later call, from each rank's own line; and an agreement
// of one rank exchanges nothing through the bootstrap (the device set-up relies on it
// to run from progress, where no MPI call may be made).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algo/call_kinds.h"
#include "setup/agreement.h"

using gpurdma::algo::CallKinds;
using Kind = CallKinds::Kind;

TEST(CallKinds, EachRankReadsWhatAPeerPostedForACall)
{
    std::vector<char> board(CallKinds::bytes(3), 0);
    const CallKinds rank0(board.data(), 0), rank1(board.data(), 1), rank2(board.data(), 2);
    EXPECT_EQ(rank0.peer(1, 1), Kind::NotYet);  // nothing posted: zeroed memory
    rank1.post(1, false);
    rank2.post(1, true);
    EXPECT_EQ(rank0.peer(1, 1), Kind::Host);
    EXPECT_EQ(rank0.peer(2, 1), Kind::Device);
    EXPECT_EQ(rank0.peer(1, 2), Kind::NotYet);
    rank1.post(2, true);  // a later call overwrites the line, and only that rank's line
    EXPECT_EQ(rank0.peer(1, 2), Kind::Device);
    EXPECT_EQ(rank0.peer(1, 1), Kind::Later);
    EXPECT_EQ(rank2.peer(2, 1), Kind::Device);
    EXPECT_EQ(rank2.peer(0, 1), Kind::NotYet);
}

TEST(CallKinds, LinesDoNotShareACacheLine)
{
    std::vector<char> board(CallKinds::bytes(2), 0);
    CallKinds(board.data(), 1).post(7, true);
    for (size_t i = 0; i < CallKinds::kLine; ++i) EXPECT_EQ(board[i], 0) << "byte " << i;
}

TEST(Agreement, OneRankExchangesWithoutTheBootstrap)
{
    gpurdma_bootstrap_t boot{};
    int calls = 0;
    boot.arg = &calls;
    boot.allgather = [](const void *, void *, size_t, void *arg) {
        ++*static_cast<int *>(arg);
        return -1;
    };
    gpurdma::setup::Agreement agreement(boot, 0, 1);
    std::vector<std::string> all;
    ASSERT_TRUE(agreement.exchange("mine", &all).is_ok());
    EXPECT_EQ(all, std::vector<std::string>{"mine"});
    EXPECT_EQ(calls, 0);
}
