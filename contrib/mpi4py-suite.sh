#!/usr/bin/env bash
# mpi4py's own upstream test suite (test/runtests.py, without test_spawn) through gpurdma
# and through Open MPI's defaults, at each rank count, mpi4py at its defaults
# (MPI_THREAD_MULTIPLE); prints the counts of tests run, failed, in error and skipped,
# summed over the ranks, side by side, and exits 1 where gpurdma's differ from the
# defaults' (or a run failed or ran out of time), 77 where the suite is not at hand.
#
# Usage: contrib/mpi4py-suite.sh [-n "1 2 3 4"] [-t SECONDS] [-i PATTERN]... [TESTDIR]
#   TESTDIR   mpi4py's test/ directory, of the installed mpi4py's version (default:
#             $GPURDMA_MPI4PY_TESTS, else `apt-get source mpi4py` of the installed
#             version, kept in build/mpi4py-source; GPURDMA_MPI4PY_NO_FETCH=1: only
#             what is kept there, nothing fetched)
#   -n        the rank counts (default 1 2 3 4)
#   -t        the limit of each launch (default 900 s): a hang fails, it does not stall
#   -i        only the modules matching PATTERN (runtests.py -i), e.g. -i test_comm_inter
# Runs from the build tree (contrib/env.sh); Debian's python3-mpi4py and python3-numpy.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
nps="1 2 3 4" limit=900 includes=()
while getopts "n:t:i:" o; do
    case $o in
    n) nps=$OPTARG ;;
    t) limit=$OPTARG ;;
    i) includes+=(-i "$OPTARG") ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
tests=${1:-${GPURDMA_MPI4PY_TESTS:-}}

py=/usr/bin/python3
if ! "$py" -c 'import mpi4py, numpy' 2>/dev/null; then
    echo "SKIP mpi4py suite: no $py with mpi4py and numpy (Debian: python3-mpi4py python3-numpy)"
    exit 77
fi
version=$("$py" -c 'import mpi4py; print(mpi4py.__version__)')
if [ -z "$tests" ]; then
    src=${GPURDMA_BUILD:-$top/build}/mpi4py-source
    deb_version=$(dpkg-query -W -f='${source:Version}' python3-mpi4py 2>/dev/null)
    if [ ! -f "$src/mpi4py-$version/test/runtests.py" ] && [ "${GPURDMA_MPI4PY_NO_FETCH:-0}" = 1 ]; then
        echo "SKIP mpi4py suite: no test/ directory of mpi4py $version kept in $src, and" \
            "GPURDMA_MPI4PY_NO_FETCH=1 (give one as GPURDMA_MPI4PY_TESTS)"
        exit 77
    fi
    if [ ! -f "$src/mpi4py-$version/test/runtests.py" ]; then
        rm -rf "$src" && mkdir -p "$src"
        if bash "$top/contrib/apt-get-source.sh" "mpi4py=$deb_version" "$src" >/dev/null 2>&1 &&
            tar -xf "$src"/mpi4py_"$version".orig.tar.* -C "$src" 2>/dev/null; then
            :
        else
            echo "SKIP mpi4py suite: Debian's source of mpi4py $deb_version is not available here" \
                "(apt-get source failed); give its test/ directory as TESTDIR or GPURDMA_MPI4PY_TESTS"
            exit 77
        fi
    fi
    tests=$src/mpi4py-$version/test
fi
[ -f "$tests/runtests.py" ] || { echo "FAIL: $tests/runtests.py not found"; exit 1; }
# shellcheck source=env.sh
. "$top/contrib/env.sh"
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-mpi4py.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# "ran failures errors skipped" summed over the ranks' unittest summaries (each rank
# prints its own; progress dots may precede them on the same line).
counts() {
    local out=$1
    local ran fail err skip
    ran=$(grep -oE 'Ran [0-9]+ tests?' "$out" | awk '{s += $2} END {print s + 0}')
    fail=$(grep -oE 'failures=[0-9]+' "$out" | awk -F= '{s += $2} END {print s + 0}')
    err=$(grep -oE 'errors=[0-9]+' "$out" | awk -F= '{s += $2} END {print s + 0}')
    skip=$(grep -oE 'skipped=[0-9]+' "$out" | awk -F= '{s += $2} END {print s + 0}')
    echo "$ran $fail $err $skip"
}

bad=0
printf '%-4s %-9s %8s %8s %8s %8s %8s %s\n' np config ran failed errors skipped seconds exit
for np in $nps; do
    declare -A result=()
    for config in defaults gpurdma; do
        on=()
        [ "$config" = gpurdma ] && on=(--mca coll_gpurdma_priority 100)
        out=$logs/np$np-$config.log
        start=$SECONDS
        (cd "$tests" && timeout -k 10 "$limit" mpirun --oversubscribe -np "$np" "${on[@]}" \
            "$py" runtests.py --no-builddir -e test_spawn "${includes[@]}") >"$out" 2>&1
        rc=$?
        read -r ran fail err skip < <(counts "$out")
        printf '%-4s %-9s %8s %8s %8s %8s %8s %s\n' "$np" "$config" "$ran" "$fail" "$err" "$skip" \
            $((SECONDS - start)) "$rc"
        result[$config]="$ran $fail $err $skip"
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            echo "FAIL np=$np $config: still running after $limit s"
            bad=1
        elif [ "$config" = gpurdma ] && [ "$rc" -ne 0 ]; then
            echo "FAIL np=$np gpurdma: exit $rc"; grep -E 'FAIL:|ERROR:|Error' "$out" | head -20
            bad=1
        fi
        [ "$ran" -gt 0 ] || { echo "FAIL np=$np $config: no test ran"; tail -20 "$out"; bad=1; }
    done
    if [ "${result[defaults]}" != "${result[gpurdma]}" ]; then
        echo "FAIL np=$np: gpurdma's counts (${result[gpurdma]}) differ from the defaults' (${result[defaults]})"
        bad=1
    fi
    unset result
done
[ $bad -eq 0 ] && echo "mpi4py $version suite: gpurdma's counts equal Open MPI's defaults' at np $nps"
exit $bad
