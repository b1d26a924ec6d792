// What the CUDA reduction kernels cover, and how the host finds and calls them.
// Shared by the kernels (nvcc) and the host code that launches them (g++), so it
// holds only constexpr data and plain structs.
//
// The validity rule is op_rules.h's, shared with the host kernels;
// tests/unit/test_device.cpp checks that device_supported() is exactly the host's
// supported() minus long double.
#ifndef GPURDMA_REDUCE_REDUCE_DEVICE_H
#define GPURDMA_REDUCE_REDUCE_DEVICE_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "gpurdma/gpurdma.h"
#include "reduce/op_rules.h"

namespace gpurdma::reduce::device {

// Sources one kernel reads (the ranks of a node that share the reduction).
constexpr int kMaxSources = 16;

// Every kernel's __launch_bounds__: the most threads per block it may be launched with
// (the launcher's block size; the stand-in driver refuses more, as a GPU does).
constexpr unsigned kThreadsPerBlock = 512;

// The one kernel parameter: dst[i] = src[0][i] OP src[1][i] OP ... (left to right,
// i.e. lower rank first), for i < count. dst may be one of the sources.
struct ReduceArgs {
    const void *src[kMaxSources];
    void *dst;
    unsigned long long count;
    int nsrc;
};

// Long double (x87 80-bit) has no device representation: those types stage to host.
constexpr bool is_long_double(gpurdma_dtype_t d)
{
    return d == GPURDMA_LONG_DOUBLE || d == GPURDMA_LONG_DOUBLE_COMPLEX || d == GPURDMA_LONG_DOUBLE_INT;
}

using reduce::Kind;  // the MPI standard's type groups (op_rules.h)

constexpr Kind kind_of(gpurdma_dtype_t d)
{
    switch (d) {
        case GPURDMA_INT8:
        case GPURDMA_UINT8:
        case GPURDMA_INT16:
        case GPURDMA_UINT16:
        case GPURDMA_INT32:
        case GPURDMA_UINT32:
        case GPURDMA_INT64:
        case GPURDMA_UINT64: return Kind::Integer;
        case GPURDMA_FLOAT:
        case GPURDMA_DOUBLE:
        case GPURDMA_FLOAT16: return Kind::Floating;
        case GPURDMA_BOOL: return Kind::Logical;
        case GPURDMA_BYTE: return Kind::Byte;
        case GPURDMA_FLOAT_COMPLEX:
        case GPURDMA_DOUBLE_COMPLEX: return Kind::Complex;
        case GPURDMA_FLOAT_INT:
        case GPURDMA_DOUBLE_INT:
        case GPURDMA_LONG_INT:
        case GPURDMA_2INT:
        case GPURDMA_SHORT_INT: return Kind::Pair;
        default: return Kind::None;  // long double family, out of range
    }
}

// The MPI standard's valid (op, type group) pairs, for the types the GPU handles.
constexpr bool device_supported(gpurdma_op_t op, gpurdma_dtype_t d)
{
    return valid_op(op, kind_of(d));
}

// Whether two results are the same element: every byte, except the padding of the
// value/index pairs (MPI_SHORT_INT, MPI_DOUBLE_INT, ...), which no op defines.
inline bool same_element(gpurdma_dtype_t d, const void *a, const void *b, size_t elem_size)
{
    if (kind_of(d) != Kind::Pair) return std::memcmp(a, b, elem_size) == 0;
    const size_t value = d == GPURDMA_SHORT_INT ? 2 : (d == GPURDMA_DOUBLE_INT || d == GPURDMA_LONG_INT) ? 8 : 4;
    const size_t index = value == 8 ? 8 : 4;
    return std::memcmp(a, b, value) == 0 &&
           std::memcmp(static_cast<const char *>(a) + index, static_cast<const char *>(b) + index, sizeof(int)) == 0;
}

// Kernel symbol in the embedded module: gpurdma_rs_<op>_<dtype> (enum values).
inline void kernel_name(gpurdma_op_t op, gpurdma_dtype_t d, char (&out)[32])
{
    std::snprintf(out, sizeof out, "gpurdma_rs_%d_%d", static_cast<int>(op), static_cast<int>(d));
}

}  // namespace gpurdma::reduce::device

#endif  // GPURDMA_REDUCE_REDUCE_DEVICE_H
