// Local reduction (gpurdma_reduce_local) against references written independently
// of src/reduce/functors.h: modular arithmetic on uint64 for integers, <cmath> for
// floating-point special cases, the MPI standard's op table spelled out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "gpurdma/gpurdma.h"
#include "reduce/reduce.h"

namespace {

// The C layouts the pair dtypes name, spelled as in the MPI standard.
struct FloatInt {
    float v;
    int i;
};
struct DoubleInt {
    double v;
    int i;
};
struct LongInt {
    long v;
    int i;
};
struct TwoInt {
    int v;
    int i;
};
struct ShortInt {
    short v;
    int i;
};
struct LongDoubleInt {
    long double v;
    int i;
};

constexpr gpurdma_op_t kAllOps[] = {
    GPURDMA_SUM,  GPURDMA_PROD, GPURDMA_MIN, GPURDMA_MAX,  GPURDMA_LAND,   GPURDMA_LOR,
    GPURDMA_LXOR, GPURDMA_BAND, GPURDMA_BOR, GPURDMA_BXOR, GPURDMA_MAXLOC, GPURDMA_MINLOC,
};

std::mt19937_64 &rng()
{
    static std::mt19937_64 engine(20240611);
    return engine;
}

template <typename T> std::string hex(const T &v)
{
    // Long double carries 6 bytes of padding; show only the meaningful bytes.
    const size_t n = std::is_same_v<T, long double> ? 10 : sizeof(T);
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    std::string s;
    char buf[4];
    for (size_t k = 0; k < n; ++k) {
        std::snprintf(buf, sizeof buf, "%02x", bytes[k]);
        s += buf;
    }
    return s;
}

template <typename T> T reduce_one(gpurdma_op_t op, gpurdma_dtype_t dtype, T a, T b)
{
    T d{};
    EXPECT_EQ(gpurdma_reduce_local(op, dtype, &d, &a, &b, 1), GPURDMA_OK);
    return d;
}

// Runs op in every aliasing arrangement and for counts that hit vector tails; checks
// each element against ref and that nothing past count, nor a read-only input, changes.
// std::function keeps check to one instantiation per element type (compile time);
// NoDeduce makes T come from the vectors alone, so lambdas convert.
template <typename T> struct NoDeduce {
    using type = T;
};
template <typename T> using RefFn = typename NoDeduce<std::function<T(T, T)>>::type;
template <typename T> using EqFn = typename NoDeduce<std::function<bool(T, T)>>::type;

template <typename T>
void check(gpurdma_op_t op, gpurdma_dtype_t dtype, const std::vector<T> &a, const std::vector<T> &b,
           const RefFn<T> &ref, const EqFn<T> &eq)
{
    SCOPED_TRACE(std::string(gpurdma_op_name(op)) + " on " + gpurdma_dtype_name(dtype));
    ASSERT_EQ(a.size(), b.size());
    ASSERT_TRUE(gpurdma_op_supported(op, dtype));
    ASSERT_EQ(gpurdma_dtype_size(dtype), sizeof(T));

    enum Mode { kDistinct, kIntoA, kIntoB, kSameInputs, kAllSame, kModes };
    const char *mode_names[] = {"dst distinct", "dst == a", "dst == b", "a == b", "dst == a == b"};
    const size_t counts[] = {0, 1, 2, 3, 7, 16, 17, 31, 1001, a.size()};
    for (size_t n : counts) {
        if (n > a.size()) continue;
        for (int mode = 0; mode < kModes; ++mode) {
            SCOPED_TRACE(std::string(mode_names[mode]) + ", count " + std::to_string(n));
            // One guard element past n, filled with a byte pattern.
            std::vector<T> x(n + 1), y(n + 1), d(n + 1);
            for (auto *buf : {&x, &y, &d}) {
                std::memset(static_cast<void *>(buf->data()), 0xA5, buf->size() * sizeof(T));
            }
            std::copy(a.begin(), a.begin() + n, x.begin());
            std::copy(b.begin(), b.begin() + n, y.begin());
            // Snapshots as bytes: copying a T need not preserve its padding.
            const auto bytes_of = [n](const std::vector<T> &v) {
                std::vector<unsigned char> out((n + 1) * sizeof(T));
                std::memcpy(out.data(), static_cast<const void *>(v.data()), out.size());
                return out;
            };
            const auto x0 = bytes_of(x), y0 = bytes_of(y), d0 = bytes_of(d);

            T *dst = nullptr;
            const T *in_a = x.data();
            const T *in_b = y.data();
            const std::vector<T> *second = &b;
            switch (mode) {
                case kDistinct: dst = d.data(); break;
                case kIntoA: dst = x.data(); break;
                case kIntoB: dst = y.data(); break;
                case kSameInputs:
                    dst = d.data();
                    in_b = x.data();
                    second = &a;
                    break;
                case kAllSame:
                    dst = x.data();
                    in_b = x.data();
                    second = &a;
                    break;
            }
            ASSERT_EQ(gpurdma_reduce_local(op, dtype, dst, in_a, in_b, n), GPURDMA_OK);

            size_t bad = 0;
            for (size_t i = 0; i < n; ++i) {
                const T want = ref(a[i], (*second)[i]);
                if (!eq(dst[i], want) && bad++ < 3) {
                    ADD_FAILURE() << "element " << i << ": a=" << hex(a[i]) << " b=" << hex((*second)[i]) << " got "
                                  << hex(dst[i]) << " want " << hex(want);
                }
            }
            EXPECT_EQ(bad, 0u);
            for (const auto *buf : {&x, &y, &d}) {
                EXPECT_EQ(std::memcmp(&(*buf)[n], &d0[n * sizeof(T)], sizeof(T)), 0) << "guard overwritten";
            }
            if (dst != x.data()) {
                EXPECT_EQ(std::memcmp(x.data(), x0.data(), n * sizeof(T)), 0) << "a modified";
            }
            if (dst != y.data()) {
                EXPECT_EQ(std::memcmp(y.data(), y0.data(), n * sizeof(T)), 0) << "b modified";
            }
            if (dst != d.data()) {
                EXPECT_EQ(std::memcmp(d.data(), d0.data(), n * sizeof(T)), 0);
            }
        }
    }
}

// ---------------------------------------------------------------- integers

template <typename T> uint64_t widen(T v)
{  // sign-extends, then reads the bits as unsigned
    if constexpr (std::is_signed_v<T>) {
        return static_cast<uint64_t>(static_cast<int64_t>(v));
    } else {
        return static_cast<uint64_t>(v);
    }
}

template <typename T> T narrow(uint64_t v)
{  // keeps the low bits, reading them as two's complement
    constexpr int bits = 8 * sizeof(T);
    uint64_t mask = ~uint64_t{0};
    if constexpr (bits < 64) mask = (uint64_t{1} << bits) - 1;
    v &= mask;
    if constexpr (std::is_signed_v<T>) {
        if (v >> (bits - 1)) return static_cast<T>(-static_cast<int64_t>(mask - v) - 1);
    }
    return static_cast<T>(v);
}

template <typename T> T ref_integer(gpurdma_op_t op, T a, T b)
{
    const uint64_t ua = widen(a), ub = widen(b);
    switch (op) {
        case GPURDMA_SUM: return narrow<T>(ua + ub);
        case GPURDMA_PROD: return narrow<T>(ua * ub);
        case GPURDMA_MIN: return std::min(a, b);
        case GPURDMA_MAX: return std::max(a, b);
        case GPURDMA_LAND: return (a != 0 && b != 0) ? T(1) : T(0);
        case GPURDMA_LOR: return (a != 0 || b != 0) ? T(1) : T(0);
        case GPURDMA_LXOR: return ((a == 0) != (b == 0)) ? T(1) : T(0);
        case GPURDMA_BAND: return narrow<T>(ua & ub);
        case GPURDMA_BOR: return narrow<T>(ua | ub);
        case GPURDMA_BXOR: return narrow<T>(ua ^ ub);
        default: ADD_FAILURE() << "no integer reference for op " << op; return T(0);
    }
}

// Every pair of edge values, then random values over the whole range.
template <typename T> void integer_inputs(std::vector<T> &a, std::vector<T> &b)
{
    using L = std::numeric_limits<T>;
    const T edges[] = {T(0),
                       T(1),
                       T(2),
                       narrow<T>(~uint64_t{0}),
                       L::min(),
                       L::max(),
                       T(L::min() + 1),
                       T(L::max() - 1),
                       T(100),
                       narrow<T>(200),
                       narrow<T>(0x5555555555555555ull)};
    for (T x : edges) {
        for (T y : edges) {
            a.push_back(x);
            b.push_back(y);
        }
    }
    while (a.size() < 1500) {
        a.push_back(narrow<T>(rng()()));
        b.push_back(narrow<T>(rng()()));
    }
}

template <typename T> void check_integer_type(gpurdma_dtype_t dtype)
{
    std::vector<T> a, b;
    integer_inputs(a, b);
    const gpurdma_op_t ops[] = {GPURDMA_SUM, GPURDMA_PROD, GPURDMA_MIN,  GPURDMA_MAX, GPURDMA_LAND,
                                GPURDMA_LOR, GPURDMA_LXOR, GPURDMA_BAND, GPURDMA_BOR, GPURDMA_BXOR};
    for (gpurdma_op_t op : ops) {
        check(
            op, dtype, a, b, [op](T x, T y) { return ref_integer(op, x, y); }, [](T x, T y) { return x == y; });
    }
}

TEST(ReduceInteger, Int8)
{
    check_integer_type<int8_t>(GPURDMA_INT8);
}
TEST(ReduceInteger, Uint8)
{
    check_integer_type<uint8_t>(GPURDMA_UINT8);
}
TEST(ReduceInteger, Int16)
{
    check_integer_type<int16_t>(GPURDMA_INT16);
}
TEST(ReduceInteger, Uint16)
{
    check_integer_type<uint16_t>(GPURDMA_UINT16);
}
TEST(ReduceInteger, Int32)
{
    check_integer_type<int32_t>(GPURDMA_INT32);
}
TEST(ReduceInteger, Uint32)
{
    check_integer_type<uint32_t>(GPURDMA_UINT32);
}
TEST(ReduceInteger, Int64)
{
    check_integer_type<int64_t>(GPURDMA_INT64);
}
TEST(ReduceInteger, Uint64)
{
    check_integer_type<uint64_t>(GPURDMA_UINT64);
}

TEST(ReduceInteger, SumWrapsAtLimits)
{
    EXPECT_EQ(reduce_one<int8_t>(GPURDMA_SUM, GPURDMA_INT8, 127, 1), -128);
    EXPECT_EQ(reduce_one<int8_t>(GPURDMA_SUM, GPURDMA_INT8, -128, -1), 127);
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_SUM, GPURDMA_UINT8, 200, 100), 44);
    EXPECT_EQ(reduce_one<int16_t>(GPURDMA_SUM, GPURDMA_INT16, 32767, 1), -32768);
    EXPECT_EQ(reduce_one<uint16_t>(GPURDMA_SUM, GPURDMA_UINT16, 65535, 2), 1);
    EXPECT_EQ(reduce_one<int32_t>(GPURDMA_SUM, GPURDMA_INT32, INT32_MAX, 1), INT32_MIN);
    EXPECT_EQ(reduce_one<uint32_t>(GPURDMA_SUM, GPURDMA_UINT32, UINT32_MAX, 1), 0u);
    EXPECT_EQ(reduce_one<int64_t>(GPURDMA_SUM, GPURDMA_INT64, INT64_MAX, 1), INT64_MIN);
    EXPECT_EQ(reduce_one<uint64_t>(GPURDMA_SUM, GPURDMA_UINT64, UINT64_MAX, 3), 2u);
}

TEST(ReduceInteger, ProdWrapsAtLimits)
{
    EXPECT_EQ(reduce_one<int8_t>(GPURDMA_PROD, GPURDMA_INT8, 64, 2), -128);
    EXPECT_EQ(reduce_one<int8_t>(GPURDMA_PROD, GPURDMA_INT8, -128, -1), -128);
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_PROD, GPURDMA_UINT8, 16, 17), 16);
    // 65535 * 65535 overflows int if uint16 is promoted naively.
    EXPECT_EQ(reduce_one<uint16_t>(GPURDMA_PROD, GPURDMA_UINT16, 65535, 65535), 1);
    EXPECT_EQ(reduce_one<int32_t>(GPURDMA_PROD, GPURDMA_INT32, INT32_MIN, -1), INT32_MIN);
    EXPECT_EQ(reduce_one<int64_t>(GPURDMA_PROD, GPURDMA_INT64, INT64_MAX, 2), -2);
    EXPECT_EQ(reduce_one<int64_t>(GPURDMA_PROD, GPURDMA_INT64, int64_t{1} << 62, 4), 0);
    // (2^32 + 1)^2 = 2^64 + 2^33 + 1 -> 2^33 + 1
    EXPECT_EQ(reduce_one<int64_t>(GPURDMA_PROD, GPURDMA_INT64, (int64_t{1} << 32) + 1, (int64_t{1} << 32) + 1),
              (int64_t{1} << 33) + 1);
    EXPECT_EQ(reduce_one<int64_t>(GPURDMA_PROD, GPURDMA_INT64, INT64_MIN, -1), INT64_MIN);
    EXPECT_EQ(reduce_one<uint64_t>(GPURDMA_PROD, GPURDMA_UINT64, UINT64_MAX, UINT64_MAX), 1u);
}

TEST(ReduceInteger, LogicalTreatsNonzeroAsTrue)
{
    EXPECT_EQ(reduce_one<int32_t>(GPURDMA_LAND, GPURDMA_INT32, 2, -1), 1);
    EXPECT_EQ(reduce_one<int32_t>(GPURDMA_LOR, GPURDMA_INT32, 2, -1), 1);
    EXPECT_EQ(reduce_one<int32_t>(GPURDMA_LXOR, GPURDMA_INT32, 2, -1), 0);
    EXPECT_EQ(reduce_one<int32_t>(GPURDMA_LAND, GPURDMA_INT32, 0, -1), 0);
    EXPECT_EQ(reduce_one<int32_t>(GPURDMA_LOR, GPURDMA_INT32, 0, -1), 1);
    EXPECT_EQ(reduce_one<int32_t>(GPURDMA_LXOR, GPURDMA_INT32, 2, 0), 1);
    EXPECT_EQ(reduce_one<int32_t>(GPURDMA_LOR, GPURDMA_INT32, 0, 0), 0);
    EXPECT_EQ(reduce_one<int8_t>(GPURDMA_LAND, GPURDMA_INT8, -128, 64), 1);
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_LXOR, GPURDMA_UINT8, 255, 2), 0);
    EXPECT_EQ(reduce_one<int16_t>(GPURDMA_LAND, GPURDMA_INT16, 256, 512), 1);  // no low byte set
    EXPECT_EQ(reduce_one<uint64_t>(GPURDMA_LAND, GPURDMA_UINT64, uint64_t{1} << 63, 2), 1u);
    EXPECT_EQ(reduce_one<int64_t>(GPURDMA_LXOR, GPURDMA_INT64, int64_t{1} << 40, 0), 1);
}

// ---------------------------------------------------------------- floating point

template <typename T> bool same_float(T x, T y)
{  // equal including the sign of zero; any NaN matches NaN
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
    return x == y && std::signbit(x) == std::signbit(y);
}

template <typename T> T ref_min(T a, T b)
{
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == 0 && b == 0) return (std::signbit(a) || std::signbit(b)) ? -T(0) : T(0);
    return std::min(a, b);
}

template <typename T> T ref_max(T a, T b)
{
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == 0 && b == 0) return (std::signbit(a) && std::signbit(b)) ? -T(0) : T(0);
    return std::max(a, b);
}

template <typename T> T nan_with_payload(int k)
{
    const char *tag = k == 1 ? "1" : "2";
    if constexpr (std::is_same_v<T, float>) return std::nanf(tag);
    else if constexpr (std::is_same_v<T, double>) return std::nan(tag);
    else return std::nanl(tag);
}

template <typename T> void float_inputs(std::vector<T> &a, std::vector<T> &b)
{
    using L = std::numeric_limits<T>;
    const T edges[] = {T(0),
                       -T(0),
                       T(1),
                       T(-1),
                       T(0.5),
                       T(3),
                       T(-7),
                       L::infinity(),
                       -L::infinity(),
                       nan_with_payload<T>(1),
                       nan_with_payload<T>(2),
                       L::max(),
                       L::lowest(),
                       L::min(),
                       L::denorm_min(),
                       -L::denorm_min(),
                       L::epsilon()};
    for (T x : edges) {
        for (T y : edges) {
            a.push_back(x);
            b.push_back(y);
        }
    }
    std::uniform_real_distribution<double> wide(-1e6, 1e6);
    std::uniform_int_distribution<int> small(-16, 16);
    while (a.size() < 1500) {
        const bool exact = a.size() % 2 == 0;
        a.push_back(exact ? T(small(rng())) : T(wide(rng())));
        b.push_back(exact ? T(small(rng())) : T(wide(rng())));
    }
}

template <typename T> void check_float_type(gpurdma_dtype_t dtype)
{
    std::vector<T> a, b;
    float_inputs(a, b);
    auto eq = [](T x, T y) { return same_float(x, y); };
    check(
        GPURDMA_SUM, dtype, a, b, [](T x, T y) { return x + y; }, eq);
    check(
        GPURDMA_PROD, dtype, a, b, [](T x, T y) { return x * y; }, eq);
    // MIN/MAX return one operand unchanged, so compare bits: this also pins which
    // NaN comes back when both are NaN, i.e. that operand order is kept.
    auto bits_eq = [](T x, T y) { return hex(x) == hex(y); };
    check(GPURDMA_MIN, dtype, a, b, ref_min<T>, bits_eq);
    check(GPURDMA_MAX, dtype, a, b, ref_max<T>, bits_eq);
}

TEST(ReduceFloating, Float)
{
    check_float_type<float>(GPURDMA_FLOAT);
}
TEST(ReduceFloating, Double)
{
    check_float_type<double>(GPURDMA_DOUBLE);
}
TEST(ReduceFloating, LongDouble)
{
    check_float_type<long double>(GPURDMA_LONG_DOUBLE);
}

template <typename T> void check_nan_min_max(gpurdma_dtype_t dtype, T nan1, T nan2)
{
    ASSERT_NE(hex(nan1), hex(nan2)) << "payloads must differ to tell them apart";
    for (gpurdma_op_t op : {GPURDMA_MIN, GPURDMA_MAX}) {
        SCOPED_TRACE(gpurdma_op_name(op));
        EXPECT_EQ(hex(reduce_one(op, dtype, nan1, T(1))), hex(nan1));
        EXPECT_EQ(hex(reduce_one(op, dtype, T(1), nan2)), hex(nan2));
        EXPECT_EQ(hex(reduce_one(op, dtype, nan1, nan2)), hex(nan1));
        EXPECT_EQ(hex(reduce_one(op, dtype, nan2, nan1)), hex(nan2));
        EXPECT_TRUE(std::isnan(reduce_one(op, dtype, -std::numeric_limits<T>::infinity(), nan1)));
        EXPECT_TRUE(std::isnan(reduce_one(op, dtype, nan1, std::numeric_limits<T>::infinity())));
    }
}

TEST(ReduceFloating, NanPropagatesFromEitherSide)
{
    check_nan_min_max<float>(GPURDMA_FLOAT, std::nanf("1"), std::nanf("2"));
    check_nan_min_max<double>(GPURDMA_DOUBLE, std::nan("1"), std::nan("2"));
    check_nan_min_max<long double>(GPURDMA_LONG_DOUBLE, std::nanl("1"), std::nanl("2"));
}

template <typename T> void check_signed_zero(gpurdma_dtype_t dtype)
{
    const T pz = T(0), nz = -T(0);
    EXPECT_TRUE(std::signbit(reduce_one(GPURDMA_MIN, dtype, pz, nz)));
    EXPECT_TRUE(std::signbit(reduce_one(GPURDMA_MIN, dtype, nz, pz)));
    EXPECT_TRUE(std::signbit(reduce_one(GPURDMA_MIN, dtype, nz, nz)));
    EXPECT_FALSE(std::signbit(reduce_one(GPURDMA_MIN, dtype, pz, pz)));
    EXPECT_FALSE(std::signbit(reduce_one(GPURDMA_MAX, dtype, pz, nz)));
    EXPECT_FALSE(std::signbit(reduce_one(GPURDMA_MAX, dtype, nz, pz)));
    EXPECT_FALSE(std::signbit(reduce_one(GPURDMA_MAX, dtype, pz, pz)));
    EXPECT_TRUE(std::signbit(reduce_one(GPURDMA_MAX, dtype, nz, nz)));
}

TEST(ReduceFloating, SignedZeroIndependentOfOrder)
{
    check_signed_zero<float>(GPURDMA_FLOAT);
    check_signed_zero<double>(GPURDMA_DOUBLE);
    check_signed_zero<long double>(GPURDMA_LONG_DOUBLE);
}

// ---------------------------------------------------------------- bool and byte

TEST(ReduceBool, LogicalOps)
{
    std::vector<bool> a, b;  // every combination, then random
    for (int k = 0; k < 4; ++k) {
        a.push_back(k & 1);
        b.push_back(k & 2);
    }
    std::bernoulli_distribution coin(0.5);
    while (a.size() < 1200) {
        a.push_back(coin(rng()));
        b.push_back(coin(rng()));
    }
    // std::vector<bool> is packed; copy into arrays of C _Bool-sized elements.
    struct Bool {
        bool v;
    };
    static_assert(sizeof(Bool) == sizeof(bool));
    std::vector<Bool> ca, cb;
    for (size_t i = 0; i < a.size(); ++i) {
        ca.push_back({a[i]});
        cb.push_back({b[i]});
    }
    auto eq = [](Bool x, Bool y) { return x.v == y.v; };
    check(
        GPURDMA_LAND, GPURDMA_BOOL, ca, cb, [](Bool x, Bool y) { return Bool{x.v && y.v}; }, eq);
    check(
        GPURDMA_LOR, GPURDMA_BOOL, ca, cb, [](Bool x, Bool y) { return Bool{x.v || y.v}; }, eq);
    check(
        GPURDMA_LXOR, GPURDMA_BOOL, ca, cb, [](Bool x, Bool y) { return Bool{x.v != y.v}; }, eq);
}

TEST(ReduceBool, AnyNonzeroByteIsTrue)
{
    // Not a valid C _Bool, but a buffer might hold one; the result is still 0 or 1.
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_LAND, GPURDMA_BOOL, 2, 255), 1);
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_LOR, GPURDMA_BOOL, 0, 2), 1);
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_LXOR, GPURDMA_BOOL, 2, 1), 0);
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_LAND, GPURDMA_BOOL, 0, 2), 0);
}

TEST(ReduceByte, BitwiseOps)
{
    std::vector<uint8_t> a, b;
    for (int k = 0; k < 1200; ++k) {
        a.push_back(static_cast<uint8_t>(rng()()));
        b.push_back(static_cast<uint8_t>(rng()()));
    }
    auto eq = [](uint8_t x, uint8_t y) { return x == y; };
    check(
        GPURDMA_BAND, GPURDMA_BYTE, a, b, [](uint8_t x, uint8_t y) { return uint8_t(x & y); }, eq);
    check(
        GPURDMA_BOR, GPURDMA_BYTE, a, b, [](uint8_t x, uint8_t y) { return uint8_t(x | y); }, eq);
    check(
        GPURDMA_BXOR, GPURDMA_BYTE, a, b, [](uint8_t x, uint8_t y) { return uint8_t(x ^ y); }, eq);
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_BAND, GPURDMA_BYTE, 0xF0, 0x3C), 0x30);
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_BOR, GPURDMA_BYTE, 0xF0, 0x0C), 0xFC);
    EXPECT_EQ(reduce_one<uint8_t>(GPURDMA_BXOR, GPURDMA_BYTE, 0xFF, 0x0F), 0xF0);
}

// ---------------------------------------------------------------- complex

template <typename T> void check_complex_type(gpurdma_dtype_t dtype)
{
    using C = std::complex<T>;  // layout-compatible with C's T _Complex
    std::vector<C> a, b;
    // Small integers and halves: every sum and product is exact, whatever the
    // compiler does with fused multiply-add.
    std::uniform_int_distribution<int> small(-40, 40);
    for (int k = 0; k < 1200; ++k) {
        a.emplace_back(T(small(rng())) / 2, T(small(rng())) / 2);
        b.emplace_back(T(small(rng())) / 2, T(small(rng())) / 2);
    }
    auto eq = [](C x, C y) { return same_float(x.real(), y.real()) && same_float(x.imag(), y.imag()); };
    check(
        GPURDMA_SUM, dtype, a, b, [](C x, C y) { return C(x.real() + y.real(), x.imag() + y.imag()); }, eq);
    check(
        GPURDMA_PROD, dtype, a, b,
        [](C x, C y) {
            return C(x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real());
        },
        eq);
    const C p = reduce_one(GPURDMA_PROD, dtype, C(1, 2), C(3, 4));  // (1+2i)(3+4i)
    EXPECT_EQ(p.real(), T(-5));
    EXPECT_EQ(p.imag(), T(10));
    const C s = reduce_one(GPURDMA_SUM, dtype, C(1, 2), C(3, -4));
    EXPECT_EQ(s.real(), T(4));
    EXPECT_EQ(s.imag(), T(-2));
    const C i2 = reduce_one(GPURDMA_PROD, dtype, C(0, 1), C(0, 1));  // i * i
    EXPECT_EQ(i2.real(), T(-1));
    EXPECT_EQ(i2.imag(), T(0));
}

TEST(ReduceComplex, FloatComplex)
{
    check_complex_type<float>(GPURDMA_FLOAT_COMPLEX);
}
TEST(ReduceComplex, DoubleComplex)
{
    check_complex_type<double>(GPURDMA_DOUBLE_COMPLEX);
}
TEST(ReduceComplex, LongDoubleComplex)
{
    check_complex_type<long double>(GPURDMA_LONG_DOUBLE_COMPLEX);
}

// ---------------------------------------------------------------- MAXLOC / MINLOC

template <typename P> P ref_maxloc(P a, P b)
{
    if (a.v == b.v) return b.i < a.i ? b : a;
    return a.v < b.v ? b : a;
}

template <typename P> P ref_minloc(P a, P b)
{
    if (a.v == b.v) return b.i < a.i ? b : a;
    return b.v < a.v ? b : a;
}

template <typename P> void check_loc_type(gpurdma_dtype_t dtype)
{
    using V = decltype(P::v);
    std::vector<P> a, b;
    // Few distinct values and indices, so ties on value (and on both) are common.
    std::uniform_int_distribution<int> value(-3, 3), index(-2, 5);
    for (int k = 0; k < 1200; ++k) {
        a.push_back({V(value(rng())), index(rng())});
        b.push_back({V(value(rng())), index(rng())});
    }
    a.push_back({std::numeric_limits<V>::lowest(), 0});
    b.push_back({std::numeric_limits<V>::max(), std::numeric_limits<int>::max()});
    if constexpr (std::is_floating_point_v<V>) {
        // Equal value and index but different zeros: only operand order decides.
        a.push_back({V(0), 3});
        b.push_back({-V(0), 3});
        a.push_back({-V(0), 3});
        b.push_back({V(0), 3});
    }
    auto eq = [](P x, P y) { return hex(x.v) == hex(y.v) && x.i == y.i; };
    check(GPURDMA_MAXLOC, dtype, a, b, ref_maxloc<P>, eq);
    check(GPURDMA_MINLOC, dtype, a, b, ref_minloc<P>, eq);

    // Ties pick the smaller index in both operand orders.
    const P lo{V(7), 2}, hi{V(7), 9};
    for (gpurdma_op_t op : {GPURDMA_MAXLOC, GPURDMA_MINLOC}) {
        EXPECT_EQ(reduce_one(op, dtype, lo, hi).i, 2);
        EXPECT_EQ(reduce_one(op, dtype, hi, lo).i, 2);
    }
    const P small{V(-1), 5}, big{V(4), 1};
    EXPECT_EQ(reduce_one(GPURDMA_MAXLOC, dtype, small, big).i, 1);
    EXPECT_EQ(reduce_one(GPURDMA_MAXLOC, dtype, big, small).i, 1);
    EXPECT_EQ(reduce_one(GPURDMA_MINLOC, dtype, small, big).i, 5);
    EXPECT_EQ(reduce_one(GPURDMA_MINLOC, dtype, big, small).v, V(-1));
}

TEST(ReduceLoc, FloatInt)
{
    check_loc_type<FloatInt>(GPURDMA_FLOAT_INT);
}
TEST(ReduceLoc, DoubleInt)
{
    check_loc_type<DoubleInt>(GPURDMA_DOUBLE_INT);
}
TEST(ReduceLoc, LongInt)
{
    check_loc_type<LongInt>(GPURDMA_LONG_INT);
}
TEST(ReduceLoc, TwoInt)
{
    check_loc_type<TwoInt>(GPURDMA_2INT);
}
TEST(ReduceLoc, ShortInt)
{
    check_loc_type<ShortInt>(GPURDMA_SHORT_INT);
}
TEST(ReduceLoc, LongDoubleInt)
{
    check_loc_type<LongDoubleInt>(GPURDMA_LONG_DOUBLE_INT);
}

// ---------------------------------------------------------------- API surface

TEST(ReduceApi, DtypeSizesMatchC)
{
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_INT8), sizeof(int8_t));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_UINT8), sizeof(uint8_t));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_INT16), sizeof(int16_t));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_UINT16), sizeof(uint16_t));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_INT32), sizeof(int32_t));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_UINT32), sizeof(uint32_t));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_INT64), sizeof(int64_t));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_UINT64), sizeof(uint64_t));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_FLOAT), sizeof(float));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_DOUBLE), sizeof(double));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_LONG_DOUBLE), sizeof(long double));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_BOOL), sizeof(bool));  // C++ bool == C _Bool
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_BYTE), 1u);
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_FLOAT_COMPLEX), sizeof(std::complex<float>));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_DOUBLE_COMPLEX), sizeof(std::complex<double>));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_LONG_DOUBLE_COMPLEX), sizeof(std::complex<long double>));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_FLOAT_INT), sizeof(FloatInt));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_DOUBLE_INT), sizeof(DoubleInt));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_LONG_INT), sizeof(LongInt));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_2INT), sizeof(TwoInt));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_SHORT_INT), sizeof(ShortInt));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_LONG_DOUBLE_INT), sizeof(LongDoubleInt));
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_FLOAT16), 2u);  // _Float16
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_DTYPE_COUNT), 0u);
#if defined(__x86_64__)
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_LONG_DOUBLE_INT), 32u);
    EXPECT_EQ(gpurdma_dtype_size(GPURDMA_LONG_DOUBLE_COMPLEX), 32u);
#endif
}

TEST(ReduceApi, SupportedTableMatchesStandard)
{
    // MPI standard, section "Predefined Reduction Operations", C types only.
    // Columns:      SUM PROD MIN MAX | LAND LOR LXOR | BAND BOR BXOR | MAXLOC MINLOC
    const char *integer = "1111 111 111 00";
    const char *floating = "1111 000 000 00";
    const char *logical = "0000 111 000 00";
    const char *byte = "0000 000 111 00";
    const char *complex = "1100 000 000 00";
    const char *pair = "0000 000 000 11";
    const struct {
        gpurdma_dtype_t dtype;
        const char *row;
    } table[] = {
        {GPURDMA_INT8, integer},
        {GPURDMA_UINT8, integer},
        {GPURDMA_INT16, integer},
        {GPURDMA_UINT16, integer},
        {GPURDMA_INT32, integer},
        {GPURDMA_UINT32, integer},
        {GPURDMA_INT64, integer},
        {GPURDMA_UINT64, integer},
        {GPURDMA_FLOAT, floating},
        {GPURDMA_DOUBLE, floating},
        {GPURDMA_LONG_DOUBLE, floating},
        {GPURDMA_BOOL, logical},
        {GPURDMA_BYTE, byte},
        {GPURDMA_FLOAT_COMPLEX, complex},
        {GPURDMA_DOUBLE_COMPLEX, complex},
        {GPURDMA_LONG_DOUBLE_COMPLEX, complex},
        {GPURDMA_FLOAT_INT, pair},
        {GPURDMA_DOUBLE_INT, pair},
        {GPURDMA_LONG_INT, pair},
        {GPURDMA_2INT, pair},
        {GPURDMA_SHORT_INT, pair},
        {GPURDMA_LONG_DOUBLE_INT, pair},
        {GPURDMA_FLOAT16, floating},  // _Float16 (Open MPI 5: MPIX_C_FLOAT16), as float
    };
    ASSERT_EQ(std::size(table), size_t{GPURDMA_DTYPE_COUNT});
    std::set<int> seen;
    for (const auto &entry : table) {
        seen.insert(entry.dtype);
        std::string bits;
        for (const char *c = entry.row; *c; ++c) {
            if (*c != ' ') bits += *c;
        }
        ASSERT_EQ(bits.size(), size_t{GPURDMA_OP_COUNT});
        for (int op = 0; op < GPURDMA_OP_COUNT; ++op) {
            const auto o = static_cast<gpurdma_op_t>(op);
            const int want = bits[op] == '1';
            EXPECT_EQ(gpurdma_op_supported(o, entry.dtype), want)
                << gpurdma_op_name(o) << " on " << gpurdma_dtype_name(entry.dtype);
            EXPECT_EQ(gpurdma::reduce::supported(o, entry.dtype), want != 0);
            if (!want) {
                int x = 0;
                EXPECT_EQ(gpurdma_reduce_local(o, entry.dtype, &x, &x, &x, 0), GPURDMA_ERR_UNSUPPORTED);
            }
        }
    }
    EXPECT_EQ(seen.size(), size_t{GPURDMA_DTYPE_COUNT});
}

TEST(ReduceApi, UnsupportedCombinationsAreRefused)
{
    float f[4] = {1, 2, 3, 4};
    float g[4] = {5, 6, 7, 8};
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_BAND, GPURDMA_FLOAT, f, f, g, 4), GPURDMA_ERR_UNSUPPORTED);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_LAND, GPURDMA_DOUBLE, f, f, g, 2), GPURDMA_ERR_UNSUPPORTED);
    bool t[2] = {true, false};
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_BOOL, t, t, t, 2), GPURDMA_ERR_UNSUPPORTED);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_BAND, GPURDMA_BOOL, t, t, t, 2), GPURDMA_ERR_UNSUPPORTED);
    int32_t n[2] = {1, 2};
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_MAXLOC, GPURDMA_INT32, n, n, n, 1), GPURDMA_ERR_UNSUPPORTED);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_MIN, GPURDMA_FLOAT_COMPLEX, f, f, g, 2), GPURDMA_ERR_UNSUPPORTED);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_BYTE, t, t, t, 2), GPURDMA_ERR_UNSUPPORTED);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_2INT, n, n, n, 1), GPURDMA_ERR_UNSUPPORTED);
    // Refused before touching anything.
    EXPECT_EQ(f[0], 1.0f);
    EXPECT_TRUE(t[0]);
    EXPECT_EQ(n[0], 1);
}

TEST(ReduceApi, OutOfRangeEnumsAreInvalid)
{
    int x = 0;
    const auto bad_op = static_cast<gpurdma_op_t>(GPURDMA_OP_COUNT);
    const auto bad_dtype = static_cast<gpurdma_dtype_t>(GPURDMA_DTYPE_COUNT);
    // Largest value the enum can hold in C++ (0..31 for 22 enumerators); a
    // negative one would already be UB in the cast.
    const auto top = static_cast<gpurdma_dtype_t>(31);
    EXPECT_EQ(gpurdma_reduce_local(bad_op, GPURDMA_INT32, &x, &x, &x, 1), GPURDMA_ERR_INVALID);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, bad_dtype, &x, &x, &x, 1), GPURDMA_ERR_INVALID);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, top, &x, &x, &x, 1), GPURDMA_ERR_INVALID);
    EXPECT_EQ(gpurdma_op_supported(bad_op, GPURDMA_INT32), 0);
    EXPECT_EQ(gpurdma_op_supported(GPURDMA_SUM, bad_dtype), 0);
    EXPECT_EQ(gpurdma_op_supported(GPURDMA_SUM, top), 0);
    EXPECT_EQ(gpurdma_dtype_size(top), 0u);
}

TEST(ReduceApi, CountZeroTouchesNothing)
{
    int32_t a[1] = {5}, b[1] = {6}, d[1] = {7};
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_INT32, d, a, b, 0), GPURDMA_OK);
    EXPECT_EQ(d[0], 7);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_INT32, nullptr, nullptr, nullptr, 0), GPURDMA_OK);
}

TEST(ReduceApi, NullBuffersAreInvalid)
{
    int32_t a[1] = {5};
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_INT32, nullptr, a, a, 1), GPURDMA_ERR_INVALID);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_INT32, a, nullptr, a, 1), GPURDMA_ERR_INVALID);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_INT32, a, a, nullptr, 1), GPURDMA_ERR_INVALID);
}

TEST(ReduceApi, PartialOverlapIsInvalid)
{
    int32_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t other[4] = {0, 0, 0, 0};
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_INT32, buf + 1, buf, other, 4), GPURDMA_ERR_INVALID);
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_INT32, buf, other, buf + 3, 4), GPURDMA_ERR_INVALID);
    EXPECT_EQ(buf[1], 2);
    // Adjacent but disjoint is fine, and a == b overlapping each other is only read.
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_INT32, buf + 4, buf, buf, 4), GPURDMA_OK);
    EXPECT_EQ(buf[4], 2);
    EXPECT_EQ(buf[7], 8);
}

TEST(ReduceApi, CppEntryMatchesC)
{
    for (int d = 0; d < GPURDMA_DTYPE_COUNT; ++d) {
        const auto dtype = static_cast<gpurdma_dtype_t>(d);
        EXPECT_EQ(gpurdma::reduce::dtype_size(dtype), gpurdma_dtype_size(dtype));
        for (gpurdma_op_t op : kAllOps) {
            EXPECT_EQ(gpurdma::reduce::supported(op, dtype), gpurdma_op_supported(op, dtype) != 0);
        }
    }
    int32_t a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, d[3] = {};
    EXPECT_EQ(gpurdma::reduce::apply(GPURDMA_SUM, GPURDMA_INT32, d, a, b, 3), GPURDMA_OK);
    EXPECT_EQ(d[2], 33);
    EXPECT_EQ(gpurdma::reduce::apply(GPURDMA_BAND, GPURDMA_FLOAT, d, a, b, 3), GPURDMA_ERR_UNSUPPORTED);
}

TEST(ReduceApi, NamesAreDistinctAndNeverNull)
{
    std::set<std::string> dtypes, ops, statuses;
    for (int d = 0; d < GPURDMA_DTYPE_COUNT; ++d) {
        const char *name = gpurdma_dtype_name(static_cast<gpurdma_dtype_t>(d));
        ASSERT_NE(name, nullptr);
        EXPECT_NE(std::string(name), "");
        dtypes.insert(name);
    }
    for (gpurdma_op_t op : kAllOps) ops.insert(gpurdma_op_name(op));
    for (int s = GPURDMA_OK; s <= GPURDMA_ERR_CONCURRENT; ++s) {
        statuses.insert(gpurdma_status_name(static_cast<gpurdma_status_t>(s)));
    }
    EXPECT_EQ(dtypes.size(), size_t{GPURDMA_DTYPE_COUNT});
    EXPECT_EQ(ops.size(), size_t{GPURDMA_OP_COUNT});
    EXPECT_EQ(statuses.size(), size_t{GPURDMA_ERR_CONCURRENT + 1});
    EXPECT_STREQ(gpurdma_op_name(GPURDMA_SUM), "sum");
    EXPECT_STREQ(gpurdma_dtype_name(GPURDMA_FLOAT), "float");
    EXPECT_NE(gpurdma_dtype_name(static_cast<gpurdma_dtype_t>(GPURDMA_DTYPE_COUNT)), nullptr);
    EXPECT_STREQ(gpurdma_op_name(static_cast<gpurdma_op_t>(GPURDMA_OP_COUNT)), "unknown");
    EXPECT_STREQ(gpurdma_status_name(static_cast<gpurdma_status_t>(GPURDMA_ERR_CONCURRENT + 1)), "unknown");
}

// Counts past 2^31 must not be truncated anywhere. Needs 4 GiB, so opt-in.
TEST(ReduceApi, CountAbove2To31)
{
    if (std::getenv("GPURDMA_TEST_LARGE") == nullptr) {
        GTEST_SKIP() << "set GPURDMA_TEST_LARGE=1 to run (allocates 4 GiB)";
    }
    const size_t n = (size_t{1} << 31) + 64;
    auto *a = static_cast<int8_t *>(std::calloc(n, 1));
    auto *b = static_cast<int8_t *>(std::calloc(n, 1));
    if (a == nullptr || b == nullptr) {
        std::free(a);
        std::free(b);
        GTEST_SKIP() << "could not allocate 4 GiB";
    }
    const size_t high = size_t{1} << 31;
    a[high] = 1;
    b[high] = 127;
    a[n - 1] = 2;
    b[n - 1] = 3;
    b[0] = 9;
    EXPECT_EQ(gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_INT8, a, a, b, n), GPURDMA_OK);
    EXPECT_EQ(a[0], 9);
    EXPECT_EQ(a[high], -128);
    EXPECT_EQ(a[n - 1], 5);
    std::free(a);
    std::free(b);
}

}  // namespace

// Buffers at odd addresses (MPI allows any) give the same results as aligned ones.
TEST(ReduceApi, MisalignedBuffers)
{
    const size_t n = 3001;
    std::vector<unsigned char> store(3 * (n * 8 + 16));
    for (size_t shift : {1u, 3u, 7u}) {
        double *a = reinterpret_cast<double *>(store.data() + shift);
        double *b = reinterpret_cast<double *>(store.data() + n * 8 + 8 + shift);
        double *d = reinterpret_cast<double *>(store.data() + 2 * (n * 8 + 8) + shift);
        std::vector<double> ra(n), rb(n);
        for (size_t i = 0; i < n; ++i) {
            ra[i] = static_cast<double>(i) * 0.5;
            rb[i] = static_cast<double>(n - i);
        }
        std::memcpy(a, ra.data(), n * 8);
        std::memcpy(b, rb.data(), n * 8);
        ASSERT_EQ(GPURDMA_OK, gpurdma_reduce_local(GPURDMA_SUM, GPURDMA_DOUBLE, d, a, b, n));
        for (size_t i = 0; i < n; ++i) {
            double got;
            std::memcpy(&got, reinterpret_cast<unsigned char *>(d) + i * 8, 8);
            ASSERT_EQ(got, ra[i] + rb[i]) << "shift " << shift << " i " << i;
        }
        // In place (dst == a) at the same odd address.
        ASSERT_EQ(GPURDMA_OK, gpurdma_reduce_local(GPURDMA_MAX, GPURDMA_DOUBLE, a, a, b, n));
        for (size_t i = 0; i < n; ++i) {
            double got;
            std::memcpy(&got, reinterpret_cast<unsigned char *>(a) + i * 8, 8);
            ASSERT_EQ(got, std::max(ra[i], rb[i]));
        }
    }
}
