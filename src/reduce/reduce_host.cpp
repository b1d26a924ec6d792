// Host reduction: the op x dtype dispatch onto the kernel variant this CPU runs best,
// and the C entry points around it. The variants are built here, in one translation
// unit, each from reduce/kernel_loops.h under its own instruction set.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <utility>

#include "gpurdma/gpurdma.h"
#include "reduce/kernel_table.h"
#include "reduce/reduce.h"
#include "reduce/type_map.h"

// Named variants need GCC's target pragma and x86-64; elsewhere only the baseline
// (the compiler's default ISA) exists.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GPURDMA_X86_VARIANTS 1
#else
#define GPURDMA_X86_VARIANTS 0
#endif

// FMA enabled for the whole file from the command line (-march=native, -mfma): every
// variant could then fuse, so none builds the kernels that multiply and add, and
// those (op, type) pairs go to the previous module, which rounds each operation.
#if defined(__FMA__) || defined(__FMA4__) || defined(__AVX512F__)
#define GPURDMA_COMMAND_LINE_FMA true
#else
#define GPURDMA_COMMAND_LINE_FMA false
#endif

namespace gpurdma::reduce::baseline {
// x86-64's baseline (SSE2) has no FMA; elsewhere the flags decide (-ffp-contract=off),
// and contrib/check-no-fma.sh checks what was built.
constexpr bool kHasFma = GPURDMA_COMMAND_LINE_FMA;
}  // namespace gpurdma::reduce::baseline
#define GPURDMA_ISA baseline
#define GPURDMA_ISA_F16C 0
#include "reduce/kernel_loops.h"
#undef GPURDMA_ISA_F16C
#undef GPURDMA_ISA

#if GPURDMA_X86_VARIANTS
// "avx2" alone does not enable FMA (that is the separate "fma" feature); F16C comes
// with every AVX2 CPU and converts half precision.
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace gpurdma::reduce::avx2 {
constexpr bool kHasFma = GPURDMA_COMMAND_LINE_FMA;
}  // namespace gpurdma::reduce::avx2
#define GPURDMA_ISA avx2
#define GPURDMA_ISA_F16C 1
#include "reduce/kernel_loops.h"
#undef GPURDMA_ISA_F16C
#undef GPURDMA_ISA
#pragma GCC pop_options

// AVX-512F contains FMA: GCC uses it for 512-bit vectors whatever "fma" says.
#pragma GCC push_options
#pragma GCC target("avx512f,f16c")
namespace gpurdma::reduce::avx512 {
constexpr bool kHasFma = true;
}  // namespace gpurdma::reduce::avx512
#define GPURDMA_ISA avx512
#define GPURDMA_ISA_F16C 1
#include "reduce/kernel_loops.h"
#undef GPURDMA_ISA_F16C
#undef GPURDMA_ISA
#pragma GCC pop_options
#endif

namespace gpurdma::reduce {
namespace {

using types::kDtypes;
using types::kOps;

template <std::size_t... D> constexpr std::array<std::size_t, kDtypes> make_sizes(std::index_sequence<D...>)
{
    return {{sizeof(typename types::Dtype<static_cast<gpurdma_dtype_t>(D)>::type)...}};
}

constexpr auto kSizes = make_sizes(std::make_index_sequence<kDtypes>{});

bool in_range(gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    // Compare as unsigned: an enum can hold values outside its enumerators.
    return static_cast<unsigned>(op) < kOps && static_cast<unsigned>(dtype) < kDtypes;
}

using Table = std::array<Kernel, kOps * kDtypes>;

const Table *table_of(Isa isa)
{
    switch (isa) {
        case Isa::Baseline: return &baseline::kTable;
#if GPURDMA_X86_VARIANTS
        case Isa::Avx2: return &avx2::kTable;
        case Isa::Avx512: return &avx512::kTable;
#endif
        default: return nullptr;
    }
}

// The table reduce::apply indexes: the dispatched variant's, filled once.
const Table &dispatch_table()
{
    static const Table table = [] {
        Table t{};
        const Isa isa = dispatched_isa();
        for (std::size_t i = 0; i < t.size(); ++i) {
            t[i] = kernel(isa, static_cast<gpurdma_op_t>(i / kDtypes), static_cast<gpurdma_dtype_t>(i % kDtypes));
        }
        return t;
    }();
    return table;
}

}  // namespace

Kernel kernel(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    const Table *table = table_of(isa);
    if (table == nullptr || !in_range(op, dtype)) return nullptr;
    const std::size_t i = op * kDtypes + dtype;
#if GPURDMA_X86_VARIANTS
    // AVX-512 has no build of the kernels that multiply and add (kernel_loops.h):
    // AVX2's, which cannot fuse, serve in its place.
    if (isa == Isa::Avx512 && (*table)[i] == nullptr) return avx2::kTable[i];
#endif
    return (*table)[i];
}

bool isa_built(Isa isa)
{
    return table_of(isa) != nullptr;
}

bool isa_runnable(Isa isa)
{
    if (!isa_built(isa)) return false;
#if GPURDMA_X86_VARIANTS
    // libgcc's checks include the OS saving the wider registers (XCR0).
    __builtin_cpu_init();
    const bool f16c = __builtin_cpu_supports("f16c");
    if (isa == Isa::Avx2) return f16c && __builtin_cpu_supports("avx2");
    // AVX-512's complex PROD is AVX2's kernel (kernel()), so it needs AVX2 too.
    if (isa == Isa::Avx512) return f16c && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2");
#endif
    return true;
}

Isa dispatched_isa()
{
    static const Isa best = [] {
        for (Isa isa : {Isa::Avx512, Isa::Avx2}) {
            if (isa_runnable(isa)) return isa;
        }
        return Isa::Baseline;
    }();
    return best;
}

const char *isa_name(Isa isa)
{
    switch (isa) {
        case Isa::Baseline: return "baseline";
        case Isa::Avx2: return "avx2";
        case Isa::Avx512: return "avx512f";
        default: return "unknown";
    }
}

bool partially_overlap(const void *p, const void *q, std::size_t bytes)
{
    if (p == q) return false;
    const auto x = reinterpret_cast<std::uintptr_t>(p);
    const auto y = reinterpret_cast<std::uintptr_t>(q);
    return x < y + bytes && y < x + bytes;
}

bool supported(gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    return kernel(Isa::Baseline, op, dtype) != nullptr;
}

std::size_t dtype_size(gpurdma_dtype_t dtype)
{
    return static_cast<unsigned>(dtype) < kDtypes ? kSizes[dtype] : 0;
}

gpurdma_status_t apply(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                       std::size_t count)
{
    if (!in_range(op, dtype)) return GPURDMA_ERR_INVALID;
    const Kernel run = dispatch_table()[op * kDtypes + dtype];
    if (run == nullptr) return GPURDMA_ERR_UNSUPPORTED;
    if (count == 0) return GPURDMA_OK;
    if (dst == nullptr || a == nullptr || b == nullptr) return GPURDMA_ERR_INVALID;
    const std::size_t size = kSizes[dtype];
    if (count > SIZE_MAX / size) return GPURDMA_ERR_INVALID;
    const std::size_t bytes = count * size;
    // The loops assume no partial overlap (restrict); refuse rather than corrupt.
    if (partially_overlap(dst, a, bytes) || partially_overlap(dst, b, bytes)) {
        return GPURDMA_ERR_INVALID;
    }
    run(dst, a, b, count);
    return GPURDMA_OK;
}

}  // namespace gpurdma::reduce

namespace {

template <typename E, std::size_t N> const char *name_of(E value, const char *const (&names)[N])
{
    const auto i = static_cast<unsigned>(value);
    return i < N ? names[i] : "unknown";
}

constexpr const char *kDtypeNames[] = {
    "int8",      "uint8",           "int16",          "uint16",
    "int32",     "uint32",          "int64",          "uint64",
    "float",     "double",          "long_double",    "bool",
    "byte",      "float_complex",   "double_complex", "long_double_complex",
    "float_int", "double_int",      "long_int",       "2int",
    "short_int", "long_double_int", "float16",
};
static_assert(std::size(kDtypeNames) == GPURDMA_DTYPE_COUNT);

constexpr const char *kOpNames[] = {
    "sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor", "maxloc", "minloc",
};
static_assert(std::size(kOpNames) == GPURDMA_OP_COUNT);

constexpr const char *kStatusNames[] = {
    "ok",      "unsupported",      "no resource",         "transport error",
    "timeout", "invalid argument", "communicator broken", "concurrent calls on one communicator",
};
static_assert(std::size(kStatusNames) == GPURDMA_ERR_CONCURRENT + 1);

}  // namespace

size_t gpurdma_dtype_size(gpurdma_dtype_t dtype)
{
    return gpurdma::reduce::dtype_size(dtype);
}

int gpurdma_op_supported(gpurdma_op_t op, gpurdma_dtype_t dtype)
{
    return gpurdma::reduce::supported(op, dtype) ? 1 : 0;
}

const char *gpurdma_dtype_name(gpurdma_dtype_t dtype)
{
    return name_of(dtype, kDtypeNames);
}

const char *gpurdma_op_name(gpurdma_op_t op)
{
    return name_of(op, kOpNames);
}

const char *gpurdma_status_name(gpurdma_status_t status)
{
    return name_of(status, kStatusNames);
}

gpurdma_status_t gpurdma_reduce_local(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                                      size_t count)
{
    return gpurdma::reduce::apply(op, dtype, dst, a, b, count);
}
