#!/usr/bin/env bash
# The flight recorder's cost (docs/PERFORMANCE.md, 2026-12-07): real OSU 7.4 osu_allreduce,
# Open MPI's default binding and mapping, OSU's default iterations, 8 B to 64 KiB, np 2
# and np 4 (oversubscribed on 2 cores), launches interleaved round by round, in an order
# that turns each round:
#   base   the build before the recorder (its component folder: BASE_BUILD)
#   on     this build, coll_gpurdma_recorder_size 32 (a history of 32 calls)
#   off    this build, its defaults (coll_gpurdma_recorder_size 0: no history)
# Before each launch contrib/line-roundtrip 0 1 records the VM's phase (a cache-line
# hand-over of about 65 or about 290 ns).
# Output lines: ROUND np size config value_us handover_ns
# Usage: run.sh OSU_DIR BASE_BUILD NEW_BUILD OUT_FILE [ROUNDS]
set -u
osu=$1 base=$2 new=$3 out=$4 rounds=${5:-9}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pkglib=$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')
phase() { "$new/contrib/line-roundtrip" 0 1 200000 | awk '{print $(NF-1)}'; }
for r in $(seq 1 "$rounds"); do
    for np in 2 4; do
        ov=""; [ "$np" -gt 2 ] && ov=--oversubscribe
        # The order turns every round, so that no config always follows the same one.
        case $((r % 3)) in 0) order="base on off" ;; 1) order="on off base" ;; *) order="off base on" ;; esac
        for cfg in $order; do
            dir=$new; extra=""
            [ "$cfg" = base ] && dir=$base
            [ "$cfg" = on ] && extra="--mca coll_gpurdma_recorder_size 32"
            h=$(phase)
            OMPI_MCA_mca_base_component_path="$pkglib:$dir/component" timeout 300 mpirun -np "$np" $ov \
                --mca coll_gpurdma_priority 100 $extra "$osu/osu_allreduce" -m 8:65536 2>/dev/null |
                awk -v r="$r" -v np="$np" -v c="$cfg" -v h="$h" 'NF==2 && $1 ~ /^[0-9]+$/ {print r, np, $1, c, $2, h}' >> "$out"
        done
    done
done
