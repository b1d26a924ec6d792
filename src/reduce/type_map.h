// The host kernels' two small type maps (dtype -> element type and kind, op ->
// functor) and the MPI standard's rule for which pairs are valid. Internal to the
// host reduction (reduce_host.cpp and the kernel variants it builds).
#ifndef GPURDMA_REDUCE_TYPE_MAP_H
#define GPURDMA_REDUCE_TYPE_MAP_H

#include <cstddef>
#include <cstdint>

#include "gpurdma/gpurdma.h"
#include "reduce/element_types.h"
#include "reduce/functors.h"
#include "reduce/half.h"
#include "reduce/op_rules.h"

namespace gpurdma::reduce::types {

constexpr std::size_t kOps = GPURDMA_OP_COUNT;
constexpr std::size_t kDtypes = GPURDMA_DTYPE_COUNT;

using reduce::Kind;  // the MPI standard's type groups (op_rules.h)

template <typename T, Kind K> struct Layout {
    using type = T;
    static constexpr Kind kind = K;
};

template <gpurdma_dtype_t D> struct Dtype;
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
template <> struct Dtype<GPURDMA_LONG_DOUBLE_COMPLEX> : Layout<Complex<long double>, Kind::Complex> {};
template <> struct Dtype<GPURDMA_FLOAT_INT> : Layout<ValueIndex<float>, Kind::Pair> {};
template <> struct Dtype<GPURDMA_DOUBLE_INT> : Layout<ValueIndex<double>, Kind::Pair> {};
template <> struct Dtype<GPURDMA_LONG_INT> : Layout<ValueIndex<long>, Kind::Pair> {};
template <> struct Dtype<GPURDMA_2INT> : Layout<ValueIndex<int>, Kind::Pair> {};
template <> struct Dtype<GPURDMA_SHORT_INT> : Layout<ValueIndex<short>, Kind::Pair> {};
template <> struct Dtype<GPURDMA_LONG_DOUBLE_INT> : Layout<ValueIndex<long double>, Kind::Pair> {};
// Each kernel variant swaps in its own conversions (kernel_loops.h).
template <> struct Dtype<GPURDMA_FLOAT16> : Layout<Half<SoftHalf>, Kind::Floating> {};

static_assert(sizeof(bool) == 1, "C _Bool is read as one byte");

template <gpurdma_op_t O> using Op = OpFunctor<O>;  // functors.h

// The MPI standard's table of valid (op, type-group) pairs, C types only.
constexpr bool valid(gpurdma_op_t op, Kind kind)
{
    return valid_op(op, kind);
}

// Whether the functor adds products of floating-point values: the only kernels a
// compiler can turn into fused multiply-adds (complex PROD).
constexpr bool multiplies_and_adds(gpurdma_op_t op, Kind kind)
{
    return op == GPURDMA_PROD && kind == Kind::Complex;
}

}  // namespace gpurdma::reduce::types

#endif  // GPURDMA_REDUCE_TYPE_MAP_H
