// cuda_fp16.h for the host-compiled kernels (host_cuda.h): the four conversions the
// kernels use, through the host path's portable binary16 code (src/reduce/half.h), so
// the stand-in's results are the host's bits (a GPU quiets NaN payloads its own way).
#pragma once

#include <cstdint>

#include "host_cuda.h"
#include "reduce/half.h"

struct __half {
    std::uint16_t bits;
};

inline __half __ushort_as_half(unsigned short h)
{
    return __half{h};
}
inline unsigned short __half_as_ushort(__half h)
{
    return h.bits;
}
inline float __half2float(__half h)
{
    return gpurdma::reduce::half_to_float(h.bits);
}
inline __half __float2half_rn(float f)
{
    return __half{gpurdma::reduce::float_to_half(f)};
}
