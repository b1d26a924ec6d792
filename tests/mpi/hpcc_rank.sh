#!/usr/bin/env bash
# One rank of HPC Challenge (Debian's hpcc: HPL, PTRANS, RandomAccess, STREAM, FFT,
# DGEMM; their verifications reduce error counts and residual norms with
# MPI_Allreduce), run in DIR (hpccinf.txt there, hpccoutf.txt written there). Rank 0,
# once hpcc has ended, reads hpcc's own verdicts from hpccoutf.txt and prints the
# "N passed, M failed" line the test runner reads; it fails if any verdict is missing
# or bad.
# Usage (under mpirun): hpcc_rank.sh DIR
set -u
cd "$1" || exit 1
hpcc
rc=$?
[ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" = 0 ] || exit $rc
out=hpccoutf.txt
passed=0
failed=0
verdict() {  # NAME CONDITION...
    local name=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "hpcc: FAIL $name"
    fi
}
has() { grep -q -- "$1" "$out"; }
none() { ! grep -q -- "$1" "$out"; }
count_is() { [ "$(grep -c -- "$1" "$out")" = "$2" ]; }
[ $rc -eq 0 ] || echo "hpcc: exit code $rc"
verdict "exit code 0" [ $rc -eq 0 ]
verdict "output written" [ -s "$out" ]
verdict "overall Success=1" has '^Success=1$'
# HPL and PTRANS: every residual check passed, none failed.
verdict "HPL residual check" has '1 tests completed and passed residual checks'
verdict "no residual check failed" none '[1-9][0-9]* tests completed and failed residual checks'
verdict "residual checks reported" count_is ' 0 tests completed and failed residual checks' 2
verdict "MPIRandomAccess errors 0" has '^MPIRandomAccess_Errors=0$'
verdict "MPIRandomAccess_LCG errors 0" has '^MPIRandomAccess_LCG_Errors=0$'
verdict "STREAM validates" has '^Solution Validates'
# Each star/single test reduces its nodes' error flags: all must say 0.
verdict "every node-error count is 0" none '^Node(s) with error [1-9]'
verdict "node-error counts reported" has '^Node(s) with error 0'
echo "hpcc: $passed passed, $failed failed"
[ $failed -eq 0 ]
