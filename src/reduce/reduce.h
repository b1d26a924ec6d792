// Host-side local reduction: the C++ entry that the gpurdma_reduce_local family of
// C functions wraps.
#ifndef GPURDMA_REDUCE_REDUCE_H
#define GPURDMA_REDUCE_REDUCE_H

#include <cstddef>

#include "gpurdma/gpurdma.h"

namespace gpurdma::reduce {

// dst[i] = a[i] OP b[i] for i < count. dst may be exactly a and/or b; any other
// overlap is rejected (GPURDMA_ERR_INVALID). Returns GPURDMA_ERR_UNSUPPORTED for a
// combination the MPI standard does not define, GPURDMA_ERR_INVALID for an op or
// dtype out of range or a null buffer with count > 0.
gpurdma_status_t apply(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b, size_t count);

// Whether the MPI standard defines op on dtype (false for values out of range).
bool supported(gpurdma_op_t op, gpurdma_dtype_t dtype);

// Whether two spans of `bytes` bytes overlap without starting at the same address
// (the overlap apply rejects).
bool partially_overlap(const void *p, const void *q, size_t bytes);

// C sizeof of one element; 0 for a dtype out of range.
size_t dtype_size(gpurdma_dtype_t dtype);

}  // namespace gpurdma::reduce

#endif  // GPURDMA_REDUCE_REDUCE_H
