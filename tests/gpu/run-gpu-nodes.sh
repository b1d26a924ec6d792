#!/usr/bin/env bash
# The hierarchical device path (GPU buffers across nodes) with the GPU launcher at
# logical nodes on this one machine (coll_gpurdma_logical_nodes: 2x2 and 3+1+2):
# every op x type against the host reference, in place and not, 1 element to 4 MiB
# (several chunks, unequal slices), blocking, nonblocking and persistent; the rail stage
# reducing on the host (staged chunks) and on the GPU (sends staged, or straight from
# GPU memory where the stand-in's device memory is host memory); nodes of
# host-buffer ranks beside nodes of device-buffer ranks, and ranks of one node that
# mix them; with the stand-in, copies and kernels delayed at random (chunks land out of
# the order a fixed speed gives: only the events keep the pipeline right); calls staged
# whole through host memory (the ring forced), nonblocking and persistent checks in
# turn, with slow copies, no start or test holding its caller during a copy, and a copy
# in or a copy back outlasting the timeout (the error names the stage); a rank stopped
# in the middle of a call (every other rank must return an error within the timeout).
# On a GPU (the launcher's probe) the ranks share GPU 0; otherwise the stand-in
# libcuda.so.1 that make check builds (tests/gpu/fake_cuda.cpp, running the kernels' own
# source on the CPU over each launch's grid), in every build, with nvcc or without.
set -u
# CI's Debian 13 part: the launcher runs the core without MPI, the code the Debian 12 part
# runs it on; there only the Open MPI 5 tests are new.
if [ "${GPURDMA_SKIP_GPU_LAUNCHER:-0}" = 1 ]; then
    echo "SKIP: GPURDMA_SKIP_GPU_LAUNCHER=1 (the GPU launcher's suite runs in CI's Debian 12 part)"
    exit 77
fi
build=${GPURDMA_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
launcher=$build/tests/gpu/gpu_launcher
[ -x "$launcher" ] || { echo "FAIL: $launcher not built (make check builds it)"; exit 1; }

if probe=$("$launcher" --mode probe); then
    echo "== on GPU 0 ($probe)"
else
    fake=$build/tests/gpu/fake
    [ -f "$fake/libcuda.so.1" ] || { echo "FAIL: $fake/libcuda.so.1 not built (make check builds it)"; exit 1; }
    export LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export GPURDMA_FAKE_CUDA_LEAKS=1  # a stand-in that reports leaks does so at exit
    echo "== with the stand-in driver (no CUDA driver: $probe)"
fi

failed=0
# step WHAT ARGS...: one launcher run (want=, wants= in its environment: lines it must print).
. "$(dirname "$0")/launcher_step.sh"

small=(--chunk-size 16384 --max-bytes 4194304 --expect-device --limit 240)
step "2x2, hierarchical at every size, 16 KiB chunks" --np 4 --logical-nodes 2 --algorithm hier "${small[@]}"
step "3+1+2, hierarchical at every size, 16 KiB chunks" --np 6 --logical-nodes 3,1,2 --algorithm hier "${small[@]}"
step "2x2, auto (flat sizes stage whole), default chunks" --np 4 --logical-nodes 2 --max-bytes 4194304 \
    --expect-device --limit 240
step "2x2, node 0 passes host buffers" --np 4 --logical-nodes 2 --algorithm hier --host-ranks 0,1 "${small[@]}"
step "3+1+2, the one-rank node passes host buffers" --np 6 --logical-nodes 3,1,2 --algorithm hier --host-ranks 3 \
    "${small[@]}"
if [ -n "${GPURDMA_FAKE_CUDA_LEAKS:-}" ]; then
    GPURDMA_FAKE_CUDA_COPY_GBPS=0.5 GPURDMA_FAKE_CUDA_KERNEL_GBPS=1 \
        step "3+1+2, slow copies and kernels (stand-in knobs, if it has them)" --np 6 --logical-nodes 3,1,2 \
        --algorithm hier --chunk-size 16384 --max-bytes 1048576 --expect-device --limit 240
    # Each copy and kernel waits 0..500 us at random first: a fence that misses the copy
    # it guards (a chunk railed before its copy out lands) fails here in most calls,
    # against about one in eight at a fixed speed. The seed repeats a run's draws.
    seed=${GPURDMA_FAKE_CUDA_SEED:-$RANDOM}
    jittered=(--algorithm hier --chunk-size 16384 --max-bytes 1048576 --expect-device --limit 240)
    GPURDMA_FAKE_CUDA_JITTER_US=500 GPURDMA_FAKE_CUDA_SEED=$seed \
        step "2x2, copies and kernels delayed 0..500 us at random (GPURDMA_FAKE_CUDA_SEED=$seed)" --np 4 \
        --logical-nodes 2 "${jittered[@]}"
    GPURDMA_FAKE_CUDA_JITTER_US=500 GPURDMA_FAKE_CUDA_SEED=$seed \
        step "3+1+2, copies and kernels delayed 0..500 us at random (GPURDMA_FAKE_CUDA_SEED=$seed)" --np 6 \
        --logical-nodes 3,1,2 "${jittered[@]}"
fi
# The rail stage on the GPU (coll_gpurdma_rail_reduce device): the rail runs in place on
# the GPU slices, arrivals reduced by the kernel out of their landing slots (which the
# stand-in lets a kernel read only once they are page-locked), sends staged through
# page-locked buffers; beside a node of host-buffer ranks, whose host schedule sends the
# same messages; and with a rank stopped mid-call.
rail=(--algorithm hier --rail-reduce device --verbose 1)
want="rail stage reduces on the device" \
    step "2x2, rail on the GPU, every size" --np 4 --logical-nodes 2 "${rail[@]}" "${small[@]}"
want="rail stage reduces on the device" \
    step "3+1+2, rail on the GPU, every size" --np 6 --logical-nodes 3,1,2 "${rail[@]}" "${small[@]}"
want="rail stage reduces on the device" \
    step "2x2, rail on the GPU on node 0, node 1 passes host buffers" --np 4 --logical-nodes 2 "${rail[@]}" \
    --host-ranks 2,3 "${small[@]}"
if [ -n "${GPURDMA_FAKE_CUDA_LEAKS:-}" ]; then
    # Sends straight from GPU memory, as GPUDirect RDMA would: UCX reads the stand-in's
    # "device memory" (host memory) itself, so a send that left before the kernel that
    # wrote its bytes had finished would carry stale data.
    direct=(--algorithm hier --rail-reduce device --verbose 1 --chunk-size 16384 --expect-device --limit 240)
    # Arrivals then land in the stand-in's "device memory" too (offered to the rail
    # peers, registered with UCX as host memory), flushed before the GPU reads them.
    landed='so far [1-9][0-9]* arrivals landed in GPU memory
fake-cuda: [1-9][0-9]* GPUDirect RDMA flushes'
    GPURDMA_FAKE_CUDA_HOST_MEMORY=1 want="rail stage reduces on the device, sends straight from GPU memory" \
        wants="$landed" \
        step "2x2, rail on the GPU, sends straight from GPU memory, arrivals land in GPU memory" --np 4 \
        --logical-nodes 2 "${direct[@]}" --verbose 2 --max-bytes 4194304
    # Node 0's ranks pass host buffers in every other call: their CPU reads what node
    # 1's GPUs put into node 0's GPU memory (a host copy of each such arrival).
    GPURDMA_FAKE_CUDA_HOST_MEMORY=1 want="arrivals land in GPU memory" \
        wants='[1-9][0-9]* copied for the CPU' \
        step "2x2, node 0 alternates host and GPU buffers: its CPU reads arrivals landed in its GPU memory" --np 4 \
        --logical-nodes 2 --algorithm hier --rail-reduce device --chunk-size 16384 --limit 240 --host-ranks 0,1 \
        --alternate --verbose 2 \
        --max-bytes 1048576
    # A peer gone mid-call while arrivals land in GPU memory: the others fail within the
    # timeout and still withdraw and free what they offered (the leak report says so).
    GPURDMA_FAKE_CUDA_HOST_MEMORY=1 want="arrivals land in GPU memory" \
        step "2x2, arrivals in GPU memory, rank 3 stops mid-call: errors within the 5 s timeout" --np 4 \
        --logical-nodes 2 --algorithm hier --rail-reduce device --verbose 1 --chunk-size 16384 --max-bytes 4194304 \
        --timeout 5 \
        --stop-rank 3 --limit 120
    GPURDMA_FAKE_CUDA_HOST_MEMORY=1 want="rail stage reduces on the device, sends straight from GPU memory" \
        step "3+1+2, rail on the GPU, sends straight from GPU memory" --np 6 --logical-nodes 3,1,2 \
        "${direct[@]}" --max-bytes 4194304
    GPURDMA_FAKE_CUDA_JITTER_US=500 GPURDMA_FAKE_CUDA_SEED=$seed want="rail stage reduces on the device" \
        step "3+1+2, rail on the GPU, sends staged, copies and kernels delayed 0..500 us (GPURDMA_FAKE_CUDA_SEED=$seed)" \
        --np 6 --logical-nodes 3,1,2 "${rail[@]}" "${jittered[@]}"
    GPURDMA_FAKE_CUDA_HOST_MEMORY=1 GPURDMA_FAKE_CUDA_JITTER_US=500 GPURDMA_FAKE_CUDA_SEED=$seed \
        want="sends straight from GPU memory" \
        step "2x2, rail on the GPU, sends straight from GPU memory, delayed 0..500 us (GPURDMA_FAKE_CUDA_SEED=$seed)" \
        --np 4 --logical-nodes 2 --rail-reduce device --verbose 1 "${jittered[@]}"
    # auto weighs both modes per 256 KiB slice with this node's copy rates and GPU step
    # cost, timed once per process by the GPU's clock (gpu/copy_rate_probe.h). With the
    # stand-in's instant copies the host still wins: the device estimate adds the
    # network to its steps. Copies at 0.1 GB/s out and 0.2 GB/s in
    # (as the set-up's timing must find them) and sends straight from its "device
    # memory": two slow copies per slice against the GPU reading each arrival once, so
    # the GPU. The rates timed must be the knobs' within 15% (the stand-in's thread
    # wakes late by a varying amount, in the copies and in the step subtracted from
    # them), each in its direction: [0.08, 0.12) out, [0.17, 0.23) in.
    rates='copies 0\.(0[89][0-9]*|1|1[01][0-9]*) GB/s out, 0\.(1[789][0-9]*|2|2[012][0-9]*) GB/s in'
    want="auto: the host is estimated faster" \
        step "2x2, auto weighs the modes: the stand-in's slow GPU steps, the host" --np 4 --logical-nodes 2 \
        --algorithm hier --verbose 1 --max-bytes 1048576 --expect-device --limit 120
    GPURDMA_FAKE_CUDA_HOST_MEMORY=1 GPURDMA_FAKE_CUDA_D2H_GBPS=0.1 GPURDMA_FAKE_CUDA_H2D_GBPS=0.2 \
        want="auto: the GPU is estimated faster" wants="$rates" \
        step "2x2, auto weighs the modes: slow copies and sends straight, the GPU" --np 4 --logical-nodes 2 \
        --algorithm hier --verbose 1 --max-bytes 1048576 --expect-device --limit 120
fi
want="rail stage reduces on the device" \
    step "3+1+2, rail on the GPU, rank 4 stops mid-call: errors within the 5 s timeout" --np 6 --logical-nodes 3,1,2 \
    "${rail[@]}" --chunk-size 16384 --max-bytes 4194304 --timeout 5 --stop-rank 4 --limit 120
# The other collectives across nodes (algo/device_node_rail.h): a rank stopped in the
# middle of a reduce-scatter and of a reduce to rank 0. Its node peer waits for it and
# must end with an error naming the stage and the peer within the timeout; node 0's
# ranks may complete instead (once the stopped rank has posted its input, its node
# head's kernel has what node 0's results need), but never hang. The stopped rank makes
# no test after its start (--stop-tests 0): with three, its copies out had finished in
# time once in CI, it marked its inputs read and its node peer completed (correctly).
# Its node peer then times out waiting for it either in the call's buffer-kind
# agreement or in the node stage, whichever the start reached.
for coll in reduce_scatter reduce; do
    name=${coll/_/-}
    want="rank 2: timeout after 5.0 s: launcher: $name timed out after 5 s in " \
        step "2x2, the $name across nodes on the GPUs, rank 3 stops mid-call: its node peer errors within 5 s" \
        --np 4 --logical-nodes 2 --chunk-size 16384 --max-bytes 4194304 --timeout 5 --stop-rank 3 --stop-coll $coll \
        --stop-tests 0 --stop-may-finish 0,1 --limit 120
done
# A node whose ranks mix host and GPU buffers agrees per call: its GPU ranks stage
# and join the host path (algo/call_kinds.h); a 5 s timeout, so a wait for the other
# path fails the step instead of passing late.
step "2x2, rank 1 passes host buffers beside its node peer's GPU buffers: that node stages, the other runs on the GPUs" \
    --np 4 --logical-nodes 2 --algorithm hier --host-ranks 1 --chunk-size 16384 --max-bytes 4194304 --timeout 5 \
    --limit 120
step "one node of 3, rank 2 passes host buffers (blocking, nonblocking, persistent)" --np 3 --logical-nodes 3 \
    --algorithm hier --host-ranks 2 --chunk-size 16384 --max-bytes 1048576 --timeout 5 --limit 120
# Staged whole: asynchronous copies that the call's state machine polls (stand-in: each
# copy still running when first polled), then the host ring, then the copies back.
GPURDMA_FAKE_CUDA_COPY_GBPS=0.5 step "2x2, every call staged whole (ring), nonblocking and persistent in turn, slow copies" \
    --np 4 --logical-nodes 2 --algorithm ring --kind mixed --max-bytes 1048576 --expect-staged --limit 240
if [ -n "${GPURDMA_FAKE_CUDA_LEAKS:-}" ]; then
    # 1 s per 64 KiB copy: a copy made inside iallreduce/start/test would hold it that
    # long; so would a wait for the application's own fill (left landing: the calls
    # wait for it by polling an event, and their results are checked).
    GPURDMA_FAKE_CUDA_COPY_GBPS=0.0000655 step "2x2, staged nonblocking and persistent calls never hold the caller in a copy" \
        --np 4 --logical-nodes 2 --algorithm ring --hold-check --max-bytes 65536 --max-call-ms 400 --expect-staged \
        --limit 120
    # 2 s per 128 KiB copy against a 1 s timeout: the error names the stage (the fills
    # waited for first, as an application that synchronises before MPI does).
    GPURDMA_FAKE_CUDA_COPY_GBPS=0.0000655 want="timed out after 1 s in GPU staging in" \
        step "2x2, a staging copy outlasting the timeout: errors naming the stage" --np 4 --logical-nodes 2 \
        --algorithm ring --hold-check --fills-land --max-bytes 131072 --timeout 1 --expect-errors --limit 120
    # Staging out is the host-to-device copy of the result: only that direction slow.
    GPURDMA_FAKE_CUDA_H2D_GBPS=0.0000655 want="timed out after 1 s in GPU staging out" \
        step "2x2, a copy back outlasting the timeout: errors naming the stage" --np 4 --logical-nodes 2 \
        --algorithm ring --hold-check --fills-land --max-bytes 131072 --timeout 1 --expect-errors --limit 120
    # The application's own copy into its buffer still landing after the timeout: the
    # calls end with an error that names it, not a hang.
    GPURDMA_FAKE_CUDA_H2D_GBPS=0.0000655 want="the application's GPU work" \
        step "2x2, the application's own copy outlasting the timeout: errors naming it" --np 4 --logical-nodes 2 \
        --algorithm ring --hold-check --max-bytes 131072 --timeout 1 --expect-errors --limit 120
fi
step "2x2, rank 1 stops mid-call: errors within the 5 s timeout" --np 4 --logical-nodes 2 --algorithm hier \
    --chunk-size 16384 --max-bytes 4194304 --timeout 5 --stop-rank 1 --limit 120
step "3+1+2, rank 4 stops mid-call: errors within the 5 s timeout" --np 6 --logical-nodes 3,1,2 --algorithm hier \
    --chunk-size 16384 --max-bytes 4194304 --timeout 5 --stop-rank 4 --limit 120
[ $failed -eq 0 ] && echo "PASS" || echo "FAIL"
exit $failed
