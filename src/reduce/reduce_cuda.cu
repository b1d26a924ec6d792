// CUDA reduction kernels, built by nvcc into a fatbin that the core embeds as bytes
// and loads with cuModuleLoadData (no libcudart, no link against libcuda).
//
// Every kernel is the same template over the host path's functors (functors.h), so
// integer results are bit-identical to the host's, and each element is folded in a
// fixed order (source 0 first = lower rank first), so floats are identical on every
// rank that copies the result. One extern "C" entry per (op, dtype), with a plain
// name the host builds from the enum values (reduce_device.h).
#if defined(__HIP__)
// The same source through hipcc (clang) for AMD GPUs: HIP spells the half intrinsics
// and uint4 as CUDA does.
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#include <cuda_fp16.h>
#endif

#include <cstdint>

#include "reduce/element_types.h"
#include "reduce/functors.h"
#include "reduce/reduce_device.h"

namespace gpurdma::reduce::device {
namespace {

// binary16 through CUDA's __half: widened exactly, rounded back to nearest even
// (__float2half_rn), as on the host. Computed NaNs come out canonical, as every
// device float NaN does.
struct CudaHalf {
    __host__ __device__ static float widen(uint16_t h) { return __half2float(__ushort_as_half(h)); }
    __host__ __device__ static uint16_t narrow(float f) { return __half_as_ushort(__float2half_rn(f)); }
};

template <int D> struct DevType {
    using type = void;
};
template <> struct DevType<GPURDMA_INT8> {
    using type = int8_t;
};
template <> struct DevType<GPURDMA_UINT8> {
    using type = uint8_t;
};
template <> struct DevType<GPURDMA_INT16> {
    using type = int16_t;
};
template <> struct DevType<GPURDMA_UINT16> {
    using type = uint16_t;
};
template <> struct DevType<GPURDMA_INT32> {
    using type = int32_t;
};
template <> struct DevType<GPURDMA_UINT32> {
    using type = uint32_t;
};
template <> struct DevType<GPURDMA_INT64> {
    using type = int64_t;
};
template <> struct DevType<GPURDMA_UINT64> {
    using type = uint64_t;
};
template <> struct DevType<GPURDMA_FLOAT> {
    using type = float;
};
template <> struct DevType<GPURDMA_DOUBLE> {
    using type = double;
};
template <> struct DevType<GPURDMA_BOOL> {
    using type = uint8_t;
};  // C _Bool read as a byte, as on the host
template <> struct DevType<GPURDMA_BYTE> {
    using type = uint8_t;
};
template <> struct DevType<GPURDMA_FLOAT_COMPLEX> {
    using type = Complex<float>;
};
template <> struct DevType<GPURDMA_DOUBLE_COMPLEX> {
    using type = Complex<double>;
};
template <> struct DevType<GPURDMA_FLOAT_INT> {
    using type = ValueIndex<float>;
};
template <> struct DevType<GPURDMA_DOUBLE_INT> {
    using type = ValueIndex<double>;
};
template <> struct DevType<GPURDMA_LONG_INT> {
    using type = ValueIndex<long>;
};
template <> struct DevType<GPURDMA_2INT> {
    using type = ValueIndex<int>;
};
template <> struct DevType<GPURDMA_SHORT_INT> {
    using type = ValueIndex<short>;
};
template <> struct DevType<GPURDMA_FLOAT16> {
    using type = Half<CudaHalf>;
};

template <int O> using DevOp = OpFunctor<O>;  // functors.h

// 16 bytes seen as elements: one 128-bit load per source per step.
template <typename T> union Vec {
    uint4 raw;
    T e[16 / sizeof(T)];
};

template <typename F, typename T> __device__ void reduce_sources(const ReduceArgs &a)
{
    static_assert(16 % sizeof(T) == 0, "every device element size divides 16");
    constexpr int kPer = 16 / sizeof(T);
    const F f{};
    const size_t n = a.count;
    const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    bool aligned = (reinterpret_cast<uintptr_t>(a.dst) & 15) == 0;
    for (int s = 0; s < a.nsrc; ++s) aligned &= (reinterpret_cast<uintptr_t>(a.src[s]) & 15) == 0;
    size_t done = 0;
    if (aligned) {  // uniform across the grid: no divergence
        const size_t nvec = n / kPer;
        const uint4 *const *src = reinterpret_cast<const uint4 *const *>(a.src);
        uint4 *dst = static_cast<uint4 *>(a.dst);
        for (size_t v = first; v < nvec; v += stride) {
            Vec<T> acc;
            acc.raw = src[0][v];
            for (int s = 1; s < a.nsrc; ++s) {
                Vec<T> x;
                x.raw = src[s][v];
#pragma unroll
                for (int k = 0; k < kPer; ++k) acc.e[k] = f(acc.e[k], x.e[k]);
            }
            dst[v] = acc.raw;
        }
        done = nvec * kPer;
    }
    const T *const *src = reinterpret_cast<const T *const *>(a.src);
    T *dst = static_cast<T *>(a.dst);
    for (size_t i = done + first; i < n; i += stride) {
        T acc = src[0][i];
        for (int s = 1; s < a.nsrc; ++s) acc = f(acc, src[s][i]);
        dst[i] = acc;
    }
}

// Evaluated on the host side of nvcc (a constant), so no relaxed-constexpr flag is needed.
template <int O, int D>
constexpr bool kSupported = device_supported(static_cast<gpurdma_op_t>(O), static_cast<gpurdma_dtype_t>(D));

template <int O, int D> __device__ void dispatch(const ReduceArgs &a)
{
    if constexpr (kSupported<O, D>) reduce_sources<typename DevOp<O>::type, typename DevType<D>::type>(a);
}

}  // namespace
}  // namespace gpurdma::reduce::device

// The macro tables are laid out by hand.
// clang-format off
// One entry per (op, dtype) enum pair; unsupported pairs compile to empty kernels
// that the host never looks up.
#define GPURDMA_RS(O, D)                                                                   \
    extern "C" __global__ void __launch_bounds__(gpurdma::reduce::device::kThreadsPerBlock) \
    gpurdma_rs_##O##_##D(                                                                  \
        gpurdma::reduce::device::ReduceArgs a)                                             \
    {                                                                                      \
        gpurdma::reduce::device::dispatch<O, D>(a);                                        \
    }
#define GPURDMA_RS_OP(O)                                                                   \
    GPURDMA_RS(O, 0) GPURDMA_RS(O, 1) GPURDMA_RS(O, 2) GPURDMA_RS(O, 3) GPURDMA_RS(O, 4)    \
    GPURDMA_RS(O, 5) GPURDMA_RS(O, 6) GPURDMA_RS(O, 7) GPURDMA_RS(O, 8) GPURDMA_RS(O, 9)    \
    GPURDMA_RS(O, 11) GPURDMA_RS(O, 12) GPURDMA_RS(O, 13) GPURDMA_RS(O, 14)                \
    GPURDMA_RS(O, 16) GPURDMA_RS(O, 17) GPURDMA_RS(O, 18) GPURDMA_RS(O, 19) GPURDMA_RS(O, 20)    \
    GPURDMA_RS(O, 22)
// dtypes 10, 15, 21 are the long double family: no device kernels.
static_assert(GPURDMA_LONG_DOUBLE == 10 && GPURDMA_LONG_DOUBLE_COMPLEX == 15 && GPURDMA_LONG_DOUBLE_INT == 21 &&
              GPURDMA_FLOAT16 == 22 && GPURDMA_DTYPE_COUNT == 23 && GPURDMA_OP_COUNT == 12,
              "kernel list matches the enums");

GPURDMA_RS_OP(0) GPURDMA_RS_OP(1) GPURDMA_RS_OP(2) GPURDMA_RS_OP(3) GPURDMA_RS_OP(4) GPURDMA_RS_OP(5)
GPURDMA_RS_OP(6) GPURDMA_RS_OP(7) GPURDMA_RS_OP(8) GPURDMA_RS_OP(9) GPURDMA_RS_OP(10) GPURDMA_RS_OP(11)
    // clang-format on
