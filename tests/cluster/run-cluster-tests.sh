#!/usr/bin/env bash
# Cluster tests: gpurdma across hosts that really are separate (network, UTS, IPC and
# mount namespaces on this machine, made by contrib/cluster.sh), launched by real
# mpirun jobs through an rsh agent. Needs root; otherwise it is skipped (exit 77).
#
#   a. allreduce_check --quick at 2 hosts x 2 ranks, 3 x 1 and 3+1+2 ranks;
#   b. each run's gpurdma set-up line must name the right number of hosts, nothing declined;
#   c. osu_allreduce at 2 x 2: MiB must cross each participating host's link;
#   d. allreduce_check again with netem (delay 50us, loss 0.01%) on every link;
#   e. nonblocking_check --quick (MPI_Iallreduce, persistent) and thread_stress_check
#      (MPI_THREAD_MULTIPLE) at 2 x 2, gpurdma's MPI_T counters required; collectives_check
#      --lite (reduce-scatter, allgather, bcast, reduce; counters required) at 2 x 2 and 3+1+2;
#      allreduce_check with coll_gpurdma_rail_slots 1 (2 x 2) and 64 (3+1+2), and with the
#      rail stage by halving-doubling at 3+1+2 (3 nodes: the fold);
#   f. device_check --quick (GPU buffers) at 2 x 2 and 3+1+2 with --expect-device (and
#      the rail stage on the GPU: sends staged at 3+1+2, straight at 2 x 2): on
#      GPU 0 where there is one, else with the stand-in libcuda.so.1 on every rank
#      (CUDA IPC between the ranks of a host inside its namespaces, page-locked staging
#      between hosts); skipped by a host-only build.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${GPURDMA_SRCDIR:-$(cd "$here/../.." && pwd)}
build=${GPURDMA_BUILDDIR:-$src/build}
cluster=$src/contrib/cluster.sh
bin=$build/tests/mpi
osu=$build/osu-compat/osu_allreduce
export GPURDMA_BUILD=$build
# Cluster 1 (198.18.1.0/24, gpr1-*): independent of a cluster made by hand (id 0).
export GPURDMA_CLUSTER_ID=${GPURDMA_CLUSTER_ID:-1}
unset GPURDMA_CLUSTER_STATE
[ -n "${OMPI_PKGLIBDIR:-}" ] && export OMPI_PKGLIBDIR

skip() { echo "SKIP: $*"; exit 77; }
# GPURDMA_CLUSTER_ONLY=REGEX runs only the steps whose name matches (CI's Debian 13 pass:
# Open MPI 5's launch across the hosts, not every step again).
only=${GPURDMA_CLUSTER_ONLY:-}
selected() { [ -z "$only" ] || [[ $1 =~ $only ]]; }

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
for t in ip nsenter unshare tc timeout setsid flock "${MPIRUN:-mpirun}"; do
    command -v "$t" >/dev/null 2>&1 || skip "'$t' not found"
done
probe=gpr-probe$$
ip netns add "$probe" 2>/dev/null || skip "cannot create a network namespace (ip netns add)"
ip netns del "$probe"
unshare --uts --ipc --mount true 2>/dev/null || skip "cannot create UTS/IPC/mount namespaces (unshare)"

# One run at a time per cluster id (e.g. two `make check` at once).
lock=/tmp/gpurdma-cluster$GPURDMA_CLUSTER_ID.lock
exec 9>"$lock"
if ! flock -n 9; then
    echo "waiting for another cluster test run (lock $lock)"
    flock -w 600 9 || { echo "ERROR: another cluster test run holds $lock"; exit 99; }
fi

log_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-cluster-tests.XXXXXX")
# Timeouts write their dumps here, not into the working directory (coll_gpurdma_dump_dir).
export OMPI_MCA_coll_gpurdma_dump_dir="$log_dir/dumps"
teardown() {
    "$cluster" down >/dev/null 2>&1 || echo "WARNING: cluster teardown failed; run: $cluster down"
    rm -rf "$log_dir"
}
trap teardown EXIT
trap 'echo "interrupted"; exit 130' INT
trap 'echo "terminated"; exit 143' TERM

t0=$SECONDS
if ! "$cluster" up 3 >"$log_dir/up.log" 2>&1; then
    cat "$log_dir/up.log"
    # Most likely a restricted environment (no veth/bridge); the tests cannot run here.
    skip "cannot bring up the namespace cluster (see above)"
fi
echo "cluster: $(cat "$log_dir/up.log")"

on=(--mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 1)
passed=0
failed=0

# job OUT LIMIT ARGS...: contrib/cluster.sh run ARGS > OUT, killed after LIMIT seconds.
# In the background so that INT/TERM reach this script (and its teardown) at once.
job() {
    local out=$1 limit=$2
    shift 2
    GPURDMA_CLUSTER_TIMEOUT=$limit "$cluster" run "$@" >"$out" 2>&1 &
    wait $!
}

# result NAME START WHY OUT [INFO]
result() {
    local name=$1 start=$2 why=$3 out=$4 info=${5:-}
    if [ -z "$why" ]; then
        passed=$((passed + 1))
        printf 'PASS %-52s %4ds  %s\n' "$name" $((SECONDS - start)) "$info"
    else
        failed=$((failed + 1))
        printf 'FAIL %-52s %4ds  %s\n' "$name" $((SECONDS - start)) "$why"
        [ -f "$out" ] && grep -v '^note: library op deviates' "$out" | tail -40 | sed 's/^/    | /'
    fi
    # nothing of a failed or timed-out job may linger into the next step
    "$cluster" reap >/dev/null 2>&1
}

# check_used OUT HOSTS: gpurdma set up MPI_COMM_WORLD on HOSTS hosts, declined nothing
check_used() {
    local out=$1 hosts=$2 line
    line=$(grep -E 'coll:gpurdma: MPI_COMM_WORLD .*ranks on [0-9]+ host' "$out" | head -1)
    if [ -z "$line" ]; then
        grep -qE 'coll:gpurdma: .*ranks on [0-9]+ host' "$out" &&
            echo "no set-up line for MPI_COMM_WORLD" || echo "no gpurdma set-up line: gpurdma was not used"
        return
    fi
    echo "$line" | grep -qE "ranks on $hosts host" ||
        { echo "expected $hosts hosts, got: $(echo "$line" | grep -oE '[0-9]+ ranks on [0-9]+ host\(s\)')"; return; }
    grep -q "declined" "$out" && { echo "gpurdma declined: $(grep -m1 declined "$out")"; return; }
}

# allreduce NAME HOSTS TIMEOUT MPIRUN-ARGS...: allreduce_check --quick, must pass and use gpurdma
allreduce() {
    local name=$1 hosts=$2 limit=$3
    selected "$name" || return 0
    shift 3
    local out start=$SECONDS rc why=""
    out="$log_dir/$(echo "$name" | tr -c 'A-Za-z0-9' _).log"
    job "$out" "$limit" "$@" "${on[@]}" "$bin/allreduce_check" --quick --strict
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        why="timed out after ${limit}s"
    elif [ $rc -ne 0 ]; then
        why="exit code $rc"
    else
        why=$(check_used "$out" "$hosts")
        [ -z "$why" ] && ! grep -q "allreduce_check: [0-9]* passed, 0 failed" "$out" &&
            why="no 'passed, 0 failed' summary"
    fi
    result "$name" "$start" "$why" "$out" \
        "$(grep -h 'allreduce_check:' "$out" | tail -1); $(grep -oE -m1 '[0-9]+ ranks on [0-9]+ host\(s\)[^;]*' "$out")"
}

# checked NAME HOSTS TIMEOUT PROGRAM [PROGRAM-ARGS...] -- MPIRUN-ARGS...: a tests/mpi
# program must pass with gpurdma used (GPURDMA_EXPECT_USED=1: its counters too)
checked() {
    local name=$1 hosts=$2 limit=$3 prog=$4
    selected "$name" || return 0
    shift 4
    local pargs=()
    while [ "$1" != "--" ]; do pargs+=("$1"); shift; done
    shift
    local out start=$SECONDS rc why=""
    out="$log_dir/$(echo "$name" | tr -c 'A-Za-z0-9' _).log"
    job "$out" "$limit" "$@" "${on[@]}" -x GPURDMA_EXPECT_USED=1 --mca coll_gpurdma_timeout 20 "$bin/$prog" "${pargs[@]}"
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        why="timed out after ${limit}s"
    elif [ $rc -ne 0 ]; then
        why="exit code $rc"
    else
        why=$(check_used "$out" "$hosts")
        [ -z "$why" ] && ! grep -q "$prog: [0-9]* passed, 0 failed" "$out" && why="no 'passed, 0 failed' summary"
        [ -z "$why" ] && [ -n "${WANT:-}" ] && ! grep -qF -- "$WANT" "$out" && why="no line says '$WANT'"
    fi
    result "$name" "$start" "$why" "$out" "$(grep -h "$prog:" "$out" | tail -1)"
}

# link NODE: the root end of NODE's veth
link() {
    "$cluster" counters | awk -v n="$1" '$1 == n { print $2 }'
}

# counter NODE sent|received
counter() {
    "$cluster" counters | awk -v n="$1" -v c="$2" '$1 == n { print (c == "sent" ? $4 : $5) }'
}

# --- a + b
allreduce "allreduce 2 hosts x 2 ranks" 2 120 --host node0:2,node1:2
allreduce "allreduce 3 hosts x 1 rank" 3 120 --host node0:1,node1:1,node2:1
allreduce "allreduce 3 hosts, 3+1+2 ranks" 3 180 --host node0:3,node1:1,node2:2

# --- c: inter-host bytes really cross the links
osu_step() {
    local name="osu_allreduce 2x2: bytes cross the links" start=$SECONDS why="" rc
    local out="$log_dir/osu.log" min_mib=16 info="" n
    selected "$name" || return 0
    if [ ! -x "$osu" ]; then
        result "$name" "$start" "$osu not built (make -C $build)" /dev/null
        return
    fi
    declare -A before_s before_r
    for n in node0 node1; do before_s[$n]=$(counter $n sent); before_r[$n]=$(counter $n received); done
    job "$out" 180 --host node0:2,node1:2 "${on[@]}" "$osu" -m 1048576:16777216 -i 5 -x 1
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        why="timed out after 180s"
    elif [ $rc -ne 0 ]; then
        why="exit code $rc"
    else
        why=$(check_used "$out" 2)
        [ -z "$why" ] && ! grep -qE '^16777216 ' "$out" && why="no result row for 16777216 bytes"
    fi
    for n in node0 node1; do
        local s=$((($(counter $n sent) - before_s[$n]) / 1048576))
        local r=$((($(counter $n received) - before_r[$n]) / 1048576))
        info+="$n sent $s MiB, received $r MiB; "
        if [ -z "$why" ] && { [ $s -lt $min_mib ] || [ $r -lt $min_mib ]; }; then
            why="$n: only $s MiB sent / $r MiB received on $(link $n) (expected >= $min_mib MiB each)"
        fi
    done
    local n2
    n2=$(counter node2 sent)
    result "$name" "$start" "${why:+$why; $info}" "$out" "$info(node2, idle: $n2 bytes sent in all)"
}
osu_step

# --- d: impaired links
netem_step() {
    local spec="delay 50us loss 0.01%" start=$SECONDS msg rc name
    selected "allreduce 2x2, netem" || return 0
    msg=$("$cluster" netem "$spec" 2>&1)
    rc=$?
    name="allreduce 2x2, netem $spec"
    case $rc in
    0) ;;
    3) name="allreduce 2x2, loss 0.01% (no sch_netem: no delay)"; echo "note: $msg" ;;
    *) result "$name" "$start" "cluster.sh netem failed: $msg" /dev/null; return ;;
    esac
    allreduce "$name" 2 180 --host node0:2,node1:2
    local drops
    drops=$(for n in node0 node1; do tc -s qdisc show dev "$(link $n)" | grep -m1 dropped; done |
        awk '{ gsub(",", "", $7); s += $7 } END { print s + 0 }')
    echo "     packets dropped on the links of node0 and node1 during that run: $drops"
    "$cluster" netem off >/dev/null
}
netem_step

# --- e: nonblocking, persistent and threads across hosts
checked "nonblocking 2 hosts x 2 ranks" 2 180 nonblocking_check --quick --strict -- --host node0:2,node1:2
checked "thread stress 2 hosts x 2 ranks" 2 120 thread_stress_check --threads 3 -- --host node0:2,node1:2
# The collectives beyond allreduce (reduce-scatter(_block), allgather, bcast, reduce;
# blocking, nonblocking, persistent): --lite (representative types, two ops each, counts
# 0 1 1001 70000, world and the split with reversed key; every message costs about 1 ms
# here); gpurdma's per-collective MPI_T counters required. Declined calls go to Open
# MPI's ops, hence op ^avx.
checked "collectives 2 hosts x 2 ranks" 2 180 collectives_check --lite -- --host node0:2,node1:2 --mca op ^avx \
    -x GPURDMA_REQUIRE_COLL_PVARS=1
checked "collectives 3 hosts, 3+1+2 ranks" 3 180 collectives_check --lite -- --host node0:3,node1:1,node2:2 \
    --mca op ^avx -x GPURDMA_REQUIRE_COLL_PVARS=1
# MPI_Barrier, MPI_Ibarrier, the persistent barrier across hosts (the namespaces share
# this kernel's clock, which barrier_check's check needs): counted as barriers.
checked "barrier 3 hosts, 3+1+2 ranks" 3 120 barrier_check -- --host node0:3,node1:1,node2:2

# --- e2: receiver-driven admission on the rails (coll_gpurdma_rail_slots): one put in
# flight per rail peer, and the most (64, with 16 KiB chunks so that a call fills them)
WANT="1 in flight per rail peer" checked "admission: rail_slots 1, 2 hosts x 2 ranks" 2 180 allreduce_check --quick \
    --strict -- --host node0:2,node1:2 --mca coll_gpurdma_rail_slots 1
WANT="64 in flight per rail peer" checked "admission: rail_slots 64, 3 hosts, 3+1+2 ranks" 3 180 allreduce_check \
    --quick --strict -- --host node0:3,node1:1,node2:2 --mca coll_gpurdma_rail_slots 64 \
    --mca coll_gpurdma_chunk_size 16384
# The rail stage by halving-doubling over real sockets between hosts: 3 nodes is not a
# power of two, so node 2 folds into node 0 before the exchanges and gets its result back
# after (plan/halving_doubling.h); 16 KiB chunks so that a call is several units.
WANT="by halving-doubling" checked "rail stage by halving-doubling, 3 hosts, 3+1+2 ranks" 3 180 allreduce_check \
    --quick --strict -- --host node0:3,node1:1,node2:2 --mca coll_gpurdma_rail_algorithm rhd \
    --mca coll_gpurdma_chunk_size 16384

# --- e3: nodes ordered by the switch fabric (coll_gpurdma_fabric_topology, Slurm's
# topology.conf format): node0 and node2 under leafA, node1 under leafB, so the rails
# run node0 -> node2 -> node1, not in rank order; results checked, by ring and by
# halving-doubling (whose first exchange then pairs node0 with node2).
cat >"$log_dir/topology.conf" <<'TOPOLOGY'
# as a site's slurm.conf would have it with TopologyPlugin=topology/tree
SwitchName=leafA Nodes=node[0,2]
SwitchName=leafB Nodes=node1
SwitchName=spine Switches=leafA,leafB
TOPOLOGY
WANT="nodes in fabric order: 3 nodes under 2 leaf switches (leafA: 2, leafB: 1)" checked \
    "fabric order from topology.conf, 3 hosts, 3+1+2 ranks" 3 180 collectives_check --lite -- \
    --host node0:3,node1:1,node2:2 --mca op ^avx --mca coll_gpurdma_fabric_topology "$log_dir/topology.conf"
WANT="nodes in fabric order: 3 nodes under 2 leaf switches (leafA: 2, leafB: 1)" checked \
    "fabric order, halving-doubling, 3 hosts, 3+1+2 ranks" 3 180 allreduce_check --quick --strict -- \
    --host node0:3,node1:1,node2:2 --mca coll_gpurdma_rail_algorithm rhd --mca coll_gpurdma_chunk_size 16384 \
    --mca coll_gpurdma_fabric_topology "$log_dir/topology.conf"

# --- g: the live dump and gpurdma-doctor across hosts: rank 3 (alone on node1) skips call
# 9 while the others wait in it; a trigger file on the shared file system asks every
# rank for its dump (tests/mpi/run-doctor-tests.sh has the other scenarios).
doctor_step() {
    local name="doctor: a rank skips a call, 3 hosts, 3+1+2 ranks"
    selected "$name" || return 0
    local start=$SECONDS why="" out="$log_dir/doctor.log" dumps="$log_dir/doctor-dumps" n
    GPURDMA_CLUSTER_TIMEOUT=120 "$cluster" run --host node0:3,node1:1,node2:2 "${on[@]}" \
        --mca coll_gpurdma_dump_dir "$dumps" --mca coll_gpurdma_dump_trigger "$log_dir/doctor-go" \
        "$bin/doctor_check" skip 9 3 60 >"$out" 2>&1 &
    local pid=$!
    for _ in $(seq 600); do
        [ "$(grep -c '^ENTER 9' "$out")" -ge 6 ] && grep -q '^HOLD rank 3' "$out" && break
        sleep 0.1
    done
    sleep 1.5  # the waiters' loops note where they wait (after 10 ms)
    touch "$log_dir/doctor-go"
    for _ in $(seq 300); do
        n=$(ls "$dumps"/gpurdma-*.json 2>/dev/null | wc -l)
        [ "$n" -ge 6 ] && break
        sleep 0.1
    done
    sleep 0.5
    "$src/contrib/gpurdma-doctor" "$dumps" >"$log_dir/doctor.txt" 2>&1
    local rc=$?
    if [ "$n" -lt 6 ]; then
        why="$n of 6 dumps"
    elif [ "$rc" != 1 ]; then
        why="gpurdma-doctor exited $rc, not 1"
    elif ! grep -q "rank 3 (world rank 3, host node1, pid [0-9]*) has not entered call 9" "$log_dir/doctor.txt"; then
        why="gpurdma-doctor does not name rank 3 on node1"
    fi
    [ -n "$why" ] && cat "$log_dir/doctor.txt" >>"$out"
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    result "$name" "$start" "$why" "$out" "$(grep -m1 'PROBLEM' "$log_dir/doctor.txt" | cut -c1-110)"
}
doctor_step

# --- f: GPU buffers across hosts
device_steps() {
    local device_x=() fake=$build/tests/gpu/fake start=$SECONDS
    if ! "$build/tests/gpu/gpu_launcher" --mode probe >/dev/null 2>&1; then
        # The stand-in that make check builds (tests/gpu/fake_cuda.cpp, the kernels' own source on the CPU).
        if [ ! -f "$fake/libcuda.so.1" ]; then
            result "device_check: the stand-in driver" "$start" "$fake/libcuda.so.1 not built (make check builds it)" \
                /dev/null
            return
        fi
        device_x=(-x "LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" -x GPURDMA_FAKE_CUDA_LEAKS=1)
    fi
    local args=(--quick --max-bytes 262144 --expect-device)
    checked "GPU buffers 2 hosts x 2 ranks" 2 120 device_check "${args[@]}" -- --host node0:2,node1:2 "${device_x[@]}"
    checked "GPU buffers 3 hosts, 3+1+2 ranks" 3 120 device_check "${args[@]}" -- --host node0:3,node1:1,node2:2 \
        "${device_x[@]}"
    # The rail stage on the GPU (arrivals reduced out of their landing slots), sends
    # staged through page-locked buffers; with the stand-in, also sends straight from its
    # "device memory" (host memory), which UCX's tcp transport reads itself.
    WANT="rail stage reduces on the device" checked "GPU buffers 3 hosts, 3+1+2 ranks, rail on the GPU" 3 120 \
        device_check "${args[@]}" -- --host node0:3,node1:1,node2:2 --mca coll_gpurdma_rail_reduce device \
        "${device_x[@]}"
    # The same with one put in flight per rail peer (the landing offered to the peers is
    # laid out for it).
    WANT="1 in flight per rail peer" checked "GPU buffers 2 hosts x 2 ranks, rail on the GPU, rail_slots 1" 2 120 \
        device_check "${args[@]}" -- --host node0:2,node1:2 --mca coll_gpurdma_rail_reduce device \
        --mca coll_gpurdma_rail_slots 1 "${device_x[@]}"
    if [ ${#device_x[@]} -gt 0 ]; then
        WANT="sends straight from GPU memory" checked "GPU buffers 2 hosts x 2 ranks, rail on the GPU, sends straight" \
            2 120 device_check "${args[@]}" -- --host node0:2,node1:2 --mca coll_gpurdma_rail_reduce device \
            "${device_x[@]}" -x GPURDMA_FAKE_CUDA_HOST_MEMORY=1
    fi
}
device_steps

echo "cluster tests took $((SECONDS - t0))s"
echo "cluster-tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
