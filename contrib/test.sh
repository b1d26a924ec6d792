#!/usr/bin/env bash
# The test command: set up (install what is missing, build), then run every test.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${GPURDMA_BUILD:-$top/build}
# GPURDMA_SKIP_UNIT=1: no unit tests (configure --without-gtest). CI's Debian 13 pass sets
# it: the core without MPI, which Debian 12 tests (their build alone took 112 s there);
# tests/gpu's copy-rate probe runs the unit binary, so Debian 12 keeps them.
if [ "${GPURDMA_SKIP_UNIT:-0}" = 1 ]; then
    bash contrib/setup.sh --without-gtest
else
    bash contrib/setup.sh
fi
echo "== make check"
cd "$build"
# The test programs build on every core; the tests then run one at a time (each is
# multi-process and times its peers: two at once on 2 cores would starve each other).
t_build=$SECONDS
# The unit tests' own code at -O0 (the core they link keeps configure's flags): their
# build took 96 s on 2 cores at -O2 and 61 s so, their run 19 s against 23 s. The
# reduction-variants test keeps configure's flags: its scalar reference loops are its time.
# (Built only where configure found GoogleTest: config.status has the conditional.)
if grep -q '^S\["HAVE_GTEST_TRUE"\]=""' config.status; then
    make tests/unit/gpurdma_unit-test_reduce_variants.o >/dev/null
    make -j"$(nproc)" tests/unit/gpurdma_unit CXXFLAGS="-g -O0" >/dev/null
fi
make -j"$(nproc)" check TESTS= >/dev/null
t_tests=$SECONDS
echo "== test programs built in $((t_tests - t_build)) s"
# GPURDMA_TEST_BUILD_ONLY=1: build everything the tests need, run none (CI builds Debian
# 13's tree this way while this machine builds, before any test runs).
if [ "${GPURDMA_TEST_BUILD_ONLY:-0}" = 1 ]; then
    echo "== built; no test run (GPURDMA_TEST_BUILD_ONLY=1)"
    exit 0
fi
# The tests' logs: automake writes a .trs beside each test's .log.
test_logs() {
    local t
    for t in tests/*/*.trs contrib/*.trs; do if [ -f "$t" ]; then echo "${t%.trs}.log"; fi; done
}
# Each test's time: the tests run one at a time, so a log's time is its test's end.
test_times() {
    local prev=$1 f end
    for f in $(ls -tr $(test_logs)); do
        end=$(stat -c %Y "$f")
        [ "$end" -ge "$prev" ] || continue
        echo "   $((end - prev)) s  ${f%.log}"
        prev=$end
    done
}
start_epoch=$(date +%s)
if ! make -j1 check; then
    # Only the failed tests' logs (automake's .trs says which): CI shows the end of what
    # this prints, and the passing tests' tails once pushed a failing step out of it.
    for f in $(test_logs); do
        grep -qE '^:test-result: (FAIL|ERROR)' "${f%.log}.trs" || continue
        echo "== $f, its last lines:"
        tail -60 "$f"
        # A long log's failing step may sit above its last lines: its FAIL lines last,
        # where CI's excerpt (the output's end) keeps them.
        echo "== $f, its FAIL lines:"
        grep -n 'FAIL' "$f" | grep -v 'stack of pid' | tail -30 || true
    done
    exit 1
fi
# Show the suite's own summaries (automake keeps them in the .log files).
grep -h -E "^\[  (PASSED|FAILED) |mpi-tests: |mpich-coll-suite: |mpich-tests: |fault-tests: |cluster-tests: |slurm tests: |^SKIP" tests/unit/*.log \
    tests/mpi/*.log tests/mpich/*.log tests/cluster/*.log tests/slurm/*.log 2>/dev/null || true
echo "== make check: the tests took $((SECONDS - t_tests)) s"
test_times "$start_epoch"
cd "$top"
if [ "${GPURDMA_SKIP_ASAN:-0}" != 1 ]; then
    echo "== ASan + UBSan build, 4-rank runs"
    t0=$SECONDS
    bash contrib/asan-check.sh
    echo "== ASan + UBSan: $((SECONDS - t0)) s"
fi
if [ "${GPURDMA_SKIP_TSAN:-0}" != 1 ]; then
    echo "== ThreadSanitizer build: threads, requests, the progress thread, GPU buffers on the stand-in"
    t0=$SECONDS
    bash contrib/tsan-check.sh
    echo "== ThreadSanitizer: $((SECONDS - t0)) s"
fi
