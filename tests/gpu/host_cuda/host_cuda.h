// CUDA's kernel language as plain host C++, just enough for src/reduce/reduce_cuda.cu,
// so that the stand-in driver (tests/gpu/fake_cuda.cpp) runs the kernels' own source:
// the qualifiers are empty, a kernel is an ordinary extern "C" function, and the
// built-in coordinates are thread-locals that the stand-in's cuLaunchKernel sets before
// it runs each (block, thread) of the grid it was given.
#pragma once

#include <cstdint>

// The kernels' `#pragma unroll` means nothing to the host compiler: build with
// -Wno-unknown-pragmas (GCC's diagnostic pragmas do not reach the preprocessor's warning).

#define __global__
#define __device__
#define __host__
#define __launch_bounds__(...)

// CUDA's 16-byte vector, 16-byte aligned as on the device (the kernels load sources as these).
struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
};

// The running thread's place in its launch (one host thread runs one device thread at
// a time; stream workers run kernels in parallel, hence thread-local).
extern thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
