#!/usr/bin/env bash
# Soak: the full-size load runs (make check runs a scaled-down one).
#   1. 1,000,000 8-byte and 10,000 16 MiB allreduces on 4 ranks, one node
#      (shared memory): every result checked, VmRSS and open descriptors flat from the
#      first tenth of each phase to its end (tests/mpi/load_check, RSS limit 8 MiB).
#   2. the same with 2x2 logical nodes (hierarchical path, UCX between the nodes), at
#      SOAK_HIER_SMALL/SOAK_HIER_LARGE calls (default 200,000 / 2,000).
#   3. MPI_THREAD_MULTIPLE, 4 threads x 4 communicators, 2,000 calls each: gpurdma
#      declines, results correct.
# Step 1 alone: about 4-5 minutes on 2 idle cores (12 us and 19 ms per call), 13 minutes
# measured at load average 6-8. Usage: contrib/soak.sh (GPURDMA_BUILD selects the build).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${GPURDMA_BUILD:-$top/build}
small=${SOAK_SMALL:-1000000}
large=${SOAK_LARGE:-10000}
bin=$build/tests/mpi
make -C "$build" tests/mpi/load_check tests/mpi/thread_check >/dev/null || exit 1
. "$top/contrib/env.sh"
export OMPI_MCA_mca_base_component_path="$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://'):$build/component"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader,tcp
        --mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 1)
status=0
step() {
    local name=$1 limit=$2 pattern=$3
    shift 3
    local log t0=$SECONDS
    log=$(mktemp)
    timeout -k 10 "$limit" mpirun "${common[@]}" "$@" >"$log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] && grep -q "passed, 0 failed" "$log" && grep -q "$pattern" "$log"; then
        echo "PASS $name ($((SECONDS - t0)) s)"
    else
        echo "FAIL $name (exit $rc, $((SECONDS - t0)) s)"
        status=1
    fi
    grep -E "^load_check|^  rank|thread_check:|^FAIL" "$log" | sed 's/^/    /'
    rm -f "$log"
}
step "load np=4, one node: $small x 8 B + $large x 16 MiB" 3600 "coll:gpurdma: .*ranks on" \
    -np 4 "$bin/load_check" "$small" "$large" 8
step "load np=4, 2x2 logical nodes: ${SOAK_HIER_SMALL:-200000} x 8 B + ${SOAK_HIER_LARGE:-2000} x 16 MiB" 3600 \
    "coll:gpurdma: .*2 nodes x 2 ranks" -np 4 --mca coll_gpurdma_logical_nodes 2 \
    "$bin/load_check" "${SOAK_HIER_SMALL:-200000}" "${SOAK_HIER_LARGE:-2000}" 8
step "threads np=4: 4 threads x 4 comms x 2000 calls" 1800 "MPI_THREAD_MULTIPLE is not supported; declining" \
    -np 4 "$bin/thread_check" 2000 4
exit $status
