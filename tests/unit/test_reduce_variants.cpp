// Every host kernel variant this CPU can run (baseline, AVX2, AVX-512), called
// directly rather than through the dispatcher, against a plain scalar reference
// written here: the same bits for every op x dtype (half precision against the
// compiler's _Float16), at every length from 1 to 67
// (vector bodies and scalar tails), in every aliasing case and at misaligned
// addresses. A variant that fused a multiply-add or reassociated would differ in the
// last bit of some element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpurdma/gpurdma.h"
#include "reduce/kernel_table.h"

namespace {

using gpurdma::reduce::Isa;

template <typename T> struct Cplx {
    T re, im;
};  // C's T _Complex
template <typename V> struct Pair {
    V v;
    int i;
};  // MPI's value/index structs
struct F16 {
    std::uint16_t bits;
};  // C's _Float16, as bits

// ---------------------------------------------------------------- the reference
// One element at a time, in the textbook operations, each product rounded to T on
// its own (volatile: no contraction, no vectorisation can merge them).
#define NO_VECTOR __attribute__((noinline, optimize("no-tree-vectorize", "no-tree-slp-vectorize")))

template <typename T> NO_VECTOR T rounded(T x)
{
    volatile T v = x;
    return v;
}

template <typename T> NO_VECTOR T ref_integer(gpurdma_op_t op, T a, T b)
{
    const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
    switch (op) {
        case GPURDMA_SUM: return static_cast<T>(ua + ub);  // modular, as MPI wraps
        case GPURDMA_PROD: return static_cast<T>(ua * ub);
        case GPURDMA_MIN: return b < a ? b : a;
        case GPURDMA_MAX: return a < b ? b : a;
        case GPURDMA_LAND: return (a != 0 && b != 0) ? 1 : 0;
        case GPURDMA_LOR: return (a != 0 || b != 0) ? 1 : 0;
        case GPURDMA_LXOR: return ((a != 0) != (b != 0)) ? 1 : 0;
        case GPURDMA_BAND: return static_cast<T>(a & b);
        case GPURDMA_BOR: return static_cast<T>(a | b);
        case GPURDMA_BXOR: return static_cast<T>(a ^ b);
        default: ADD_FAILURE() << "op " << op; return 0;
    }
}

// MIN/MAX as gpurdma pins them down: a NaN operand wins (a before b), and
// MIN(+0, -0) = -0, MAX(+0, -0) = +0 in either order.
template <typename T> NO_VECTOR T ref_floating(gpurdma_op_t op, T a, T b)
{
    switch (op) {
        case GPURDMA_SUM: return rounded<T>(a + b);
        case GPURDMA_PROD: return rounded<T>(a * b);
        case GPURDMA_MIN:
        case GPURDMA_MAX: {
            if (std::isnan(a)) return a;
            if (std::isnan(b)) return b;
            const bool min = op == GPURDMA_MIN;
            if (a < b) return min ? a : b;
            if (b < a) return min ? b : a;
            return (std::signbit(a) == min) ? a : b;  // equal; only zeros can differ
        }
        default: ADD_FAILURE() << "op " << op; return 0;
    }
}

template <typename T> NO_VECTOR Cplx<T> ref_complex(gpurdma_op_t op, Cplx<T> a, Cplx<T> b)
{
    if (op == GPURDMA_SUM) return {rounded<T>(a.re + b.re), rounded<T>(a.im + b.im)};
    if (op != GPURDMA_PROD) ADD_FAILURE() << "op " << op;
    const T rr = rounded<T>(a.re * b.re), ii = rounded<T>(a.im * b.im);
    const T ri = rounded<T>(a.re * b.im), ir = rounded<T>(a.im * b.re);
    return {rounded<T>(rr - ii), rounded<T>(ri + ir)};
}

#if defined(__FLT16_MANT_DIG__)
// binary16 through the compiler's own _Float16 conversions (libgcc's soft-float here,
// not gpurdma's), the op in float, rounded back to half: the MPI's op on _Float16.
NO_VECTOR float widen(F16 h)
{
    _Float16 x;
    std::memcpy(&x, &h.bits, sizeof x);
    return rounded<float>(static_cast<float>(x));
}

NO_VECTOR F16 narrow(float f)
{
    volatile _Float16 x = static_cast<_Float16>(f);
    F16 h;
    std::memcpy(&h.bits, const_cast<_Float16 *>(&x), sizeof h.bits);
    return h;
}

NO_VECTOR F16 ref_half(gpurdma_op_t op, F16 a, F16 b)
{
    const float x = widen(a), y = widen(b);
    switch (op) {
        case GPURDMA_SUM: return narrow(rounded<float>(x + y));
        case GPURDMA_PROD: return narrow(rounded<float>(x * y));
        default: {  // MIN/MAX return an operand, chosen by the rules for float
            if (std::isnan(x)) return a;
            if (std::isnan(y)) return b;
            const float pick = ref_floating<float>(op, x, y);
            return (pick == x && std::signbit(pick) == std::signbit(x)) ? a : b;
        }
    }
}
#endif

// MAXLOC/MINLOC: the better value wins; on a tie (or unordered values) the smaller
// index.
template <typename V> NO_VECTOR Pair<V> ref_loc(gpurdma_op_t op, Pair<V> a, Pair<V> b)
{
    const bool max = op == GPURDMA_MAXLOC;
    if (max ? a.v > b.v : a.v < b.v) return a;
    if (max ? b.v > a.v : b.v < a.v) return b;
    return b.i < a.i ? b : a;
}

// ---------------------------------------------------------------- inputs

std::mt19937_64 &rng()
{
    static std::mt19937_64 engine(20250611);
    return engine;
}

template <typename T> T any_bits()
{
    T v;
    unsigned char bytes[sizeof(T)];
    for (auto &c : bytes) c = static_cast<unsigned char>(rng()());
    std::memcpy(&v, bytes, sizeof(T));
    return v;
}

template <typename T> T integer_value()
{
    switch (rng()() % 4) {
        case 0: return static_cast<T>(rng()() % 5) - 2;  // zeros, ties, +-1
        case 1: return std::numeric_limits<T>::max() - static_cast<T>(rng()() % 2);
        case 2: return std::numeric_limits<T>::min() + static_cast<T>(rng()() % 2);
        default: return any_bits<T>();
    }
}

// Ordinary values over many binades, small integers (ties, exact results, signed
// zeros), the special values, and (float, double) arbitrary bit patterns.
template <typename T> T floating_value()
{
    using L = std::numeric_limits<T>;
    std::normal_distribution<double> normal;
    const int k = static_cast<int>(rng()() % 16);
    if (k < 7) return std::ldexp(static_cast<T>(normal(rng())), static_cast<int>(rng()() % 60) - 30);
    if (k < 10) {
        const T v = static_cast<T>(static_cast<int>(rng()() % 9) - 4);
        return rng()() % 2 ? -v : v;
    }
    if (k < 13) {
        const T specials[] = {T(0),     L::infinity(), L::quiet_NaN(), L::denorm_min(),
                              L::min(), L::max(),      L::epsilon(),   std::nextafter(L::max(), T(0))};
        const T v = specials[rng()() % std::size(specials)];
        return rng()() % 2 ? -v : v;
    }
    if constexpr (std::is_same_v<T, long double>) {
        return static_cast<T>(normal(rng()));  // x87 encodings that are not numbers aside
    } else {
        return any_bits<T>();  // NaNs with payloads, signalling NaNs, subnormals
    }
}

template <typename T> T value()
{
    if constexpr (std::is_integral_v<T>) return integer_value<T>();
    else return floating_value<T>();
}

// ---------------------------------------------------------------- one dtype

// The bytes of an element that carry a value: not long double's 6 bytes of padding,
// not the padding of the value/index structs.
template <typename T> void append_bytes(const T &x, std::vector<unsigned char> &out)
{
    static_assert(std::is_arithmetic_v<T>);
    const auto *p = reinterpret_cast<const unsigned char *>(&x);
    out.insert(out.end(), p, p + (std::is_same_v<T, long double> ? 10 : sizeof(T)));
}

template <typename T> void append_bytes(const Cplx<T> &x, std::vector<unsigned char> &out)
{
    append_bytes(x.re, out);
    append_bytes(x.im, out);
}

template <typename V> void append_bytes(const Pair<V> &x, std::vector<unsigned char> &out)
{
    append_bytes(x.v, out);
    append_bytes(x.i, out);
}

void append_bytes(const F16 &x, std::vector<unsigned char> &out)
{
    append_bytes(x.bits, out);
}

template <typename T> std::vector<unsigned char> meaningful_bytes(const T &x)
{
    std::vector<unsigned char> out;
    append_bytes(x, out);
    return out;
}

// Whether a kernel's element is the reference's: the same meaningful bytes, except
// that where SUM or PROD computes a NaN any NaN matches. Which NaN x + y returns when
// both are NaN is the first operand's on x86 and the compiler may order a commutative
// operation either way (IEEE 754 leaves it open; CUDA returns one canonical NaN).
// MIN, MAX and the LOC ops return an operand, so their NaNs must match bit for bit.
template <typename T> bool same(const T &got, const T &want, bool computed)
{
    if constexpr (std::is_floating_point_v<T>) {
        if (computed && std::isnan(got) && std::isnan(want)) return true;
    }
    return meaningful_bytes(got) == meaningful_bytes(want);
}

template <typename T> bool same(const Cplx<T> &got, const Cplx<T> &want, bool computed)
{
    return same(got.re, want.re, computed) && same(got.im, want.im, computed);
}

bool same(const F16 &got, const F16 &want, bool computed)
{
    const auto nan = [](F16 h) { return (h.bits & 0x7fff) > 0x7c00; };
    if (computed && nan(got) && nan(want)) return true;
    return got.bits == want.bits;
}

template <typename V> bool same(const Pair<V> &got, const Pair<V> &want, bool)
{
    return meaningful_bytes(got) == meaningful_bytes(want);
}

template <typename T> std::string hex(const T &x)
{
    std::string s;
    char b[3];
    for (unsigned char c : meaningful_bytes(x)) {
        std::snprintf(b, sizeof b, "%02x", c);
        s += b;
    }
    return s;
}

// Where the three buffers sit: offsets in bytes from a 64-byte-aligned base, and
// which of them are the same buffer.
struct Layout {
    const char *name;
    enum Alias { kDistinct, kIntoA, kIntoB, kSameInputs, kAllSame } alias;
    std::size_t off_d, off_a, off_b;  // in units of the element's alignment, or bytes if odd
    bool bytes;  // offsets are byte counts (misaligned for T)
};

constexpr Layout kLayouts[] = {
    {"distinct, aligned", Layout::kDistinct, 0, 0, 0, false},
    {"distinct, staggered", Layout::kDistinct, 1, 2, 3, false},
    {"distinct, misaligned", Layout::kDistinct, 1, 0, 3, true},
    {"dst == a, aligned", Layout::kIntoA, 0, 0, 0, false},
    {"dst == a, staggered", Layout::kIntoA, 1, 1, 2, false},
    {"dst == a, misaligned", Layout::kIntoA, 1, 1, 0, true},
    {"dst == b", Layout::kIntoB, 0, 0, 0, false},
    {"dst == b, misaligned", Layout::kIntoB, 3, 0, 3, true},
    {"a == b", Layout::kSameInputs, 0, 2, 2, false},
    {"dst == a == b", Layout::kAllSame, 0, 0, 0, false},
    {"dst == a == b, misaligned", Layout::kAllSame, 5, 5, 5, true},
};

constexpr std::size_t kGuard = 64;  // bytes past the end that must not change

template <typename T, typename Ref>
void check_kernel(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype, Ref ref, T (*gen)())
{
    const auto kernel = gpurdma::reduce::kernel(isa, op, dtype);
    ASSERT_NE(kernel, nullptr);
    ASSERT_EQ(gpurdma_dtype_size(dtype), sizeof(T));
    std::vector<std::size_t> lengths;
    for (std::size_t n = 1; n <= 67; ++n) lengths.push_back(n);
    lengths.insert(lengths.end(), {1031, 4099});  // 4099: past one scratch chunk (misaligned)
    const bool computed = op == GPURDMA_SUM || op == GPURDMA_PROD;
    int failures = 0;
    for (std::size_t n : lengths) {
        for (const Layout &lay : kLayouts) {
            const std::size_t unit = lay.bytes ? 1 : alignof(T);
            const std::size_t bytes = n * sizeof(T);
            // Three 64-byte-aligned arenas; the layout picks offsets into them.
            std::vector<unsigned char> arena(3 * (bytes + 8 * alignof(T) + kGuard + 64) + 64);
            auto *base = reinterpret_cast<unsigned char *>((reinterpret_cast<std::uintptr_t>(arena.data()) + 63) &
                                                           ~std::uintptr_t{63});
            const std::size_t stride = (bytes + 8 * alignof(T) + kGuard + 63) & ~std::size_t{63};
            unsigned char *bd = base + lay.off_d * unit;
            unsigned char *ba = base + stride + lay.off_a * unit;
            unsigned char *bb = base + 2 * stride + lay.off_b * unit;
            switch (lay.alias) {
                case Layout::kDistinct: break;
                case Layout::kIntoA: ba = bd; break;
                case Layout::kIntoB: bb = bd; break;
                case Layout::kSameInputs: bb = ba; break;
                case Layout::kAllSame: ba = bb = bd; break;
            }
            for (std::size_t k = 0; k < arena.size(); ++k) arena[k] = static_cast<unsigned char>(k * 131 + n);
            std::vector<T> a(n), b(n), want(n);
            for (std::size_t i = 0; i < n; ++i) {
                a[i] = gen();
                b[i] = gen();
            }
            // Inputs written to their (possibly shared) buffers; a shared one holds a's.
            std::memcpy(bb, b.data(), bytes);
            std::memcpy(ba, a.data(), bytes);
            std::memcpy(b.data(), bb, bytes);
            for (std::size_t i = 0; i < n; ++i) want[i] = ref(op, a[i], b[i]);
            const std::vector<unsigned char> before(arena);

            kernel(bd, ba, bb, n);

            for (std::size_t i = 0; i < n && failures < 5; ++i) {
                T got;
                std::memcpy(&got, bd + i * sizeof(T), sizeof(T));
                if (!same(got, want[i], computed)) {
                    ++failures;
                    ADD_FAILURE() << gpurdma::reduce::isa_name(isa) << " " << gpurdma_op_name(op) << " on "
                                  << gpurdma_dtype_name(dtype) << ", n " << n << ", " << lay.name << ", element " << i
                                  << ": a " << hex(a[i]) << " b " << hex(b[i]) << " got " << hex(got) << " want "
                                  << hex(want[i]);
                }
            }
            // Nothing but dst[0, n) may change.
            const std::size_t d0 = static_cast<std::size_t>(bd - arena.data());
            for (std::size_t k = 0; k < arena.size() && failures < 5; ++k) {
                if ((k < d0 || k >= d0 + bytes) && arena[k] != before[k]) {
                    ++failures;
                    ADD_FAILURE() << gpurdma::reduce::isa_name(isa) << " " << gpurdma_op_name(op) << " on "
                                  << gpurdma_dtype_name(dtype) << ", n " << n << ", " << lay.name << ": byte " << k
                                  << " outside dst changed";
                }
            }
            if (failures >= 5) return;
        }
    }
}

template <typename T> void check_type(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    check_kernel<T>(isa, op, dtype, ref_integer<T>, value<T>);
}

template <typename T> void check_floating(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    check_kernel<T>(isa, op, dtype, ref_floating<T>, value<T>);
}

template <typename T> void check_complex(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    auto gen = []() { return Cplx<T>{value<T>(), value<T>()}; };
    check_kernel<Cplx<T>>(isa, op, dtype, ref_complex<T>, +gen);
}

template <typename V> void check_loc(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    // Few distinct values and indices, so that ties are common.
    auto gen = []() {
        Pair<V> p;
        std::memset(static_cast<void *>(&p), 0, sizeof p);
        p.v = rng()() % 8 == 0 ? value<V>() : static_cast<V>(static_cast<int>(rng()() % 5) - 2);
        p.i = static_cast<int>(rng()() % 7) - 3;
        return p;
    };
    check_kernel<Pair<V>>(isa, op, dtype, ref_loc<V>, +gen);
}

// Halves: any bits (NaNs, infinities, subnormals), small integers (exact sums and
// ties), and values near the largest finite half (sums and products that overflow).
F16 half_value()
{
    switch (rng()() % 4) {
        case 0: return {static_cast<std::uint16_t>(rng()())};
        case 1: {
            const std::uint16_t small[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x4000, 0x4200,
                                           0xc400, 0x3800, 0x0001, 0x03ff, 0x0400, 0x7c00};
            return {small[rng()() % std::size(small)]};
        }
        case 2: return {static_cast<std::uint16_t>(0x7800 + rng()() % 0x400 + (rng()() % 2) * 0x8000)};
        default: return {static_cast<std::uint16_t>(0x1000 + rng()() % 0x4000 + (rng()() % 2) * 0x8000)};
    }
}

void check_half(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype)
{
#if defined(__FLT16_MANT_DIG__)
    check_kernel<F16>(isa, op, dtype, ref_half, half_value);
#else
    (void)isa, (void)op, (void)dtype;  // no _Float16 in this compiler: no reference
#endif
}

// C _Bool and MPI_BYTE are read as bytes; a bool byte other than 0 or 1 is still true.
void check_bytes(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    auto gen = []() {
        constexpr std::uint8_t kBytes[] = {0, 1, 2, 0x80, 0xff};
        return rng()() % 2 ? kBytes[rng()() % 5] : static_cast<std::uint8_t>(rng()());
    };
    check_kernel<std::uint8_t>(isa, op, dtype, ref_integer<std::uint8_t>, +gen);
}

void check_pair(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    SCOPED_TRACE(std::string(gpurdma_op_name(op)) + " on " + gpurdma_dtype_name(dtype));
    switch (dtype) {
        case GPURDMA_INT8: return check_type<std::int8_t>(isa, op, dtype);
        case GPURDMA_UINT8: return check_type<std::uint8_t>(isa, op, dtype);
        case GPURDMA_INT16: return check_type<std::int16_t>(isa, op, dtype);
        case GPURDMA_UINT16: return check_type<std::uint16_t>(isa, op, dtype);
        case GPURDMA_INT32: return check_type<std::int32_t>(isa, op, dtype);
        case GPURDMA_UINT32: return check_type<std::uint32_t>(isa, op, dtype);
        case GPURDMA_INT64: return check_type<std::int64_t>(isa, op, dtype);
        case GPURDMA_UINT64: return check_type<std::uint64_t>(isa, op, dtype);
        case GPURDMA_FLOAT: return check_floating<float>(isa, op, dtype);
        case GPURDMA_DOUBLE: return check_floating<double>(isa, op, dtype);
        case GPURDMA_LONG_DOUBLE: return check_floating<long double>(isa, op, dtype);
        case GPURDMA_BOOL:
        case GPURDMA_BYTE: return check_bytes(isa, op, dtype);
        case GPURDMA_FLOAT_COMPLEX: return check_complex<float>(isa, op, dtype);
        case GPURDMA_DOUBLE_COMPLEX: return check_complex<double>(isa, op, dtype);
        case GPURDMA_LONG_DOUBLE_COMPLEX: return check_complex<long double>(isa, op, dtype);
        case GPURDMA_FLOAT_INT: return check_loc<float>(isa, op, dtype);
        case GPURDMA_DOUBLE_INT: return check_loc<double>(isa, op, dtype);
        case GPURDMA_LONG_INT: return check_loc<long>(isa, op, dtype);
        case GPURDMA_2INT: return check_loc<int>(isa, op, dtype);
        case GPURDMA_SHORT_INT: return check_loc<short>(isa, op, dtype);
        case GPURDMA_LONG_DOUBLE_INT: return check_loc<long double>(isa, op, dtype);
        case GPURDMA_FLOAT16: return check_half(isa, op, dtype);
        default: FAIL() << "no reference for dtype " << dtype << ": add one here";
    }
}

class ReduceVariant : public ::testing::TestWithParam<Isa> {
protected:
    void SetUp() override
    {
        const Isa isa = GetParam();
        if (!gpurdma::reduce::isa_built(isa)) {
            GTEST_SKIP() << gpurdma::reduce::isa_name(isa) << " variant not built (x86-64 with GCC builds it)";
        }
        if (!gpurdma::reduce::isa_runnable(isa)) {
            GTEST_SKIP() << "this CPU cannot run the " << gpurdma::reduce::isa_name(isa) << " variant";
        }
    }
};

TEST_P(ReduceVariant, EveryOpAndTypeBitIdenticalToScalarReference)
{
    int pairs = 0;
    for (int o = 0; o < GPURDMA_OP_COUNT; ++o) {
        for (int d = 0; d < GPURDMA_DTYPE_COUNT; ++d) {
            const auto op = static_cast<gpurdma_op_t>(o);
            const auto dtype = static_cast<gpurdma_dtype_t>(d);
            if (!gpurdma_op_supported(op, dtype)) {
                EXPECT_EQ(gpurdma::reduce::kernel(GetParam(), op, dtype), nullptr);
                continue;
            }
            check_pair(GetParam(), op, dtype);
            ++pairs;
        }
    }
    EXPECT_GT(pairs, 100);
}

// Complex products are the kernels a compiler can fuse into multiply-adds; these
// inputs make a fused product differ from the rounded one in most elements.
TEST_P(ReduceVariant, ComplexProductRoundsEachProduct)
{
    for (gpurdma_dtype_t dtype : {GPURDMA_FLOAT_COMPLEX, GPURDMA_DOUBLE_COMPLEX}) {
        const auto kernel = gpurdma::reduce::kernel(GetParam(), GPURDMA_PROD, dtype);
        ASSERT_NE(kernel, nullptr);
        constexpr std::size_t n = 64;
        std::normal_distribution<double> normal;
        if (dtype == GPURDMA_DOUBLE_COMPLEX) {
            std::vector<Cplx<double>> a(n), b(n), d(n);
            for (std::size_t i = 0; i < n; ++i) {
                a[i] = {normal(rng()), normal(rng())};
                b[i] = {normal(rng()), normal(rng())};
            }
            kernel(d.data(), a.data(), b.data(), n);
            for (std::size_t i = 0; i < n; ++i) {
                const auto want = ref_complex(GPURDMA_PROD, a[i], b[i]);
                EXPECT_EQ(hex(d[i]), hex(want)) << gpurdma::reduce::isa_name(GetParam()) << " element " << i;
            }
        } else {
            std::vector<Cplx<float>> a(n), b(n), d(n);
            for (std::size_t i = 0; i < n; ++i) {
                a[i] = {float(normal(rng())), float(normal(rng()))};
                b[i] = {float(normal(rng())), float(normal(rng()))};
            }
            kernel(d.data(), a.data(), b.data(), n);
            for (std::size_t i = 0; i < n; ++i) {
                const auto want = ref_complex(GPURDMA_PROD, a[i], b[i]);
                EXPECT_EQ(hex(d[i]), hex(want)) << gpurdma::reduce::isa_name(GetParam()) << " element " << i;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, ReduceVariant, ::testing::Values(Isa::Baseline, Isa::Avx2, Isa::Avx512),
                         [](const ::testing::TestParamInfo<Isa> &info) {
                             return std::string(gpurdma::reduce::isa_name(info.param));
                         });

TEST(ReduceDispatch, UsesTheWidestRunnableVariant)
{
    const Isa want = gpurdma::reduce::isa_runnable(Isa::Avx512) ? Isa::Avx512
                     : gpurdma::reduce::isa_runnable(Isa::Avx2) ? Isa::Avx2
                                                                : Isa::Baseline;
    EXPECT_EQ(gpurdma::reduce::dispatched_isa(), want);
    EXPECT_TRUE(gpurdma::reduce::isa_runnable(Isa::Baseline));
    EXPECT_FALSE(gpurdma::reduce::isa_built(Isa::Count));
    EXPECT_EQ(gpurdma::reduce::kernel(Isa::Count, GPURDMA_SUM, GPURDMA_FLOAT), nullptr);
    EXPECT_EQ(gpurdma::reduce::kernel(Isa::Baseline, GPURDMA_OP_COUNT, GPURDMA_FLOAT), nullptr);
    EXPECT_EQ(gpurdma::reduce::kernel(Isa::Baseline, GPURDMA_SUM, GPURDMA_DTYPE_COUNT), nullptr);
}

}  // namespace
