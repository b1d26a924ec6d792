#!/usr/bin/env bash
# Fuzzes gpurdma's input parsers with libFuzzer (Debian's clang, installed if missing),
# each target for a bounded time, under ASan + UBSan:
#   fuzz_topology     coll_gpurdma_logical_nodes parsing + the topology built from it
#   fuzz_device_list  coll_gpurdma_net_devices parsing + the rail choice
#   fuzz_wire         the set-up record reader (src/setup/wire.h)
# Targets live in tests/fuzz/. Usage: contrib/fuzz.sh [SECONDS_PER_TARGET (60)] [TARGET...]
# Work directory (corpora, crash inputs, logs): $GPURDMA_FUZZ_DIR (default /tmp/gpurdma-fuzz).
# Exit status: 0 if no target crashed, 1 otherwise (the crashing inputs are kept).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_topology fuzz_device_list fuzz_wire)
work=${GPURDMA_FUZZ_DIR:-/tmp/gpurdma-fuzz}
mkdir -p "$work"

if ! command -v clang++ >/dev/null; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang libhwloc-dev
fi
cxx=(clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
     -I"$top/include" -I"$top/src")
declare -A sources=(
    [fuzz_topology]="$top/tests/fuzz/fuzz_topology.cpp $top/src/topo/topology.cpp"
    [fuzz_device_list]="$top/tests/fuzz/fuzz_device_list.cpp $top/src/topo/nic.cpp"
    [fuzz_wire]="$top/tests/fuzz/fuzz_wire.cpp"
)
declare -A libs=([fuzz_device_list]="$(pkg-config --libs hwloc)")

seed() {  # seed NAME FILE CONTENT (printf format)
    mkdir -p "$work/corpus/$1"
    printf "$3" >"$work/corpus/$1/$2"
}
seed fuzz_topology k2 '\x04\x01\x32'
seed fuzz_topology list '\x06\x01\x33,1,2'
seed fuzz_topology two '\x08\x02\x32,2'
seed fuzz_topology bad '\x05\x01\x31,,2'
seed fuzz_device_list one 'mlx5_0:1'
seed fuzz_device_list two 'mlx5_0:1,mlx5_1:1'
seed fuzz_device_list excl '^mlx5_2'
seed fuzz_wire r1 '\x03\x00\x00\x00\x04\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x05\x00\x00\x00node0\x08\x00\x00\x00mlx5_0:1'
seed fuzz_wire r2 '\x01\x00\x00\x00\x03\x00\x00\x00/ab\x02\x00\x00\x00xy\x00\x10\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00k'

status=0
printf '%-18s %8s %10s %8s %6s  %s\n' target seconds execs corpus cov result
for t in "${targets[@]}"; do
    [ -n "${sources[$t]:-}" ] || { echo "unknown target $t"; exit 2; }
    # shellcheck disable=SC2086
    "${cxx[@]}" -o "$work/$t" ${sources[$t]} ${libs[$t]:-}
    mkdir -p "$work/crashes/$t"
    log="$work/$t.log"
    set +e
    "$work/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/crashes/$t/" "$work/corpus/$t" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
    corpus=$(find "$work/corpus/$t" -type f | wc -l)
    if [ $rc -eq 0 ]; then
        result=ok
    else
        result="CRASH (exit $rc): $(ls "$work/crashes/$t" | head -3 | tr '\n' ' ')"
        status=1
        grep -m3 -A12 "ERROR:\|runtime error\|deadly signal" "$log" | sed 's/^/    | /'
    fi
    printf '%-18s %8s %10s %8s %6s  %s\n' "$t" "$secs" "$execs" "$corpus" "$cov" "$result"
done
exit $status
