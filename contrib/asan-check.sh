#!/usr/bin/env bash
# Builds gpurdma with ASan + UBSan (in build-asan/) and runs 4-rank MPI jobs with it:
# the osu-compat benchmark with validation, the correctness check and the
# dup/free lifecycle. Fails on any sanitizer error, and on any leak whose stack passes
# through gpurdma (Open MPI and UCX leak at exit on their own; those are not ours).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${GPURDMA_ASAN_BUILD:-$top/build-asan}
GPURDMA_BUILD=$build bash "$top/contrib/setup.sh" --enable-sanitizers --without-cuda
make -C "$build" -j"$(nproc)" tests/mpi/allreduce_check tests/mpi/lifecycle_check >/dev/null
. "$top/contrib/env.sh"
export OMPI_MCA_mca_base_component_path="$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://'):$build/component"
libasan=$(gcc -print-file-name=libasan.so)
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
status=0
check() {
    local name=$1
    shift
    if ! timeout 600 mpirun --oversubscribe --bind-to none -np 4 --mca pml ob1 \
        -x LD_PRELOAD="$libasan" -x ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 \
        -x UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        --mca coll_gpurdma_priority 100 "$@" >"$log/$name" 2>&1; then
        # A leak report alone makes the job exit non-zero: judge by what it contains.
        if grep -q "ERROR: AddressSanitizer\|runtime error:" "$log/$name" ||
            ! grep -q "ERROR: LeakSanitizer" "$log/$name"; then
            echo "FAIL $name"; tail -40 "$log/$name"; status=1; return
        fi
    fi
    if grep -q "ERROR: AddressSanitizer\|runtime error:" "$log/$name"; then
        echo "FAIL $name: sanitizer error"; grep -m5 -A20 "ERROR: AddressSanitizer\|runtime error:" "$log/$name"; status=1; return
    fi
    # Leak records are blank-line separated; keep those with a gpurdma frame.
    ours=$(awk 'BEGIN{RS=""} /(Direct|Indirect) leak/ && /gpurdma/' "$log/$name")
    if [ -n "$ours" ]; then
        echo "FAIL $name: leaks through gpurdma"; echo "$ours" | head -40; status=1; return
    fi
    leaks=$(grep -c "Direct leak\|Indirect leak" "$log/$name" || true)
    echo "PASS $name (no sanitizer error; $leaks leak records, none through gpurdma)"
}
check "osu_allreduce -c" "$build/osu-compat/osu_allreduce" -m 8:4194304 -i 10 -x 2 -c
check "allreduce_check" "$build/tests/mpi/allreduce_check" --quick
check "lifecycle_check" "$build/tests/mpi/lifecycle_check" 100
exit $status
