// The host reduction kernels per instruction set, as a table the dispatcher (and the
// unit tests, which run every variant the CPU can) index by (ISA, op, dtype).
//
// Every variant computes every element alone, in the same operations, each rounded
// (no fused multiply-add, no reassociation), so all variants, the CUDA kernels and
// Open MPI's own op give the same bits. contrib/check-no-fma.sh checks the built code.
#ifndef GPURDMA_REDUCE_KERNEL_TABLE_H
#define GPURDMA_REDUCE_KERNEL_TABLE_H

#include <cstddef>

#include "gpurdma/gpurdma.h"

namespace gpurdma::reduce {

enum class Isa { Baseline, Avx2, Avx512, Count };

// dst[i] = a[i] OP b[i] for i < n, at any alignment; dst may be exactly a and/or b.
// No argument checks (reduce::apply does them).
using Kernel = void (*)(void *dst, const void *a, const void *b, std::size_t n);

// The kernel for (op, dtype) built for isa; nullptr when the MPI standard does not
// define the pair, the values are out of range, or isa is not built (isa_built).
Kernel kernel(Isa isa, gpurdma_op_t op, gpurdma_dtype_t dtype);

// Whether this build has a variant for isa (x86-64 with GCC: all three; elsewhere
// only the baseline).
bool isa_built(Isa isa);

// Whether it is built and this CPU (and OS) can run it.
bool isa_runnable(Isa isa);

// The variant reduce::apply uses: the widest runnable one.
Isa dispatched_isa();

const char *isa_name(Isa isa);

}  // namespace gpurdma::reduce

#endif  // GPURDMA_REDUCE_KERNEL_TABLE_H
