#!/usr/bin/env bash
# Builds gpurdma with ASan + UBSan (in build-asan/), runs the unit tests in that build,
# then MPI jobs with it: the osu-compat benchmarks with validation, the correctness
# check (one node, and 2x2 logical nodes over UCX), the dup/free lifecycle, the
# fallbacks, a stuck peer (the timeout error path), a short load run, nonblocking and
# persistent requests, threads (with and without the progress thread), and GPU buffers
# with the stand-in driver (built here with the sanitizers too, running the kernels'
# source): one node (the device path at every size, and small ones staged), the
# hierarchical path at 2x2 and 3+1+2 logical nodes (the rail on the host and on the
# GPU), reduce-scatter, allgather, bcast and reduce on one node and at 2x2, a node
# whose ranks mix host and GPU buffers (staged), each blocking, nonblocking and
# persistent (device_check, device_colls_check). Fails on any sanitizer error, on any leak
# whose stack passes through gpurdma (Open MPI and UCX leak at exit on their own; those
# are not ours), and on any leak the stand-in reports (device memory, page-locked
# memory, events, streams).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${GPURDMA_ASAN_BUILD:-$top/build-asan}
# -O1, as ASan's documentation advises: measured on 2 cores, the core then the unit tests
# built in 125 s + 175 s, against 205 s (configure included) + 252 s at the default -O2.
# -g1 (line tables, no variables): reports keep function, file and line; with UBSan the
# compiles took about half as long as at -g (host_team.cpp 16 -> 8 s). A report's
# inlined frames show as their caller's: the leak filter below still sees gpurdma's.
t_build=$SECONDS
GPURDMA_BUILD=$build bash "$top/contrib/setup.sh" --enable-sanitizers --without-cuda CFLAGS="-g1 -O1" CXXFLAGS="-g1 -O1"
make -C "$build" -j"$(nproc)" tests/mpi/allreduce_check tests/mpi/lifecycle_check tests/mpi/fallback_check \
    tests/mpi/stuck_peer_check tests/mpi/load_check tests/mpi/nonblocking_check tests/mpi/thread_stress_check \
    tests/mpi/device_check tests/mpi/device_colls_check tests/gpu/fake/libcuda.so.1 >/dev/null
# The unit tests under the sanitizers (GoogleTest; absent when configure found no gtest).
echo "   (built with the MPI test programs in $((SECONDS - t_build)) s)"
if grep -q '^S\["HAVE_GTEST_TRUE"\]=""' "$build/config.status"; then  # configure found GoogleTest
    t_unit=$SECONDS
    # The test code at -O0 (the core it links stays -O1): with UBSan and -g, -O1 made the
    # unit tests the slowest build of CI (292 s on 2 cores; 103 s at -O0). The reduction
    # variants test stays -O1: its scalar reference loops ran 90 s at -O0, against 45.
    make -C "$build" tests/unit/gpurdma_unit-test_reduce_variants.o CXXFLAGS="-g1 -O1" >/dev/null
    make -C "$build" -j"$(nproc)" tests/unit/gpurdma_unit CXXFLAGS="-g1 -O0" >/dev/null
    echo "   (unit tests built in $((SECONDS - t_unit)) s)"
    t_unit=$SECONDS
    ulog="${TMPDIR:-/tmp}/gpurdma-asan-unit.$$.log"
    urc=0
    # intercept_tls_get_addr=0: see check() below (the unit tests load hwloc's and UCX's
    # plugins too; LeakSanitizer's tracer died at their exit once in CI).
    ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        timeout 900 "$build/tests/unit/gpurdma_unit" >"$ulog" 2>&1 || urc=$?
    # Leaks count only through gpurdma code (gpurdma:: frames or the gpurdma_unit binary);
    # hwloc's and UCX's dlclosed plugins leak on their own ("<unknown module>").
    ours=$(awk 'BEGIN{RS=""} /(Direct|Indirect) leak/ && /gpurdma/' "$ulog")
    if grep -q "ERROR: AddressSanitizer\|runtime error:\|^\[  FAILED  \]" "$ulog" || ! grep -q '^\[  PASSED  \]' "$ulog" ||
        [ -n "$ours" ] || { [ $urc -ne 0 ] && ! grep -q "ERROR: LeakSanitizer" "$ulog"; }; then
        echo "FAIL gpurdma_unit under ASan+UBSan (exit $urc)"; grep -v '^\[       OK \]\|^\[ RUN' "$ulog" | tail -40; unit_failed=1
    else
        echo "PASS gpurdma_unit under ASan+UBSan ($(grep -m1 '^\[  PASSED  \]' "$ulog"); $(grep -c 'Direct leak\|Indirect leak' "$ulog") leak records, none through gpurdma; $((SECONDS - t_unit)) s)"
    fi
    rm -f "$ulog"
    # The fabric model and the schedules as its input (a few seconds; the whole model runs).
    t_unit=$SECONDS
    make -C "$build" -j"$(nproc)" tests/fabric/fabric_tests CXXFLAGS="-g1 -O1" >/dev/null
    flog="${TMPDIR:-/tmp}/gpurdma-asan-fabric.$$.log"
    if ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        timeout 600 "$build/tests/fabric/fabric_tests" >"$flog" 2>&1 && grep -q '^\[  PASSED  \]' "$flog"; then
        echo "PASS fabric_tests under ASan+UBSan ($(grep -m1 '^\[  PASSED  \]' "$flog"); $((SECONDS - t_unit)) s)"
    else
        echo "FAIL fabric_tests under ASan+UBSan"; grep -v '^\[       OK \]\|^\[ RUN' "$flog" | tail -40; unit_failed=1
    fi
    rm -f "$flog"
fi
. "$top/contrib/env.sh"
export OMPI_MCA_mca_base_component_path="$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://'):$build/component"
libasan=$(gcc -print-file-name=libasan.so)
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
status=${unit_failed:-0}
# intercept_tls_get_addr=0: LeakSanitizer otherwise scans each thread's dynamic TLS blocks
# as recorded at __tls_get_addr, and Open MPI's finalize dlcloses plugins whose libraries
# have TLS (here libOpenCL, libudev, librdmacm, libicuuc, libuuid call __tls_get_addr):
# GCC 12's runtime then reads a stale record at exit and its tracer dies ("Tracer caught
# signal 11", "LeakSanitizer has encountered a fatal error"): 5 of 28 runs of the 3+1+2
# device step, and once in CI. With the option: 0 of 18. gpurdma keeps nothing in
# dynamic TLS, so no leak of ours can hide behind it.
check() {
    local name=$1 t0=$SECONDS
    shift
    if ! timeout -k 10 600 mpirun --oversubscribe --bind-to none -np "${NP:-4}" --mca pml ob1 \
        -x LD_PRELOAD="$libasan" -x ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:intercept_tls_get_addr=0 \
        -x UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        --mca coll_gpurdma_priority 100 "$@" >"$log/$name" 2>&1; then
        # A leak report alone makes the job exit non-zero: judge by what it contains.
        if grep -q "ERROR: AddressSanitizer\|runtime error:" "$log/$name" ||
            ! grep -q "ERROR: LeakSanitizer" "$log/$name"; then
            echo "FAIL $name"; tail -40 "$log/$name"; status=1; return
        fi
    fi
    if grep -q "ERROR: AddressSanitizer\|runtime error:" "$log/$name"; then
        echo "FAIL $name: sanitizer error"; grep -m5 -A20 "ERROR: AddressSanitizer\|runtime error:" "$log/$name"; status=1; return
    fi
    # The stand-in driver's own report (device steps): every count must be zero.
    if grep 'fake-cuda: .* leaked' "$log/$name" | grep -vq ' 0 leaked pinned allocations, 0 registrations, 0 device allocations, 0 events, 0 streams'; then
        echo "FAIL $name: the stand-in driver reports leaks"; grep 'fake-cuda: .* leaked' "$log/$name" | head -5; status=1; return
    fi
    # Leak records are blank-line separated; keep those with a gpurdma frame.
    ours=$(awk 'BEGIN{RS=""} /(Direct|Indirect) leak/ && /gpurdma/' "$log/$name")
    if [ -n "$ours" ]; then
        echo "FAIL $name: leaks through gpurdma"; echo "$ours" | head -40; status=1; return
    fi
    leaks=$(grep -c "Direct leak\|Indirect leak" "$log/$name" || true)
    echo "PASS $name (no sanitizer error; $leaks leak records, none through gpurdma; $((SECONDS - t0)) s)"
}
check "osu_allreduce -c" "$build/osu-compat/osu_allreduce" -m 8:4194304 -i 10 -x 2 -c
for b in osu_reduce_scatter osu_allgather osu_bcast osu_reduce; do
    check "$b -c" "$build/osu-compat/$b" -m 8:4194304 -i 10 -x 2 -c
done
check "allreduce_check" "$build/tests/mpi/allreduce_check" --quick
check "lifecycle_check" "$build/tests/mpi/lifecycle_check" 100
# Two endpoints per rail peer (coll_gpurdma_rail_qps): every other slot on the second.
check "allreduce_check 2x2 logical nodes, 2 endpoints per rail peer" --mca coll_gpurdma_logical_nodes 2 \
    --mca coll_gpurdma_rail_qps 2 "$build/tests/mpi/allreduce_check" --quick
check "fallback_check" --mca coll_gpurdma_verbose 2 "$build/tests/mpi/fallback_check" --quick
NP=3 check "stuck peer (timeout error path)" --mca coll_gpurdma_timeout 2 --mca coll_gpurdma_logical_nodes 1 \
    "$build/tests/mpi/stuck_peer_check" stop 1 20 65536 2
check "load_check 20000 + 20" "$build/tests/mpi/load_check" 20000 20 64
# Requests: queued, persistent and freed while in flight; then threads on shared and
# separate communicators (MPI_THREAD_MULTIPLE), with and without the progress thread.
NP=2 check "nonblocking_check" "$build/tests/mpi/nonblocking_check" --quick --strict
NP=2 check "thread_stress_check" "$build/tests/mpi/thread_stress_check" --threads 3 --seconds 2
NP=2 check "thread_stress_check, progress thread" --mca coll_gpurdma_progress_thread 1 \
    "$build/tests/mpi/thread_stress_check" --threads 3 --seconds 2
# GPU buffers through the stand-in driver (this build's, with the sanitizers): blocking,
# nonblocking and persistent calls in every device_check step.
gpu=(-x LD_LIBRARY_PATH="$build/tests/gpu/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" -x GPURDMA_FAKE_CUDA_LEAKS=1
     --mca coll_gpurdma_timeout 30 --mca coll_gpurdma_chunk_size 16384)
dev=("$build/tests/mpi/device_check" --quick --max-bytes 262144 --expect-device)
NP=3 check "GPU buffers, one node, the device path at every size" "${gpu[@]}" \
    --mca coll_gpurdma_device_stage_max 0 "${dev[@]}"
NP=2 check "GPU buffers, one node, small ones staged" "${gpu[@]}" "${dev[@]}"
NP=3 check "GPU buffers, reduce-scatter, allgather, bcast and reduce on the device path" "${gpu[@]}" \
    --mca coll_gpurdma_device_stage_max 0 "$build/tests/mpi/device_colls_check" --max-bytes 65536 --expect-device
# Across nodes (algo/device_node_rail.h): the node stage on the GPUs, the rail on page-locked copies.
check "GPU buffers, reduce-scatter, allgather, bcast and reduce at 2x2 logical nodes on the device path" "${gpu[@]}" \
    --mca coll_gpurdma_logical_nodes 2 --mca coll_gpurdma_device_stage_max 0 \
    "$build/tests/mpi/device_colls_check" --max-bytes 65536 --expect-device
check "GPU buffers, 2x2 logical nodes" "${gpu[@]}" --mca coll_gpurdma_logical_nodes 2 "${dev[@]}"
NP=6 check "GPU buffers, 3+1+2 logical nodes, rail on the GPU, 2 endpoints per rail peer" "${gpu[@]}" \
    --mca coll_gpurdma_logical_nodes 3,1,2 --mca coll_gpurdma_rail_reduce device --mca coll_gpurdma_rail_qps 2 \
    "${dev[@]}" --device-per-rank
check "GPU buffers, 2x2, rank 1 passes host buffers (its node stages)" "${gpu[@]}" \
    --mca coll_gpurdma_logical_nodes 2 "$build/tests/mpi/device_check" --quick --max-bytes 262144 --host-ranks 1
exit $status
