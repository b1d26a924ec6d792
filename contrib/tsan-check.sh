#!/usr/bin/env bash
# Builds gpurdma with ThreadSanitizer (in build-tsan/, at -O1, without nvcc: GPU buffers
# then run on the stand-in driver's kernels, built here with TSan too) and runs, under
# mpirun with libtsan preloaded into every rank:
#   - threads: thread_stress_check (MPI_THREAD_MULTIPLE, calls on shared and separate
#     communicators from several threads), without and with the progress thread;
#   - requests: nonblocking_check (queued, persistent, freed in flight), without and with
#     the progress thread;
#   - GPU buffers on the stand-in: device_check (blocking, nonblocking and persistent) on
#     one node and at 2x2 logical nodes, without and with the progress thread (which
#     then drives device calls beside the stand-in's stream workers and the caller).
# Fails on any ThreadSanitizer report that contrib/tsan.supp does not suppress; each
# suppression there names the third-party race and why it is benign. Open MPI, UCX and
# hwloc are not instrumented: their own races are not seen, only ours and those at the
# boundary that TSan's interceptors see.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${GPURDMA_TSAN_BUILD:-$top/build-tsan}
GPURDMA_BUILD=$build bash "$top/contrib/setup.sh" --enable-sanitizers=thread --without-cuda CFLAGS="-g -O1" \
    CXXFLAGS="-g -O1"
make -C "$build" -j"$(nproc)" tests/mpi/nonblocking_check tests/mpi/thread_stress_check tests/mpi/device_check \
    tests/gpu/fake/libcuda.so.1 >/dev/null
. "$top/contrib/env.sh"
export OMPI_MCA_mca_base_component_path="$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://'):$build/component"
libtsan=$(gcc -print-file-name=libtsan.so)
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
status=0
check() {
    local name=$1 t0=$SECONDS
    shift
    local rc=0
    # UCX's memory hooks off: libucm's madvise hook runs in a thread's exit after TSan has
    # dropped the thread's state, and crashes there (seen at every job's end).
    # history_size=7 (the most): with the default, a report's earlier access in Open MPI's
    # progress (another thread copying a message into our receive buffer) came out as
    # "failed to restore the stack", which no suppression of Open MPI's code can match.
    timeout -k 10 600 mpirun --oversubscribe --bind-to none -np "${NP:-2}" --mca pml ob1 \
        -x LD_PRELOAD="$libtsan" -x TSAN_OPTIONS="suppressions=$top/contrib/tsan.supp halt_on_error=0 second_deadlock_stack=1 history_size=7" \
        -x UCX_MEM_MMAP_HOOK_MODE=none -x UCX_MEM_MALLOC_HOOKS=no \
        --mca coll_gpurdma_priority 100 "$@" >"$log/$name" 2>&1 || rc=$?
    local reports
    reports=$(grep -c "WARNING: ThreadSanitizer" "$log/$name" || true)
    if [ "$reports" -gt 0 ]; then
        echo "FAIL $name: $reports ThreadSanitizer reports"
        grep -m3 -A30 "WARNING: ThreadSanitizer" "$log/$name"
        status=1
        return
    fi
    if [ "$rc" -ne 0 ]; then
        echo "FAIL $name (exit $rc)"; tail -30 "$log/$name"; status=1; return
    fi
    if grep 'fake-cuda: .* leaked' "$log/$name" | grep -vq ' 0 leaked pinned allocations, 0 registrations, 0 device allocations, 0 events, 0 streams'; then
        echo "FAIL $name: the stand-in driver reports leaks"; status=1; return
    fi
    local suppressed
    suppressed=$(grep -o 'ThreadSanitizer: Matched [0-9]* suppressions' "$log/$name" | head -1 || true)
    echo "PASS $name (no ThreadSanitizer report${suppressed:+; $suppressed}; $((SECONDS - t0)) s)"
}
progress=(--mca coll_gpurdma_progress_thread 1)
check "thread_stress_check" "$build/tests/mpi/thread_stress_check" --threads 3 --seconds 2
check "thread_stress_check, progress thread" "${progress[@]}" "$build/tests/mpi/thread_stress_check" --threads 3 \
    --seconds 2
check "nonblocking_check" "$build/tests/mpi/nonblocking_check" --quick --strict
check "nonblocking_check, progress thread" "${progress[@]}" "$build/tests/mpi/nonblocking_check" --quick --strict
gpu=(-x LD_LIBRARY_PATH="$build/tests/gpu/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" -x GPURDMA_FAKE_CUDA_LEAKS=1
     --mca coll_gpurdma_timeout 60 --mca coll_gpurdma_chunk_size 16384)
dev=("$build/tests/mpi/device_check" --quick --max-bytes 65536 --expect-device)
check "GPU buffers (stand-in), one node" "${gpu[@]}" --mca coll_gpurdma_device_stage_max 0 "${dev[@]}"
check "GPU buffers (stand-in), one node, progress thread" "${gpu[@]}" "${progress[@]}" \
    --mca coll_gpurdma_device_stage_max 0 "${dev[@]}"
NP=4 check "GPU buffers (stand-in), 2x2 logical nodes" "${gpu[@]}" --mca coll_gpurdma_logical_nodes 2 "${dev[@]}"
NP=4 check "GPU buffers (stand-in), 2x2 logical nodes, progress thread" "${gpu[@]}" "${progress[@]}" \
    --mca coll_gpurdma_logical_nodes 2 "${dev[@]}"
exit $status
