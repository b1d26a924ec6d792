#!/usr/bin/env bash
# The GPU launcher in the test suite:
#  - the stand-in libcuda.so.1 (tests/gpu/fake_cuda.cpp) is built, and its own semantics
#    checked (tests/gpu/fake_cuda_check.cpp: streams, events, page-locked memory, leak
#    report, bandwidth knobs), everywhere: it needs only the C++ compiler;
#  - host buffers always (the launcher, its bootstrap and the core without MPI);
#  - device buffers on a real GPU where a CUDA driver exists; otherwise the device
#    path's protocol (IPC exchange and cache, slices, barriers, staging votes, stream and
#    event ordering) against the stand-in, which checks the protocol, not the CUDA
#    kernels: once as fast as it goes, once with slow copies and kernels (so work is
#    still running when the caller polls), both with GPURDMA_FAKE_CUDA_LEAKS=1 (a rank
#    that leaves page-locked memory, device memory, events or streams behind fails).
set -u
build=${GPURDMA_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
src=${GPURDMA_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
launcher=$build/tests/gpu/gpu_launcher
[ -x "$launcher" ] || { echo "FAIL: $launcher not built (make check builds it)"; exit 1; }

fake=$build/tests/gpu/fake
mkdir -p "$fake"
# shellcheck disable=SC2206 # CXX may hold several words ("ccache g++")
cxx=(${CXX:-g++} -std=c++17 -O2 -Wall -Wextra -pthread -I"$src/include" -I"$src/src")
echo "== the stand-in driver's own semantics (fake_cuda_check)"
if ! "${cxx[@]}" -shared -fPIC -Wl,-Bsymbolic -Wl,-z,nodelete -o "$fake/libcuda.so.1" \
        "$src/tests/gpu/fake_cuda.cpp" "$src/src/reduce/reduce_host.cpp"; then
    echo "FAIL: cannot build the stand-in driver"
    exit 1
fi
if ! "${cxx[@]}" -o "$fake/fake_cuda_check" "$src/tests/gpu/fake_cuda_check.cpp" -ldl; then
    echo "FAIL: cannot build fake_cuda_check"
    exit 1
fi
timeout -k 10 300 "$fake/fake_cuda_check" "$fake/libcuda.so.1" || { echo "FAIL: stand-in driver semantics"; exit 1; }

echo "== gpu launcher, host buffers (np 2 and 4)"
"$launcher" --mode host --np 2,4 --max-bytes 262144 --limit 120 || { echo "FAIL: host mode"; exit 1; }

if probe=$("$launcher" --mode probe); then
    echo "== gpu launcher, device buffers on GPU 0 ($probe)"
    "$launcher" --mode device --np 2,4 --max-bytes 16777216 --expect-device --stage-max 0 --verbose 1 --limit 240 ||
        { echo "FAIL: device mode"; exit 1; }
elif ! grep -q '^#define GPURDMA_HAVE_CUDA 1' "$build/config.h" 2>/dev/null; then
    echo "SKIP device part: no CUDA driver ($probe), and a host-only build (no kernels to load)"
else
    echo "SKIP device part: no CUDA driver ($probe)"
    echo "== device path protocol with the stand-in driver (np 2 and 4)"
    LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} GPURDMA_FAKE_CUDA_LEAKS=1 \
        "$launcher" --mode device --np 2,4 --max-bytes 262144 --expect-device --stage-max 0 --limit 120 ||
        { echo "FAIL: device protocol (stand-in driver)"; exit 1; }
    echo "== the same with small messages staged (coll_gpurdma_device_stage_max's default, np 2)"
    LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} GPURDMA_FAKE_CUDA_LEAKS=1 \
        "$launcher" --mode device --np 2 --max-bytes 262144 --expect-device --limit 120 ||
        { echo "FAIL: device protocol with small messages staged (stand-in driver)"; exit 1; }
    echo "== device path protocol with the stand-in driver, copies and kernels at 1 GB/s (np 4)"
    LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} GPURDMA_FAKE_CUDA_LEAKS=1 \
        GPURDMA_FAKE_CUDA_COPY_GBPS=1 GPURDMA_FAKE_CUDA_KERNEL_GBPS=1 \
        "$launcher" --mode device --np 4 --max-bytes 262144 --expect-device --stage-max 0 --limit 120 ||
        { echo "FAIL: device protocol (stand-in driver, slow copies and kernels)"; exit 1; }
fi
echo "PASS"
