#!/usr/bin/env bash
# The GPU launcher in the test suite:
#  - the stand-in libcuda.so.1 that make check builds (tests/gpu/fake_cuda.cpp, with the
#    kernels' own source compiled for the host: tests/gpu/host_kernels.cpp) and its own
#    semantics (tests/gpu/fake_cuda_check: streams, events, page-locked memory, launch
#    shapes, leak report, bandwidth knobs);
#  - the kernels against the host reduction (tests/gpu/kernel_check), on a GPU where a
#    CUDA driver exists, else through the stand-in: every (op, type), 1-16 sources, in
#    place, vector and grid-stride boundaries, misalignments, five grids;
#  - host buffers always (the launcher, its bootstrap and the core without MPI);
#  - device buffers on a real GPU where a CUDA driver exists; otherwise the device
#    path's protocol (IPC exchange and cache, slices, barriers, staging votes, stream and
#    event ordering) against the stand-in, in every build (without nvcc the stand-in
#    gives the kernel image): once as fast as it goes, once with slow copies and kernels
#    (so work is still running when the caller polls), both with GPURDMA_FAKE_CUDA_LEAKS=1
#    (a rank that leaves page-locked memory, device memory, events or streams behind fails).
set -u
# CI's Debian 13 part: the launcher runs the core without MPI, the code the Debian 12 part
# runs it on; there only the Open MPI 5 tests are new.
if [ "${GPURDMA_SKIP_GPU_LAUNCHER:-0}" = 1 ]; then
    echo "SKIP: GPURDMA_SKIP_GPU_LAUNCHER=1 (the GPU launcher's suite runs in CI's Debian 12 part)"
    exit 77
fi
build=${GPURDMA_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
launcher=$build/tests/gpu/gpu_launcher
fake=$build/tests/gpu/fake
for f in "$launcher" "$build/tests/gpu/fake_cuda_check" "$build/tests/gpu/kernel_check" "$fake/libcuda.so.1"; do
    [ -x "$f" ] || { echo "FAIL: $f not built (make check builds it)"; exit 1; }
done
echo "== the stand-in driver's own semantics (fake_cuda_check)"
timeout -k 10 300 "$build/tests/gpu/fake_cuda_check" "$fake/libcuda.so.1" || { echo "FAIL: stand-in driver semantics"; exit 1; }

echo "== gpu launcher, host buffers (np 2 and 4)"
"$launcher" --mode host --np 2,4 --max-bytes 262144 --limit 120 || { echo "FAIL: host mode"; exit 1; }
"$launcher" --mode host --colls --np 2,3,4 --max-bytes 65536 --limit 120 ||
    { echo "FAIL: host mode, the other collectives"; exit 1; }

if probe=$("$launcher" --mode probe); then
    echo "== the kernels against the host reduction on GPU 0 ($probe)"
    timeout -k 10 600 "$build/tests/gpu/kernel_check" || { echo "FAIL: kernel_check on the GPU"; exit 1; }
    echo "== gpu launcher, device buffers on GPU 0 ($probe)"
    "$launcher" --mode device --np 2,4 --max-bytes 16777216 --expect-device --stage-max 0 --verbose 1 --limit 240 ||
        { echo "FAIL: device mode"; exit 1; }
else
    echo "== the kernels against the host reduction, through the stand-in (no CUDA driver: $probe)"
    # Copies from pageable memory land at once here (the stand-in's default is 200 us
    # later): kernel_check checks the kernels, and waited about 3 ms a launch on those
    # landings (68 s of CI, at 15% CPU; 10 s without). fake_cuda_check and the launcher's
    # steps keep the late landings.
    GPURDMA_FAKE_CUDA_LANDS_LATER_US=0 LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        timeout -k 10 600 "$build/tests/gpu/kernel_check" ||
        { echo "FAIL: kernel_check through the stand-in"; exit 1; }
    echo "== the copy-rate probe through the stand-in (unit tests that skip without a driver)"
    LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} GPURDMA_FAKE_CUDA_LEAKS=1 timeout -k 10 120 \
        "$build/tests/unit/gpurdma_unit" --gtest_filter='CopyRateProbe.*' --gtest_brief=1 ||
        { echo "FAIL: copy-rate probe through the stand-in"; exit 1; }
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
# The other collectives (reduce_scatter block and uneven with zeros, allgather, bcast and
# reduce at every root; blocking, nonblocking and persistent; in place and not) on GPU
# buffers: on one node the device path (kernels and copies over CUDA IPC,
# algo/device_node_work.h) at every size, and small messages staged through page-locked
# host memory as by default; ranks of one node mixing host and GPU buffers (and send and
# receive buffers on different sides: the node stages); an allreduce on the device path
# after every call; logical nodes (2x2, 3+1+2): the node stage on the GPUs and the rail
# from page-locked copies (algo/device_node_rail.h), beside a node that stages (a rank
# on host buffers) or whose ranks pass host buffers; and (stand-in) slow and jittered
# copies and kernels.
colls_env=()
stand_in=0
if ! "$launcher" --mode probe >/dev/null; then
    stand_in=1
    colls_env=(LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} GPURDMA_FAKE_CUDA_LEAKS=1)
fi
colls() {
    local what=$1
    shift
    echo "== the other collectives on device buffers: $what"
    env "${colls_env[@]}" "$launcher" --mode device --colls --max-bytes 65536 --limit 120 "$@" ||
        { echo "FAIL: the other collectives on device buffers: $what"; exit 1; }
}
colls "one node, on the GPUs at every size" --np 2,3,4 --stage-max 0 --expect-device
colls "one node, small messages staged (coll_gpurdma_device_stage_max's default)" --np 3 --expect-device
colls "one node, ranks 1 and 2 on host buffers, split buffers" --np 4 --host-ranks 1,2 --split-buffers
colls "one node, an allreduce on the device path after every call" --np 4 --interleave --stage-max 0
colls "logical nodes 2x2, node stage on the GPUs, rail from page-locked copies" --np 4 --logical-nodes 2 \
    --stage-max 0 --expect-device
colls "logical nodes 3+1+2, node stage on the GPUs, rail from page-locked copies, 256 KiB" --np 6 \
    --logical-nodes 3,1,2 --stage-max 0 --expect-device --max-bytes 262144
colls "logical nodes 2x2, an allreduce after every call" --np 4 --logical-nodes 2 --interleave --stage-max 0
colls "logical nodes 2x2, rank 1 on host buffers: node 0 stages, node 1 on the GPUs" --np 4 --logical-nodes 2 \
    --host-ranks 1 --stage-max 0
colls "logical nodes 2+1, the one-rank node on host buffers, node 0 on the GPUs" --np 3 --logical-nodes 2,1 \
    --host-ranks 2 --stage-max 0
if [ $stand_in = 1 ]; then
    env_before=("${colls_env[@]}")
    colls_env+=(GPURDMA_FAKE_CUDA_COPY_GBPS=0.2 GPURDMA_FAKE_CUDA_KERNEL_GBPS=0.2)
    colls "one node, on the GPUs, copies and kernels at 0.2 GB/s" --np 4 --stage-max 0 --expect-device
    colls_env=("${env_before[@]}" GPURDMA_FAKE_CUDA_JITTER_US=500)
    colls "one node, on the GPUs, copies and kernels delayed 0..500 us at random, split buffers" --np 3 \
        --stage-max 0 --expect-device --split-buffers
    colls_env=("${env_before[@]}" GPURDMA_FAKE_CUDA_COPY_GBPS=0.2)
    colls "logical nodes 2x2, split buffers, copies at 0.2 GB/s" --np 4 --logical-nodes 2 --split-buffers
    colls_env=("${env_before[@]}" GPURDMA_FAKE_CUDA_JITTER_US=500)
    colls "logical nodes 3+1+2, copies and kernels delayed 0..500 us at random, split buffers" --np 6 \
        --logical-nodes 3,1,2 --stage-max 0 --expect-device --split-buffers
fi
echo "PASS"
