# The `run` of the MPI test scripts (tests/mpi/run-mpi-tests.sh under Open MPI,
# tests/mpich/run-mpich-tests.sh under MPICH): one launch, the program's own verdict,
# and what gpurdma's verbose output must show. Sourced; the script sets:
#   launcher=(...)   the launch command (mpirun and its options, mpiexec.mpich)
#   launch_env=(...) VAR=value for every launch (may be empty)
#   tag              gpurdma's line prefix: "coll:gpurdma", "pmpi:gpurdma"
#   fallback_text    its fallback line: "fallback to the previous allreduce", ...
#   log_dir          where outputs go: $log_dir/run.log, the last run's
#   passed, failed, names=()  the tallies
#
# run NAME EXPECT TIMEOUT ENV... -- LAUNCH-ARGS...
#   EXPECT: used          gpurdma set up a communicator and declined nothing (and printed
#                         a line matching USED_PATTERN if set)
#           fallback      the fallbacks named in FALLBACK_PATTERNS were printed (exactly
#                         FALLBACK_COUNT fallback lines if set)
#           off           gpurdma printed nothing
#           timeout       an error naming the stage (TIMEOUT_STAGE), the peer
#                         (TIMEOUT_PEER) and its host
#           cannot-start  a declined set-up that names UCX
#           none          only the program's own verdict
# Every run must also print "passed, 0 failed" and exit 0.
run() {
    local name=$1 expect=$2 limit=$3
    shift 3
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    local out="$log_dir/run.log" start=$SECONDS why="" n
    env "${launch_env[@]}" "${envs[@]}" timeout -k 10 "$limit" "${launcher[@]}" "$@" >"$out" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        why="exit code $rc"
    else
        case $expect in
        used)
            grep -q "$tag: .*ranks on .*host" "$out" || why="no gpurdma set-up line: gpurdma was not used"
            grep -q "declined" "$out" && why="gpurdma declined: $(grep -m1 declined "$out")"
            grep -q "UCX  ERROR" "$out" && why="UCX reported an error: $(grep -m1 'UCX  ERROR' "$out")"
            [ -n "${USED_PATTERN:-}" ] && ! grep -q "$USED_PATTERN" "$out" && why="no line matching '$USED_PATTERN'"
            ;;
        fallback)
            for pat in "${FALLBACK_PATTERNS[@]}"; do
                grep -q "$pat" "$out" || why="missing fallback line matching '$pat'"
            done
            n=$(grep -c "$fallback_text" "$out")
            [ -n "${FALLBACK_COUNT:-}" ] && [ "$n" != "$FALLBACK_COUNT" ] &&
                why="$n fallback lines, expected $FALLBACK_COUNT"
            ;;
        off)
            grep -q "$tag" "$out" && why="gpurdma printed output while off"
            ;;
        timeout)
            grep -q "timed out after .* in ${TIMEOUT_STAGE:-.*}.*waiting for .*rank ${TIMEOUT_PEER:-[0-9]*} on host" "$out" ||
                why="no timeout message naming the stage (${TIMEOUT_STAGE:-any}), peer ${TIMEOUT_PEER:-} and host"
            ;;
        cannot-start)
            grep -q "$tag: .*declined.*cannot start UCX" "$out" || why="no 'declined ... cannot start UCX' warning"
            ;;
        esac
        grep -q "passed, 0 failed" "$out" || why="${why:-no 'passed, 0 failed' summary}"
    fi
    if [ -z "$why" ]; then
        passed=$((passed + 1))
        printf 'PASS %-44s %4ds  %s\n' "$name" $((SECONDS - start)) "$(grep -h 'passed,' "$out" | tail -1)"
    else
        failed=$((failed + 1))
        names+=("$name")
        printf 'FAIL %-44s %4ds  %s\n' "$name" $((SECONDS - start)) "$why"
        sed 's/^/    | /' "$out" | tail -40
    fi
}
