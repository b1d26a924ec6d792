// Element types with no built-in C++ equivalent that is usable in device code:
// complex numbers (std::complex is host-only), half precision and MPI's value/index
// pairs.
#ifndef GPURDMA_REDUCE_ELEMENT_TYPES_H
#define GPURDMA_REDUCE_ELEMENT_TYPES_H

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace gpurdma::reduce {

// Same layout as C's T _Complex (an array of two T: real, then imaginary).
template <typename T> struct Complex {
    T re;
    T im;
};

// IEEE binary16 (C's _Float16, CUDA's __half, MPIX_C_FLOAT16), held as its bits.
// Conv converts to and from float (portable, F16C or CUDA): every op computes in float
// and rounds back to half at each step, as the MPI's own op on _Float16 does. Float
// has 24 >= 2 * 11 + 2 bits, so a sum or product rounded to float and then to half is
// the correctly rounded half: what native half arithmetic gives too.
template <typename Conv> struct Half {
    std::uint16_t bits;
};

// Same layout as C's struct { T v; int i; } (MPI_FLOAT_INT, MPI_2INT, ...).
template <typename T> struct ValueIndex {
    T v;
    int i;
};

namespace detail {

template <typename T> struct CPair {  // the layout the MPI standard names, spelled as plain C
    T v;
    int i;
};

template <typename T> constexpr bool pair_matches_c()
{
    return sizeof(ValueIndex<T>) == sizeof(CPair<T>) && alignof(ValueIndex<T>) == alignof(CPair<T>) &&
           offsetof(ValueIndex<T>, v) == offsetof(CPair<T>, v) && offsetof(ValueIndex<T>, i) == offsetof(CPair<T>, i) &&
           std::is_standard_layout_v<ValueIndex<T>> && std::is_trivially_copyable_v<ValueIndex<T>>;
}

template <typename T> constexpr bool complex_matches_c()
{
    return sizeof(Complex<T>) == 2 * sizeof(T) && alignof(Complex<T>) == alignof(T) &&
           offsetof(Complex<T>, im) == sizeof(T) && std::is_standard_layout_v<Complex<T>> &&
           std::is_trivially_copyable_v<Complex<T>>;
}

}  // namespace detail

static_assert(detail::pair_matches_c<float>());
static_assert(detail::pair_matches_c<double>());
static_assert(detail::pair_matches_c<long>());
static_assert(detail::pair_matches_c<int>());
static_assert(detail::pair_matches_c<short>());
static_assert(detail::pair_matches_c<long double>());
static_assert(detail::complex_matches_c<float>());
static_assert(detail::complex_matches_c<double>());
static_assert(detail::complex_matches_c<long double>());
static_assert(sizeof(Half<void>) == 2 && alignof(Half<void>) == 2);

// (Not in hipcc's device pass: it sees the host's macros, with AMDGPU's 8-byte long
// double; the device has no long double kernels.)
#if defined(__x86_64__) && !defined(__HIP_DEVICE_COMPILE__)
// The sizes the x86-64 System V ABI gives the C pair structs; buffers cross the
// C API (and the network) as raw bytes, so these must not drift.
static_assert(sizeof(ValueIndex<float>) == 8);
static_assert(sizeof(ValueIndex<double>) == 16);
static_assert(sizeof(ValueIndex<long>) == 16);
static_assert(sizeof(ValueIndex<int>) == 8);
static_assert(sizeof(ValueIndex<short>) == 8);
static_assert(sizeof(ValueIndex<long double>) == 32);
static_assert(sizeof(Complex<long double>) == 32);
#endif

}  // namespace gpurdma::reduce

#endif  // GPURDMA_REDUCE_ELEMENT_TYPES_H
