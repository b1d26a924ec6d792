// The launcher's host reference: inputs whose reduction is exact in any order, the
// comparison against the reference, and a digest of a result for the check that every
// rank holds the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "gpurdma/gpurdma.h"
#include "reduce/reduce_device.h"

namespace gpurdma::launcher {

inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

template <typename T> void small_int(void *p, uint64_t h) { T v = T(int(h % 17) - 8); std::memcpy(p, &v, sizeof v); }
template <typename T> void pair(void *p, uint64_t h)
{
    struct { T v; int i; } x{};
    x.v = T(int(h % 5));
    x.i = int((h >> 8) % 4);
    std::memcpy(p, &x, sizeof x);
}

inline void fill(gpurdma_dtype_t d, int rank, uint64_t seed, char *buf, size_t count)
{
    const size_t es = gpurdma_dtype_size(d);
    for (size_t i = 0; i < count; ++i) {
        const uint64_t h = mix(seed * 1000003 + uint64_t(rank) * 7919 + i);
        char *p = buf + i * es;
        std::memset(p, 0, es);
        switch (d) {
            case GPURDMA_FLOAT: small_int<float>(p, h); break;
            // Small integers, not random bits: a device computes one canonical NaN.
            case GPURDMA_FLOAT16: small_int<_Float16>(p, h); break;
            case GPURDMA_DOUBLE: small_int<double>(p, h); break;
            case GPURDMA_LONG_DOUBLE: small_int<long double>(p, h); break;
            case GPURDMA_FLOAT_COMPLEX: small_int<float>(p, h); small_int<float>(p + 4, h >> 16); break;
            case GPURDMA_DOUBLE_COMPLEX: small_int<double>(p, h); small_int<double>(p + 8, h >> 16); break;
            case GPURDMA_LONG_DOUBLE_COMPLEX:
                small_int<long double>(p, h);
                small_int<long double>(p + 16, h >> 16);
                break;
            case GPURDMA_FLOAT_INT: pair<float>(p, h); break;
            case GPURDMA_DOUBLE_INT: pair<double>(p, h); break;
            case GPURDMA_LONG_INT: pair<long>(p, h); break;
            case GPURDMA_2INT: pair<int>(p, h); break;
            case GPURDMA_SHORT_INT: pair<short>(p, h); break;
            case GPURDMA_LONG_DOUBLE_INT: pair<long double>(p, h); break;
            case GPURDMA_BOOL: p[0] = char(h % 3); break;  // 2 is true too
            default: std::memcpy(p, &h, es); break;        // integers, byte: any bits
        }
    }
}

// Against the host reference: integers, bools, bytes and pairs bit for bit;
// floating point by value, because the reference folds in rank order while the host
// algorithms between nodes group differently, and a complex product's zero may then
// come out as -0 instead of +0 (the inputs are small integers, so nothing else can
// differ). Identity across ranks is checked separately, bit for bit.
template <typename T>
bool same_values(const char *a, const char *b, size_t n)
{
    for (size_t k = 0; k < n; ++k) {
        T x, y;
        std::memcpy(&x, a + k * sizeof(T), sizeof(T));
        std::memcpy(&y, b + k * sizeof(T), sizeof(T));
        if (!(x == y)) return false;
    }
    return true;
}

inline bool same(gpurdma_dtype_t d, const char *a, const char *b, size_t es)
{
    switch (d) {
        case GPURDMA_FLOAT: return same_values<float>(a, b, 1);
        case GPURDMA_FLOAT16: return same_values<_Float16>(a, b, 1);
        case GPURDMA_DOUBLE: return same_values<double>(a, b, 1);
        case GPURDMA_LONG_DOUBLE: return same_values<long double>(a, b, 1);
        case GPURDMA_FLOAT_COMPLEX: return same_values<float>(a, b, 2);
        case GPURDMA_DOUBLE_COMPLEX: return same_values<double>(a, b, 2);
        case GPURDMA_LONG_DOUBLE_COMPLEX: return same_values<long double>(a, b, 2);
        case GPURDMA_LONG_DOUBLE_INT:
            return same_values<long double>(a, b, 1) && std::memcmp(a + 16, b + 16, sizeof(int)) == 0;
        default: return gpurdma::reduce::device::same_element(d, a, b, es);
    }
}

// FNV-1a of a result, over the bytes that carry values (no padding), for the check
// that every rank holds the same bits.
inline uint64_t digest(gpurdma_dtype_t d, const char *p, size_t count)
{
    const size_t es = gpurdma_dtype_size(d);
    size_t value = es, index = 0;  // bytes [0, value) and [index, index + 4) when index > 0
    switch (d) {
        case GPURDMA_LONG_DOUBLE: case GPURDMA_LONG_DOUBLE_COMPLEX: value = 10; break;  // 2nd part of complex skipped
        case GPURDMA_LONG_DOUBLE_INT: value = 10; index = 16; break;
        case GPURDMA_SHORT_INT: value = 2; index = 4; break;
        case GPURDMA_DOUBLE_INT: case GPURDMA_LONG_INT: value = 8; index = 8; break;
        default: break;
    }
    uint64_t h = 1469598103934665603ULL;
    auto eat = [&h](const char *q, size_t n) {
        for (size_t k = 0; k < n; ++k) h = (h ^ static_cast<unsigned char>(q[k])) * 1099511628211ULL;
    };
    for (size_t i = 0; i < count; ++i) {
        eat(p + i * es, value);
        if (index) eat(p + i * es + index, sizeof(int));
    }
    return h;
}

}  // namespace gpurdma::launcher
