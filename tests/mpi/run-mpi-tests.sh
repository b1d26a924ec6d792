#!/usr/bin/env bash
# MPI integration tests: real mpirun launches with coll/gpurdma on (and off),
# at 1, 2, 3, 4, 5 and 8 ranks (oversubscribed), over UCX's shared-memory and tcp
# transports. Each run must pass its own checks AND show (verbose output) that
# gpurdma really handled the calls, or fell back where it must.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${GPURDMA_BUILDDIR:-$(cd "$here/../.." && pwd)}
pkglibdir=${OMPI_PKGLIBDIR:-$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')}
mpirun=${MPIRUN:-mpirun}
bin=$build/tests/mpi
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-mpi-tests.XXXXXX")
trap 'rm -rf "$log_dir"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_path="$pkglibdir:$build/component"
# Timeouts write their dumps here, not into the working directory (coll_gpurdma_dump_dir).
export OMPI_MCA_coll_gpurdma_dump_dir="$log_dir/dumps"
common=(--oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader,tcp)
on=(--mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 1)

passed=0
failed=0
names=()

launcher=("$mpirun" "${common[@]}")
launch_env=()
tag="coll:gpurdma"
fallback_text="fallback to the previous allreduce"
# shellcheck source=../support/run_case.sh
. "$here/../support/run_case.sh"

# One rank: coll/self takes it (gpurdma declines size-1 communicators quietly).
run "allreduce np=1" none 120 -- -np 1 "${on[@]}" "$bin/allreduce_check" --strict
# Known open bug: a rare hang over UCX's tcp transport (seen in 2 of about 30 runs,
# only under full-suite load; a peer's message never arrives and gpurdma's timeout
# reports it). Until it is found, UCX-tcp runs get one retry, which is printed, so
# the failure stays visible without sinking the whole suite.
run_retry() {
    local before=$failed
    run "$@"
    if [ "$failed" -gt "$before" ]; then
        failed=$before
        names=("${names[@]:0:${#names[@]}-1}")
        echo "RETRY $1 (first attempt failed; known intermittent UCX-tcp hang)"
        run "$@"
    fi
}

for np in 2 3 4 5 8; do
    args=(--strict)
    [ "$np" -ge 5 ] && args+=(--quick)
    run "allreduce np=$np shm" used 300 -- -np "$np" "${on[@]}" "$bin/allreduce_check" "${args[@]}"
done

# The wait policy comes from the host's placement, not a rank's own mask: under
# Open MPI's default launch (a core per rank at np <= 2, a package above) two ranks
# on two CPUs spin, and more ranks than the host's CPUs yield.
saved_common=("${common[@]}")
default_launch=()
skip=0
for a in "${common[@]}"; do
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    if [ "$a" = --bind-to ]; then skip=1; continue; fi
    default_launch+=("$a")
done
common=("${default_launch[@]}")
if [ "$(nproc)" -ge 2 ]; then
    USED_PATTERN="wait on .*: spin: 2 ranks, each on a CPU of its own" \
        run "wait policy np=2 default binding: spin" used 120 -- -np 2 "${on[@]}" "$bin/allreduce_check" --quick --strict
fi
if [ "$(nproc)" -lt 4 ]; then
    USED_PATTERN="wait on .*: yield when idle: 4 ranks" \
        run "wait policy np=4 default binding: yield" used 120 -- -np 4 "${on[@]}" "$bin/allreduce_check" --quick --strict
fi
common=("${saved_common[@]}")

# Same bits as Open MPI's own op where the order is fixed (two ranks): float, double,
# long double and complex SUM/PROD/MIN/MAX against the previous module and MPI_Reduce_local.
run "same bits as Open MPI's op np=2" used 120 -- -np 2 "${on[@]}" "$bin/same_bits_check"
# A process's logical node is the same in every communicator: halves split across
# the world's two logical nodes are 2 nodes x 2 ranks and go hierarchical.
USED_PATTERN="SPLIT FROM 0 (cid [0-9]*): 4 ranks on 1 host(s), 2 nodes x 2 ranks;.*hierarchical" \
    run "logical nodes follow the process np=8" used 300 -- -np 8 "${on[@]}" --mca coll_gpurdma_logical_nodes 4 \
    "$bin/split_nodes_check"
# Inside one node gpurdma uses its own shared memory, not UCX: one logical node per
# rank puts every transfer on UCX, over tcp and over UCX's shared-memory transports.
run_retry "flat over UCX tcp np=4" used 300 UCX_TLS=tcp -- -np 4 "${on[@]}" --mca coll_gpurdma_logical_nodes 1 \
    --mca coll_gpurdma_timeout 20 \
    "$bin/allreduce_check" --quick --strict
run "flat over UCX posix+cma np=3" used 300 UCX_TLS=posix,cma -- -np 3 "${on[@]}" --mca coll_gpurdma_logical_nodes 1 \
    "$bin/allreduce_check" --quick --strict
run "flat over UCX sysv np=2" used 300 UCX_TLS=sysv,cma -- -np 2 "${on[@]}" --mca coll_gpurdma_logical_nodes 1 \
    "$bin/allreduce_check" --quick --strict
run "allreduce np=4 ring only, small chunks" used 300 -- -np 4 "${on[@]}" --mca coll_gpurdma_algorithm ring \
    --mca coll_gpurdma_chunk_size 4096 --mca coll_gpurdma_slots 2 "$bin/allreduce_check" --quick --strict
run "node path np=3, 4 KiB blocks x 1 slot, no direct form" used 300 -- -np 3 "${on[@]}" \
    --mca coll_gpurdma_node_chunk_size 4096 --mca coll_gpurdma_slots 1 --mca coll_gpurdma_small_msg_max 0 \
    "$bin/allreduce_check" --quick --strict
run "allreduce np=5 rd only" used 300 -- -np 5 "${on[@]}" --mca coll_gpurdma_algorithm rd "$bin/allreduce_check" --quick --strict
# Logical nodes: the hierarchical path (node stage in shared memory, rails over UCX).
run "hierarchical 2x2 logical nodes" used 300 -- -np 4 "${on[@]}" --mca coll_gpurdma_logical_nodes 2 \
    "$bin/allreduce_check" --quick --strict
run_retry "hierarchical 3+1+2 irregular, ucx tcp" used 300 UCX_TLS=tcp -- -np 6 "${on[@]}" --mca coll_gpurdma_timeout 20 \
    --mca coll_gpurdma_logical_nodes 3,1,2 --mca coll_gpurdma_chunk_size 8192 "$bin/allreduce_check" --quick --strict
USED_PATTERN="cost model, calibrated in [0-9]* ms" run "hierarchical 2x2, cost model calibrated" used 300 -- -np 4 \
    "${on[@]}" --mca coll_gpurdma_logical_nodes 2 --mca coll_gpurdma_calibrate 1 "$bin/allreduce_check" --quick --strict
run "hierarchical forced, 1,3 + 4 KiB chunks" used 300 -- -np 4 "${on[@]}" --mca coll_gpurdma_logical_nodes 1,3 \
    --mca coll_gpurdma_algorithm hier --mca coll_gpurdma_chunk_size 4096 "$bin/allreduce_check" --quick --strict
# A rail peer's slots striped over several endpoints (coll_gpurdma_rail_qps): on UCX's
# shared-memory transports (puts) and over tcp (active messages), 1 KiB chunks so that
# every call spreads its messages over the lanes.
USED_PATTERN="4 in flight per rail peer over 3 endpoint" run "hierarchical 3+1+2, 3 endpoints per rail peer" used 300 \
    -- -np 6 "${on[@]}" --mca coll_gpurdma_logical_nodes 3,1,2 --mca coll_gpurdma_rail_qps 3 \
    --mca coll_gpurdma_rail_slots 4 --mca coll_gpurdma_chunk_size 1024 "$bin/allreduce_check" --quick --strict
USED_PATTERN="over 2 endpoint" run_retry "hierarchical 2x2, 2 endpoints per rail peer, ucx tcp" used 300 UCX_TLS=tcp \
    -- -np 4 "${on[@]}" --mca coll_gpurdma_timeout 20 --mca coll_gpurdma_logical_nodes 2 --mca coll_gpurdma_rail_qps 2 \
    --mca coll_gpurdma_chunk_size 4096 "$bin/allreduce_check" --quick --strict
run "one rank per logical node (flat over UCX)" used 300 -- -np 3 "${on[@]}" --mca coll_gpurdma_logical_nodes 1 \
    "$bin/allreduce_check" --quick --strict
# The rail stage by halving-doubling (plan/halving_doubling.h) at node counts that are
# powers of two and not (3, 5, 6, 7 fold neighbour pairs), 2 ranks a node, small chunks
# so that units span pieces and the exchanges overlap; the whole slice one unit (8 nodes
# choose their units by the cost model: the set-up line prints the plan).
for nodes in 3 5 6 7 8; do
    USED_PATTERN="rail stage between nodes.*by halving-doubling" run "hierarchical $nodes logical nodes x 2, rail rhd" \
        used 300 -- -np $((2 * nodes)) "${on[@]}" --mca coll_gpurdma_logical_nodes 2 --mca coll_gpurdma_algorithm hier \
        --mca coll_gpurdma_rail_algorithm rhd --mca coll_gpurdma_chunk_size 16384 --mca coll_gpurdma_timeout 30 \
        "$bin/allreduce_check" --quick --strict
done
USED_PATTERN="rail stage between nodes" run "hierarchical 8 logical nodes x 2, rail and units automatic" used 300 -- \
    -np 16 "${on[@]}" --mca coll_gpurdma_logical_nodes 2 --mca coll_gpurdma_timeout 30 "$bin/allreduce_check" --quick \
    --strict
# Open MPI's own ops deviate from the standard in places (see tests/mpi/README.md): not strict.
run "allreduce np=4 component off" off 300 -- -np 4 --mca op ^avx "$bin/allreduce_check" --quick

FALLBACK_PATTERNS=("fallback to the previous allreduce (user-defined" "fallback to the previous allreduce (derived")
run "fallback np=4" fallback 300 -- -np 4 --mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 2 "$bin/fallback_check"
run "fallback np=3" fallback 300 -- -np 3 --mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 2 "$bin/fallback_check"
# Fortran (Open MPI's mpifort): its bindings reach the component; MPI_INTEGER,
# MPI_DOUBLE_PRECISION and MPI_REAL are gpurdma's, MPI_LOGICAL the one fallback per rank.
if [ -x "$bin/fortran_mpi_check" ]; then
    FALLBACK_PATTERNS=("coll:gpurdma: .*ranks on .*host" "fallback to the previous allreduce (derived or unsupported datatype)")
    for f in mpi f08; do
        FALLBACK_COUNT=2 run "Fortran use $f np=2" fallback 120 -- -np 2 --mca coll_gpurdma_priority 100 \
            --mca coll_gpurdma_verbose 2 "$bin/fortran_${f}_check"
    done
else
    echo "SKIP Fortran: no Open MPI mpifort"
fi

TIMEOUT_STAGE="node reduce-scatter/allgather (intra-node)"
run "peer missing: error, no hang np=3" timeout 120 -- -np 3 "${on[@]}" --mca coll_gpurdma_timeout 2 \
    "$bin/timeout_check" 2
TIMEOUT_STAGE="ring reduce-scatter"
run "peer missing, ring: error, no hang np=2" timeout 120 -- -np 2 "${on[@]}" --mca coll_gpurdma_timeout 2 \
    --mca coll_gpurdma_algorithm ring "$bin/timeout_check" 2
# Falls back to Open MPI's ops here, hence op ^avx (Debian's op/avx saturates char sums).
run "UCX cannot start: previous module np=2" cannot-start 120 -- -np 2 "${on[@]}" --mca op ^avx --mca coll_gpurdma_logical_nodes 1 \
    --mca coll_gpurdma_ucx_tls no_such_transport "$bin/allreduce_check" --quick

# MPI_Iallreduce and persistent allreduce over the type x op matrix, many requests
# outstanding, several communicators, ordering with blocking calls, MPI_Request_free of
# active requests. GPURDMA_EXPECT_USED=1: gpurdma's MPI_T counters must show the calls.
# A short coll_gpurdma_timeout turns a hang into a failure within seconds.
nb_on=("${on[@]}" -x GPURDMA_EXPECT_USED=1 --mca coll_gpurdma_timeout 10)
run "nonblocking np=1" none 120 -- -np 1 "${on[@]}" "$bin/nonblocking_check" --quick --strict
run "nonblocking np=2" used 180 -- -np 2 "${nb_on[@]}" "$bin/nonblocking_check" --strict
run "nonblocking np=3" used 120 -- -np 3 "${nb_on[@]}" "$bin/nonblocking_check" --quick --strict
run "nonblocking np=4 2x2 logical nodes" used 120 -- -np 4 "${nb_on[@]}" --mca coll_gpurdma_logical_nodes 2 \
    "$bin/nonblocking_check" --quick --strict
run "nonblocking np=8" used 180 -- -np 8 "${nb_on[@]}" "$bin/nonblocking_check" --quick --strict
run_retry "nonblocking flat over UCX tcp np=2" used 120 UCX_TLS=tcp -- -np 2 "${nb_on[@]}" \
    --mca coll_gpurdma_logical_nodes 1 "$bin/nonblocking_check" --quick --strict
# libnbc's (Open MPI's ops, not strict: see above).
run "nonblocking np=2 component off (libnbc)" off 120 -- -np 2 --mca op ^avx "$bin/nonblocking_check" --quick
run "nonblocking np=4 component off (libnbc)" off 120 -- -np 4 --mca op ^avx "$bin/nonblocking_check" --quick

# The collectives beyond allreduce (collectives_check): MPI_Reduce_scatter(_block),
# MPI_Allgather, MPI_Bcast, MPI_Reduce over the type x op matrix, every root, in place,
# on dup/split communicators, nonblocking and persistent batches beside MPI_Iallreduce.
# Declined calls go to the previous module (Open MPI's ops), hence op ^avx and no --strict;
# GPURDMA_EXPECT_USED=1 checks gpurdma's per-collective MPI_T counters grew on every rank.
coll_on=("${on[@]}" --mca op ^avx -x GPURDMA_EXPECT_USED=1 -x GPURDMA_REQUIRE_COLL_PVARS=1 --mca coll_gpurdma_timeout 20)
run "collectives np=2" used 180 -- -np 2 "${coll_on[@]}" "$bin/collectives_check"
run "collectives np=3" used 180 -- -np 3 "${coll_on[@]}" "$bin/collectives_check" --quick
run "collectives np=4" used 180 -- -np 4 "${coll_on[@]}" "$bin/collectives_check" --quick
run "collectives np=4 ring only" used 180 -- -np 4 "${coll_on[@]}" --mca coll_gpurdma_algorithm ring \
    "$bin/collectives_check" --lite
run "collectives np=4 2x2 logical nodes" used 180 -- -np 4 "${coll_on[@]}" --mca coll_gpurdma_logical_nodes 2 \
    "$bin/collectives_check" --quick
run "collectives np=3 component off" off 180 -- -np 3 --mca op ^avx "$bin/collectives_check" --quick
# Switched off per collective: those calls all go to the previous module.
run "collectives np=3 bcast and reduce switched off" used 180 -- -np 3 "${coll_on[@]}" \
    --mca coll_gpurdma_bcast_enable 0 --mca coll_gpurdma_reduce_enable 0 "$bin/collectives_check" --quick \
    --only blocking,nonblocking --expect-declined bcast,reduce

# MPI_Barrier, MPI_Ibarrier, the persistent barrier: no rank leaves before the last has
# entered (barrier_check's clock check), on world, dup, splits, self; counted as barriers.
bar_on=("${on[@]}" -x GPURDMA_EXPECT_USED=1 --mca coll_gpurdma_timeout 20)
run "barrier np=2" used 120 -- -np 2 "${bar_on[@]}" "$bin/barrier_check"
run "barrier np=5" used 120 -- -np 5 "${bar_on[@]}" "$bin/barrier_check"
run "barrier np=4 2x2 logical nodes (UCX)" used 120 -- -np 4 "${bar_on[@]}" --mca coll_gpurdma_logical_nodes 2 \
    "$bin/barrier_check"
run "barrier np=3, a rank 4 s late past coll_gpurdma_timeout 1" used 120 -- -np 3 "${on[@]}" -x GPURDMA_EXPECT_USED=1 \
    --mca coll_gpurdma_timeout 1 "$bin/barrier_check" --late-s 4
run "barrier np=3 switched off" used 120 -- -np 3 "${on[@]}" --mca coll_gpurdma_barrier_enable 0 \
    "$bin/barrier_check" --expect-declined

# MPI_THREAD_MULTIPLE: threads x communicators x sizes x ops, blocking and nonblocking;
# with gpurdma also two threads on one communicator (one call refused).
run "thread stress np=2" used 60 -- -np 2 "${nb_on[@]}" "$bin/thread_stress_check"
run "thread stress np=4" used 60 -- -np 4 "${nb_on[@]}" "$bin/thread_stress_check" --threads 3
run "thread stress np=4 2x2 logical nodes" used 60 -- -np 4 "${nb_on[@]}" --mca coll_gpurdma_logical_nodes 2 \
    "$bin/thread_stress_check" --threads 2 --seconds 2
run "thread stress np=2 component off" off 60 -- -np 2 --mca op ^avx "$bin/thread_stress_check"

# Communicators made where Open MPI runs collectives from inside its progress: MPI_Comm_dup
# and MPI_Comm_idup of an intercommunicator (the context id agreed by MPI_Ireduce from a
# request callback: a set-up that waited there hung under MPI_THREAD_MULTIPLE), and
# nonblocking and persistent calls of every collective on fresh communicators while
# another communicator's call is in flight (waited on by another thread at
# MPI_THREAD_MULTIPLE). A hang fails at the limit.
for np in 3 4 5; do
    for level in multiple single; do
        run "intercomm np=$np thread $level" used 90 -- -np "$np" "${nb_on[@]}" "$bin/intercomm_check" \
            --thread "$level"
    done
done
run "intercomm np=4 2x2 logical nodes" used 90 -- -np 4 "${nb_on[@]}" --mca coll_gpurdma_logical_nodes 2 \
    "$bin/intercomm_check"
run "intercomm np=3 component off" off 60 -- -np 3 "$bin/intercomm_check" --rounds 1

# mpi4py (Debian's python3-mpi4py) at its default thread level, MPI_THREAD_MULTIPLE.
py=""
for c in "${PYTHON:-}" /usr/bin/python3 python3; do
    [ -n "$c" ] && "$c" -c 'import mpi4py, numpy' 2>/dev/null && { py=$c; break; }
done
if [ -z "$py" ]; then
    echo "SKIP mpi4py: no python3 with mpi4py and numpy (Debian: python3-mpi4py python3-numpy)"
else
    run "mpi4py np=2" used 60 -- -np 2 "${on[@]}" "$py" "$here/mpi4py_check.py"
    run "mpi4py np=4" used 60 -- -np 4 "${on[@]}" "$py" "$here/mpi4py_check.py"
    run "mpi4py np=2 component off" off 60 -- -np 2 "$py" "$here/mpi4py_check.py"
    # mpi4py's own tests of intercommunicators, where its upstream suite is at hand
    # (contrib/mpi4py-suite.sh: GPURDMA_MPI4PY_TESTS, or Debian's source package as that
    # script keeps it; nothing is fetched here).
    start=$SECONDS
    GPURDMA_BUILD=$build GPURDMA_MPI4PY_NO_FETCH=1 bash "$here/../../contrib/mpi4py-suite.sh" -n "3 4" -t 120 -i test_cco_obj_inter \
        -i test_comm_inter >"$log_dir/run.log" 2>&1
    case $? in
    0) passed=$((passed + 1))
       printf 'PASS %-44s %4ds  %s\n' "mpi4py's intercomm tests np=3,4" $((SECONDS - start)) \
           "$(grep -c '^[34] *gpurdma' "$log_dir/run.log") launches, counts as the defaults'" ;;
    77) grep SKIP "$log_dir/run.log" ;;
    *) failed=$((failed + 1)); names+=("mpi4py's intercomm tests")
       printf 'FAIL %-44s %4ds\n' "mpi4py's intercomm tests np=3,4" $((SECONDS - start))
       sed 's/^/    | /' "$log_dir/run.log" | tail -40 ;;
    esac
fi

# A real HPC code: HPC Challenge (Debian's hpcc), whose verifications (HPL and PTRANS
# residuals, RandomAccess errors, STREAM, every test's node-error count) reduce through
# MPI_Allreduce; hpcc_rank.sh checks its verdicts. On one node, and at 2 logical nodes.
if ! command -v hpcc >/dev/null; then
    echo "SKIP hpcc: not installed (Debian: hpcc)"
else
    hpcc_dir() {  # P Q: a fresh directory with hpcc's input for a P x Q grid
        local d
        d=$(mktemp -d "$log_dir/hpcc.XXXXXX")
        sed -e "s/@P@/$1/" -e "s/@Q@/$2/" "$here/hpccinf.txt.in" >"$d/hpccinf.txt"
        echo "$d"
    }
    run "hpcc np=2" used 180 -- -np 2 "${on[@]}" bash "$here/hpcc_rank.sh" "$(hpcc_dir 1 2)"
    run "hpcc np=4 2x2 logical nodes" used 300 -- -np 4 "${on[@]}" --mca coll_gpurdma_logical_nodes 2 \
        bash "$here/hpcc_rank.sh" "$(hpcc_dir 2 2)"
fi

# Repeated calls do no set-up, registration or allocation work (MPI_T counters, heap).
run "counters np=2 node path, 1000 calls" used 120 -- -np 2 "${on[@]}" "$bin/counters_check"
run "counters np=4 2x2 logical nodes, 1000 calls" used 300 -- -np 4 "${on[@]}" --mca coll_gpurdma_logical_nodes 2 \
    "$bin/counters_check"
run "lifecycle np=4, 10000 dup-free cycles" used 600 -- -np 4 "${on[@]}" "$bin/lifecycle_check"
run "lifecycle np=4 2x2 logical nodes, 3000 cycles" used 600 -- -np 4 "${on[@]}" --mca coll_gpurdma_logical_nodes 2 \
    "$bin/lifecycle_check" 3000
run_retry "lifecycle np=2 over UCX tcp" used 600 UCX_TLS=tcp -- -np 2 "${on[@]}" --mca coll_gpurdma_logical_nodes 1 \
    "$bin/lifecycle_check" 300
# GPU buffers under mpirun (device_check): the hierarchical device path at logical nodes,
# every op x type against the host reference, --expect-device (gpurdma's counters must
# show device-path calls). On GPU 0 where the launcher's probe finds one; otherwise with
# the stand-in libcuda.so.1 that make check builds (tests/gpu/fake_cuda.cpp, running the
# kernels' own source on the CPU), which fails a rank that leaks device memory, events
# or streams at exit. Every build has it, with nvcc or without.
{
    device_x=()
    stand_in_failed=0
    if ! "$build/tests/gpu/gpu_launcher" --mode probe >/dev/null 2>&1; then
        fake=$build/tests/gpu/fake
        [ -f "$fake/libcuda.so.1" ] || stand_in_failed=1
        device_x=(-x "LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" -x GPURDMA_FAKE_CUDA_LEAKS=1)
    fi
    if [ "$stand_in_failed" = 1 ]; then
        failed=$((failed + 1))
        names+=("device_check: no stand-in driver")
        echo "FAIL device_check: $build/tests/gpu/fake/libcuda.so.1 not built (make check builds it)"
    else
        dev_on=("${on[@]}" "${device_x[@]}" --mca coll_gpurdma_timeout 20 --mca coll_gpurdma_chunk_size 16384)
        USED_PATTERN="device buffers across nodes" run "device buffers 2x2 logical nodes" used 120 -- -np 4 \
            "${dev_on[@]}" --mca coll_gpurdma_logical_nodes 2 "$bin/device_check" --max-bytes 262144 --expect-device
        USED_PATTERN="device buffers across nodes" run "device buffers 3+1+2 logical nodes" used 120 -- -np 6 \
            "${dev_on[@]}" --mca coll_gpurdma_logical_nodes 3,1,2 "$bin/device_check" --max-bytes 262144 \
            --device-per-rank --expect-device
        # The rail stage on the GPU: arrivals reduced out of their landing slots, sends
        # staged; with the stand-in, also straight from its "device memory" (host memory),
        # and arrivals landing in it (offered to the rail peers, as with GPUDirect RDMA).
        USED_PATTERN="rail stage reduces on the device" run "device buffers 3+1+2 logical nodes, rail on the GPU" \
            used 120 -- -np 6 "${dev_on[@]}" --mca coll_gpurdma_logical_nodes 3,1,2 \
            --mca coll_gpurdma_rail_reduce device "$bin/device_check" --max-bytes 262144 --expect-device
        # Halving-doubling rails in units of the whole slice (up to 128 KiB here, 16 KiB
        # chunks): the host's page-locked chunk buffers grow to a unit; the GPU's in place.
        for mode in host device; do
            USED_PATTERN="by halving-doubling" run "device buffers 3+1+2 logical nodes, rhd rails in whole slices, $mode" \
                used 120 -- -np 6 "${dev_on[@]}" --mca coll_gpurdma_logical_nodes 3,1,2 \
                --mca coll_gpurdma_rail_algorithm rhd --mca coll_gpurdma_rail_unit 1073741824 \
                --mca coll_gpurdma_rail_reduce $mode "$bin/device_check" --max-bytes 262144 --expect-device
        done
        if [ ${#device_x[@]} -gt 0 ]; then
            USED_PATTERN="arrivals land in GPU memory" run \
                "device buffers 2x2 logical nodes, rail on the GPU, sends straight, arrivals in GPU memory" used 120 \
                -- -np 4 \
                "${dev_on[@]}" -x GPURDMA_FAKE_CUDA_HOST_MEMORY=1 --mca coll_gpurdma_logical_nodes 2 \
                --mca coll_gpurdma_rail_reduce device "$bin/device_check" --max-bytes 262144 --expect-device
        fi
        # One node: every size on the device path (device_stage_max 0), then the default:
        # up to 32 KiB staged through page-locked host memory, the device path above.
        USED_PATTERN="device buffers: node stage on the GPU" run "device buffers one node np=3, every size on the GPU" \
            used 120 -- -np 3 "${dev_on[@]}" --mca coll_gpurdma_device_stage_max 0 "$bin/device_check" \
            --max-bytes 262144 --expect-device
        USED_PATTERN="device buffers: node stage on the GPU" run "device buffers one node np=2, small ones staged" \
            used 120 -- -np 2 "${dev_on[@]}" "$bin/device_check" --max-bytes 262144 --expect-device
        # The other collectives on GPU buffers (device_colls_check): on one node the device
        # path at every size (kernels and copies over CUDA IPC), a node peer on host
        # buffers (the node stages), and across logical nodes (node stage on the GPUs,
        # rail from page-locked copies).
        USED_PATTERN="on the device path (GPU buffers)" run \
            "reduce-scatter/allgather/bcast/reduce on device buffers one node np=3, on the GPU" used 120 -- -np 3 \
            "${dev_on[@]}" --mca coll_gpurdma_device_stage_max 0 "$bin/device_colls_check" --max-bytes 262144 \
            --expect-device
        USED_PATTERN="device_colls_check: [1-9][0-9]* passed, 0 failed" run \
            "reduce-scatter/allgather/bcast/reduce, one node np=4, rank 1 on host buffers" used 120 -- -np 4 \
            "${dev_on[@]}" "$bin/device_colls_check" --max-bytes 65536 --host-ranks 1
        USED_PATTERN="on the device path (GPU buffers)" run \
            "reduce-scatter/allgather/bcast/reduce on device buffers, 2x2 logical nodes, on the GPUs" used 120 -- \
            -np 4 "${dev_on[@]}" --mca coll_gpurdma_logical_nodes 2 --mca coll_gpurdma_device_stage_max 0 \
            "$bin/device_colls_check" --max-bytes 262144 --expect-device
        # A node whose ranks mix host and GPU buffers agrees per call: rank 1's node
        # stages every call and joins it on the host path; node 1 runs on its GPU(s).
        USED_PATTERN="device buffers across nodes" run "host and device buffers on one node, 2x2" used 120 -- \
            -np 4 "${dev_on[@]}" --mca coll_gpurdma_logical_nodes 2 "$bin/device_check" --max-bytes 262144 \
            --host-ranks 1
        # The device set-up runs as steps of the call: a node peer that began the call and
        # then computes for 0.6 x the timeout holds neither its peer's MPI_Iallreduce nor
        # another communicator's calls in that process (setup_wait_check).
        set_up=("${on[@]}" "${device_x[@]}" --mca coll_gpurdma_timeout 5 --mca coll_gpurdma_device_stage_max 0)
        USED_PATTERN="device buffers: node stage on the GPU" run "device set-up while a node peer computes, np=3" \
            used 120 -- -np 3 "${set_up[@]}" "$bin/setup_wait_check" --compute 3
        USED_PATTERN="device buffers across nodes" run "device set-up while a node peer computes, 2x2" used 120 -- \
            -np 4 "${set_up[@]}" --mca coll_gpurdma_logical_nodes 2 "$bin/setup_wait_check" --compute 3
        # The same through HIP (AMD GPUs): only the stand-in HIP runtime on the path
        # (tests/gpu/fake_hip.cpp; no libcuda.so.1), so the component and the test pick
        # HIP as on an AMD node; where hipcc built the AMD code objects, the kernels are
        # looked up in them.
        fake_hip=$build/tests/gpu/fake-hip
        if [ ${#device_x[@]} -gt 0 ] && [ -f "$fake_hip/libamdhip64.so.5" ]; then
            hip_on=("${on[@]}" -x "LD_LIBRARY_PATH=$fake_hip${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                -x GPURDMA_FAKE_CUDA_LEAKS=1 --mca coll_gpurdma_timeout 20 --mca coll_gpurdma_chunk_size 16384)
            USED_PATTERN="device buffers up to [0-9]* bytes (HIP)" run "HIP: device buffers 2x2 logical nodes" used 120 -- \
                -np 4 "${hip_on[@]}" --mca coll_gpurdma_logical_nodes 2 "$bin/device_check" --max-bytes 262144 \
                --expect-device
            USED_PATTERN="device buffers through HIP" run \
                "HIP: reduce-scatter/allgather/bcast/reduce on device buffers one node np=3, on the GPU" used 120 \
                -- -np 3 "${hip_on[@]}" --mca coll_gpurdma_device_stage_max 0 "$bin/device_colls_check" \
                --max-bytes 262144 --expect-device
        fi
        # Buffers of both vendors in one process: both stand-ins loaded, rank 1's receive
        # buffers HIP's, its send buffers CUDA's. gpurdma (CUDA) stages them with HIP's
        # copies, rank 1's node peer stages with it (the node's board says host), the
        # other node runs on its GPUs; the declined calls stage through HIP's copies too.
        if [ ${#device_x[@]} -gt 0 ] && [ -f "$fake_hip/libamdhip64.so.5" ]; then
            both_on=(--mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 2
                -x "LD_LIBRARY_PATH=$build/tests/gpu/fake:$fake_hip${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                -x GPURDMA_FAKE_CUDA_LEAKS=1 --mca coll_gpurdma_timeout 20 --mca coll_gpurdma_chunk_size 16384)
            USED_PATTERN="a HIP buffer beside gpurdma's CUDA runtime: staged through host memory by HIP's copies" run \
                "CUDA and HIP buffers in one call, 2x2 logical nodes" used 120 -- -np 4 "${both_on[@]}" \
                --mca coll_gpurdma_logical_nodes 2 "$bin/device_check" --max-bytes 262144 --other-vendor-ranks 1
        fi
    fi
}

if [ "${GPURDMA_SKIP_LARGE:-0}" = 1 ]; then
    echo "SKIP large (>2 GiB) test: GPURDMA_SKIP_LARGE=1"
else
    run "large >2GiB np=2" used 600 -- -np 2 "${on[@]}" "$bin/large_check"
fi

echo "mpi-tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
