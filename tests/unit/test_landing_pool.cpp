// LandingPool (transport/landing_pool.h): communicators' UCX landing slices come from
// regions registered once per process; a freed slice is reused (its control part
// cleared, the rest untouched), one a peer may still write into never is, and a new
// region is made only when no free range fits.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "transport/landing_pool.h"
#include "transport/ucx_context.h"

using gpurdma::Status;
using gpurdma::transport::LandingPool;
using gpurdma::transport::LandingSlice;
using gpurdma::transport::UcxContext;

namespace {

std::unique_ptr<UcxContext> start_ucx()
{
    std::unique_ptr<UcxContext> ucx;
    const Status st = UcxContext::create("", "", {}, &ucx);
    return st.is_ok() ? std::move(ucx) : nullptr;
}

}  // namespace

TEST(LandingPool, SlicesShareOneRegistrationAndAreReused)
{
    auto ucx = start_ucx();
    if (!ucx) GTEST_SKIP() << "UCX does not start here";
    LandingPool &pool = ucx->landing();
    constexpr size_t kSlice = (2 << 20) + 4096, kControl = 4096;
    std::unique_ptr<LandingSlice> a, b, c;
    ASSERT_TRUE(pool.take(kSlice, kControl, &a).is_ok());
    ASSERT_TRUE(pool.take(kSlice, kControl, &b).is_ok());
    EXPECT_EQ(pool.regions(), 1u) << "two communicators' slices in one registered region";
    EXPECT_EQ(a->region_base(), b->region_base());
    EXPECT_EQ(a->packed_key(), b->packed_key()) << "one key for both: a peer unpacks it once";
    EXPECT_NE(a->base(), b->base());
    std::memset(a->base(), 0x5a, kSlice);
    char *const was = a->base();
    a.reset();
    ASSERT_TRUE(pool.take(kSlice, kControl, &c).is_ok());
    EXPECT_EQ(c->base(), was) << "the freed slice is handed out again";
    bool control_zero = true;
    for (size_t i = 0; i < kControl; ++i) control_zero = control_zero && c->base()[i] == 0;
    EXPECT_TRUE(control_zero) << "flags and credits start at zero";
    EXPECT_EQ(static_cast<unsigned char>(c->base()[kSlice - 1]), 0x5a) << "data slots are not touched";

    // A slice a peer may still write into is never handed out again.
    c->keep_forever();
    c.reset();
    std::unique_ptr<LandingSlice> d;
    ASSERT_TRUE(pool.take(kSlice, kControl, &d).is_ok());
    EXPECT_NE(d->base(), was);
}

TEST(LandingPool, LargeSliceGetsARegionOfItsOwn)
{
    auto ucx = start_ucx();
    if (!ucx) GTEST_SKIP() << "UCX does not start here";
    LandingPool &pool = ucx->landing();
    std::unique_ptr<LandingSlice> small, large;
    ASSERT_TRUE(pool.take(4096, 64, &small).is_ok());
    ASSERT_TRUE(pool.take(LandingPool::kRegionBytes + 4096, 64, &large).is_ok());
    EXPECT_EQ(pool.regions(), 2u);
    EXPECT_GE(large->bytes(), LandingPool::kRegionBytes + 4096);
    const size_t free_before = pool.bytes_free();
    large.reset();
    small.reset();
    EXPECT_EQ(pool.bytes_free(), free_before + LandingPool::kRegionBytes + 8192) << "both ranges back, coalesced";
}
