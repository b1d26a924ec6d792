// IEEE 754 binary16 <-> binary32 conversions in portable C++, for CPUs without
// conversion instructions (the baseline kernel variant). Widening is exact; narrowing
// rounds to nearest, ties to even, overflowing to infinity. A NaN keeps its sign and
// the top of its payload and comes out quiet, as x86's F16C instructions do, so every
// host variant gives the same bits (tests/unit/test_reduce_half.cpp checks all 65536
// halves and the rounding boundaries against the compiler's _Float16 and F16C).
#ifndef GPURDMA_REDUCE_HALF_H
#define GPURDMA_REDUCE_HALF_H

#include <cstdint>
#include <cstring>

namespace gpurdma::reduce {

inline float half_to_float(std::uint16_t h)
{
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t mant = h & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0x1f) {  // infinity, or a NaN made quiet
        bits = sign | 0x7f800000u | (mant != 0 ? 0x400000u | (mant << 13) : 0);
    } else if (exp != 0) {  // normal: rebias 15 -> 127
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else {  // subnormal mant * 2^-24: normalise into a float
        std::uint32_t e = 113;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            --e;
        }
        bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

inline std::uint16_t float_to_half(float f)
{
    std::uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t exp = (x >> 23) & 0xffu;
    std::uint32_t mant = x & 0x7fffffu;
    if (exp == 0xff) {  // infinity; a NaN keeps its top 9 payload bits and is quiet
        return static_cast<std::uint16_t>(sign | 0x7c00u | (mant != 0 ? 0x200u | (mant >> 13) : 0));
    }
    const int e = static_cast<int>(exp) - 112;  // the half's biased exponent
    if (e >= 0x1f) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 2^16
    std::uint32_t half;
    std::uint32_t rest;
    std::uint32_t tie;
    if (e > 0) {  // normal: drop 13 bits
        half = (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
        rest = mant & 0x1fffu;
        tie = 0x1000u;
    } else {  // subnormal or zero: the value in units of 2^-24, implicit bit included
        if (e < -10) return sign;  // below 2^-25, half the smallest subnormal
        mant |= 0x800000u;
        const int shift = 14 - e;  // 14..24
        half = mant >> shift;
        rest = mant & ((1u << shift) - 1);
        tie = 1u << (shift - 1);
    }
    // A carry out of the significand steps the exponent: to the smallest normal, or
    // from the largest finite value to infinity, both the correctly rounded result.
    if (rest > tie || (rest == tie && (half & 1u) != 0)) ++half;
    return static_cast<std::uint16_t>(sign | half);
}

// The conversion policy the portable element type uses (element_types.h: Half).
struct SoftHalf {
    static float widen(std::uint16_t h) { return half_to_float(h); }
    static std::uint16_t narrow(float f) { return float_to_half(f); }
};

// The compiler's _Float16 conversions (GCC >= 12 on x86-64): no target attribute, so
// they inline into every kernel variant and compile to F16C instructions in those
// built for it (kernel_loops.h); elsewhere they call the compiler's runtime.
#if defined(__FLT16_MANT_DIG__) && !defined(__CUDACC__)
#define GPURDMA_HAVE_FLOAT16 1
struct NativeHalf {
    static float widen(std::uint16_t h)
    {
        _Float16 x;
        std::memcpy(&x, &h, sizeof x);
        return static_cast<float>(x);
    }
    static std::uint16_t narrow(float f)
    {
        const auto x = static_cast<_Float16>(f);
        std::uint16_t h;
        std::memcpy(&h, &x, sizeof h);
        return h;
    }
};
#endif

}  // namespace gpurdma::reduce

#endif  // GPURDMA_REDUCE_HALF_H
