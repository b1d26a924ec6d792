#!/usr/bin/env bash
# A cluster of N "hosts" on one machine, for testing gpurdma across hosts.
#
#   contrib/cluster.sh up N             create hosts node0..node{N-1} (tears down any old one first)
#   contrib/cluster.sh down             tear everything down (idempotent; also cleans up
#                                       after a crashed earlier run)
#   contrib/cluster.sh status           list the hosts, their addresses and hostnames
#   contrib/cluster.sh run ARGS...      mpirun ARGS from node0 across the hosts (prints the command)
#   contrib/cluster.sh exec NODE CMD... run CMD inside host NODE (node0, 0 or 198.18.0.1)
#   contrib/cluster.sh counters         bytes each host sent/received on its link
#   contrib/cluster.sh netem "SPEC"     tc netem SPEC (e.g. "delay 50us loss 0.01%") on every link
#   contrib/cluster.sh netem off        remove it
#   contrib/cluster.sh reap             kill every process in the hosts except the holders
#   contrib/cluster.sh rsh HOST CMD...  the rsh agent Open MPI uses (ssh-like)
#
# Each host K is
#   - a network namespace gpr-nodeK with lo and eth0 = 198.18.0.(K+1)/24, the other end
#     of a veth pair whose root-namespace end gpr-vK sits on the bridge gpr-br0
#     (198.18.0.254/24). Only addresses from 198.18.0.0/15 (the benchmarking range) are
#     used, and nothing is routed anywhere else;
#   - a holder process (sleep infinity) in that network namespace plus its own UTS
#     (hostname nodeK), IPC and mount namespaces. The mount namespace has a private
#     /etc/hosts naming all hosts, /sys showing the host's interfaces, an empty /dev/shm
#     and its own /proc/sys/kernel/random/boot_id: UCX takes processes with the same
#     boot id (and IPC namespace) for one machine and would use shared memory between
#     them, so without this gpurdma's inter-host traffic would never touch the links.
# Everything "on" host K runs via nsenter into the holder's namespaces: mpirun on node0,
# and Open MPI's orted on the others via the rsh agent. MPI_COMM_TYPE_SHARED then splits
# by host, and gethostname() returns nodeK. The real /etc/hosts is never touched.
#
# Environment:
#   GPURDMA_CLUSTER_ID       0..255: which cluster (0). Clusters with different ids are
#                            independent and can be up at the same time: id I uses
#                            198.18.I.0/24, bridge gpr-brI, namespaces gprI-nodeK and links
#                            gprI-vK (for id 0: gpr-br0, gpr-nodeK, gpr-vK). The cluster
#                            tests use id 1, so they leave a cluster made by hand alone.
#   GPURDMA_CLUSTER_STATE    state directory (/tmp/gpurdma-cluster, /tmp/gpurdma-clusterI
#                            for id I): pids, hosts, hostfile, the rsh agent
#   GPURDMA_BUILD            gpurdma build directory (<repo>/build); its component/
#                            directory is appended to Open MPI's component path
#   GPURDMA_CLUSTER_TIMEOUT  seconds before `run` kills mpirun (300)
#   GPURDMA_CLUSTER_SLOTS    slots per host in the default hostfile (2)
#   MPIRUN, OMPI_PKGLIBDIR   mpirun to use (mpirun); Open MPI's component directory
#                            (from ompi_info)
#   UCX_*                    passed to the ranks with -x; `run` sets UCX_NET_DEVICES=eth0
#                            unless it is set (UCX_NET_DEVICES=all to undo)
set -u

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
self="$top/contrib/cluster.sh"
die() { echo "cluster.sh: $*" >&2; exit 1; }
note() { echo "cluster.sh: $*" >&2; }

id=${GPURDMA_CLUSTER_ID:-0}
case $id in '' | *[!0-9]*) die "GPURDMA_CLUSTER_ID must be 0..255" ;; esac
id=$((10#$id))
[ "$id" -le 255 ] || die "GPURDMA_CLUSTER_ID must be 0..255"
if [ "$id" -eq 0 ]; then pfx=gpr; else pfx=gpr$id; fi
state=${GPURDMA_CLUSTER_STATE:-/tmp/gpurdma-cluster${id#0}}
build=${GPURDMA_BUILD:-$top/build}
bridge=gpr-br$id
net=198.18.$id
bridge_addr=$net.254
subnet=$net.0/24
nsprefix=$pfx-node  # network namespaces $nsprefix$K
vprefix=$pfx-v      # root ends of the veth pairs $vprefix$K
max_nodes=64

node_ip() { echo "$net.$(($1 + 1))"; }

need_root() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces)"
}

need_tools() {
    local t
    for t in ip nsenter unshare timeout setsid sleep; do
        command -v "$t" >/dev/null 2>&1 || die "'$t' not found (Debian: iproute2, util-linux, coreutils)"
    done
}

nodes() { cat "$state/nodes" 2>/dev/null || echo 0; }

# node_index NAME -> K, for node0 / 0 / node0.anything / 198.18.ID.(K+1)
node_index() {
    local h=$1 k
    case $h in
    "$net".*) k=$((${h##*.} - 1)) ;;
    node*) k=${h#node}; k=${k%%.*} ;;
    *) k=$h ;;
    esac
    case $k in '' | *[!0-9]*) return 1 ;; esac
    [ "$k" -lt "$(nodes)" ] || return 1
    echo "$k"
}

holder_pid() {
    local k=$1 pid
    pid=$(cat "$state/node$k.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    echo "$pid"
}

# pids of every process whose network namespace is one of our hosts' (the holders included)
ns_pids() {
    local ns
    for ns in $(ip netns list 2>/dev/null | awk -v p="$nsprefix" '$1 ~ "^" p "[0-9]+$" {print $1}'); do
        ip netns pids "$ns" 2>/dev/null
    done
}

# holders of this or an earlier run: sleep processes carrying our marker in their environment
marked_holders() {
    local f pid
    for f in /proc/[0-9]*/environ; do
        pid=${f#/proc/}; pid=${pid%/environ}
        tr '\0' '\n' 2>/dev/null <"$f" | grep -qx "GPURDMA_CLUSTER_HOLDER=$id:node[0-9]*" && echo "$pid"
    done
}

kill_pids() {
    local sig=$1; shift
    local p
    for p in "$@"; do
        [ "$p" != "$$" ] && kill "-$sig" "$p" 2>/dev/null
    done
}

cmd_down() {
    need_root
    local pids i
    # 1. every process in our namespaces (including holders), then holders that lost
    #    their named namespace (crashed run); TERM first, KILL what is left.
    for i in 1 2 3; do
        mapfile -t pids < <({ ns_pids; marked_holders; } | sort -u)
        [ ${#pids[@]} -eq 0 ] && break
        if [ "$i" -lt 3 ]; then kill_pids TERM "${pids[@]}"; else kill_pids KILL "${pids[@]}"; fi
        sleep 0.3
    done
    # 2. namespaces (deleting one removes its veth pair), stray veths, the bridge
    local ns l
    for ns in $(ip netns list 2>/dev/null | awk -v p="$nsprefix" '$1 ~ "^" p "[0-9]+$" {print $1}'); do
        ip netns del "$ns" 2>/dev/null || note "could not delete netns $ns"
    done
    for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${vprefix}[0-9]+\$"); do
        ip link del "$l" 2>/dev/null
    done
    ip link show "$bridge" >/dev/null 2>&1 && ip link del "$bridge"
    rm -rf "$state"
    return 0
}

write_agent() {
    # Open MPI's rsh launcher calls this like ssh: AGENT [ssh options] HOST COMMAND...
    cat >"$state/rsh" <<EOF
#!/bin/sh
# Generated by contrib/cluster.sh: ssh-like rsh agent into the cluster's hosts.
exec "$self" rsh "\$@"
EOF
    chmod +x "$state/rsh"
}

cmd_up() {
    need_root
    need_tools
    local n=${1:-}
    case $n in '' | *[!0-9]*) die "usage: cluster.sh up N (1..$max_nodes)" ;; esac
    [ "$n" -ge 1 ] && [ "$n" -le "$max_nodes" ] || die "N must be 1..$max_nodes"
    cmd_down
    mkdir -p "$state" || die "cannot create $state"
    echo "$n" >"$state/nodes"

    local k slots=${GPURDMA_CLUSTER_SLOTS:-2}
    {
        echo "127.0.0.1 localhost"
        for ((k = 0; k < n; k++)); do echo "$(node_ip $k) node$k"; done
    } >"$state/hosts"
    for ((k = 0; k < n; k++)); do echo "node$k slots=$slots"; done >"$state/hostfile"
    write_agent

    ip link add "$bridge" type bridge || { cmd_down; die "cannot create bridge $bridge"; }
    ip addr add "$bridge_addr/24" dev "$bridge"
    ip link set "$bridge" up
    for ((k = 0; k < n; k++)); do
        local ns=$nsprefix$k
        ip netns add "$ns" &&
            ip link add "$vprefix$k" type veth peer name eth0 netns "$ns" &&
            ip link set "$vprefix$k" master "$bridge" up &&
            ip -n "$ns" addr add "$(node_ip $k)/24" dev eth0 &&
            ip -n "$ns" link set eth0 up &&
            ip -n "$ns" link set lo up ||
            { cmd_down; die "cannot create host node$k (network namespace / veth)"; }
        # no IPv6 chatter on the links (keeps the byte counters to what MPI sends)
        ip netns exec "$ns" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6' 2>/dev/null
        # The holder: own UTS (hostname), IPC and mount namespace: /etc/hosts, /sys of
        # this netns, an empty /dev/shm and its own boot id (UCX takes two processes for
        # one machine, and its shared-memory transports for usable, when the boot ids match).
        cat /proc/sys/kernel/random/uuid >"$state/node$k.boot_id"
        GPURDMA_CLUSTER_HOLDER=$id:node$k setsid ip netns exec "$ns" \
            unshare --uts --ipc --mount --propagation private --fork \
            sh -c 'set -e; hostname "$1"; mount --bind "$2/hosts" /etc/hosts
                   mount -t tmpfs -o mode=1777 tmpfs /dev/shm
                   mount --bind "$2/$1.boot_id" /proc/sys/kernel/random/boot_id
                   echo $$ >"$2/$1.pid.tmp"; mv "$2/$1.pid.tmp" "$2/$1.pid"; exec sleep infinity' \
            holder "node$k" "$state" </dev/null >"$state/node$k.log" 2>&1 &
    done
    # wait for the holders, then check each host is what it should be
    local t
    for ((k = 0; k < n; k++)); do
        for ((t = 0; t < 100; t++)); do [ -s "$state/node$k.pid" ] && break; sleep 0.05; done
        local pid
        pid=$(holder_pid $k) || { cat "$state/node$k.log" >&2; cmd_down; die "holder for node$k did not start"; }
        local got
        got=$(nsenter -t "$pid" --net --uts --ipc --mount -- \
            sh -c 'echo "$(hostname) $(cat /proc/sys/kernel/random/boot_id) $(cat /sys/class/net/eth0/address 2>/dev/null)"')
        case $got in
        "node$k $(cat "$state/node$k.boot_id") "?*) ;;
        *) cmd_down; die "node$k: hostname/network namespace check failed (got '$got')" ;;
        esac
    done
    echo "cluster.sh: $n host(s) up (cluster $id, $subnet): $(for ((k = 0; k < n; k++)); do printf 'node%d=%s ' $k "$(node_ip $k)"; done)"
}

cmd_status() {
    local n k pid
    n=$(nodes)
    [ "$n" -gt 0 ] || { echo "cluster.sh: no cluster (state: $state)"; return 1; }
    for ((k = 0; k < n; k++)); do
        if pid=$(holder_pid $k); then
            printf 'node%d %s holder=%s hostname=%s\n' $k "$(node_ip $k)" "$pid" \
                "$(nsenter -t "$pid" --uts -- hostname)"
        else
            printf 'node%d %s holder MISSING\n' $k "$(node_ip $k)"
        fi
    done
}

# rsh agent: AGENT [ssh options] HOST COMMAND...
cmd_rsh() {
    while [ $# -gt 0 ]; do
        case $1 in
        -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;; # ssh options that take an argument
        -*) shift ;;
        *) break ;;
        esac
    done
    [ $# -ge 1 ] || die "rsh: no host"
    local host=$1 k pid
    shift
    k=$(node_index "$host") || die "rsh: unknown host '$host'"
    pid=$(holder_pid "$k") || die "rsh: host $host is not up"
    # like ssh: the remote command is the arguments joined by spaces, run by a shell
    [ $# -ge 1 ] || set -- 'exec ${SHELL:-/bin/sh} -i'
    exec nsenter -t "$pid" --net --uts --ipc --mount --wd="$PWD" -- /bin/sh -c "$*"
}

cmd_exec() {
    [ $# -ge 2 ] || die "usage: cluster.sh exec NODE CMD..."
    local k pid
    k=$(node_index "$1") || die "unknown host '$1'"
    pid=$(holder_pid "$k") || die "host $1 is not up"
    shift
    exec nsenter -t "$pid" --net --uts --ipc --mount --wd="$PWD" -- "$@"
}

cmd_run() {
    need_root
    local pid pkglibdir
    pid=$(holder_pid 0) || die "no cluster: run 'contrib/cluster.sh up N' first"
    pkglibdir=${OMPI_PKGLIBDIR:-$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')}
    [ -n "$pkglibdir" ] || die "cannot find Open MPI's pkglibdir (ompi_info)"

    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_mca_base_component_path="$pkglibdir:$build/component"
    # gpurdma's own UCX context: between hosts, UCX sees different boot ids and IPC
    # namespaces, so only its network transports reach another host; restrict those
    # to eth0 (the host's link). UCX_TLS is left to UCX unless you set it.
    export UCX_NET_DEVICES=${UCX_NET_DEVICES:-eth0}

    local have_hosts=0 a
    for a in "$@"; do
        case $a in
        -H | -host | --host | -hostfile | --hostfile | -machinefile | --machinefile | \
            --default-hostfile | -default-hostfile) have_hosts=1 ;;
        esac
    done
    # shellcheck disable=SC2054
    local args=(--mca plm_rsh_agent "$state/rsh"
                --mca plm_rsh_no_tree_spawn 1
                --mca oob_tcp_if_include "$subnet"
                --mca btl_tcp_if_include "$subnet"
                --mca pml ob1 --mca btl self,vader,tcp
                --oversubscribe --bind-to none)
    [ "$have_hosts" -eq 0 ] && args+=(--hostfile "$state/hostfile")
    local v
    for v in PATH LD_LIBRARY_PATH OMPI_MCA_mca_base_component_path $(env | sed -n 's/^\(UCX_[A-Za-z0-9_]*\)=.*/\1/p'); do
        [ -n "${!v+x}" ] && args+=(-x "$v")
    done
    local limit=${GPURDMA_CLUSTER_TIMEOUT:-300}
    echo "+ [node0] timeout -k 10 $limit ${MPIRUN:-mpirun} ${args[*]} $*" >&2
    timeout -k 10 "$limit" nsenter -t "$pid" --net --uts --ipc --mount --wd="$PWD" -- "${MPIRUN:-mpirun}" "${args[@]}" "$@"
}

cmd_counters() {
    local n k
    n=$(nodes)
    [ "$n" -gt 0 ] || die "no cluster"
    # root end of the veth: its RX is what the host sent, its TX what the host received
    printf '%-6s %-8s %-12s %14s %14s\n' host link address sent_bytes received_bytes
    for ((k = 0; k < n; k++)); do
        printf '%-6s %-8s %-12s %14s %14s\n' "node$k" "$vprefix$k" "$(node_ip $k)" \
            "$(cat "/sys/class/net/$vprefix$k/statistics/rx_bytes" 2>/dev/null || echo -)" \
            "$(cat "/sys/class/net/$vprefix$k/statistics/tx_bytes" 2>/dev/null || echo -)"
    done
}

# Without sch_netem (some kernels lack it) `loss P%` and `rate R` are emulated with
# htb and a classic-BPF classifier that sends a random fraction of packets to a
# class whose queue holds nothing (pfifo limit 0). Delay, jitter, reordering etc.
# cannot be emulated that way: they are reported and left out (exit code 3).
emulate_netem() {
    local dev=$1; shift
    local loss="" rate="" ignored=() w
    while [ $# -gt 0 ]; do
        w=$1; shift
        case $w in
        loss | drop)
            [ "${1:-}" = random ] && shift
            loss=${1%\%}; shift || true
            ;;
        rate) rate=$1; shift ;;
        *) ignored+=("$w"); while [ $# -gt 0 ] && ! [[ $1 =~ ^[a-z]+$ ]]; do ignored+=("$1"); shift; done ;;
        esac
    done
    tc qdisc del dev "$dev" root 2>/dev/null
    tc qdisc add dev "$dev" root handle 1: htb default 1 r2q 1000 || return 1
    tc class add dev "$dev" parent 1: classid 1:1 htb rate "${rate:-100gbit}" quantum 200000 || return 1
    if [ -n "$loss" ]; then
        # threshold = loss/100 * 2^32; the filter matches when random < threshold
        local thr
        thr=$(awk -v p="$loss" 'BEGIN { t = p / 100 * 4294967296; if (t > 4294967295) t = 4294967295; printf "%.0f", t }')
        tc class add dev "$dev" parent 1: classid 1:2 htb rate 100gbit quantum 200000 &&
            tc qdisc add dev "$dev" parent 1:2 handle 2: pfifo limit 0 &&
            tc filter add dev "$dev" parent 1: prio 1 protocol all bpf \
                bytecode "4,32 0 0 4294963256,53 1 0 $thr,6 0 0 4294967295,6 0 0 0" flowid 1:2 || return 1
    fi
    EMULATED="${loss:+loss $loss%}${rate:+ rate $rate}"
    IGNORED="${ignored[*]}"
}

cmd_netem() {
    need_root
    local spec="$*" n k rc=0
    n=$(nodes)
    [ "$n" -gt 0 ] || die "no cluster"
    [ -n "$spec" ] || die "usage: cluster.sh netem \"delay 50us loss 0.01%\" | off"
    # On the root end of each veth: every packet between two hosts passes exactly one
    # of them (the receiver's), so "delay 50us" is 50us one way.
    if [ "$spec" = off ]; then
        for ((k = 0; k < n; k++)); do tc qdisc del dev "$vprefix$k" root 2>/dev/null; done
        echo "netem: off"
        return 0
    fi
    local err
    for ((k = 0; k < n; k++)); do
        # shellcheck disable=SC2086
        if ! err=$(tc qdisc replace dev "$vprefix$k" root netem $spec 2>&1); then
            if [ "$k" -eq 0 ] && echo "$err" | grep -qi "unknown"; then
                EMULATED="" IGNORED=""
                local j
                for ((j = 0; j < n; j++)); do
                    # shellcheck disable=SC2086
                    emulate_netem "$vprefix$j" $spec || die "netem: emulation failed on $vprefix$j"
                done
                echo "netem: this kernel has no sch_netem; emulated with htb+bpf: ${EMULATED}${IGNORED:+; NOT emulated: $IGNORED}"
                [ -n "$IGNORED" ] && return 3
                return 0
            fi
            die "netem: tc failed on $vprefix$k: $err"
        fi
    done
    echo "netem: $spec on ${n} link(s)"
    return $rc
}

cmd_reap() {
    need_root
    local holders pids p
    holders=" $(for ((k = 0; k < $(nodes); k++)); do holder_pid $k; done | tr '\n' ' ') "
    for sig in TERM KILL; do
        pids=()
        for p in $(ns_pids); do
            case $holders in *" $p "*) ;; *) pids+=("$p") ;; esac
        done
        [ ${#pids[@]} -eq 0 ] && return 0
        kill_pids "$sig" "${pids[@]}"
        sleep 0.5
    done
}

case ${1:-} in
up) shift; cmd_up "$@" ;;
down) cmd_down ;;
status) cmd_status ;;
run) shift; cmd_run "$@" ;;
exec) shift; cmd_exec "$@" ;;
rsh) shift; cmd_rsh "$@" ;;
counters) cmd_counters ;;
netem) shift; cmd_netem "$@" ;;
reap) cmd_reap ;;
*) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
