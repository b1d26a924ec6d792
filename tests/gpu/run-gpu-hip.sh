#!/usr/bin/env bash
# The GPU suites through HIP: gpurdma's HIP adapters (src/gpu/hip_api.cpp) over the
# stand-in HIP runtime that make check builds (tests/gpu/fake-hip/libamdhip64.so.5:
# tests/gpu/fake_hip.cpp, the CUDA stand-in's memory, streams, IPC and host-run kernels
# behind HIP's entry points and HIP's rules), with no libcuda on the path, so the process
# picks HIP as an AMD GPU node would:
#  - the kernels against the host reduction (kernel_check): hipModuleLoadData takes the
#    code objects hipcc built where configure found hipcc (Debian 13), the stand-in's
#    image otherwise, and the launches run the kernels' source on the CPU;
#  - one node on the GPUs (the node stage over HIP IPC), small messages staged, ranks
#    mixing host and GPU buffers; 2x2 and 3+1+2 logical nodes (node stage on the GPUs,
#    rail from page-locked copies, the rail reducing on the GPU), blocking, nonblocking
#    and persistent; the other collectives; copies and kernels delayed at random; calls
#    staged whole; a rank stopped mid-call (errors within the timeout);
#  - after every run, each rank's hipGetLastError must be clean (gpurdma's queries of
#    host buffers fail under HIP 5 and must not leave the application an error), and the
#    stand-in reports no leaks.
# On a machine with a real AMD GPU and no NVIDIA one, the launcher's probe finds it and
# contrib/gpu-check.sh runs the real suites there; this script is the stand-in's.
# The whole suite runs where hipcc built the AMD code objects (CI's Debian 13 part, which
# leaves the CUDA launcher suites to Debian 12): the kernels are then the real bundle's.
# A build without hipcc (Debian 12) runs the kernels and the one-node steps, on the
# stand-in's kernel image; with GPURDMA_SKIP_GPU_LAUNCHER=1 as well, nothing.
set -u
build=${GPURDMA_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
quick=0
if [ ! -f "$build/src/reduce/reduce_kernels.hipfb" ]; then
    if [ "${GPURDMA_SKIP_GPU_LAUNCHER:-0}" = 1 ]; then
        echo "SKIP: GPURDMA_SKIP_GPU_LAUNCHER=1 and no AMD code objects built"
        exit 77
    fi
    quick=1
fi
launcher=$build/tests/gpu/gpu_launcher
fake=$build/tests/gpu/fake-hip
for f in "$launcher" "$build/tests/gpu/kernel_check" "$fake/libamdhip64.so.5"; do
    [ -e "$f" ] || { echo "FAIL: $f not built (make check builds it)"; exit 1; }
done
# Only the HIP stand-in: a libcuda.so.1 found first would make the process a CUDA one.
export LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# UCX's memory events off (UCX_MEM_EVENTS=no: gpurdma's calls do not depend on them;
# the TSan build runs with UCX's hooks off too). With them, Debian 13's UCX 1.18.1 hung
# one rank of 6 in 3 of 119 runs of the 3+1+2 collectives step under load: in its first
# ucp_init, installing UCM's memory hooks, it waited for the write side of UCM's event
# lock while the lock counted one reader and no thread was inside a hook (the lock's
# words read with gdb). Not seen with UCX 1.13 (Debian 12), nor in 5000 bare ucp_init
# runs beside threads that map, unmap and exit. The other ranks then wait for it in the
# set-up exchange (the bootstrap's allgather), which coll_gpurdma_timeout does not bound.
export UCX_MEM_EVENTS=no
export GPURDMA_FAKE_CUDA_LEAKS=1
probe=$("$launcher" --mode probe) || { echo "FAIL: the HIP stand-in is not picked: $probe"; exit 1; }
case $probe in
    HIP*) echo "== through the stand-in HIP runtime ($probe)" ;;
    *) echo "SKIP: a CUDA driver is found first ($probe): this machine's suites run through CUDA"; exit 77 ;;
esac

echo "== the kernels against the host reduction, through HIP"
out=$(GPURDMA_FAKE_CUDA_LANDS_LATER_US=0 timeout -k 10 600 "$build/tests/gpu/kernel_check" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q ', 0 mismatches, .* through HIP$' ||
    { echo "FAIL: kernel_check through HIP"; exit 1; }
# Where hipcc built the code objects, the stand-in must have loaded them, not its own image.
if [ -f "$build/src/reduce/reduce_kernels.hipfb" ] && ! printf '%s\n' "$out" | grep -q 'embedded AMD code objects'; then
    echo "FAIL: kernel_check did not load the AMD code objects hipcc built"
    exit 1
fi

failed=0
. "$(dirname "$0")/launcher_step.sh"

step "one node, allreduce on the GPUs at every size (np 2 and 4)" --np 2,4 --max-bytes 262144 --expect-device \
    --stage-max 0 --limit 120
step "one node, small messages staged (np 2)" --np 2 --max-bytes 262144 --expect-device --limit 120
step "one node, the other collectives on the GPUs at every size (np 3 and 4)" --colls --np 3,4 --max-bytes 65536 \
    --stage-max 0 --expect-device --limit 120
step "one node, the other collectives, ranks 1 and 2 on host buffers, split buffers" --colls --np 4 \
    --host-ranks 1,2 --split-buffers --max-bytes 65536 --limit 120
if [ $quick = 1 ]; then
    [ $failed -eq 0 ] && echo "PASS (the kernels and one node; the whole suite runs where hipcc built the code objects)" ||
        echo "FAIL"
    exit $failed
fi
small=(--chunk-size 16384 --max-bytes 4194304 --expect-device --limit 240)
step "2x2, hierarchical at every size, 16 KiB chunks" --np 4 --logical-nodes 2 --algorithm hier "${small[@]}"
want="rail stage reduces on the device" \
    step "3+1+2, rail on the GPU, every size" --np 6 --logical-nodes 3,1,2 --algorithm hier --rail-reduce device \
    --verbose 1 "${small[@]}"
step "2x2, node 0 passes host buffers" --np 4 --logical-nodes 2 --algorithm hier --host-ranks 0,1 "${small[@]}"
step "2x2, the other collectives, node stage on the GPUs, rail from page-locked copies" --colls --np 4 \
    --logical-nodes 2 --stage-max 0 --expect-device --max-bytes 65536 --limit 120
step "3+1+2, the other collectives, an allreduce after every call" --colls --np 6 --logical-nodes 3,1,2 \
    --interleave --stage-max 0 --max-bytes 65536 --limit 120
GPURDMA_FAKE_CUDA_JITTER_US=500 \
    step "3+1+2, copies and kernels delayed 0..500 us at random" --np 6 --logical-nodes 3,1,2 --algorithm hier \
    --chunk-size 16384 --max-bytes 1048576 --expect-device --limit 240
GPURDMA_FAKE_CUDA_COPY_GBPS=0.5 step "2x2, every call staged whole (ring), nonblocking and persistent in turn, slow copies" \
    --np 4 --logical-nodes 2 --algorithm ring --kind mixed --max-bytes 1048576 --expect-staged --limit 240
step "2x2, rank 1 stops mid-call: errors within the 5 s timeout" --np 4 --logical-nodes 2 --algorithm hier \
    --chunk-size 16384 --max-bytes 4194304 --timeout 5 --stop-rank 1 --limit 120
[ $failed -eq 0 ] && echo "PASS" || echo "FAIL"
exit $failed
