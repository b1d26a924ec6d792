#!/usr/bin/env bash
# MPICH tests (make check): libgpurdma_pmpi.so preloaded under mpiexec.mpich into the
# tests/mpi programs that apply, built against MPICH (tests/mpich/). Each run must pass
# its own checks AND show (verbose output) that gpurdma handled the calls, or fell back
# where it must. Also: Fortran (use mpi, use mpi_f08), and the library preloaded into an
# Open MPI program (the other ABI) must refuse with one line and change nothing.
# Skips (one SKIP line) when the build has no MPICH (configure found no mpicc.mpich).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${GPURDMA_BUILDDIR:-$(cd "$here/../.." && pwd)}
mpiexec=${MPICH_MPIEXEC:-}
lib=$build/.libs/libgpurdma_pmpi.so
bin=$build/tests/mpich
if [ -z "$mpiexec" ] || [ ! -f "$lib" ]; then
    echo "SKIP mpich-tests: no MPICH in this build (configure --with-mpich; Debian: apt-get install mpich libmpich-dev)"
    exit 77
fi
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-mpich-tests.XXXXXX")
# Timeouts write their dumps here, not into the working directory (GPURDMA_DUMP_DIR).
export GPURDMA_DUMP_DIR="$log_dir/dumps"
trap 'rm -rf "$log_dir"' EXIT

passed=0
failed=0
names=()

launcher=("$mpiexec")
launch_env=(LD_PRELOAD="$lib" GPURDMA_VERBOSE=1)
tag="pmpi:gpurdma"
fallback_text="fallback to PMPI_Allreduce"
# shellcheck source=../support/run_case.sh
. "$here/../support/run_case.sh"

# The matrix of types x ops x counts on several communicators (world, dup, split,
# reversed subset, self), normal and in place; its bitident section checks that every
# rank gets the same bits. One rank: the core's single-rank path (no set-up line).
run "allreduce np=1" none 120 -- -n 1 "$bin/allreduce_check" --quick --strict
run "allreduce np=2" used 240 -- -n 2 "$bin/allreduce_check" --strict
for np in 3 4 5 8; do
    run "allreduce np=$np" used 240 -- -n "$np" "$bin/allreduce_check" --quick --strict
done
# GPURDMA_* variables reach the core; the launcher's local ranks place processes on nodes.
USED_PATTERN="MPI_COMM_WORLD .*: 4 ranks on 1 host(s), 2 nodes x 2 ranks" run "allreduce np=4 2x2 logical nodes" used 240 \
    GPURDMA_LOGICAL_NODES=2 -- -n 4 "$bin/allreduce_check" --quick --strict
# MPICH's own ops: not strict (4.0.2's MPI_MIN/MPI_MAX on unsigned types are not the
# standard's, e.g. MPI_MIN of MPI_UNSIGNED_CHAR 111 and 255 gives 255).
run "allreduce np=2 off (GPURDMA_PRIORITY=0)" off 120 GPURDMA_PRIORITY=0 -- -n 2 "$bin/allreduce_check" --quick

# The collectives beyond allreduce (reduce-scatter(_block), allgather, bcast, reduce,
# nonblocking and persistent): MPICH's own until the interposer serves them, so not
# strict; collectives_check works around MPICH 4.0.2's own bugs there (a note says which).
# MPICH's ranks poll hard when oversubscribed: np=3 runs the blocking section only.
run "collectives np=2" used 240 -- -n 2 "$bin/collectives_check" --quick
run "collectives np=3 representative types" used 240 -- -n 3 "$bin/collectives_check" --quick --rep-only

# Bad values: one warning per process naming the variable, the default, right results.
USED_PATTERN="GPURDMA_SLOTS=0 is not in 1..64; using 4" run "bad GPURDMA_SLOTS, GPURDMA_TIMEOUT np=2" used 120 \
    GPURDMA_SLOTS=0 GPURDMA_TIMEOUT=soon -- -n 2 "$bin/allreduce_check" --quick --strict
grep -q "GPURDMA_TIMEOUT='soon' is not a number" "$log_dir/run.log" || {
    failed=$((failed + 1))
    names+=("bad GPURDMA_TIMEOUT")
    echo "FAIL no warning for GPURDMA_TIMEOUT='soon'"
}
# MPI_Barrier through the interposer (MPI_Ibarrier and the persistent one: MPICH's own).
USED_PATTERN="MPI_COMM_WORLD.*: barrier 1 x uint8 max" run "barrier np=3" used 120 GPURDMA_VERBOSE=2 -- -n 3 \
    "$bin/barrier_check"
# MPI_THREAD_MULTIPLE: threads each on their own communicator, all gpurdma's.
run "threads np=2, 3 threads" used 120 -- -n 2 "$bin/thread_check" 100 3
run "threads np=4, 2 threads" used 120 -- -n 4 "$bin/thread_check" 50 2

# User ops, derived types and an inter-communicator: PMPI_Allreduce.
FALLBACK_PATTERNS=("fallback to PMPI_Allreduce (user-defined" "fallback to PMPI_Allreduce (derived")
run "fallback np=3" fallback 120 GPURDMA_VERBOSE=2 -- -n 3 "$bin/fallback_check" --quick
run "lifecycle np=4, 200 dup-free cycles" used 240 -- -n 4 "$bin/lifecycle_check" 200
# Communicators the application never frees: MPICH deletes none of their attributes, so
# MPI_Finalize releases their states (rank 0's "freed after" line of the last one).
USED_PATTERN="left to MPI_Finalize 1 (handle 0x[0-9a-f]*): rank 0 freed after 1 allreduce calls" \
    run "lifecycle np=2, 2 communicators left to MPI_Finalize" used 120 -- -n 2 "$bin/lifecycle_check" 20 --leave 2

# GPU buffers (a GPU, or the stand-in driver make check builds): the interposer's device
# path, and what it declines (a user op, on MPI_INT and on a datatype with gaps) staged
# through host memory for PMPI_Allreduce. Blocking calls only: the interposer takes no
# other (Debian 12's MPICH 4.0.2 computes MPI_MIN and MPI_MAX on MPI_UNSIGNED_SHORT and
# MPI_UINT64_T as signed, in its own MPI_Allreduce and MPI_Iallreduce alike).
dev_env=()
if ! "$build/tests/gpu/gpu_launcher" --mode probe >/dev/null 2>&1; then
    dev_env=(LD_LIBRARY_PATH="$build/tests/gpu/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" GPURDMA_FAKE_CUDA_LEAKS=1)
fi
FALLBACK_PATTERNS=("fallback to PMPI_Allreduce (user-defined.*staged through host memory")
run "device buffers np=2, declined calls staged" fallback 240 GPURDMA_VERBOSE=2 "${dev_env[@]}" -- -n 2 \
    "$bin/device_check" --quick --blocking-only --max-bytes 65536
# The same through HIP: only the stand-in HIP runtime on the path (tests/gpu/fake_hip.cpp).
if [ ${#dev_env[@]} -gt 0 ] && [ -f "$build/tests/gpu/fake-hip/libamdhip64.so.5" ]; then
    FALLBACK_PATTERNS+=("device buffers up to [0-9]* bytes (HIP)")
    run "HIP: device buffers np=2, declined calls staged" fallback 240 GPURDMA_VERBOSE=2 \
        LD_LIBRARY_PATH="$build/tests/gpu/fake-hip${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" GPURDMA_FAKE_CUDA_LEAKS=1 \
        -- -n 2 "$bin/device_check" --quick --blocking-only --max-bytes 65536
    # Both stand-ins loaded, rank 1's receive buffers HIP's beside CUDA's send buffers.
    USED_PATTERN="a HIP buffer beside gpurdma's CUDA runtime: staged through host memory by HIP's copies" \
        run "CUDA and HIP buffers in one call np=2" used 240 GPURDMA_VERBOSE=2 \
        LD_LIBRARY_PATH="$build/tests/gpu/fake:$build/tests/gpu/fake-hip${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        GPURDMA_FAKE_CUDA_LEAKS=1 -- -n 2 "$bin/device_check" --quick --blocking-only --max-bytes 65536 \
        --other-vendor-ranks 1
fi

# A peer that stops (SIGSTOP) or arrives late: an MPI error naming stage, peer and host
# through the communicator's error handler, no hang.
TIMEOUT_PEER=1 run "stuck peer: SIGSTOP np=3" timeout 120 GPURDMA_TIMEOUT=3 -- -n 3 "$bin/stuck_peer_check" \
    stop 1 40 65536 3
TIMEOUT_STAGE="ring reduce-scatter" run "peer missing, ring np=2" timeout 120 GPURDMA_TIMEOUT=2 \
    GPURDMA_ALGORITHM=ring -- -n 2 "$bin/timeout_check" 2

# Fortran: MPICH's bindings call MPI_Allreduce, so the preloaded library sees them.
if [ -x "$bin/fortran_mpi_check" ]; then
    # Fortran's types are gpurdma's: the one fallback per rank is MPI_LOGICAL's.
    FALLBACK_PATTERNS=("ranks on .*host" "fallback to PMPI_Allreduce (derived or unsupported datatype)")
    FALLBACK_COUNT=2 run "Fortran use mpi np=2" fallback 120 GPURDMA_VERBOSE=2 -- -n 2 "$bin/fortran_mpi_check"
    FALLBACK_COUNT=2 run "Fortran use mpi_f08 np=2" fallback 120 GPURDMA_VERBOSE=2 -- -n 2 "$bin/fortran_f08_check"
else
    echo "SKIP Fortran: no mpif90.mpich"
fi

# The other ABI: preloaded into an Open MPI program, one line per host, every result
# still right (Open MPI's own allreduce).
openmpi_prog=$build/tests/mpi/allreduce_check
if [ -x "$openmpi_prog" ] && command -v "${MPIRUN:-mpirun}" >/dev/null; then
    out="$log_dir/abi.log"
    start=$SECONDS
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 10 120 "${MPIRUN:-mpirun}" --oversubscribe \
        --bind-to none --mca pml ob1 --mca btl self,vader,tcp --mca op ^avx -x LD_PRELOAD="$lib" -np 2 \
        "$openmpi_prog" --quick >"$out" 2>&1
    rc=$?
    lines=$(grep -c "pmpi:gpurdma" "$out")
    if [ $rc -eq 0 ] && [ "$lines" = 1 ] && grep -q "built for the MPICH ABI .* runs Open MPI" "$out" &&
        grep -q "passed, 0 failed" "$out"; then
        passed=$((passed + 1))
        printf 'PASS %-44s %4ds  %s\n' "other ABI (Open MPI) refuses np=2" $((SECONDS - start)) "$(grep pmpi:gpurdma "$out")"
    else
        failed=$((failed + 1))
        names+=("other ABI")
        printf 'FAIL %-44s %4ds  exit code %d, %s gpurdma line(s)\n' "other ABI (Open MPI) refuses np=2" \
            $((SECONDS - start)) $rc "$lines"
        sed 's/^/    | /' "$out" | tail -40
    fi
fi

echo "mpich-tests: $passed passed, $failed failed${names[*]:+ (${names[*]})}"
[ "$failed" -eq 0 ]
