#!/usr/bin/env bash
# Slurm tests: a private one-host Slurm (its own munged, slurmctld and slurmd, its own
# slurm.conf, topology.conf, munge key, ports, spool and state, all in a temporary
# directory), then MPI jobs launched by `srun --mpi=pmix`, direct (no mpirun):
#
#   a. `srun --mpi=list` names pmix; srun gives the tasks their switch address
#      (SLURM_TOPOLOGY_ADDR=spine.leaf1.HOST); the Slurm version is printed;
#   b. allreduce_check --quick --strict at 4 ranks, 2 logical nodes: gpurdma set up
#      MPI_COMM_WORLD, declined nothing, and put the nodes in fabric order from Slurm's
#      topology/tree (SLURM_TOPOLOGY_ADDR: "2 nodes under 1 leaf switch (leaf1: 2)");
#   c. collectives_check --lite at 4 ranks, gpurdma's MPI_T counters required;
#   d. barrier_check at 4 ranks, counters required.
#
# Needs root and slurmd, slurmctld, munge and slurm-wlm-basic-plugins (contrib/setup.sh
# installs them on Debian 12); without them it is skipped (exit 77). Everything it
# starts is stopped on exit (also on INT/TERM), and its directory removed; the daemons'
# logs are printed when Slurm cannot start or a job fails.
#   GPURDMA_BUILDDIR          the build tree (default: the tree two levels up, else its build/)
#   GPURDMA_SLURM_JOB_LIMIT   seconds each srun may take (default 180)
# shellcheck disable=SC2317  # teardown's helpers run from the EXIT trap
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${GPURDMA_BUILDDIR:-$(cd "$here/../.." && pwd)}
# Run from the source tree by hand: its build/ (contrib/setup.sh's), where the root has none.
[ -n "${GPURDMA_BUILDDIR:-}" ] || [ -x "$build/tests/mpi/allreduce_check" ] ||
    [ ! -x "$build/build/tests/mpi/allreduce_check" ] || build=$build/build
bin=$build/tests/mpi
limit=${GPURDMA_SLURM_JOB_LIMIT:-180}  # seconds per srun

skip() { echo "SKIP: $*"; exit 77; }
for t in srun sinfo scontrol slurmctld slurmd munged munge; do
    command -v "$t" >/dev/null 2>&1 ||
        skip "'$t' not found: install slurmd slurmctld munge slurm-wlm-basic-plugins (contrib/setup.sh does)"
done
[ "$(id -u)" -eq 0 ] || skip "needs root (runs its own slurmctld, slurmd and munged)"
for t in timeout flock python3 ompi_info; do
    command -v "$t" >/dev/null 2>&1 || skip "'$t' not found"
done
for p in allreduce_check collectives_check barrier_check; do
    [ -x "$bin/$p" ] || { echo "ERROR: $bin/$p not built (GPURDMA_BUILDDIR=$build)"; exit 99; }
done
pkglibdir=${OMPI_PKGLIBDIR:-$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')}

# One run at a time (two `make check` at once): the free ports are picked before the
# daemons take them.
lock=${TMPDIR:-/tmp}/gpurdma-slurm-tests.lock
exec 9>"$lock"  # (closed for what it starts: a leftover must not hold the lock)
if ! flock -n 9; then
    echo "waiting for another Slurm test run (lock $lock)"
    flock -w 600 9 || { echo "ERROR: another Slurm test run holds $lock"; exit 99; }
fi

# The directory must be searchable by all (munged checks its socket's path).
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-slurm-tests.XXXXXX") || exit 99
chmod 755 "$dir"
# Every process this script starts inherits this variable (daemons, srun, the job's
# tasks) or holds a file of this run's directory open (slurmstepd, whose environment is
# empty): teardown finds what is left by these, and by nothing broader.
export GPURDMA_SLURM_TEST_DIR=$dir
pids=()     # munged, slurmctld, slurmd, in start order
job_pid=""  # the srun in flight (its timeout)

# ours [PID...]: left=(the processes, other than this shell and the PIDs given and their
# children, whose environment names this run's directory or that hold a file under it open).
left=()
ours() {
    local e p k v env fds found=() skip=" $$ $* " parents=" $* "
    local IFS=$'\n'
    left=()
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}
        p=${p%/environ}
        # A builtin: no process of its own to find.
        mapfile -d '' env 2>/dev/null <"$e" || continue
        [[ $'\n'"${env[*]}"$'\n' == *$'\n'"GPURDMA_SLURM_TEST_DIR=$dir"$'\n'* ]] && found+=("$p")
    done
    mapfile -t fds < <(find /proc/[0-9]*/fd -lname "$dir/*" 2>/dev/null)
    for e in "${fds[@]}"; do
        p=${e#/proc/}
        found+=("${p%%/*}")
    done
    for p in "${found[@]}"; do
        [[ $skip == *" $p "* ]] && continue
        [[ $'\n'"${left[*]}"$'\n' == *$'\n'"$p"$'\n'* ]] && continue
        v=""
        while IFS=$' \t' read -r k v _; do [ "$k" = PPid: ] && break; done 2>/dev/null <"/proc/$p/status"
        [[ $parents == *" ${v:-x} "* ]] && continue
        left+=("$p")
    done
}

# alive PID: it runs (not a zombie: this shell reaps its children only after teardown).
alive() {
    local k v
    kill -0 "$1" 2>/dev/null || return 1
    while read -r k v _; do
        # (Explicit statuses: a bare return in a trap's function returns the trap's status.)
        [ "$k" = State: ] && { [ "$v" = Z ] && return 1; return 0; }
    done 2>/dev/null <"/proc/$1/status"
    return 1
}

# wait_gone TENTHS PID...: up to TENTHS tenths of a second for them to end; 0 if they did.
wait_gone() {
    local n=$1 p running
    shift
    while :; do
        running=0
        for p in "$@"; do alive "$p" && running=1; done
        [ "$running" = 0 ] && return 0
        [ "$n" -le 0 ] && return 1
        n=$((n - 1))
        sleep 0.1
    done
}

teardown() {
    local rc=$? i end
    trap - EXIT INT TERM
    # The srun in flight (it cancels its step), then every job; up to 15 s for them to end
    # (their slurmstepds with them) while the daemons still run.
    [ -z "$job_pid" ] || kill -TERM "$job_pid" 2>/dev/null
    if [ ${#pids[@]} -ge 3 ] && alive "${pids[1]}"; then
        timeout 5 scancel --quiet --user=root </dev/null >/dev/null 2>&1
        end=$((SECONDS + 15))
        while [ "$SECONDS" -lt "$end" ]; do
            ours "${pids[@]}"
            [ ${#left[@]} -eq 0 ] && break
            sleep 0.2
        done
    fi
    # The daemons, newest first.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill -TERM "${pids[i]}" 2>/dev/null
        wait_gone 100 "${pids[i]}" || kill -KILL "${pids[i]}" 2>/dev/null
    done
    # Whatever is still here (a slurmstepd, which ignores TERM; a job's task): TERM, then KILL.
    ours
    if [ ${#left[@]} -gt 0 ]; then
        kill -TERM "${left[@]}" 2>/dev/null
        wait_gone 30 "${left[@]}" || kill -KILL "${left[@]}" 2>/dev/null
        wait_gone 30 "${left[@]}"
        ours
        [ ${#left[@]} -eq 0 ] || echo "WARNING: processes of this test still running: ${left[*]}"
    fi
    wait 2>/dev/null
    rm -rf "$dir"
    exit "$rc"
}
trap teardown EXIT
trap 'echo "interrupted"; exit 130' INT
trap 'echo "terminated"; exit 143' TERM

# show_logs LINES LOG...: the last LINES lines of each of the daemons' logs (and of
# what they printed themselves, the .out files, where not empty).
show_logs() {
    local n=$1 f
    shift
    for f in "$@"; do
        [ -s "$dir/$f" ] || continue
        # What a daemon printed itself: only where its log has nothing (e.g. a bad slurm.conf).
        [[ $f != *.out ]] || [ ! -s "$dir/${f%.out}.log" ] || continue
        echo "---- $f (last $n lines)"
        tail -n "$n" "$dir/$f" | sed 's/^/    | /'
    done
}
fail_setup() {
    echo "ERROR: $*"
    show_logs 60 munged.log slurmctld.out slurmctld.log slurmd.out slurmd.log
    exit 1
}
# node_state: state=(the node's state as sinfo gives it: idle, allocated, ...; "" if none).
node_state() {
    state=$(timeout 5 sinfo -h -n "$host" -o %T </dev/null 2>/dev/null | head -n 1)
}
# wait_idle SECONDS: until the node is idle (no job allocated or completing); 1 if not.
state=""
wait_idle() {
    local end=$((SECONDS + $1))
    while :; do
        node_state
        [ "$state" = idle ] && return 0
        [ $SECONDS -ge "$end" ] && return 1
        sleep 0.2
    done
}

# Two free TCP ports, outside the ephemeral range, for slurmctld and slurmd (6817 and
# 6818 are the system Slurm's).
read -r ctld_port slurmd_port < <(python3 - <<'EOF'
import socket
free = []
for port in range(6917, 7917):
    s = socket.socket()
    try:
        s.bind(("", port))
        free.append(port)
    except OSError:
        pass
    finally:
        s.close()
    if len(free) == 2:
        break
print(*free)
EOF
)
[ -n "${slurmd_port:-}" ] || fail_setup "no two free TCP ports in 6917-7916"

host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$dir/etc" "$dir/munge" "$dir/state" "$dir/spool" "$dir/tmp"
chmod 700 "$dir/etc" "$dir/state" "$dir/spool"
chmod 755 "$dir/munge"
chmod 1777 "$dir/tmp"

# munge: its own key, socket, pid, seed and log.
if ! dd if=/dev/urandom of="$dir/etc/munge.key" bs=1024 count=1 status=none ||
    ! chmod 400 "$dir/etc/munge.key"; then
    fail_setup "cannot write the munge key"
fi
sock=$dir/munge/munge.socket
# The daemons run in their own session (setsid: a terminal's Ctrl-C reaches this script,
# whose teardown stops them in order, not them); not group leaders, setsid execs in place.
setsid munged --foreground --force --socket="$sock" --key-file="$dir/etc/munge.key" --log-file="$dir/munged.log" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/etc/munged.seed" </dev/null >>"$dir/munged.log" 2>&1 9>&- &
pids+=($!)
for _ in $(seq 50); do
    munge -S "$sock" -n </dev/null 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.2
done
munge -S "$sock" -n </dev/null 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 || fail_setup "munged did not start"

# Slurm: one node (this host, at 127.0.0.1: no name service needed), one partition that
# takes more tasks than CPUs (srun --overcommit), topology/tree with one leaf under one
# spine, PMIx the default MPI; no cgroups, no accounting.
conf=$dir/etc/slurm.conf
cat >"$conf" <<EOF
ClusterName=gpurdmatest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
PlugStackConfig=$dir/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=pmix
TopologyPlugin=topology/tree
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=gpurdma Nodes=$host Default=YES MaxTime=INFINITE OverSubscribe=FORCE:4 State=UP
EOF
: >"$dir/etc/plugstack.conf"
cat >"$dir/etc/topology.conf" <<EOF
SwitchName=leaf1 Nodes=$host
SwitchName=spine Switches=leaf1
EOF
export SLURM_CONF=$conf
# Nothing from a surrounding job or the caller's Slurm.
for v in $(compgen -e | grep -E '^(SLURM_|SBATCH_|SALLOC_|SRUN_)' | grep -vx SLURM_CONF); do unset "$v"; done

setsid slurmctld -D -i -f "$conf" </dev/null >>"$dir/slurmctld.out" 2>&1 9>&- &
pids+=($!)
setsid slurmd -D -f "$conf" -N "$host" </dev/null >>"$dir/slurmd.out" 2>&1 9>&- &
pids+=($!)

# Up to 30 s for the node to be idle.
daemons=(munged slurmctld slurmd)
end=$((SECONDS + 30))
while :; do
    for i in 0 1 2; do alive "${pids[i]}" || fail_setup "${daemons[i]} exited (node state '$state')"; done
    node_state
    [ "$state" = idle ] || [ $SECONDS -ge $end ] && break
    sleep 0.3
done
if [ "$state" != idle ]; then
    timeout 10 scontrol show node "$host" 2>&1 | sed 's/^/    | /'
    fail_setup "node $host not idle after 30 s (state '${state:-no answer}')"
fi
echo "slurm: $(slurmctld -V), node $host ($cpus CPUs) idle, ports $ctld_port/$slurmd_port"

passed=0
failed=0
names=()
pass() {
    passed=$((passed + 1))
    printf 'PASS %-44s %4ds  %s\n' "$1" "$2" "$3"
}
fail() {
    failed=$((failed + 1))
    names+=("$1")
    printf 'FAIL %-44s %4ds  %s\n' "$1" "$2" "$3"
}

# The MPI plugins srun offers: pmix must be among them.
start=$SECONDS
mpis=$(timeout 30 srun --mpi=list </dev/null 2>&1)
if grep -qw pmix <<<"$mpis"; then
    pass "srun --mpi=list names pmix" $((SECONDS - start)) "$(grep -o 'pmix[_a-z0-9]*' <<<"$mpis" | sort -u | tr '\n' ' ')"
else
    fail "srun --mpi=list names pmix" $((SECONDS - start)) "no pmix in: $(tr '\n' ' ' <<<"$mpis")"
fi

# The switch address srun gives every task under topology/tree (what gpurdma orders the
# nodes by): "spine.leaf1.HOST", pattern "switch.switch.node".
start=$SECONDS
# shellcheck disable=SC2016  # the task's variables, expanded by its shell
addr=$(timeout 60 srun -n 1 --mpi=none sh -c 'echo "$SLURM_TOPOLOGY_ADDR ($SLURM_TOPOLOGY_ADDR_PATTERN)"' </dev/null 2>&1 9>&-)
if [ "$addr" = "spine.leaf1.$host (switch.switch.node)" ]; then
    pass "srun sets SLURM_TOPOLOGY_ADDR" $((SECONDS - start)) "$addr"
else
    fail "srun sets SLURM_TOPOLOGY_ADDR" $((SECONDS - start)) "expected spine.leaf1.$host (switch.switch.node), got: $addr"
fi

# What the ranks need: gpurdma from the build tree, chosen and verbose; Open MPI's ob1
# over shared memory and tcp (as tests/mpi/run-mpi-tests.sh).
export OMPI_MCA_mca_base_component_path="$pkglibdir:$build/component"
export OMPI_MCA_coll_gpurdma_priority=100 OMPI_MCA_coll_gpurdma_verbose=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
# Timeouts write their dumps here, not into the working directory (coll_gpurdma_dump_dir).
export OMPI_MCA_coll_gpurdma_dump_dir="$dir/dumps"
out=$dir/job.log

# job NAME SETUP_PATTERN ENV... -- SRUN-ARGS...: one srun (bounded by $limit), which must
# exit 0, print "passed, 0 failed", gpurdma's set-up line for MPI_COMM_WORLD and
# SETUP_PATTERN (if not empty), nothing declined. In the background, so that INT/TERM
# reach this script (and its teardown) at once.
job() {
    local name=$1 pattern=$2 start=$SECONDS why="" rc setup envs=()
    shift 2
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    # The job before may still be completing: its end is not this job's time.
    wait_idle 30 || echo "WARNING: node $host still '$state' after 30 s"
    start=$SECONDS
    env "${envs[@]}" timeout -k 10 "$limit" srun --mpi=pmix --overcommit --kill-on-bad-exit=1 "$@" \
        </dev/null >"$out" 2>&1 9>&- &
    job_pid=$!
    wait $job_pid
    rc=$?
    job_pid=""
    setup=$(grep -m1 "coll:gpurdma: MPI_COMM_WORLD.*ranks on 1 host" "$out")
    if [ $rc -ne 0 ]; then
        why="exit code $rc"
        [ $rc = 124 ] || [ $rc = 137 ] && why="timed out after $limit s"
    elif [ -z "$setup" ]; then
        why="no gpurdma set-up line for MPI_COMM_WORLD: gpurdma was not used"
    elif grep -q "declined" "$out"; then
        why="gpurdma declined: $(grep -m1 declined "$out")"
    elif grep -q "UCX  ERROR" "$out"; then
        why="UCX reported an error: $(grep -m1 'UCX  ERROR' "$out")"
    elif [ -n "$pattern" ] && ! grep -q "$pattern" "$out"; then
        why="no line matching '$pattern'"
    elif ! grep -q "passed, 0 failed" "$out"; then
        why="no 'passed, 0 failed' summary"
    fi
    if [ -z "$why" ]; then
        pass "$name" $((SECONDS - start)) "$(grep -h 'passed,' "$out" | tail -n 1)"
        echo "    | $setup"
        [ -z "$pattern" ] || grep -m1 "$pattern" "$out" | grep -vxF "$setup" | sed 's/^/    | /'
    else
        fail "$name" $((SECONDS - start)) "$why"
        sed 's/^/    | /' "$out" | tail -n 40
        show_logs 15 slurmctld.log slurmd.log
    fi
}

job "srun allreduce np=4, 2 logical nodes" \
    "coll:gpurdma: MPI_COMM_WORLD.*nodes in fabric order: 2 nodes under 1 leaf switch (leaf1: 2)" \
    OMPI_MCA_coll_gpurdma_logical_nodes=2 -- -n 4 "$bin/allreduce_check" --quick --strict
job "srun collectives np=4 --lite" "" OMPI_MCA_op=^avx GPURDMA_EXPECT_USED=1 GPURDMA_REQUIRE_COLL_PVARS=1 \
    OMPI_MCA_coll_gpurdma_timeout=20 -- -n 4 "$bin/collectives_check" --lite
job "srun barrier np=4" "" GPURDMA_EXPECT_USED=1 OMPI_MCA_coll_gpurdma_timeout=20 -- -n 4 "$bin/barrier_check"

echo "slurm tests: $passed passed, $failed failed"
if [ $failed -gt 0 ]; then
    printf '  failed: %s\n' "${names[@]}"
    exit 1
fi
exit 0
