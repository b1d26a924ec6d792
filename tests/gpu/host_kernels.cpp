// The reduction kernels' own source (src/reduce/reduce_cuda.cu), compiled as host C++
// through host_cuda/ for the stand-in driver: its cuLaunchKernel runs these entries
// thread by thread over the launch's grid, so every GPU test runs the real kernels.
#include "host_cuda/host_cuda.h"

thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

#include "reduce/reduce_cuda.cu"
