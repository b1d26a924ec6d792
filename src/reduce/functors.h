// One functor per MPI reduction op: f(a, b) returns a OP b, where a is the
// lower-ranked contribution. The same functors run in host loops and CUDA kernels,
// so they use only operators and <type_traits> (no std:: calls).
//
// Each result is a pure function of (a, b), so every rank computes the same bits.
// Which (op, element type) pairs are valid is decided by type_map.h (host) and
// reduce_device.h (device); a functor may compile for more types than MPI allows.
#ifndef GPURDMA_REDUCE_FUNCTORS_H
#define GPURDMA_REDUCE_FUNCTORS_H

#include <cstdint>
#include <type_traits>

#include "gpurdma/gpurdma.h"
#include "reduce/element_types.h"

#if defined(__CUDACC__) || defined(__HIP__)
#define GPURDMA_HD __host__ __device__
#else
#define GPURDMA_HD
#endif

namespace gpurdma::reduce {

namespace detail {

// Integer SUM/PROD wrap modulo 2^bits (MPI never saturates). The arithmetic runs in
// an unsigned type at least as wide as unsigned int: signed overflow is UB, and
// narrower unsigned types would promote to (signed) int, where u16 * u16 overflows.
// Converting the result back to a signed type is modular on every compiler we target.
template <typename T>
using wrap_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T> GPURDMA_HD inline bool sign_bit(T x)
{
#if defined(__CUDA_ARCH__)
    return signbit(x);
#else
    return __builtin_signbit(x);  // type-generic in GCC >= 6 and Clang
#endif
}

// a * b rounded on its own, never fused with a following add. The host build forbids
// contraction (-ffp-contract=off) and builds nothing that adds products for an ISA
// with FMA (kernel_loops.h); nvcc contracts by default (--fmad=true), and its _rn
// intrinsics are the products it never fuses. hipcc (clang) builds the AMD code objects
// with -ffp-contract=off, as the host (Makefile.am).
template <typename T> GPURDMA_HD inline T mul_rounded(T a, T b)
{
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) {
        return __fmul_rn(a, b);
    } else if constexpr (std::is_same_v<T, double>) {
        return __dmul_rn(a, b);
    } else {
        return a * b;
    }
#else
    return a * b;
#endif
}

// Which operand floating MIN/MAX return (the rules are spelled out above Min).
template <typename T> GPURDMA_HD inline bool min_takes_a(T a, T b)
{
    if (a != a) return true;
    if (b != b) return false;
    if (a < b) return true;
    if (b < a) return false;
    return sign_bit(a);  // equal: only zeros can differ
}

template <typename T> GPURDMA_HD inline bool max_takes_a(T a, T b)
{
    if (a != a) return true;
    if (b != b) return false;
    if (a < b) return false;
    if (b < a) return true;
    return !sign_bit(a);
}

// binary16 bits as an unsigned key in the order of their values, -0 before +0 (NaNs
// aside): MIN/MAX on halves compare these, which is the float comparison without
// converting (a comparison of widened halves also makes GCC call a soft-float helper).
GPURDMA_HD inline unsigned half_order(std::uint16_t h)
{
    return (h & 0x8000u) != 0 ? 0xffffu - h : h + 0x8000u;
}

GPURDMA_HD inline bool half_is_nan(std::uint16_t h)
{
    return (h & 0x7fffu) > 0x7c00u;
}

}  // namespace detail

struct Sum {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const
    {
        if constexpr (std::is_integral_v<T>) {
            using U = detail::wrap_t<T>;
            return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
        } else {
            return a + b;
        }
    }
    template <typename T> GPURDMA_HD Complex<T> operator()(Complex<T> a, Complex<T> b) const
    {
        return {a.re + b.re, a.im + b.im};
    }
    template <typename C> GPURDMA_HD Half<C> operator()(Half<C> a, Half<C> b) const
    {
        return {C::narrow(C::widen(a.bits) + C::widen(b.bits))};
    }
};

struct Prod {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const
    {
        if constexpr (std::is_integral_v<T>) {
            using U = detail::wrap_t<T>;
            return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
        } else {
            return a * b;
        }
    }
    // The textbook formula with every product rounded (as Open MPI's op and numpy
    // compute finite values), not C's Annex G (no inf/NaN recovery): cheap, and
    // identical on host and device.
    template <typename T> GPURDMA_HD Complex<T> operator()(Complex<T> a, Complex<T> b) const
    {
        using detail::mul_rounded;
        return {mul_rounded(a.re, b.re) - mul_rounded(a.im, b.im), mul_rounded(a.re, b.im) + mul_rounded(a.im, b.re)};
    }
    template <typename C> GPURDMA_HD Half<C> operator()(Half<C> a, Half<C> b) const
    {
        return {C::narrow(C::widen(a.bits) * C::widen(b.bits))};
    }
};

// Floating MIN/MAX: MPI leaves NaN and signed zeros unspecified; we pin them down so
// the result never depends on operand order or on the hardware min instruction:
//  - if either operand is NaN the result is NaN: a if a is NaN, else b;
//  - MIN(+0, -0) = MIN(-0, +0) = -0 and MAX(+0, -0) = MAX(-0, +0) = +0.
// (`a != a` is the NaN test; it needs IEEE semantics, i.e. no -ffast-math.)
// Half precision returns an operand's bits unchanged, by the same rules.
struct Min {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const
    {
        if constexpr (std::is_floating_point_v<T>) {
            return detail::min_takes_a(a, b) ? a : b;
        } else {
            return b < a ? b : a;
        }
    }
    template <typename C> GPURDMA_HD Half<C> operator()(Half<C> a, Half<C> b) const
    {
        if (detail::half_is_nan(a.bits)) return a;
        if (detail::half_is_nan(b.bits)) return b;
        return detail::half_order(a.bits) <= detail::half_order(b.bits) ? a : b;
    }
};

struct Max {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const
    {
        if constexpr (std::is_floating_point_v<T>) {
            return detail::max_takes_a(a, b) ? a : b;
        } else {
            return a < b ? b : a;
        }
    }
    template <typename C> GPURDMA_HD Half<C> operator()(Half<C> a, Half<C> b) const
    {
        if (detail::half_is_nan(a.bits)) return a;
        if (detail::half_is_nan(b.bits)) return b;
        return detail::half_order(a.bits) >= detail::half_order(b.bits) ? a : b;
    }
};

// Logical ops: nonzero is true; the result is 1 or 0 in the element type.
struct LAnd {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const { return static_cast<T>((a != 0) & (b != 0)); }
};

struct LOr {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const { return static_cast<T>((a != 0) | (b != 0)); }
};

struct LXor {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const { return static_cast<T>((a != 0) ^ (b != 0)); }
};

struct BAnd {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const { return static_cast<T>(a & b); }
};

struct BOr {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const { return static_cast<T>(a | b); }
};

struct BXor {
    template <typename T> GPURDMA_HD T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};

// MAXLOC/MINLOC: the larger (smaller) value wins; on equal values the smaller
// index wins (MPI standard), so the result is symmetric in a and b.
struct MaxLoc {
    template <typename T> GPURDMA_HD ValueIndex<T> operator()(ValueIndex<T> a, ValueIndex<T> b) const
    {
        if (a.v > b.v) return a;
        if (b.v > a.v) return b;
        return b.i < a.i ? b : a;
    }
};

struct MinLoc {
    template <typename T> GPURDMA_HD ValueIndex<T> operator()(ValueIndex<T> a, ValueIndex<T> b) const
    {
        if (a.v < b.v) return a;
        if (b.v < a.v) return b;
        return b.i < a.i ? b : a;
    }
};

// The functor of each MPI op, for the host kernels (type_map.h) and the device kernels
// (reduce_cuda.cu) alike.
template <int O> struct OpFunctor;
template <> struct OpFunctor<GPURDMA_SUM> {
    using type = Sum;
};
template <> struct OpFunctor<GPURDMA_PROD> {
    using type = Prod;
};
template <> struct OpFunctor<GPURDMA_MIN> {
    using type = Min;
};
template <> struct OpFunctor<GPURDMA_MAX> {
    using type = Max;
};
template <> struct OpFunctor<GPURDMA_LAND> {
    using type = LAnd;
};
template <> struct OpFunctor<GPURDMA_LOR> {
    using type = LOr;
};
template <> struct OpFunctor<GPURDMA_LXOR> {
    using type = LXor;
};
template <> struct OpFunctor<GPURDMA_BAND> {
    using type = BAnd;
};
template <> struct OpFunctor<GPURDMA_BOR> {
    using type = BOr;
};
template <> struct OpFunctor<GPURDMA_BXOR> {
    using type = BXor;
};
template <> struct OpFunctor<GPURDMA_MAXLOC> {
    using type = MaxLoc;
};
template <> struct OpFunctor<GPURDMA_MINLOC> {
    using type = MinLoc;
};

}  // namespace gpurdma::reduce

#endif  // GPURDMA_REDUCE_FUNCTORS_H
