# Sourced by the GPU suites: step WHAT ARGS... runs "$launcher --mode device ARGS", prints
# its summary lines and time, and sets failed=1 where it exits non-zero, where a stand-in
# reports leaks, or where a line it must print is missing: want="fixed text" and
# wants="one extended regular expression per line" in its environment.
step() {
    local what=$1
    shift
    echo "== $what"
    local out t0=$SECONDS
    out=$("$launcher" --mode device "$@" 2>&1)
    local rc=$?
    echo "   ($((SECONDS - t0)) s)"
    printf '%s\n' "$out" | grep -E '^(rank|FAIL|==|stack of pid)|leaked' | grep -v ': 0 leaked' | sed 's/^/   /'
    local reports
    reports=$(printf '%s\n' "$out" | grep -c 'leaked')
    [ "$reports" -gt 0 ] && echo "   stand-in leak reports: $reports processes"
    if printf '%s\n' "$out" | grep -E 'leaked' | grep -vq ' 0 leaked pinned allocations, 0 registrations, 0 device allocations, 0 events, 0 streams'; then
        echo "FAIL: $what: the stand-in reports leaks"
        failed=1
    fi
    [ $rc -eq 0 ] || { echo "FAIL: $what (exit $rc)"; failed=1; }
    if [ -n "${want:-}" ] && ! printf '%s\n' "$out" | grep -qF -- "$want"; then
        echo "FAIL: $what: no line says \"$want\""
        failed=1
    fi
    # wants: extended regular expressions, one per line, each matching some line.
    local re
    while IFS= read -r re; do
        [ -n "$re" ] || continue
        if ! printf '%s\n' "$out" | grep -qE -- "$re"; then
            echo "FAIL: $what: no line matches /$re/"
            failed=1
        else
            printf '%s\n' "$out" | grep -E -- "$re" | tail -n 1 | sed 's/^/   seen: /'
        fi
    done <<<"${wants:-}"
}

