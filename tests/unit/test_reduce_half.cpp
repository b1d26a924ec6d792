// Half-precision conversions (src/reduce/half.h) against the compiler's _Float16
// (libgcc's soft-float) and, where the CPU has it, F16C: every one of the 65536
// halves widened, and floats around every rounding boundary, every NaN class and
// infinity narrowed, bit for bit. Then gpurdma_reduce_local on GPURDMA_FLOAT16 with
// values whose half results are known.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "gpurdma/gpurdma.h"
#include "reduce/half.h"

namespace {

using gpurdma::reduce::float_to_half;
using gpurdma::reduce::half_to_float;

std::uint32_t bits_of(float f)
{
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float float_of(std::uint32_t u)
{
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// Floats that test narrowing: each finite half, the midpoints to its neighbours and
// one float either side of them, the overflow threshold, every NaN payload class,
// random bits.
std::vector<std::uint32_t> narrowing_inputs()
{
    std::vector<std::uint32_t> v;
    for (std::uint32_t h = 0; h < 0x7c00; ++h) {
        const std::uint32_t x = bits_of(half_to_float(static_cast<std::uint16_t>(h)));
        const std::uint32_t next = bits_of(half_to_float(static_cast<std::uint16_t>(h + 1)));
        const std::uint32_t mid = bits_of((float_of(x) + float_of(next)) / 2);  // exact
        for (std::uint32_t s : {0u, 0x80000000u}) {
            for (std::uint32_t u : {x, x + 1, x - 1, mid, mid - 1, mid + 1}) v.push_back(u | s);
        }
    }
    for (std::uint32_t u :
         {0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0x47800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
          0x7f801fffu, 0x7f802000u, 0x7fa00000u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu, 0x00000001u, 0x007fffffu,
          0x00800000u, 0x33000000u, 0x33000001u, 0x32ffffffu, 0x337fffffu, 0x387fc000u, 0x38800000u}) {
        v.push_back(u);
        v.push_back(u | 0x80000000u);
    }
    std::mt19937 rng(16);
    for (int i = 0; i < 200000; ++i) v.push_back(rng());
    return v;
}

#if defined(__FLT16_MANT_DIG__)
TEST(ReduceHalf, WideningMatchesTheCompilersForAllHalves)
{
    for (std::uint32_t h = 0; h <= 0xffff; ++h) {
        _Float16 x;
        const auto bits = static_cast<std::uint16_t>(h);
        std::memcpy(&x, &bits, sizeof x);
        ASSERT_EQ(bits_of(half_to_float(bits)), bits_of(static_cast<float>(x))) << std::hex << h;
    }
}

TEST(ReduceHalf, NarrowingMatchesTheCompilersAtEveryBoundary)
{
    for (std::uint32_t u : narrowing_inputs()) {
        const auto x = static_cast<_Float16>(float_of(u));
        std::uint16_t want;
        std::memcpy(&want, &x, sizeof want);
        ASSERT_EQ(float_to_half(float_of(u)), want) << std::hex << u;
    }
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("f16c"))) float f16c_widen(std::uint16_t h)
{
    return _cvtsh_ss(h);
}
__attribute__((target("f16c"))) std::uint16_t f16c_narrow(float f)
{
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

TEST(ReduceHalf, MatchesF16c)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
    for (std::uint32_t h = 0; h <= 0xffff; ++h) {
        const auto bits = static_cast<std::uint16_t>(h);
        ASSERT_EQ(bits_of(half_to_float(bits)), bits_of(f16c_widen(bits))) << std::hex << h;
    }
    for (std::uint32_t u : narrowing_inputs()) {
        ASSERT_EQ(float_to_half(float_of(u)), f16c_narrow(float_of(u))) << std::hex << u;
    }
}
#endif

TEST(ReduceHalf, KnownValues)
{
    EXPECT_EQ(float_to_half(1.0f), 0x3c00);
    EXPECT_EQ(float_to_half(-2.0f), 0xc000);
    EXPECT_EQ(float_to_half(65504.0f), 0x7bff);  // largest finite
    EXPECT_EQ(float_to_half(65519.996f), 0x7bff);  // just below the overflow threshold
    EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // tie: to even, which is infinity
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
    EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie: to even (zero)
    EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
    EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: to even (down)
    EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: to even (up)
    EXPECT_EQ(float_to_half(-0.0f), 0x8000);
    EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
    EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
    EXPECT_EQ(float_to_half(float_of(0x7f800001u)), 0x7e00);  // signalling NaN: quiet
    EXPECT_EQ(float_to_half(float_of(0xffc02000u)), 0xfe01);  // sign and top payload kept
    EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
    EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(bits_of(half_to_float(0x7c01)), 0x7fc02000u);  // NaN: quiet, payload kept
    EXPECT_EQ(bits_of(half_to_float(0xfc00)), 0xff800000u);
}

// Through the public entry: each step computed in float and rounded to half.
TEST(ReduceHalf, ReduceLocalRoundsToHalfAtEveryStep)
{
    ASSERT_EQ(gpurdma_dtype_size(GPURDMA_FLOAT16), 2u);
    for (gpurdma_op_t op : {GPURDMA_SUM, GPURDMA_PROD, GPURDMA_MIN, GPURDMA_MAX}) {
        EXPECT_TRUE(gpurdma_op_supported(op, GPURDMA_FLOAT16)) << gpurdma_op_name(op);
    }
    EXPECT_FALSE(gpurdma_op_supported(GPURDMA_BAND, GPURDMA_FLOAT16));
    EXPECT_STREQ(gpurdma_dtype_name(GPURDMA_FLOAT16), "float16");
    const std::uint16_t one = 0x3c00, ulp = 0x1400;  // 1 and 2^-10 (one ulp of 1)
    const std::uint16_t half_ulp = 0x1000;  // 2^-11
    std::uint16_t a[] = {one, one, 0x7bff, 0x7bff, 0x8000, 0x7e00, 0x3e00};
    std::uint16_t b[] = {half_ulp, ulp, 0x7bff, 0x3c01, 0x0000, 0x3c00, 0x3e00};
    std::uint16_t sum[7], prod[7], mn[7], mx[7];
    ASSERT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_FLOAT16, sum, a, b, 7), GPURDMA_OK);
    ASSERT_EQ(gpurdma_reduce_local(GPURDMA_PROD, GPURDMA_FLOAT16, prod, a, b, 7), GPURDMA_OK);
    ASSERT_EQ(gpurdma_reduce_local(GPURDMA_MIN, GPURDMA_FLOAT16, mn, a, b, 7), GPURDMA_OK);
    ASSERT_EQ(gpurdma_reduce_local(GPURDMA_MAX, GPURDMA_FLOAT16, mx, a, b, 7), GPURDMA_OK);
    EXPECT_EQ(sum[0], one);  // 1 + 2^-11: a tie, to even
    EXPECT_EQ(sum[1], 0x3c01);  // 1 + 2^-10
    EXPECT_EQ(sum[2], 0x7c00);  // 65504 + 65504 overflows to infinity
    EXPECT_EQ(prod[3], 0x7c00);  // 65504 * (1 + 2^-10) = 65568: infinity
    EXPECT_EQ(sum[4], 0x0000);  // -0 + +0 = +0
    EXPECT_EQ(prod[4], 0x8000);  // -0 * +0 = -0
    EXPECT_EQ(sum[5] & 0x7e00, 0x7e00);  // NaN in, NaN out
    EXPECT_EQ(prod[6], 0x4080);  // 1.5 * 1.5 = 2.25
    EXPECT_EQ(mn[4], 0x8000);  // MIN(-0, +0) = -0
    EXPECT_EQ(mx[4], 0x0000);  // MAX(-0, +0) = +0
    EXPECT_EQ(mn[5], 0x7e00);  // a NaN operand wins, bits unchanged
    EXPECT_EQ(mx[5], 0x7e00);
    EXPECT_EQ(mn[3], 0x3c01);
    EXPECT_EQ(mx[3], 0x7bff);
}

}  // namespace
