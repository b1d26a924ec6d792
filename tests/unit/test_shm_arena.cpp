// ShmArenas (transport/shm_arena.h): a communicator's node memory is a slice of its
// first rank's sparse file, which a node peer maps through /proc/<pid>/fd; a slice
// costs no page until it is touched, is reused only once every holder has let go,
// starts with its counter ranges zero, and a full arena declines by name.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "support/fork_ranks.h"
#include "support/rank_check.h"
#include "transport/shm_arena.h"

using gpurdma::Status;
using gpurdma::testing::RankCheck;
using gpurdma::transport::ShmArenas;
using gpurdma::transport::ShmSlice;
using gpurdma::transport::SliceAddress;

namespace {

constexpr size_t kBytes = 64 * 1024;
static_assert(std::is_trivially_copyable_v<SliceAddress>, "allgathered as bytes");

// Pages of [p, p + bytes) that are in memory (mincore on the shared file's pages).
size_t resident_pages(const char *p, size_t bytes)
{
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const auto start = reinterpret_cast<uintptr_t>(p) / page * page;
    const size_t len = reinterpret_cast<uintptr_t>(p) + bytes - start;
    std::vector<unsigned char> in((len + page - 1) / page);
    if (mincore(reinterpret_cast<void *>(start), len, in.data()) != 0) return SIZE_MAX;
    size_t n = 0;
    for (unsigned char c : in) n += c & 1;
    return n;
}

// Both ranks learn the owner's address (rank 0's); the peer's entry is ignored.
SliceAddress share(const SliceAddress &mine, gpurdma_bootstrap_t boot)
{
    SliceAddress all[2];
    boot.allgather(&mine, all, sizeof mine, boot.arg);
    return all[0];
}

void barrier(gpurdma_bootstrap_t boot)
{
    char in = 0, out[2];
    boot.allgather(&in, out, 1, boot.arg);
}

int run_rank(int rank, gpurdma_bootstrap_t boot)
{
    RankCheck check(rank);
    ShmArenas arenas(rank == 0 ? size_t(16) << 20 : 0);
    const std::vector<std::pair<size_t, size_t>> cleared{{0, 4096}};
    std::unique_ptr<ShmSlice> slice;
    SliceAddress first;
    if (rank == 0) {
        const Status st = arenas.take(kBytes, 2, cleared, &slice, &first);
        if (!check.expect(st.is_ok(), "take: " + st.message())) return check.result();
        check.expect(resident_pages(slice->base(), kBytes) == 0, "a fresh slice uses no page");
    }
    first = share(first, boot);
    if (rank == 1) {
        const Status st = arenas.attach(first, &slice);
        if (!check.expect(st.is_ok(), "attach: " + st.message())) return check.result();
        std::memset(slice->base(), 0xab, kBytes);
        // A peer that names another file (another nonce) is refused, not mapped.
        SliceAddress wrong = first;
        wrong.nonce ^= 2;
        std::unique_ptr<ShmSlice> none;
        const Status refused = arenas.attach(wrong, &none);
        check.expect(!refused.is_ok() && !none, "another nonce is refused: " + refused.message());
    }
    barrier(boot);
    check.expect(static_cast<unsigned char>(slice->base()[kBytes - 1]) == 0xab, "the peer's bytes are seen");
    check.equal(slice->name(), first.name(), "the same name on both ranks");

    // The owner lets go first: the slice stays the peer's until it lets go too.
    SliceAddress second;
    std::unique_ptr<ShmSlice> other;
    if (rank == 0) {
        slice.reset();
        const Status st = arenas.take(kBytes, 1, cleared, &other, &second);
        check.expect(st.is_ok() && second.offset != first.offset, "a slice still held is not handed out again");
    }
    barrier(boot);
    if (rank == 1) slice.reset();
    barrier(boot);
    if (rank == 0) {
        SliceAddress third;
        std::unique_ptr<ShmSlice> again;
        const Status st = arenas.take(kBytes, 1, cleared, &again, &third);
        if (!check.expect(st.is_ok(), "take again: " + st.message())) return check.result();
        check.expect(third.offset == first.offset, "the released slice is reused");
        check.expect(third.serial != first.serial && third.name() != first.name(), "under a new name");
        bool zero = true;
        for (size_t i = 0; i < 4096; ++i) zero = zero && again->base()[i] == 0;
        check.expect(zero, "its cleared range starts zero");
        // Only what must start zero is written: the rest keeps its (unread) bytes.
        check.expect(static_cast<unsigned char>(again->base()[kBytes - 1]) == 0xab, "the rest is not touched");
    }
    return check.result();
}

}  // namespace

TEST(ShmArena, PeersMapTheOwnersSliceWhichIsReusedWhenAllLetGo)
{
    const auto res = gpurdma::testing::run_ranks(
        2, [](int rank, int, gpurdma_bootstrap_t boot) { return run_rank(rank, boot); }, 60);
    EXPECT_FALSE(res.timed_out) << res.detail;
    EXPECT_EQ(res.failed, 0) << res.detail;
}

TEST(ShmArena, FullDeclinesNamingTheParameter)
{
    ShmArenas arenas(size_t(256) << 10);
    std::unique_ptr<ShmSlice> a, b;
    SliceAddress where;
    ASSERT_TRUE(arenas.take(200 << 10, 1, {}, &a, &where).is_ok());
    const Status full = arenas.take(200 << 10, 1, {}, &b, &where);
    EXPECT_TRUE(full.is_unsupported()) << full.message();
    EXPECT_NE(full.message().find("coll_gpurdma_shm_arena_size"), std::string::npos) << full.message();
    EXPECT_FALSE(b);
    a.reset();
    EXPECT_TRUE(arenas.take(200 << 10, 1, {}, &b, &where).is_ok()) << "freed, it fits again";
    EXPECT_EQ(arenas.bytes_in_use(), size_t(204800 + 4096)) << "the slice and its holders' count, whole pages";
}

TEST(ShmArena, DisabledTakesNothing)
{
    ShmArenas arenas(0);
    std::unique_ptr<ShmSlice> a;
    SliceAddress where;
    EXPECT_FALSE(arenas.enabled());
    EXPECT_FALSE(arenas.take(4096, 1, {}, &a, &where).is_ok());
    EXPECT_FALSE(a);
}
