// The set-up agreement (setup/agreement.h) across forked ranks with the MPI-free
// bootstrap, at 1 to 4 ranks: records of any length arrive in rank order on every
// rank; the vote gives every rank the same verdict, naming the lowest refusing rank
// and its reason; a rank that is gone makes the others' exchange fail, not hang.
#include <gtest/gtest.h>

#include <cstring>

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "setup/agreement.h"
#include "support/fork_ranks.h"
#include "support/rank_check.h"

using gpurdma::Status;
using gpurdma::setup::Agreement;
using gpurdma::testing::RankCheck;
using gpurdma::testing::RankResult;
using gpurdma::testing::run_ranks;

namespace {

constexpr double kTimeoutS = 20;  // far above what any of these takes; a hang shows as timed_out

// Bytes that differ by rank and position, zeros included (records are binary).
std::string record(int rank, size_t length)
{
    std::string r(length, '\0');
    for (size_t i = 0; i < length; ++i) r[i] = static_cast<char>((i * 31 + static_cast<size_t>(rank) * 7) % 251);
    return r;
}

std::vector<std::string> hosts_of(int size)
{
    std::vector<std::string> hosts;
    for (int r = 0; r < size; ++r) hosts.push_back("node-" + std::string(1, static_cast<char>('a' + r)));
    return hosts;
}

std::string why_of(int rank)
{
    return "cannot map the segment (ENOMEM at rank " + std::to_string(rank) + ")";
}

// Every rank votes; `refusing` ranks refuse with their reason. Every rank must get
// `want` (code and message), with and without host names.
int vote_body(int rank, int size, gpurdma_bootstrap_t boot, const std::vector<int> &refusing, bool give_reason)
{
    RankCheck check(rank);
    Agreement agreement(boot, rank, size);
    check.expect(agreement.rank() == rank && agreement.size() == size, "rank() and size() as constructed");
    bool refuse = false;
    for (int r : refusing) refuse = refuse || r == rank;
    // A refusal may carry any error code: the verdict is unsupported on every rank.
    const Status mine =
        !refuse ? Status::ok() : Status::error(GPURDMA_ERR_TRANSPORT, give_reason ? why_of(rank) : std::string());
    int lowest = -1;
    for (int r : refusing)
        if (lowest < 0 || r < lowest) lowest = r;
    const std::vector<std::string> hosts = hosts_of(size);
    for (bool named : {true, false}) {
        const Status got = named ? agreement.vote(mine, hosts) : agreement.vote(mine);
        const std::string how = named ? "vote with hosts" : "vote without hosts";
        if (lowest < 0) {
            check.expect(got.is_ok(), how + ": every rank voted ok, got \"" + got.message() + "\"");
            continue;
        }
        check.expect(got.code() == GPURDMA_ERR_UNSUPPORTED,
                     how + ": code " + std::to_string(got.code()) + ", want GPURDMA_ERR_UNSUPPORTED");
        std::string who = "rank " + std::to_string(lowest);
        if (named) who += " on host " + hosts[static_cast<size_t>(lowest)];
        check.equal(got.message(), who + (give_reason ? ": " + why_of(lowest) : " could not set up"), how);
    }
    return check.result();
}

void expect_all_passed(const RankResult &res, const std::string &what)
{
    EXPECT_FALSE(res.timed_out) << what << ": " << res.detail;
    EXPECT_EQ(res.failed, 0) << what << ": " << res.detail;
}

// Runs body on 1, 2, 3 and 4 forked ranks; every rank of every size must pass.
void on_1_to_4_ranks(const std::function<int(int, int, gpurdma_bootstrap_t)> &body)
{
    for (int size = 1; size <= 4; ++size)
        expect_all_passed(run_ranks(size, body, kTimeoutS), std::to_string(size) + " ranks");
}

}  // namespace

TEST(Agreement, ExchangeDeliversRecordsOfAnyLengthInRankOrder)
{
    // Empty, tiny, medium and large (200 KiB) records side by side, then the reverse,
    // so that each rank both pads and is padded.
    const size_t lengths[] = {0, 1, 3000, 200 * 1024};
    on_1_to_4_ranks([&](int rank, int n, gpurdma_bootstrap_t boot) {
        RankCheck check(rank);
        Agreement agreement(boot, rank, n);
        for (bool reverse : {false, true}) {
            auto length_of = [&](int r) { return lengths[reverse ? 3 - r : r]; };
            std::vector<std::string> all(7, "stale");  // whatever was there goes
            const Status st = agreement.exchange(record(rank, length_of(rank)), &all);
            if (!check.expect(st.is_ok(), "exchange: " + st.message())) continue;
            if (!check.expect(all.size() == static_cast<size_t>(n), "one record per rank")) continue;
            for (int r = 0; r < n; ++r) {
                const std::string &got = all[static_cast<size_t>(r)];
                check.expect(got.size() == length_of(r), "record of rank " + std::to_string(r) + " has " +
                                                             std::to_string(got.size()) + " bytes, want " +
                                                             std::to_string(length_of(r)));
                check.expect(got == record(r, length_of(r)), "record of rank " + std::to_string(r) + " intact");
            }
        }
        return check.result();
    });
}

TEST(Agreement, ExchangeOfEmptyRecordsGivesEmptyRecords)
{
    on_1_to_4_ranks([](int rank, int n, gpurdma_bootstrap_t boot) {
        RankCheck check(rank);
        Agreement agreement(boot, rank, n);
        std::vector<std::string> all(1, "stale");
        const Status st = agreement.exchange(std::string(), &all);
        check.expect(st.is_ok(), "exchange: " + st.message());
        check.expect(all == std::vector<std::string>(static_cast<size_t>(n)), "every record empty");
        // The next exchange still lines up (the empty one took the same rounds everywhere).
        const Status again = agreement.exchange(record(rank, 10), &all);
        check.expect(again.is_ok() && all.size() == static_cast<size_t>(n) && all.back() == record(n - 1, 10),
                     "exchange after the empty one");
        return check.result();
    });
}

TEST(Agreement, VoteAllOkIsOkEverywhere)
{
    on_1_to_4_ranks([](int rank, int n, gpurdma_bootstrap_t boot) { return vote_body(rank, n, boot, {}, true); });
}

TEST(Agreement, OneRefusalReachesEveryRankWithItsRankHostAndReason)
{
    for (int size = 1; size <= 4; ++size)
        for (int refuser = 0; refuser < size; ++refuser) {
            const RankResult res = run_ranks(
                size,
                [&](int rank, int n, gpurdma_bootstrap_t boot) { return vote_body(rank, n, boot, {refuser}, true); },
                kTimeoutS);
            expect_all_passed(res, std::to_string(size) + " ranks, rank " + std::to_string(refuser) + " refuses");
        }
}

TEST(Agreement, RefusalWithoutReasonStillNamesTheRank)
{
    for (int size = 1; size <= 4; ++size) {
        const RankResult res = run_ranks(
            size, [](int rank, int n, gpurdma_bootstrap_t boot) { return vote_body(rank, n, boot, {n - 1}, false); },
            kTimeoutS);
        expect_all_passed(res, std::to_string(size) + " ranks");
    }
}

TEST(Agreement, TwoRefusalsGiveTheLowestRanksReason)
{
    // Listed highest first: the verdict must not depend on who refused "first".
    const std::vector<std::vector<int>> cases = {{1, 0}, {2, 1}, {3, 1}, {3, 2}};
    for (int size = 2; size <= 4; ++size)
        for (const auto &refusing : cases) {
            if (refusing[0] >= size) continue;
            const RankResult res = run_ranks(
                size,
                [&](int rank, int n, gpurdma_bootstrap_t boot) { return vote_body(rank, n, boot, refusing, true); },
                kTimeoutS);
            expect_all_passed(res, std::to_string(size) + " ranks, ranks " + std::to_string(refusing[0]) + " and " +
                                       std::to_string(refusing[1]) + " refuse");
        }
}

namespace {

// The ranks that stay vote; `gone` leaves (exit 1) after `rounds_done` raw bootstrap
// rounds. The others' vote must fail with the exchange's error, within the timeout.
// The rank `gone` takes part in the first round of a vote (saying no, so that the
// others go on to the reasons' round) or of a long record's exchange (so that they go on
// to the data round), or in none, then dies: the others fail, none hangs.
enum class GoneAfter { Nothing, RefusingVote, LongRecordLengths };

void check_rank_gone(int size, int gone, GoneAfter after)
{
    const size_t long_record = Agreement::kInlineBytes + 100;
    const RankResult res = run_ranks(
        size,
        [&](int rank, int n, gpurdma_bootstrap_t boot) {
            if (rank == gone) {
                if (after == GoneAfter::RefusingVote) {
                    const uint32_t no = 0;
                    std::vector<uint32_t> votes(static_cast<size_t>(n));
                    boot.allgather(&no, votes.data(), sizeof no, boot.arg);
                } else if (after == GoneAfter::LongRecordLengths) {
                    std::string block(Agreement::kBlockBytes, '\0');
                    const uint64_t len = long_record;
                    std::memcpy(&block[0], &len, sizeof len);
                    std::string blocks(Agreement::kBlockBytes * static_cast<size_t>(n), '\0');
                    boot.allgather(block.data(), &blocks[0], Agreement::kBlockBytes, boot.arg);
                }
                return 1;
            }
            RankCheck check(rank);
            Agreement agreement(boot, rank, n);
            Status got;
            if (after == GoneAfter::LongRecordLengths) {
                std::vector<std::string> all;
                got = agreement.exchange(record(rank, long_record), &all);
            } else {
                got = agreement.vote(Status::ok(), hosts_of(n));
            }
            check.expect(got.code() == GPURDMA_ERR_TRANSPORT,
                         "with a rank gone: code " + std::to_string(got.code()) + ", want GPURDMA_ERR_TRANSPORT");
            check.equal(got.message(), "set-up exchange failed", "with a rank gone");
            return check.result();
        },
        kTimeoutS);
    const std::string what = std::to_string(size) + " ranks, rank " + std::to_string(gone) + " gone after " +
                             std::to_string(static_cast<int>(after));
    EXPECT_FALSE(res.timed_out) << what << ": " << res.detail;
    EXPECT_EQ(res.failed, 1) << what << ": " << res.detail;
    EXPECT_EQ(res.detail, "rank " + std::to_string(gone) + ": exit 1") << what;
}

}  // namespace

TEST(Agreement, RankGoneBeforeTheVoteFailsTheOthersWithoutHanging)
{
    for (int size = 2; size <= 4; ++size)
        for (int gone : {0, size - 1}) check_rank_gone(size, gone, GoneAfter::Nothing);
}

TEST(Agreement, RankGoneAfterVotingNoFailsTheOthersInTheReasonsRound)
{
    for (int size = 2; size <= 4; ++size) check_rank_gone(size, size - 1, GoneAfter::RefusingVote);
}

TEST(Agreement, RankGoneBetweenLengthAndDataRoundsFailsTheOthers)
{
    // A record longer than a block takes the exchange's second (data) round.
    for (int size = 2; size <= 4; ++size) check_rank_gone(size, size - 1, GoneAfter::LongRecordLengths);
}
