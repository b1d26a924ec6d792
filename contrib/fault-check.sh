#!/usr/bin/env bash
# Network faults on the namespace cluster (contrib/cluster.sh; needs root): gpurdma
# between 2 hosts x 2 ranks while one host's link goes down for 2 s, and with 1%
# packet loss. Each job runs a stream of allreduces (tests/mpi/stuck_peer_check stream,
# 1 MiB ints, every result checked) and must either complete with correct results or
# fail with gpurdma's timeout error (stage, peer, host) within coll_gpurdma_timeout
# + 5 s; a wrong result returned as success, a hang or a crash fails the check.
#   1. baseline (no fault), timeout 20 s
#   2. node1's link down 2 s mid-stream, timeout 20 s (outlives the outage)
#   3. node1's link down 2 s mid-stream, timeout 1 s (shorter than the outage)
#   4. 1% loss on every link (htb+bpf emulation where sch_netem is missing), timeout 20 s
#   5. allreduce_check --quick --strict (every type and op) under 1% loss
# Uses cluster id 6 (198.18.6.0/24) so that other clusters are left alone; about 2 min.
# Usage: contrib/fault-check.sh   (GPURDMA_BUILD selects the build, default build/)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cluster=$top/contrib/cluster.sh
export GPURDMA_BUILD=${GPURDMA_BUILD:-$top/build}
export GPURDMA_CLUSTER_ID=${GPURDMA_FAULT_CLUSTER_ID:-6}
unset GPURDMA_CLUSTER_STATE
bin=$GPURDMA_BUILD/tests/mpi
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
make -C "$GPURDMA_BUILD" tests/mpi/stuck_peer_check tests/mpi/allreduce_check >/dev/null || exit 1

exec 9>"/tmp/gpurdma-cluster$GPURDMA_CLUSTER_ID.lock"
flock -w 600 9 || { echo "ERROR: another run holds cluster $GPURDMA_CLUSTER_ID"; exit 99; }
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-fault-check.XXXXXX")
teardown() {
    "$cluster" down >/dev/null 2>&1 || echo "WARNING: cluster teardown failed; run: GPURDMA_CLUSTER_ID=$GPURDMA_CLUSTER_ID $cluster down"
    rm -rf "$log_dir"
}
trap teardown EXIT
trap 'echo interrupted; exit 130' INT
trap 'echo terminated; exit 143' TERM
"$cluster" up 2 >"$log_dir/up.log" 2>&1 || { cat "$log_dir/up.log"; echo "SKIP: cannot bring up the cluster"; exit 77; }
link1=$("$cluster" counters | awk '$1 == "node1" { print $2 }')

passed=0
failed=0
rows=()
on=(--host node0:2,node1:2 --mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 1)
CALLS=${FAULT_CALLS:-600}
COUNT=262144   # ints: 1 MiB per call

# stream NAME TIMEOUT FAULT: FAULT is "linkdown" or "" (a netem must be set before)
stream() {
    local name=$1 tmo=$2 fault=$3 out="$log_dir/$RANDOM.log" t0=$SECONDS why=""
    GPURDMA_CLUSTER_TIMEOUT=150 "$cluster" run "${on[@]}" --mca coll_gpurdma_timeout "$tmo" \
        "$bin/stuck_peer_check" stream 0 0 $COUNT "$tmo" "$CALLS" >"$out" 2>&1 &
    local job=$! down_at=""
    if [ "$fault" = linkdown ]; then
        # Wait until the stream runs (the pid line comes after MPI_Init), then 2 s down.
        for _ in $(seq 1 120); do grep -q "^PIDS" "$out" && break; sleep 0.25; done
        sleep 1.5
        down_at=$(date +%s.%N)
        ip link set dev "$link1" down
        sleep 2
        ip link set dev "$link1" up
        echo "    link $link1 (node1) down at $(date -d @"${down_at%.*}" +%T) for 2 s"
    fi
    wait $job
    local rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then why="hung: killed after 150 s"
    elif [ $rc -ne 0 ]; then why="exit code $rc"
    elif ! grep -q "stuck_peer_check: [0-9]* passed, 0 failed" "$out"; then why="no 'passed, 0 failed' summary"
    elif ! grep -q "coll:gpurdma: MPI.*ranks on 2 host" "$out"; then why="gpurdma was not used across 2 hosts"
    fi
    grep -q "^FAIL" "$out" && why="${why:-$(grep -m1 '^FAIL' "$out")}"
    local errs ok slow msg outcome
    errs=$(grep -c "^DETECT" "$out")
    ok=$(grep "^STREAM" "$out" | sed 's/.*: \([0-9]*\) of.*/\1/' | sort -n | head -1)
    slow=$(grep "^STREAM" "$out" | sed 's/.*slowest call \([0-9.]*\) s.*/\1/' | sort -n | tail -1)
    msg=$(grep -m1 -o "timed out after .*" "$out" | cut -c1-170)
    if [ "$errs" -gt 0 ]; then
        [ -n "$msg" ] || why="${why:-an error without the gpurdma timeout message}"
        outcome="failed cleanly on $errs rank(s) (\"$msg\"); $ok calls ok before; nothing wrong returned"
    else
        outcome="all $CALLS calls correct on every rank; slowest call $slow s"
    fi
    if [ -z "$why" ]; then
        passed=$((passed + 1))
        printf 'PASS %-44s %4ds  %s\n' "$name" $((SECONDS - t0)) "$outcome"
        local det
        det=$(grep "^DETECT" "$out" | sed 's/.*error after \([0-9.]*\) s.*/\1 s/' | sort -n | tail -1)
        rows+=("| $name | $outcome | ${det:--} | $((SECONDS - t0)) s |")
    else
        failed=$((failed + 1))
        printf 'FAIL %-44s %4ds  %s\n' "$name" $((SECONDS - t0)) "$why"
        tail -40 "$out" | sed 's/^/    | /'
    fi
    "$cluster" reap >/dev/null 2>&1
}

stream "cluster 2x2: baseline" 20 ""
stream "cluster 2x2: link down 2 s, timeout 20 s" 20 linkdown
stream "cluster 2x2: link down 2 s, timeout 1 s" 1 linkdown
msg=$("$cluster" netem "loss 1%" 2>&1) || { echo "FAIL netem: $msg"; exit 1; }
echo "    $msg"
stream "cluster 2x2: 1% loss, timeout 20 s" 20 ""
t0=$SECONDS
out="$log_dir/check.log"
GPURDMA_CLUSTER_TIMEOUT=300 "$cluster" run "${on[@]}" --mca coll_gpurdma_timeout 20 \
    "$bin/allreduce_check" --quick --strict >"$out" 2>&1
rc=$?
drops=$(tc -s qdisc show dev "$link1" | grep -m1 -o "dropped [0-9]*")
if [ $rc -eq 0 ] && grep -q "allreduce_check: [0-9]* passed, 0 failed" "$out"; then
    passed=$((passed + 1))
    printf 'PASS %-44s %4ds  %s\n' "cluster 2x2: allreduce_check, 1% loss" $((SECONDS - t0)) "$(grep -m1 'allreduce_check:' "$out"); node1 link $drops"
    rows+=("| cluster 2x2: allreduce_check --quick --strict, 1% loss | $(grep -m1 'allreduce_check:' "$out") | - | $((SECONDS - t0)) s |")
elif grep -q "timed out after" "$out" && ! grep -q "^FAIL" "$out"; then
    passed=$((passed + 1))
    printf 'PASS %-44s %4ds  %s\n' "cluster 2x2: allreduce_check, 1% loss" $((SECONDS - t0)) "failed cleanly: $(grep -m1 -o 'timed out after.*' "$out")"
else
    failed=$((failed + 1))
    printf 'FAIL %-44s %4ds  exit %s\n' "cluster 2x2: allreduce_check, 1% loss" $((SECONDS - t0)) "$rc"
    tail -30 "$out" | sed 's/^/    | /'
fi
"$cluster" netem off >/dev/null

echo
echo "Rows for docs/RELIABILITY.md:"
for r in "${rows[@]}"; do echo "$r"; done
echo "fault-check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
