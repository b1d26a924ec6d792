#!/usr/bin/env bash
# Reliability tests (make check): real mpirun launches with coll/gpurdma on, under
# faults, bad input, exhaustion and load. Nothing wrong may come back as success and
# nothing may hang: every job is checked (each program verifies every result it
# gets) and every mpirun runs under `timeout -k 10`.
#
#   stuck peer  a rank SIGSTOPs itself mid-stream (one node / logical nodes across
#               UCX / flat UCX with small messages; allreduce, also allgather and
#               reduce-scatter): the others get an MPI error
#               naming stage, peer and host within coll_gpurdma_timeout; SIGCONT;
#               the job ends cleanly.
#   killed peer a rank SIGKILLs itself mid-stream: the job ends within a bound, no
#               process of it is left, nothing in (a private) /dev/shm.
#   /dev/shm    nothing left after a normal end, and no name left once set up.
#   bad config  every MCA parameter with bad values: one warning per process, a safe
#               default or a decline, correct results.
#   exhaustion  a 64 KiB /dev/shm (the node memory's arena does not use it; a segment
#               per communicator declines), no locked memory, UCX unable to connect,
#               ucp_init hanging on one rank (tests/mpi/ucp_init_hang.c).
#   stuck peer, nonblocking  a rank arrives past the timeout while the others wait in
#               MPI_Wait on an MPI_Iallreduce (node path) or a started persistent
#               allreduce (UCX): MPI_Wait returns an error naming stage, peer and host
#               within coll_gpurdma_timeout; the communicator then fails at once.
#   threads     MPI_THREAD_MULTIPLE, 4 threads on 4 communicators: gpurdma takes them.
#   load        100,000 8-byte and 500 16 MiB allreduces: RSS and fds flat
#               (contrib/soak.sh runs the full 1,000,000 + 10,000).
# Steps that need root (mount namespaces) print SKIP without it.
# GPURDMA_FAULT_ONLY=REGEX runs only the steps whose name matches.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${GPURDMA_BUILDDIR:-$(cd "$here/../.." && pwd)}
pkglibdir=${OMPI_PKGLIBDIR:-$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')}
mpirun=${MPIRUN:-mpirun}
bin=$build/tests/mpi
only=${GPURDMA_FAULT_ONLY:-}
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-fault-tests.XXXXXX")
trap 'rm -rf "$log_dir"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_path="$pkglibdir:$build/component"
# Timeouts write their dumps here, not into the working directory (coll_gpurdma_dump_dir).
export OMPI_MCA_coll_gpurdma_dump_dir="$log_dir/dumps"
common=(--oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader,tcp)
on=(--mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 1)
host=$(hostname)
is_root=0
[ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null && is_root=1

passed=0
failed=0
skipped=0
names=()
results=()   # lines for the summary table

selected() { [ -z "$only" ] || [[ $1 =~ $only ]]; }
pass() {
    passed=$((passed + 1))
    printf 'PASS %-52s %4ds  %s\n' "$1" "$2" "$3"
}
fail() {
    failed=$((failed + 1))
    names+=("$1")
    printf 'FAIL %-52s %4ds  %s\n' "$1" "$2" "$3"
    [ -f "${4:-}" ] && sed 's/^/    | /' "$4" | grep -v "^    | *rank [0-9]*: VmRSS" | tail -40
}
skip() {
    skipped=$((skipped + 1))
    printf 'SKIP %-52s        %s\n' "$1" "$2"
}

# mpijob LOG LIMIT [WRAPPER...] -- MPIRUN-ARGS...: runs mpirun (inside WRAPPER, e.g. a
# mount namespace) under timeout; sets rc and secs (wall time, 0.01 s).
mpijob() {
    local out=$1 limit=$2
    shift 2
    local wrap=()
    while [ "$1" != "--" ]; do wrap+=("$1"); shift; done
    shift
    local t0 t1
    t0=$(date +%s%N)
    timeout -k 10 "$limit" "${wrap[@]}" "$mpirun" "${common[@]}" "$@" >"$out" 2>&1
    rc=$?
    t1=$(date +%s%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
}

# Wrapper: inside a fresh mount namespace with a private tmpfs of SIZE on /dev/shm,
# runs the command, then prints the gpurdma names left in it ("SHM-LEFT: ..." lines).
# Usage: "${private_shm[@]}" SIZE COMMAND...
private_shm=(unshare -m --propagation private bash -c '
    size=$1; shift
    mount -t tmpfs -o "size=$size,mode=1777" gpurdma-test /dev/shm || exit 99
    "$@"; rc=$?
    sleep 0.5
    for f in /dev/shm/gpurdma*; do [ -e "$f" ] && echo "SHM-LEFT: $f"; done
    exit $rc' private-shm)

# ------------------------------------------------------------------ stuck peer (SIGSTOP)
# stuck NAME NP VICTIM COUNT STAGE_REGEX WITNESS_REGEX [MPIRUN-ARGS...]
#   STAGE_REGEX: the stage the message must name; WITNESS_REGEX: ranks (this is rank R)
#   whose message must name the victim.
TIMEOUT_S=3
stuck() {
    local name=$1 np=$2 victim=$3 count=$4 stage=$5 witness=$6
    shift 6
    selected "$name" || return 0
    local out="$log_dir/stuck.$np.$victim.$count.log" why=""
    # STUCK_COLL: allgather or reduce_scatter instead of allreduce.
    mpijob "$out" 120 -- -np "$np" "${on[@]}" --mca coll_gpurdma_timeout $TIMEOUT_S "$@" \
        "$bin/stuck_peer_check" stop "$victim" 40 "$count" $TIMEOUT_S ${STUCK_COLL:+1040 "$STUCK_COLL"}
    if [ $rc -ne 0 ]; then
        why="exit code $rc"
    elif ! grep -q "stuck_peer_check: [0-9]* passed, 0 failed" "$out"; then
        why="no 'passed, 0 failed' summary"
    elif ! grep -Eq "timed out after $TIMEOUT_S s in ($stage), waiting for (data from |)rank $victim on host $host.*\(this is rank ($witness) on host $host\)" "$out"; then
        why="no message naming stage ($stage), peer rank $victim and host $host from rank $witness"
    fi
    # Detection: the longest a rank other than the victim waited in the failing call.
    local det
    det=$(grep "^DETECT rank" "$out" | grep -v "^DETECT rank $victim:" | sed 's/.*error after \([0-9.]*\) s.*/\1/' | sort -n | tail -1)
    local vdet
    vdet=$(grep "^DETECT rank $victim:" "$out" | sed 's/.*error after \([0-9.]*\) s.*/\1/')
    local msg
    msg=$(grep -m1 -o "timed out after .*rank $victim on host [^ ]*" "$out" | sed 's/.*timed out/timed out/')
    if [ -z "$why" ]; then
        pass "$name" "${secs%.*}" "others failed after ${det:-?} s (timeout $TIMEOUT_S s), victim after SIGCONT ${vdet:-?} s; job ${secs} s"
        results+=("| $name | error within the timeout: \"$msg\" | ${det:-?} s (others), ${vdet:-?} s (victim, after SIGCONT) | ${secs} s |")
    else
        fail "$name" "${secs%.*}" "$why" "$out"
    fi
}
# One node: any stage (auto picks the node's own algorithm); across nodes: a rank on the
# other node must name the victim while waiting in the rail's ring or recursive doubling.
stuck "stuck peer: SIGSTOP, one node np=4" 4 2 65536 \
    ".+" "[0-9]+"
stuck "stuck peer: SIGSTOP, 2x2 logical nodes (inter-node) np=4" 4 2 65536 \
    "(ring reduce-scatter|ring allgather|recursive-doubling [a-z-]+) \(inter-node\)" "0|1" --mca coll_gpurdma_logical_nodes 2
stuck "stuck peer: SIGSTOP, flat UCX, 8-byte (rd) np=3" 3 1 2 \
    "[a-z -]*recursive-doubling [a-z-]+[^,]*" "0|2" --mca coll_gpurdma_logical_nodes 1
# The other collectives: a one-node allgather, a reduce-scatter across 2x2 logical nodes
# (rank 0's rail peer is the victim).
STUCK_COLL=allgather stuck "stuck peer: SIGSTOP, allgather, one node np=3" 3 1 4096 \
    "node allgather.*" "0|2"
STUCK_COLL=reduce_scatter stuck "stuck peer: SIGSTOP, reduce-scatter, 2x2 logical nodes np=4" 4 2 16384 \
    ".+\(inter-node\)" "0" --mca coll_gpurdma_logical_nodes 2

# ------------------------------------------------------------------ stuck peer, nonblocking
# late NAME NP FORM [MPIRUN-ARGS...]: timeout_check FORM (nonblocking|persistent): rank 1
# starts 2 x timeout + 1 s late; the others' MPI_Wait must fail within the timeout + 5 s
# (the program checks the time) with a message naming the stage, rank 1 and the host.
late() {
    local name=$1 np=$2 form=$3
    shift 3
    selected "$name" || return 0
    local out="$log_dir/late.$np.$form.log" why="" det msg
    mpijob "$out" 120 -- -np "$np" "${on[@]}" --mca coll_gpurdma_timeout 2 "$@" "$bin/timeout_check" 2 "$form"
    if [ $rc -ne 0 ]; then
        why="exit code $rc"
    elif ! grep -q "timeout_check: [0-9]* passed, 0 failed" "$out"; then
        why="no 'passed, 0 failed' summary"
    elif ! grep -Eq "timed out after 2 s in .+, waiting for (data from |)rank 1 on host $host.*\(this is rank 0 on host $host\)" "$out"; then
        why="no message from rank 0 naming the stage, rank 1 and host $host"
    fi
    det=$(grep "^rank [02]: $form allreduce failed as expected after" "$out" | sed 's/.*after \([0-9.]*\) s.*/\1/' | sort -n | tail -1)
    msg=$(grep -m1 -o "timed out after .*rank 1 on host [^ ]*" "$out")
    if [ -z "$why" ]; then
        pass "$name" "${secs%.*}" "MPI_Wait failed after ${det:-?} s (timeout 2 s)"
        results+=("| $name | MPI_Wait returns an error within the timeout: \"$msg\" | ${det:-?} s | ${secs} s |")
    else
        fail "$name" "${secs%.*}" "$why" "$out"
    fi
}
late "stuck peer, nonblocking: MPI_Iallreduce, one node np=3" 3 nonblocking
# Flat UCX on one host: shared memory (UCX 1.18 puts large messages with CMA), then tcp.
late "stuck peer, nonblocking: persistent, UCX np=2" 2 persistent --mca coll_gpurdma_logical_nodes 1
late "stuck peer, nonblocking: persistent, UCX over tcp np=2" 2 persistent --mca coll_gpurdma_logical_nodes 1 \
    --mca coll_gpurdma_ucx_tls tcp,self

# ------------------------------------------------------------------ killed peer, /dev/shm
if selected "killed peer"; then
    name="killed peer: SIGKILL, 2x2 logical nodes np=4"
    if [ $is_root -eq 0 ]; then
        skip "$name" "needs root for a private /dev/shm"
    else
        out="$log_dir/kill.log"
        mpijob "$out" 120 "${private_shm[@]}" 256m -- -np 4 "${on[@]}" --mca coll_gpurdma_timeout 5 \
            --mca coll_gpurdma_logical_nodes 2 "$bin/stuck_peer_check" kill 2 40 65536 5
        end=$(date +%s.%N)
        why=""
        pids=$(grep -m1 "^PIDS" "$out" | cut -d' ' -f2-)
        kt=$(grep -m1 -o "^KILLTIME [0-9.]*" "$out" | cut -d' ' -f2)
        if [ -z "$pids" ] || [ -z "$kt" ]; then why="the job did not reach the kill (rc $rc)"; fi
        if [ $rc -eq 124 ] || awk -v s="$secs" 'BEGIN { exit !(s >= 120) }'; then why="${why:-mpirun hit the 120 s limit}"; fi
        # (Open MPI 5's prterun wraps its message: "... exited on\nsignal 9 (Killed).")
        tr '\n' ' ' <"$out" | grep -q "exited on *signal 9" || why="${why:-mpirun did not report the killed rank}"
        grep -q "^SHM-LEFT" "$out" && why="${why:-left in /dev/shm: $(grep -m3 ^SHM-LEFT "$out" | tr '\n' ' ')}"
        grep -q "^FAIL" "$out" && why="${why:-$(grep -m1 ^FAIL "$out")}"
        # No process of the job may outlive mpirun (zombies are reaped within a moment).
        left=""
        for i in 1 2 3 4 5 6 7 8 9 10; do
            left=""
            for p in $pids; do
                st=$(ps -o stat= -p "$p" 2>/dev/null | tr -d ' ')
                [ -n "$st" ] && [ "${st#Z}" = "$st" ] && left="$left $p"
            done
            [ -z "$left" ] && break
            sleep 0.5
        done
        [ -n "$left" ] && why="${why:-processes left after the job:$left}"
        det=$(awk -v a="$kt" -v b="$end" 'BEGIN { if (a == "") print "?"; else printf "%.2f", b - a }')
        # mpirun's own detection takes about a second; gpurdma's timeout (5 s) bounds it otherwise.
        awk -v d="$det" 'BEGIN { exit !(d + 0 > 30) }' && why="${why:-the job took $det s to end after the kill (limit 30 s)}"
        if [ -z "$why" ]; then
            pass "$name" "${secs%.*}" "job ended ${det} s after the kill (mpirun rc $rc); no process, nothing in /dev/shm"
            results+=("| $name | mpirun ends the job (\"exited on signal 9\"), rc $rc; no process left; /dev/shm empty | ${det} s (kill to job end) | ${secs} s |")
        else
            fail "$name" "${secs%.*}" "$why" "$out"
        fi
    fi
fi

if selected "/dev/shm after normal end"; then
    name="/dev/shm after normal end, 2x2 logical nodes np=4"
    if [ $is_root -eq 0 ]; then
        skip "$name" "needs root for a private /dev/shm"
    else
        out="$log_dir/shm-normal.log"
        mpijob "$out" 120 "${private_shm[@]}" 256m -- -np 4 "${on[@]}" --mca coll_gpurdma_logical_nodes 2 \
            "$bin/load_check" 2000 3 1024
        why=""
        [ $rc -eq 0 ] || why="exit code $rc"
        grep -q "load_check: [0-9]* passed, 0 failed" "$out" || why="${why:-no 'passed, 0 failed' summary}"
        grep -q "coll:gpurdma: .*shared memory" "$out" || why="${why:-gpurdma set-up line missing}"
        grep -q "^SHM-LEFT" "$out" && why="${why:-left in /dev/shm: $(grep -m3 ^SHM-LEFT "$out" | tr '\n' ' ')}"
        if [ -z "$why" ]; then
            pass "$name" "${secs%.*}" "no name after set-up, none after MPI_Finalize"
            results+=("| $name | no gpurdma name in /dev/shm once set up, none at the end | - | ${secs} s |")
        else
            fail "$name" "${secs%.*}" "$why" "$out"
        fi
    fi
fi

# ------------------------------------------------------------------ bad configuration
known_params=$(ompi_info --param coll gpurdma --level 9 --parsable 2>/dev/null |
    grep -o 'coll_gpurdma_[a-z_]*' | sort -u | tr '\n' ' ')
# badcfg PARAM VALUE WARNING_REGEX OUTCOME [MPIRUN-ARGS...]
#   OUTCOME: used (gpurdma still set up), declined (the previous allreduce: no set-up line)
#   WARNING_REGEX: the warning every process must print (once each), "" for none.
badcfg() {
    local param=$1 value=$2 warn=$3 outcome=$4
    shift 4
    local name="bad config: $param='$value'"
    selected "$name" || return 0
    local out="$log_dir/badcfg.log" why="" np=3 extra=()
    case " $known_params " in
    *" coll_gpurdma_$param "*) ;;
    *) skip "$name" "no MCA parameter coll_gpurdma_$param in this build"; return 0 ;;
    esac
    [ "$param" = priority ] || extra+=(--mca coll_gpurdma_priority 100)
    [ "$param" = verbose ] || extra+=(--mca coll_gpurdma_verbose 1)
    mpijob "$out" 120 -- -np $np --mca "coll_gpurdma_$param" "$value" "$@" \
        "${extra[@]}" "$bin/load_check" 300 3 1024
    if [ $rc -ne 0 ]; then
        why="exit code $rc"
    elif ! grep -q "load_check: [0-9]* passed, 0 failed" "$out"; then
        why="no 'passed, 0 failed' summary"
    elif grep -qi "segmentation\|core dumped\|signal [0-9]\|Abort" "$out"; then
        why="a process crashed"
    fi
    if [ -z "$why" ] && [ -n "$warn" ]; then
        local n
        n=$(grep -Ec "coll:gpurdma: .*($warn)" "$out")
        if [ "$n" -lt 1 ]; then why="no warning matching '$warn'"
        elif [ "$n" -gt $np ]; then why="$n warnings matching '$warn' (more than one per process)"; fi
    fi
    if [ -z "$why" ]; then
        case $outcome in
        used) grep -q "coll:gpurdma: .*ranks on .*host" "$out" || why="gpurdma was not used" ;;
        declined) grep -q "coll:gpurdma: .*ranks on .*host" "$out" && why="gpurdma set up although it should decline" ;;
        off) grep -q "coll:gpurdma" "$out" && why="gpurdma printed output although verbose is off" ;;
        esac
    fi
    local w
    w=$(grep -m1 -E "coll:gpurdma: .*(${warn:-^$})" "$out" | sed 's/^\[[^]]*\] //' | cut -c1-150)
    if [ -z "$why" ]; then
        pass "$name" "${secs%.*}" "$outcome${w:+; $w}"
        results+=("| bad config \`coll_gpurdma_$param=$value\` | $outcome, results correct${w:+; \"$w\"} | - | ${secs} s |")
    else
        fail "$name" "${secs%.*}" "$why" "$out"
    fi
}
badcfg priority -5 "" declined
badcfg priority 1000 "" used
badcfg verbose -3 "" off
badcfg chunk_size 100 "chunk_size=100 is not" used
badcfg chunk_size 4100 "chunk_size=4100 is not" used
badcfg chunk_size -1 "chunk_size=18446744073709551615 is not" used
badcfg chunk_size 1099511627776 "chunk_size=1099511627776 is not" used
badcfg node_chunk_size 0 "node_chunk_size=0 is not" used
badcfg slots 0 "slots=0 is not" used
badcfg slots -2 "slots=-2 is not" used
badcfg slots 100000 "slots=100000 is not" used
badcfg slots 64 "slots=64 x coll_gpurdma_chunk_size=33554432 is over 1 GiB per peer" used --mca coll_gpurdma_chunk_size 33554432
badcfg small_msg_max -1 "small_msg_max=18446744073709551615 is not" used
badcfg small_msg_max 0 "" used
badcfg timeout 0 "timeout=0 is not" used
badcfg timeout -1 "timeout=-1 is not" used
badcfg timeout nan "timeout=nan is not" used
badcfg timeout 1e300 "timeout=1e\\+300 is not" used
badcfg algorithm bogus "algorithm='bogus' is not one of" used
badcfg algorithm "" "" used
badcfg logical_nodes 0 "logical_nodes '0' is not K" used
badcfg logical_nodes "1,,2" "logical_nodes '1,,2' is not K" used
badcfg logical_nodes "-2" "logical_nodes '-2' is not K" used
badcfg logical_nodes "99999999999" "logical_nodes '99999999999' is not K" used
badcfg logical_nodes "1,1" "does not add up" used
badcfg net_devices "a;b" "net_devices 'a;b' is not a list" declined
badcfg net_devices "^" "net_devices '\\^' is not a list" declined
badcfg net_devices ",," "net_devices ',,' is not a list" declined
badcfg net_devices "mlx5_9:1" "net_devices 'mlx5_9:1' names no RDMA device" used --mca coll_gpurdma_logical_nodes 1
badcfg ucx_tls "no_such_tl" "declined.*cannot start UCX" declined --mca coll_gpurdma_logical_nodes 1
badcfg ucx_tls ",,," "declined.*cannot start UCX" declined --mca coll_gpurdma_logical_nodes 1
badcfg cuda 7 "cuda=7 is not 0 or 1" used
badcfg spin_us 1e9 "spin_us=1e\\+09 is over 1 s" used
badcfg spin_us nan "spin_us=nan is over 1 s" used
badcfg spin_us -1 "" used
badcfg calibrate 7 "calibrate=7 is not 0 or 1" used
badcfg net_gbps 0 "net_gbps=0 is not in" used --mca coll_gpurdma_logical_nodes 1
badcfg reduce_gbps nan "reduce_gbps=nan is not in" used --mca coll_gpurdma_logical_nodes 1
badcfg net_alpha_us -1 "net_alpha_us=-1 is not in" used --mca coll_gpurdma_logical_nodes 1
badcfg cuda -1 "cuda=-1 is not 0 or 1" used
# The RoCE/IB settings: bad values warn and leave UCX's choice; good ones must not hurt
# a UCX context without RDMA devices (one rank per logical node: UCX is started).
badcfg ib_gid_index -2 "ib_gid_index=-2 is not -1 or in 0..1023" used --mca coll_gpurdma_logical_nodes 1
badcfg ib_tc 256 "ib_tc=256 is not -1 or in 0..255" used --mca coll_gpurdma_logical_nodes 1
badcfg ib_sl 16 "ib_sl=16 is not -1 or in 0..15" used --mca coll_gpurdma_logical_nodes 1
badcfg ib_sl 3 "" used --mca coll_gpurdma_logical_nodes 1 --mca coll_gpurdma_ib_tc 106 --mca coll_gpurdma_ib_gid_index 3
# The observability settings: a bad value is a warning and the default, an unwritable
# dump folder or trigger costs nothing until a dump is asked for.
badcfg recorder_size -1 "recorder_size=-1 is not in 0..65536" used
badcfg recorder_size 100000 "recorder_size=100000 is not in 0..65536" used
badcfg dump_signal 99 "dump_signal=99 is not in 0..64" used
badcfg dump_signal 9 "" used
badcfg dump_dir /proc/no/such/folder "" used
badcfg dump_trigger /proc/no/such/file "" used
badcfg dump_on_timeout 2 "dump_on_timeout=2 is not 0 or 1" used

# ------------------------------------------------------------------ exhaustion
if selected "exhaustion: tiny /dev/shm"; then
    name="exhaustion: tiny /dev/shm (64 KiB) np=4"
    if [ $is_root -eq 0 ]; then
        skip "$name" "needs root for a private /dev/shm"
    else
        # The node memory comes from each process's arena (a memfd, not /dev/shm): gpurdma
        # runs. With coll_gpurdma_shm_arena_size 0 each communicator needs a /dev/shm
        # segment of its own, which does not fit: it declines, naming shared memory.
        # Open MPI's vader keeps its own segment out of the tiny /dev/shm.
        why=""
        out="$log_dir/tinyshm.log"
        mpijob "$out" 120 "${private_shm[@]}" 64k -- -np 4 "${on[@]}" --mca btl_vader_backing_directory /tmp \
            "$bin/load_check" 300 3 1024
        [ $rc -eq 0 ] || why="arena: exit code $rc"
        grep -q "load_check: [0-9]* passed, 0 failed" "$out" || why="${why:-arena: no 'passed, 0 failed' summary}"
        grep -q "coll:gpurdma: .*ranks on .*host.*shared memory" "$out" || why="${why:-arena: gpurdma not set up}"
        grep -q "^SHM-LEFT" "$out" && why="${why:-arena: left in /dev/shm}"
        secs_arena=$secs
        out2="$log_dir/tinyshm-segments.log"
        mpijob "$out2" 120 "${private_shm[@]}" 64k -- -np 4 "${on[@]}" --mca btl_vader_backing_directory /tmp \
            --mca coll_gpurdma_shm_arena_size 0 "$bin/load_check" 300 3 1024
        [ $rc -eq 0 ] || why="${why:-segments: exit code $rc}"
        grep -q "load_check: [0-9]* passed, 0 failed" "$out2" || why="${why:-segments: no 'passed, 0 failed' summary}"
        grep -q "coll:gpurdma: .*declined, using the previous allreduce: .*shared memory" "$out2" ||
            why="${why:-segments: no 'declined ... shared memory' line}"
        grep -q "^SHM-LEFT" "$out2" && why="${why:-segments: left in /dev/shm}"
        w=$(grep -m1 "declined" "$out2" | sed 's/^\[[^]]*\] //' | cut -c1-200)
        if [ -z "$why" ]; then
            pass "$name" "${secs_arena%.*}" "set up from the arena; with segments: $w"
            results+=("| $name | node memory from the arena (memfd): set up, results correct; with \`shm_arena_size 0\` declined at set-up on every rank, previous allreduce, results correct: \"$w\" | - | ${secs_arena} s, ${secs} s |")
        else
            fail "$name" "${secs_arena%.*}" "$why" "$out"
            sed 's/^/    | /' "$out2" | tail -20
        fi
    fi
fi

if selected "exhaustion: no locked memory"; then
    name="exhaustion: ulimit -l 0 without CAP_IPC_LOCK, UCX np=2"
    if [ $is_root -eq 0 ] || ! command -v setpriv >/dev/null; then
        skip "$name" "needs root and setpriv"
    else
        out="$log_dir/memlock.log"
        # Root ignores RLIMIT_MEMLOCK unless CAP_IPC_LOCK is dropped from the bounding set.
        mpijob "$out" 120 setpriv --bounding-set -ipc_lock prlimit --memlock=0:0 -- -np 2 "${on[@]}" \
            --mca coll_gpurdma_logical_nodes 1 "$bin/load_check" 300 3 1024
        why=""
        [ $rc -eq 0 ] || why="exit code $rc"
        grep -q "load_check: [0-9]* passed, 0 failed" "$out" || why="${why:-no 'passed, 0 failed' summary}"
        if grep -q "declined" "$out"; then how="declined: $(grep -m1 declined "$out" | sed 's/^\[[^]]*\] //' | cut -c1-150)"
        elif grep -q "coll:gpurdma: .*ranks on .*host" "$out"; then how="used (UCX needed no locked memory)"
        else why="${why:-neither set up nor declined}"; fi
        if [ -z "$why" ]; then
            pass "$name" "${secs%.*}" "$how"
            results+=("| $name | $how; results correct | - | ${secs} s |")
        else
            fail "$name" "${secs%.*}" "$why" "$out"
        fi
    fi
fi

if selected "exhaustion: UCX cannot connect"; then
    name="exhaustion: UCX cannot connect (no common transport) np=2"
    out="$log_dir/noconnect.log"
    # Rank 0 offers only tcp, rank 1 only shared memory: no transport reaches the peer.
    # One program with a per-rank setting, not "-np 1 a : -np 1 b": Open MPI 5.0.7's
    # mpirun crashes on multi-program launches (open-mpi/ompi#13303).
    per_rank="$log_dir/per-rank-tls.sh"
    printf '#!/bin/sh\nif [ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ]; then UCX_TLS=tcp; else UCX_TLS=sysv,cma; fi\nexport UCX_TLS\nexec "$@"\n' \
        >"$per_rank"
    chmod +x "$per_rank"
    mpijob "$out" 120 -- "${on[@]}" --mca coll_gpurdma_logical_nodes 1 \
        -np 2 "$per_rank" "$bin/load_check" 300 3 1024
    why=""
    [ $rc -eq 0 ] || why="exit code $rc"
    grep -q "load_check: [0-9]* passed, 0 failed" "$out" || why="${why:-no 'passed, 0 failed' summary}"
    grep -q "coll:gpurdma: .*declined, using the previous allreduce" "$out" || why="${why:-no 'declined' line}"
    grep -q "coll:gpurdma: .*ranks on .*host" "$out" && why="${why:-gpurdma set up although UCX cannot connect}"
    w=$(grep -m1 "declined" "$out" | sed 's/^\[[^]]*\] //' | cut -c1-220)
    if [ -z "$why" ]; then
        pass "$name" "${secs%.*}" "$w"
        results+=("| $name | declined at set-up on every rank, results correct: \"$w\" | - | ${secs} s |")
    else
        fail "$name" "${secs%.*}" "$why" "$out"
    fi
fi

if selected "exhaustion: ucp_init hangs"; then
    name="exhaustion: ucp_init hangs on rank 1, 2x2 logical nodes np=4"
    hang=$build/tests/mpi/ucp-init-hang/libucp_init_hang.so
    if [ ! -f "$hang" ]; then
        skip "$name" "$hang not built (make check builds it)"
    else
        out="$log_dir/ucpinit.log"
        # Rank 1's UCX never starts (its ucp_init sleeps for good): every rank's set-up must
        # end within the 5 s bound, decline naming it, and the job finish on the previous
        # module. (An ASan build checks that its runtime comes first; this library has none.)
        mpijob "$out" 120 -- -np 4 "${on[@]}" --mca coll_gpurdma_timeout 5 --mca coll_gpurdma_logical_nodes 2 \
            -x LD_PRELOAD="$hang" -x GPURDMA_TEST_UCP_INIT_HANG=1 \
            -x ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$bin/load_check" 300 3 1024
        why=""
        [ $rc -eq 0 ] || why="exit code $rc"
        grep -q "load_check: [0-9]* passed, 0 failed" "$out" || why="${why:-no 'passed, 0 failed' summary}"
        declined=$(grep -c "declined, using the previous allreduce: rank 1 .*ucp_init did not return within 5 s" "$out")
        [ "$declined" -ge 4 ] || why="${why:-$declined of 4 ranks said they declined because of rank 1 (its ucp_init hangs)}"
        grep -q "coll:gpurdma: .*ranks on .*host" "$out" && why="${why:-gpurdma set up although rank 1 has no UCX}"
        awk -v s="$secs" 'BEGIN { exit !(s > 60) }' && why="${why:-the job took $secs s (the bound is 5 s)}"
        w=$(grep -m1 "declined" "$out" | sed 's/^\[[^]]*\] //' | cut -c1-220)
        if [ -z "$why" ]; then
            pass "$name" "${secs%.*}" "$w"
            results+=("| $name | declined at set-up on every rank within the bound, results correct: \"$w\" | - | ${secs} s |")
        else
            fail "$name" "${secs%.*}" "$why" "$out"
        fi
    fi
fi

# ------------------------------------------------------------------ threads, load
if selected "threads"; then
    name="threads: MPI_THREAD_MULTIPLE, 4 threads x 4 comms np=4"
    out="$log_dir/threads.log"
    mpijob "$out" 120 -- -np 4 "${on[@]}" --mca coll_gpurdma_timeout 30 "$bin/thread_check" 200 4
    why=""
    [ $rc -eq 0 ] || why="exit code $rc"
    grep -q "thread_check: [0-9]* passed, 0 failed" "$out" || why="${why:-no 'passed, 0 failed' summary}"
    grep -q "coll:gpurdma: .*ranks on .*host" "$out" || why="${why:-no gpurdma set-up line: gpurdma was not used}"
    grep -q "declin" "$out" && why="${why:-gpurdma declined: $(grep -m1 declin "$out")}"
    if [ -z "$why" ]; then
        pass "$name" "${secs%.*}" "$(grep -m1 'thread_check:' "$out")"
        results+=("| $name | gpurdma takes every communicator (verbose set-up lines), results correct | - | ${secs} s |")
    else
        fail "$name" "${secs%.*}" "$why" "$out"
    fi
fi

if selected "load"; then
    small=${GPURDMA_LOAD_SMALL:-100000}
    large=${GPURDMA_LOAD_LARGE:-500}
    name="load: $small x 8 B + $large x 16 MiB np=4"
    out="$log_dir/load.log"
    mpijob "$out" 600 -- -np 4 "${on[@]}" "$bin/load_check" "$small" "$large" 8
    why=""
    [ $rc -eq 0 ] || why="exit code $rc"
    grep -q "load_check: [0-9]* passed, 0 failed" "$out" || why="${why:-no 'passed, 0 failed' summary}"
    grep -q "coll:gpurdma: .*ranks on .*host" "$out" || why="${why:-gpurdma was not used}"
    if [ -z "$why" ]; then
        pass "$name" "${secs%.*}" "$(grep '^load_check [81]' "$out" | sed 's/.*call); //' | tr '\n' ';')"
        results+=("| $name | $(grep '^load_check [81]' "$out" | sed 's/^load_check //' | tr '\n' ' ') | - | ${secs} s |")
    else
        fail "$name" "${secs%.*}" "$why" "$out"
    fi
fi

echo
echo "Results (rows for docs/RELIABILITY.md):"
for r in "${results[@]}"; do echo "$r"; done
echo "fault-tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
