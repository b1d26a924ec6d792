#!/usr/bin/env bash
# osu-compat's benchmarks (osu_allreduce, osu_iallreduce, osu_reduce_scatter,
# osu_allgather, osu_bcast, osu_reduce): OMB 7.4's output format and -c validation,
# under plain Open MPI (gpurdma at priority 0) and, when the component is built, with
# gpurdma on. For each program and rank count:
#   - exit 0; the benchmark's header line; "# Datatype: MPI_X." for each -T type;
#   - the column header, exactly, for the options given (-f, -c, -z, --bw);
#   - one row per size, doubling from -m's MIN (sizes below one element skipped), each
#     with the header's number of fields, every Validation field "Pass";
#   - -l (where OMB has it) and, for osu_reduce, -k rotate and -k fixed:LAST pass -c;
#   - the options a benchmark does not have are refused (exit 1): -l for osu_bcast,
#     -k for all but osu_reduce, a -k root beyond the ranks.
# Usage: tests/mpi/run-osu-compat-tests.sh (GPURDMA_BUILDDIR: the build directory)
set -u
# CI's Debian 13 part: the benchmarks' format and options are the same code on Open MPI
# 4.1, where CI's first part runs them; the Open MPI 5 tests are tests/mpi's.
if [ "${GPURDMA_SKIP_OSU_COMPAT:-0}" = 1 ]; then
    echo "SKIP: GPURDMA_SKIP_OSU_COMPAT=1 (osu-compat's suite runs in CI's Debian 12 part)"
    exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
build=${GPURDMA_BUILDDIR:-$(cd "$here/../.." && pwd)}
pkglibdir=${OMPI_PKGLIBDIR:-$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')}
mpirun=${MPIRUN:-mpirun}
bin=$build/osu-compat
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-osu-tests.XXXXXX")
trap 'rm -rf "$log_dir"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_path="$pkglibdir:$build/component"
common=(--oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader,tcp)
configs=("plain:--mca coll_gpurdma_priority 0")
if [ -e "$build/component/mca_coll_gpurdma.so" ]; then
    configs+=("gpurdma:--mca coll_gpurdma_priority 100")
fi

passed=0
failed=0
names=()
out=$log_dir/out.log

for p in osu_allreduce osu_iallreduce osu_reduce_scatter osu_allgather osu_bcast osu_reduce; do
    if [ ! -x "$bin/$p" ]; then
        echo "SKIP: $bin/$p is not built"
        exit 77
    fi
done

header_of() {
    case $1 in
    osu_allreduce) echo "# OSU MPI Allreduce Latency Test v7.4" ;;
    osu_iallreduce) echo "# OSU MPI Non-blocking Allreduce Latency Test v7.4" ;;
    osu_reduce_scatter) echo "# OSU MPI Reduce_scatter Latency Test v7.4" ;;
    osu_allgather) echo "# OSU MPI Allgather Latency Test v7.4" ;;
    osu_bcast) echo "# OSU MPI Broadcast Latency Test v7.4" ;;
    osu_reduce) echo "# OSU MPI Reduce Latency Test v7.4" ;;
    esac
}

# The column header OMB 7.4's layout gives for a latency benchmark's options:
# "# Size" in 10, Iterations in 12, every other column in 20.
columns_of() {
    local prog=$1 full=$2 val=$3 tail=$4 bw=$5 line
    line=$(printf '%-10s' "# Size")
    if [ "$prog" = osu_iallreduce ]; then
        line+=$(printf '%20s%20s' "Overall(us)" "Compute(us)")
        [ "$full" = 1 ] && line+=$(printf '%20s%20s%20s' "Coll. Init(us)" "MPI_Test(us)" "MPI_Wait(us)")
        line+=$(printf '%20s' "Pure Comm.(us)")
        [ "$full" = 1 ] && line+=$(printf '%20s%20s' "Min Comm.(us)" "Max Comm.(us)")
        line+=$(printf '%20s' "Overlap(%)")
    else
        line+=$(printf '%20s' "Avg Latency(us)")
        [ "$full" = 1 ] && line+=$(printf '%20s%20s%12s' "Min Latency(us)" "Max Latency(us)" "Iterations")
    fi
    [ "$val" = 1 ] && line+=$(printf '%20s' "Validation")
    [ "$tail" = 1 ] && line+=$(printf '%20s%20s%20s' "P50 Tail Lat(us)" "P90 Tail Lat(us)" "P99 Tail Lat(us)")
    [ "$bw" = 1 ] && line+=$(printf '%20s' "Bus BW(GB/s)")
    printf '%s\n' "$line"
}

result() {
    local name=$1 why=$2
    if [ -z "$why" ]; then
        passed=$((passed + 1))
        echo "PASS $name"
    else
        failed=$((failed + 1))
        names+=("$name")
        echo "FAIL $name: $why"
        sed -n '1,40p' "$out"
    fi
}

# check NAME NP PROG TYPES MIN MAX FULL VALIDATE TAIL BW -- MPIRUN-ARGS... -- PROG-ARGS...
# TYPES: the -T types in order (char int float), each printed as its own table.
check() {
    local name=$1 np=$2 prog=$3 types=$4 min=$5 max=$6 full=$7 val=$8 tail=$9 bw=${10}
    shift 10
    local mpi_args=() args=() why="" want_cols t size tsize nrows fields rc
    [ "$1" = "--" ] && shift
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do mpi_args+=("$1"); shift; done
    [ "$#" -gt 0 ] && shift
    args=("$@")
    timeout -k 10 300 "$mpirun" "${common[@]}" -np "$np" "${mpi_args[@]}" "$bin/$prog" "${args[@]}" >"$out" 2>&1
    rc=$?
    [ $rc -ne 0 ] && { result "$name" "exit code $rc"; return; }
    grep -qxF "$(header_of "$prog")" "$out" || why="no header line '$(header_of "$prog")'"
    want_cols=$(columns_of "$prog" "$full" "$val" "$tail" "$bw")
    local want_rows="" expect_fields
    for t in $types; do
        case $t in char) tsize=1 ;; *) tsize=4 ;; esac
        want_rows+="# Datatype: MPI_${t^^}."$'\n'"$want_cols"$'\n'
        for ((size = min; size <= max; size *= 2)); do
            [ $size -lt $tsize ] && continue
            want_rows+="$size"$'\n'
        done
    done
    # What the output holds: datatype lines, column headers, and the first field of each row.
    local got
    got=$(awk '/^# Datatype:/ || /^# Size/ {print; next} /^[0-9]/ {print $1}' "$out")
    if [ -z "$why" ] && [ "$got" != "${want_rows%$'\n'}" ]; then
        why="tables differ from the expected layout: $(diff <(printf '%s' "${want_rows%$'\n'}") <(printf '%s\n' "$got") | head -6 | tr '\n' '|')"
    fi
    # Fields per row: 1 + 1 (avg) [+ 3 full] [+ 1 validation] [+ 3 tail] [+ 1 bw]; osu_iallreduce
    # 5 (+5 with -f) and the same optional ones.
    if [ "$prog" = osu_iallreduce ]; then
        expect_fields=$((5 + (full ? 5 : 0)))
    else
        expect_fields=$((2 + (full ? 3 : 0)))
    fi
    expect_fields=$((expect_fields + val + (tail ? 3 : 0) + bw))
    if [ -z "$why" ]; then
        nrows=$(awk -v n="$expect_fields" '/^[0-9]/ && NF != n {bad++} END {print bad + 0}' "$out")
        [ "$nrows" != 0 ] && why="$nrows rows without $expect_fields fields"
    fi
    if [ -z "$why" ] && [ "$val" = 1 ]; then
        local col=$((expect_fields - (tail ? 3 : 0) - bw))
        nrows=$(awk -v c="$col" '/^[0-9]/ && $c != "Pass" {bad++} END {print bad + 0}' "$out")
        [ "$nrows" != 0 ] && why="$nrows rows not Pass"
        grep -q "DATA VALIDATION ERROR" "$out" && why="$(grep -m1 'DATA VALIDATION ERROR' "$out")"
    fi
    result "$name" "$why"
}

# refused NAME PROG ARGS...: exit 1 and an error on stderr, nothing measured.
refused() {
    local name=$1 prog=$2 rc
    shift 2
    timeout -k 10 60 "$mpirun" "${common[@]}" -np 2 "$bin/$prog" "$@" >"$out" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        result "$name" "exit code 0, want 1"
    elif grep -q "^[0-9]" "$out"; then
        result "$name" "printed rows"
    else
        result "$name" ""
    fi
}

for cfg in "${configs[@]}"; do
    label=${cfg%%:*}
    read -r -a mca <<<"${cfg#*:}"
    for np in 2 3 4; do
        for prog in osu_allreduce osu_reduce_scatter osu_allgather osu_bcast osu_reduce; do
            check "$prog np=$np $label: -c -f -T all" "$np" "$prog" "char int float" 1 65536 1 1 0 0 \
                -- "${mca[@]}" -- -m 1:65536 -i 20 -x 2 -c -f -T all
        done
        check "osu_iallreduce np=$np $label: -c -f -T mpi_float" "$np" osu_iallreduce float 8 16384 1 1 0 0 \
            -- "${mca[@]}" -- -m 8:16384 -i 10 -x 1 -c -f -T mpi_float
    done
    for prog in osu_allreduce osu_reduce_scatter osu_allgather osu_reduce; do
        check "$prog np=4 $label: -c -l -T mpi_int" 4 "$prog" int 4 262144 0 1 0 0 \
            -- "${mca[@]}" -- -m 4:262144 -i 10 -x 1 -c -l -T mpi_int
    done
    for prog in osu_allreduce osu_reduce_scatter osu_allgather osu_bcast osu_reduce; do
        check "$prog np=3 $label: defaults with -z --bw" 3 "$prog" char 1 1024 0 0 1 1 \
            -- "${mca[@]}" -- -m 1024 -i 50 -x 5 -z --bw
    done
    check "osu_reduce np=4 $label: -c -k rotate" 4 osu_reduce float 4 65536 1 1 0 0 \
        -- "${mca[@]}" -- -m 4:65536 -i 10 -x 1 -c -f -k rotate -T mpi_float
    check "osu_reduce np=4 $label: -c -l -k fixed:3" 4 osu_reduce char 1 65536 0 1 0 0 \
        -- "${mca[@]}" -- -m 1:65536 -i 10 -x 1 -c -l -k fixed:3
    # Large enough that allgather's receive buffer (size x ranks) is megabytes, the
    # reductions take the libraries' large-message paths.
    for prog in osu_reduce_scatter osu_allgather osu_bcast osu_reduce; do
        check "$prog np=4 $label: -c to 4 MiB" 4 "$prog" float 1048576 4194304 0 1 0 0 \
            -- "${mca[@]}" -- -m 1048576:4194304 -i 3 -x 1 -c -T mpi_float
    done
done

refused "osu_bcast -l (OMB's osu_bcast has no -l)" osu_bcast -l
refused "osu_allreduce -k (only osu_reduce has -k)" osu_allreduce -k rotate
refused "osu_allgather -k" osu_allgather -k fixed:0
refused "osu_reduce -k fixed:2 at 2 ranks" osu_reduce -k fixed:2
refused "osu_reduce -k nonsense" osu_reduce -k nonsense
refused "osu_allgather -D (OMB's derived datatypes, not here)" osu_allgather -D x

echo "osu-compat tests: $passed passed, $failed failed"
[ "$failed" -gt 0 ] && printf 'failed: %s\n' "${names[@]}"
[ "$failed" -eq 0 ]
