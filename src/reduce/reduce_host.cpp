// Host reduction kernels and the op x dtype dispatch, generated from two small
// type maps (dtype -> element type and kind, op -> functor) and one validity rule.
#include <array>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <iterator>
#include <utility>

#include "gpurdma/gpurdma.h"
#include "reduce/element_types.h"
#include "reduce/functors.h"
#include "reduce/reduce.h"

namespace gpurdma::reduce {
namespace {

constexpr std::size_t kOps = GPURDMA_OP_COUNT;
constexpr std::size_t kDtypes = GPURDMA_DTYPE_COUNT;

// What the MPI standard groups C types into for the purpose of valid ops.
enum class Kind { Integer, Floating, Logical, Byte, Complex, Pair };

template <typename T, Kind K>
struct Layout {
    using type = T;
    static constexpr Kind kind = K;
};

template <gpurdma_dtype_t D>
struct Dtype;
template <> struct Dtype<GPURDMA_INT8> : Layout<std::int8_t, Kind::Integer> {};
template <> struct Dtype<GPURDMA_UINT8> : Layout<std::uint8_t, Kind::Integer> {};
template <> struct Dtype<GPURDMA_INT16> : Layout<std::int16_t, Kind::Integer> {};
template <> struct Dtype<GPURDMA_UINT16> : Layout<std::uint16_t, Kind::Integer> {};
template <> struct Dtype<GPURDMA_INT32> : Layout<std::int32_t, Kind::Integer> {};
template <> struct Dtype<GPURDMA_UINT32> : Layout<std::uint32_t, Kind::Integer> {};
template <> struct Dtype<GPURDMA_INT64> : Layout<std::int64_t, Kind::Integer> {};
template <> struct Dtype<GPURDMA_UINT64> : Layout<std::uint64_t, Kind::Integer> {};
template <> struct Dtype<GPURDMA_FLOAT> : Layout<float, Kind::Floating> {};
template <> struct Dtype<GPURDMA_DOUBLE> : Layout<double, Kind::Floating> {};
template <> struct Dtype<GPURDMA_LONG_DOUBLE> : Layout<long double, Kind::Floating> {};
// C _Bool is read as a byte so that a nonzero byte other than 1 still means true
// (reading such a byte as C++ bool would be UB).
template <> struct Dtype<GPURDMA_BOOL> : Layout<std::uint8_t, Kind::Logical> {};
template <> struct Dtype<GPURDMA_BYTE> : Layout<std::uint8_t, Kind::Byte> {};
template <> struct Dtype<GPURDMA_FLOAT_COMPLEX> : Layout<Complex<float>, Kind::Complex> {};
template <> struct Dtype<GPURDMA_DOUBLE_COMPLEX> : Layout<Complex<double>, Kind::Complex> {};
template <>
struct Dtype<GPURDMA_LONG_DOUBLE_COMPLEX> : Layout<Complex<long double>, Kind::Complex> {};
template <> struct Dtype<GPURDMA_FLOAT_INT> : Layout<ValueIndex<float>, Kind::Pair> {};
template <> struct Dtype<GPURDMA_DOUBLE_INT> : Layout<ValueIndex<double>, Kind::Pair> {};
template <> struct Dtype<GPURDMA_LONG_INT> : Layout<ValueIndex<long>, Kind::Pair> {};
template <> struct Dtype<GPURDMA_2INT> : Layout<ValueIndex<int>, Kind::Pair> {};
template <> struct Dtype<GPURDMA_SHORT_INT> : Layout<ValueIndex<short>, Kind::Pair> {};
template <>
struct Dtype<GPURDMA_LONG_DOUBLE_INT> : Layout<ValueIndex<long double>, Kind::Pair> {};

static_assert(sizeof(bool) == 1, "C _Bool is read as one byte");

template <gpurdma_op_t O>
struct Op;
template <> struct Op<GPURDMA_SUM> { using type = Sum; };
template <> struct Op<GPURDMA_PROD> { using type = Prod; };
template <> struct Op<GPURDMA_MIN> { using type = Min; };
template <> struct Op<GPURDMA_MAX> { using type = Max; };
template <> struct Op<GPURDMA_LAND> { using type = LAnd; };
template <> struct Op<GPURDMA_LOR> { using type = LOr; };
template <> struct Op<GPURDMA_LXOR> { using type = LXor; };
template <> struct Op<GPURDMA_BAND> { using type = BAnd; };
template <> struct Op<GPURDMA_BOR> { using type = BOr; };
template <> struct Op<GPURDMA_BXOR> { using type = BXor; };
template <> struct Op<GPURDMA_MAXLOC> { using type = MaxLoc; };
template <> struct Op<GPURDMA_MINLOC> { using type = MinLoc; };

// The MPI standard's table of valid (op, type-group) pairs, C types only.
constexpr bool valid(gpurdma_op_t op, Kind kind) {
    const bool arith = op == GPURDMA_SUM || op == GPURDMA_PROD;
    const bool minmax = op == GPURDMA_MIN || op == GPURDMA_MAX;
    const bool logical = op == GPURDMA_LAND || op == GPURDMA_LOR || op == GPURDMA_LXOR;
    const bool bitwise = op == GPURDMA_BAND || op == GPURDMA_BOR || op == GPURDMA_BXOR;
    const bool loc = op == GPURDMA_MAXLOC || op == GPURDMA_MINLOC;
    switch (kind) {
        case Kind::Integer: return arith || minmax || logical || bitwise;
        case Kind::Floating: return arith || minmax;
        case Kind::Logical: return logical;
        case Kind::Byte: return bitwise;
        case Kind::Complex: return arith;
        case Kind::Pair: return loc;
    }
    return false;
}

// The loops are built for AVX-512, AVX2 and the baseline ISA; the loader picks the
// best the CPU has (ifunc). Each element is computed alone, so the clones agree bit
// for bit (the build forbids FMA contraction).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define GPURDMA_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GPURDMA_VECTOR_CLONES
#endif

// One loop per aliasing case, each with __restrict on exactly the pointers known to
// be distinct, so the loops vectorize without runtime alias checks; not every
// compiler's check lets dst == a (in-place accumulation, the common case) take the
// vector path.
// a == b is allowed here: restrict only forbids aliasing what is written.
template <typename F, typename T>
GPURDMA_VECTOR_CLONES void loop_distinct(T* __restrict d, const T* __restrict a, const T* __restrict b,
                   std::size_t n) {
    const F f{};
    for (std::size_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
}

template <typename F, typename T>
GPURDMA_VECTOR_CLONES void loop_into_a(T* __restrict d, const T* __restrict b, std::size_t n) {
    const F f{};
    for (std::size_t i = 0; i < n; ++i) d[i] = f(d[i], b[i]);
}

template <typename F, typename T>
GPURDMA_VECTOR_CLONES void loop_into_b(T* __restrict d, const T* __restrict a, std::size_t n) {
    const F f{};
    for (std::size_t i = 0; i < n; ++i) d[i] = f(a[i], d[i]);
}

template <typename F, typename T>
GPURDMA_VECTOR_CLONES void loop_all_same(T* d, std::size_t n) {
    const F f{};
    for (std::size_t i = 0; i < n; ++i) d[i] = f(d[i], d[i]);
}

// MPI lets users pass buffers at any address; dereferencing a misaligned T* is
// undefined (and vector code may assume alignment). Such buffers go through aligned
// scratch in chunks: reads of a chunk happen before its writes, so aliasing holds.
template <typename F, typename T>
void run_unaligned(void* dst, const void* a, const void* b, std::size_t n) {
    constexpr std::size_t kChunk = 4096 / sizeof(T) ? 4096 / sizeof(T) : 1;
    alignas(64) T x[kChunk], y[kChunk];
    const F f{};
    auto* d = static_cast<unsigned char*>(dst);
    const auto* pa = static_cast<const unsigned char*>(a);
    const auto* pb = static_cast<const unsigned char*>(b);
    for (std::size_t done = 0; done < n; done += kChunk) {
        const std::size_t m = std::min(kChunk, n - done);
        std::memcpy(x, pa + done * sizeof(T), m * sizeof(T));
        std::memcpy(y, pb + done * sizeof(T), m * sizeof(T));
        for (std::size_t i = 0; i < m; ++i) x[i] = f(x[i], y[i]);
        std::memcpy(d + done * sizeof(T), x, m * sizeof(T));
    }
}

template <typename F, typename T>
void run(void* dst, const void* a, const void* b, std::size_t n) {
    const auto misaligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0; };
    if (misaligned(dst) || misaligned(a) || misaligned(b)) {
        run_unaligned<F, T>(dst, a, b, n);
        return;
    }
    T* d = static_cast<T*>(dst);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    if (d == x && d == y) {
        loop_all_same<F>(d, n);
    } else if (d == x) {
        loop_into_a<F>(d, y, n);
    } else if (d == y) {
        loop_into_b<F>(d, x, n);
    } else {
        loop_distinct<F>(d, x, y, n);
    }
}

using Kernel = void (*)(void*, const void*, const void*, std::size_t);

template <std::size_t O, std::size_t D>
constexpr Kernel kernel_for() {
    constexpr auto op = static_cast<gpurdma_op_t>(O);
    using Elem = Dtype<static_cast<gpurdma_dtype_t>(D)>;
    if constexpr (valid(op, Elem::kind)) {
        return &run<typename Op<op>::type, typename Elem::type>;
    } else {
        return nullptr;  // not instantiated: e.g. BAND has no meaning on float
    }
}

template <std::size_t... I>
constexpr std::array<Kernel, kOps * kDtypes> make_kernels(std::index_sequence<I...>) {
    return {{kernel_for<I / kDtypes, I % kDtypes>()...}};
}

template <std::size_t... D>
constexpr std::array<std::size_t, kDtypes> make_sizes(std::index_sequence<D...>) {
    return {{sizeof(typename Dtype<static_cast<gpurdma_dtype_t>(D)>::type)...}};
}

// Indexed [op * kDtypes + dtype]; nullptr marks an unsupported combination.
constexpr auto kKernels = make_kernels(std::make_index_sequence<kOps * kDtypes>{});
constexpr auto kSizes = make_sizes(std::make_index_sequence<kDtypes>{});

bool in_range(gpurdma_op_t op, gpurdma_dtype_t dtype) {
    // Compare as unsigned: an enum can hold values outside its enumerators.
    return static_cast<unsigned>(op) < kOps && static_cast<unsigned>(dtype) < kDtypes;
}

}  // namespace

bool partially_overlap(const void* p, const void* q, std::size_t bytes) {
    if (p == q) return false;
    const auto x = reinterpret_cast<std::uintptr_t>(p);
    const auto y = reinterpret_cast<std::uintptr_t>(q);
    return x < y + bytes && y < x + bytes;
}

bool supported(gpurdma_op_t op, gpurdma_dtype_t dtype) {
    return in_range(op, dtype) && kKernels[op * kDtypes + dtype] != nullptr;
}

std::size_t dtype_size(gpurdma_dtype_t dtype) {
    return static_cast<unsigned>(dtype) < kDtypes ? kSizes[dtype] : 0;
}

gpurdma_status_t apply(gpurdma_op_t op, gpurdma_dtype_t dtype, void* dst, const void* a,
                       const void* b, std::size_t count) {
    if (!in_range(op, dtype)) return GPURDMA_ERR_INVALID;
    const Kernel kernel = kKernels[op * kDtypes + dtype];
    if (kernel == nullptr) return GPURDMA_ERR_UNSUPPORTED;
    if (count == 0) return GPURDMA_OK;
    if (dst == nullptr || a == nullptr || b == nullptr) return GPURDMA_ERR_INVALID;
    const std::size_t size = kSizes[dtype];
    if (count > SIZE_MAX / size) return GPURDMA_ERR_INVALID;
    const std::size_t bytes = count * size;
    // The loops assume no partial overlap (restrict); refuse rather than corrupt.
    if (partially_overlap(dst, a, bytes) || partially_overlap(dst, b, bytes)) {
        return GPURDMA_ERR_INVALID;
    }
    kernel(dst, a, b, count);
    return GPURDMA_OK;
}

}  // namespace gpurdma::reduce

namespace {

template <typename E, std::size_t N>
const char* name_of(E value, const char* const (&names)[N]) {
    const auto i = static_cast<unsigned>(value);
    return i < N ? names[i] : "unknown";
}

constexpr const char* kDtypeNames[] = {
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float", "double", "long_double", "bool", "byte",
    "float_complex", "double_complex", "long_double_complex",
    "float_int", "double_int", "long_int", "2int", "short_int", "long_double_int",
};
static_assert(std::size(kDtypeNames) == GPURDMA_DTYPE_COUNT);

constexpr const char* kOpNames[] = {
    "sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor", "maxloc", "minloc",
};
static_assert(std::size(kOpNames) == GPURDMA_OP_COUNT);

constexpr const char* kStatusNames[] = {
    "ok", "unsupported", "no resource", "transport error", "timeout", "invalid argument",
    "communicator broken",
};
static_assert(std::size(kStatusNames) == GPURDMA_ERR_BROKEN + 1);

}  // namespace

size_t gpurdma_dtype_size(gpurdma_dtype_t dtype) { return gpurdma::reduce::dtype_size(dtype); }

int gpurdma_op_supported(gpurdma_op_t op, gpurdma_dtype_t dtype) {
    return gpurdma::reduce::supported(op, dtype) ? 1 : 0;
}

const char* gpurdma_dtype_name(gpurdma_dtype_t dtype) { return name_of(dtype, kDtypeNames); }

const char* gpurdma_op_name(gpurdma_op_t op) { return name_of(op, kOpNames); }

const char* gpurdma_status_name(gpurdma_status_t status) {
    return name_of(status, kStatusNames);
}

gpurdma_status_t gpurdma_reduce_local(gpurdma_op_t op, gpurdma_dtype_t dtype, void* dst,
                                      const void* a, const void* b, size_t count) {
    return gpurdma::reduce::apply(op, dtype, dst, a, b, count);
}
