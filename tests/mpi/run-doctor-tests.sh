#!/usr/bin/env bash
# The live dump and gpurdma-doctor on real mpirun jobs (make check). Each scenario runs
# tests/mpi/doctor_check, asks for a dump the way a user would (kill -USR2 <mpirun>,
# or a call's timeout), and checks that contrib/gpurdma-doctor names the right rank
# and the right cause, and exits 1 (0 for the healthy job):
#   healthy  np 4, nothing wrong: "nothing wrong found".
#   stop     np 4, rank 2 SIGSTOPs itself before call 9: rank 2 wrote no dump, the
#            others wait in call 9 for it (by name).
#   skip     np 4, rank 2 skips call 9 and sleeps: it has not entered call 9 (at the
#            defaults, without a history: its last call is known by number; with
#            coll_gpurdma_recorder_size 32 also what it was).
#   count    np 4, coll_gpurdma_recorder_size 32, rank 2 passes 1001 ints to call 9, the
#            others 1000: call 9 does not match.
#   trigger  np 2, healthy, the dump asked for by coll_gpurdma_dump_trigger (a file).
#   trace    np 4 on 2 logical nodes, coll_gpurdma_trace_dir: every rank's per-stage MPI_T
#            counters grew in all three stages, and the trace files pass check_trace.py
#            (the Chrome trace event format, stages inside their calls, clocks aligned).
#   kill     np 4 on 2 logical nodes (UCX between them), rank 3 SIGKILLs itself inside
#            a 64 MiB allreduce, mpirun --enable-recovery (UCX without cma): the others time out
#            (coll_gpurdma_timeout 4), each writing its dump before its error; the
#            doctor names rank 3, and a rank waiting for it in the stage between nodes.
# Every job runs under `timeout -k 5`, and is ended by the script once checked.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${GPURDMA_BUILDDIR:-$(cd "$here/../.." && pwd)}
src=${GPURDMA_SRCDIR:-$(cd "$here/../.." && pwd)}
pkglibdir=${OMPI_PKGLIBDIR:-$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')}
mpirun=${MPIRUN:-mpirun}
doctor="$src/contrib/gpurdma-doctor"
bin=$build/tests/mpi/doctor_check
work=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-doctor-tests.XXXXXX")
job_pid=

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_path="$pkglibdir:$build/component"

end_job() {
    [ -n "$job_pid" ] || return 0
    pkill -CONT -f "$bin" 2>/dev/null
    kill -TERM "$job_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$job_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$job_pid" 2>/dev/null
    pkill -KILL -f "$bin" 2>/dev/null
    wait "$job_pid" 2>/dev/null
    job_pid=
}
trap 'end_job; rm -rf "$work"' EXIT

# A signal to mpirun (the job's process is `timeout`; mpirun is its child), which
# forwards SIGUSR2 to every rank, as a user's `kill -USR2 <mpirun's pid>`.
to_mpirun() {
    pkill "-$1" -P "$job_pid"
}

fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# Starts the job in the background: start NAME NP K VICTIM HOLD [mpirun options...]
start() {
    local name=$1 np=$2 k=$3 victim=$4 hold=$5 mode=$1
    shift 5
    case $mode in trigger | trace) mode=healthy ;; skip-history) mode=skip ;; esac
    mkdir -p "$work/$name"
    timeout -k 5 90 "$mpirun" -np "$np" --oversubscribe --mca coll_gpurdma_priority 100 \
        --mca coll_gpurdma_dump_dir "$work/$name/dump" "$@" "$bin" "$mode" "$k" "$victim" "$hold" \
        > "$work/$name/out" 2>&1 &
    job_pid=$!
}

# Waits until N lines match PATTERN in the job's output (or 60 s): wait_lines NAME PATTERN N
wait_lines() {
    for _ in $(seq 600); do
        [ "$(grep -c -- "$2" "$work/$1/out")" -ge "$3" ] && return 0
        kill -0 "$job_pid" 2>/dev/null || break
        sleep 0.1
    done
    return 1
}

# Waits for N dump files (or 30 s): wait_dumps NAME N
wait_dumps() {
    for _ in $(seq 300); do
        [ "$(ls "$work/$1/dump"/gpurdma-*.json 2>/dev/null | wc -l)" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

# Runs the doctor and checks its exit status and that each PATTERN is in its output:
# check NAME STATUS PATTERN...
check() {
    local name=$1 want=$2
    shift 2
    "$doctor" "$work/$name/dump" > "$work/$name/doctor" 2>&1
    local rc=$?
    sed "s/^/  [$name] /" "$work/$name/doctor"
    [ "$rc" = "$want" ] || fail "$name: gpurdma-doctor exited $rc, not $want"
    for p in "$@"; do
        grep -q -- "$p" "$work/$name/doctor" || fail "$name: gpurdma-doctor does not say: $p"
    done
}

# A job that waits in call 9 (or holds), then one signal to mpirun, which forwards it.
signal_scenario() {
    local name=$1 dumps=$2 waiting=$3
    shift 3
    start "$name" 4 9 2 30 "$@"
    if ! wait_lines "$name" "^ENTER 9" 4 || ! wait_lines "$name" "^HOLD" "$waiting"; then
        fail "$name: the job did not reach call 9"
        cat "$work/$name/out"
        end_job
        return
    fi
    sleep 1.5  # the waiters' loops note where they wait (after 10 ms), well past it
    to_mpirun USR2
    wait_dumps "$name" "$dumps" || fail "$name: $(ls "$work/$name/dump" 2>/dev/null | wc -l) dumps, not $dumps"
    sleep 0.5
}

echo "== healthy"
signal_scenario healthy 4 4
check healthy 0 "nothing wrong found" "4 dump(s)"
end_job

echo "== stop (rank 2 stopped before call 9)"
signal_scenario stop 3 0
check stop 1 "rank 2 on host [^ ]* wrote no dump" "ranks 0,1,3 wait in call 9 (allreduce 1000 x int32 sum)" \
    "waiting for it by name: rank 0 in"
end_job

echo "== skip (rank 2 skips call 9)"
signal_scenario skip 4 1
check skip 1 "rank 2 (world rank 2, host [^ ]*, pid [0-9]*) has not entered call 9 (allreduce 1000 x int32 sum)" \
    "its last call here is call 8, done (no history"
end_job

echo "== skip, with a history (coll_gpurdma_recorder_size 32)"
signal_scenario skip-history 4 1 --mca coll_gpurdma_recorder_size 32
check skip-history 1 "rank 2 (world rank 2, host [^ ]*, pid [0-9]*) has not entered call 9" \
    "its last call here is call 8 (barrier), done"
end_job

echo "== count (rank 2 passes 1001 ints to call 9; a finished call's mismatch needs a history)"
start count 4 9 2 30 --mca coll_gpurdma_recorder_size 32
if wait_lines count "^HOLD" 4; then
    sleep 0.5
    to_mpirun USR2
    wait_dumps count 4 || fail "count: no 4 dumps"
    sleep 0.5
    check count 1 "call 9 does not match between ranks" "ranks 0,1,3: allreduce 1000 x int32 sum; ranks 2: allreduce 1001 x int32 sum"
else
    # The mismatched call may also hang: the dump still shows the mismatch.
    to_mpirun USR2
    wait_dumps count 4 || fail "count: no 4 dumps"
    sleep 0.5
    check count 1 "call 9 does not match between ranks"
fi
end_job

echo "== trigger (a file asks for the dump)"
start trigger 2 9 0 30 --mca coll_gpurdma_dump_trigger "$work/trigger/go"
if wait_lines trigger "^HOLD" 2; then
    touch "$work/trigger/go"
    wait_dumps trigger 2 || fail "trigger: no 2 dumps after touching the trigger file"
    sleep 0.5
    check trigger 0 "nothing wrong found" "(trigger file)"
else
    fail "trigger: the job did not reach its hold"
fi
end_job

echo "== kill (rank 3 killed inside a 64 MiB allreduce across logical nodes; timeout dumps)"
# Not UCX's cma: its write to a dead process is a fatal error in UCX 1.18 (Debian 13),
# which would take the rail peer down too; shared memory and tcp let the others wait.
start kill 4 9 3 1 --enable-recovery --mca coll_gpurdma_logical_nodes 2 --mca coll_gpurdma_timeout 4 \
    --mca coll_gpurdma_ucx_tls '^cma'
if wait_lines kill "call 9 failed" 3; then
    wait_dumps kill 3 || fail "kill: no 3 dumps"
    grep -q "timed out after 4 s in .*; dump: $work/kill/dump/gpurdma-" "$work/kill/out" ||
        fail "kill: the timeout errors do not name the dump"
    check kill 1 "rank 3 on host [^ ]* wrote no dump" "ranks 0,1,2 wait in call 9 (allreduce 16777216 x int32 sum)" \
        "(timeout)" "waiting for it by name: .*(inter-node)"
else
    fail "kill: the others did not time out"
    cat "$work/kill/out"
fi
end_job

echo "== trace and per-stage counters (np 4 on 2 logical nodes, healthy)"
start trace 4 40 0 0 --mca coll_gpurdma_logical_nodes 2 --mca coll_gpurdma_trace_dir "$work/trace/files"
if wait "$job_pid"; then
    job_pid=
    # Every rank counted time and bytes in each of the hierarchical path's three stages.
    stages=$(grep -c "^STAGES rank [0-3] node_rs_us=[1-9][0-9]* node_rs_bytes=[1-9][0-9]* rail_us=[1-9][0-9]* \
rail_bytes=[1-9][0-9]* node_ag_us=[1-9][0-9]* node_ag_bytes=[1-9][0-9]* found=6$" "$work/trace/out")
    [ "$stages" = 4 ] || fail "trace: $stages of 4 ranks report every stage's MPI_T counters: $(grep STAGES "$work/trace/out")"
    python3 "$here/check_trace.py" "$work/trace/files" 4 | sed 's/^/  [trace] /'
    [ "${PIPESTATUS[0]}" = 0 ] || fail "trace: the trace files do not pass check_trace.py"
else
    job_pid=
    fail "trace: the job failed"
    cat "$work/trace/out"
fi

echo "== bad input"
mkdir -p "$work/empty"
"$doctor" "$work/empty" > "$work/empty/doctor" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "no dumps" "$work/empty/doctor" || fail "an empty folder: exit $rc, $(cat "$work/empty/doctor")"

if [ "$fails" -ne 0 ]; then
    echo "run-doctor-tests: $fails failed"
    exit 1
fi
echo "run-doctor-tests: all passed"
