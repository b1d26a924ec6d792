// The loops and the kernel table of one instruction-set variant. reduce_host.cpp
// includes this file once per ISA (no include guard, on purpose): GPURDMA_ISA names
// the variant's namespace, GPURDMA_ISA_F16C (0 or 1) whether it converts half
// precision with F16C, a `#pragma GCC target` around the include selects the
// instructions (in C++ the pragma does not define __F16C__ and friends), and the
// includer declares in that namespace
//     constexpr bool kHasFma;  // the compiler may emit fused multiply-adds here
// A variant with FMA leaves out the kernels that multiply and add (complex PROD):
// GCC 12 fuses vectorised complex products even under -ffp-contract=off, and one
// rounding instead of two changes the last bit. Those come from a variant without
// FMA instead (reduce_host.cpp), so no variant can fuse, whatever the flags say.
#if !defined(GPURDMA_ISA) || !defined(GPURDMA_ISA_F16C)
#error "define GPURDMA_ISA and GPURDMA_ISA_F16C before including reduce/kernel_loops.h"
#endif

namespace gpurdma::reduce::GPURDMA_ISA {
namespace {

// binary16 conversions: the compiler's _Float16 casts where this ISA has F16C (they
// become vcvtph2ps/vcvtps2ph once inlined here; F16C gives the same bits as half.h's
// portable conversions, which the other variants use).
#if GPURDMA_ISA_F16C && defined(GPURDMA_HAVE_FLOAT16)
using HalfConv = NativeHalf;
#else
using HalfConv = SoftHalf;
#endif

// The element type this variant computes with: its own half conversions, else the
// type map's.
template <typename T> struct Local {
    using type = T;
};
template <typename C> struct Local<Half<C>> {
    using type = Half<HalfConv>;
};

// One loop per aliasing case, each with __restrict on exactly the pointers known to
// be distinct, so the loops vectorize without runtime alias checks; not every
// compiler's check lets dst == a (in-place accumulation, the common case) take the
// vector path.
// a == b is allowed here: restrict only forbids aliasing what is written.
template <typename F, typename T>
void loop_distinct(T *__restrict d, const T *__restrict a, const T *__restrict b, std::size_t n)
{
    const F f{};
    for (std::size_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
}

template <typename F, typename T> void loop_into_a(T *__restrict d, const T *__restrict b, std::size_t n)
{
    const F f{};
    for (std::size_t i = 0; i < n; ++i) d[i] = f(d[i], b[i]);
}

template <typename F, typename T> void loop_into_b(T *__restrict d, const T *__restrict a, std::size_t n)
{
    const F f{};
    for (std::size_t i = 0; i < n; ++i) d[i] = f(a[i], d[i]);
}

template <typename F, typename T> void loop_all_same(T *d, std::size_t n)
{
    const F f{};
    for (std::size_t i = 0; i < n; ++i) d[i] = f(d[i], d[i]);
}

// MPI lets users pass buffers at any address; dereferencing a misaligned T* is
// undefined (and vector code may assume alignment). Such buffers go through aligned
// scratch in chunks, reduced by this variant's own loop: reads of a chunk happen
// before its writes, so aliasing holds.
template <typename F, typename T> void run_unaligned(void *dst, const void *a, const void *b, std::size_t n)
{
    constexpr std::size_t kChunk = 4096 / sizeof(T) ? 4096 / sizeof(T) : 1;
    alignas(64) T x[kChunk], y[kChunk];
    auto *d = static_cast<unsigned char *>(dst);
    const auto *pa = static_cast<const unsigned char *>(a);
    const auto *pb = static_cast<const unsigned char *>(b);
    for (std::size_t done = 0; done < n; done += kChunk) {
        const std::size_t m = std::min(kChunk, n - done);
        std::memcpy(x, pa + done * sizeof(T), m * sizeof(T));
        std::memcpy(y, pb + done * sizeof(T), m * sizeof(T));
        loop_into_a<F>(x, y, m);
        std::memcpy(d + done * sizeof(T), x, m * sizeof(T));
    }
}

template <typename F, typename T> void run(void *dst, const void *a, const void *b, std::size_t n)
{
    const auto misaligned = [](const void *p) { return reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0; };
    if (misaligned(dst) || misaligned(a) || misaligned(b)) {
        run_unaligned<F, T>(dst, a, b, n);
        return;
    }
    T *d = static_cast<T *>(dst);
    const T *x = static_cast<const T *>(a);
    const T *y = static_cast<const T *>(b);
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

template <std::size_t O, std::size_t D> constexpr Kernel kernel_for()
{
    constexpr auto op = static_cast<gpurdma_op_t>(O);
    using Elem = types::Dtype<static_cast<gpurdma_dtype_t>(D)>;
    if constexpr (!types::valid(op, Elem::kind)) {
        return nullptr;  // not instantiated: e.g. BAND has no meaning on float
    } else if constexpr (kHasFma && types::multiplies_and_adds(op, Elem::kind)) {
        return nullptr;  // never built where it could fuse (see the top of this file)
    } else {
        return &run<typename types::Op<op>::type, typename Local<typename Elem::type>::type>;
    }
}

template <std::size_t... I>
constexpr std::array<Kernel, types::kOps * types::kDtypes> make_table(std::index_sequence<I...>)
{
    return {{kernel_for<I / types::kDtypes, I % types::kDtypes>()...}};
}

}  // namespace

// Indexed [op * kDtypes + dtype].
constexpr auto kTable = make_table(std::make_index_sequence<types::kOps * types::kDtypes>{});

}  // namespace gpurdma::reduce::GPURDMA_ISA
