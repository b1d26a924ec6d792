#!/usr/bin/env bash
# The barrier measurements of docs/PERFORMANCE.md (2026-12-07): real OSU 7.4 launches
# interleaved, Open MPI's default binding and mapping, OSU's default iterations. Before
# each launch contrib/line-roundtrip 0 1 (a cache line handed between the two CPUs the
# ranks are bound to) records the machine's phase: this VM's hand-over is either about
# 65 ns or about 290 ns, in phases of seconds, whatever runs.
#   osu_barrier np 2: tuned, han, gpurdma; np 4 (oversubscribed): the same
#   osu_allreduce -m 8:256 np 2: tuned, han, gpurdma, gpurdma without its barrier
#     (coll_gpurdma_barrier_enable 0: OSU's MPI_Barrier after each sample is tuned's)
# Output lines: ROUND what np|size config value_us handover_ns
# Usage: run.sh OSU_DIR BUILD_DIR OUT_DIR [ROUNDS]
set -u
osu=$1 build=$2 out=$3 rounds=${4:-9}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_path="$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://'):$build/component"
last() { awk 'NF==1 && $1 ~ /^[0-9.]+$/ {v=$1} END {print v}'; }
phase() { "$build/contrib/line-roundtrip" 0 1 200000 | awk '{print $(NF-1)}'; }
mca() {
    case $1 in
        tuned) ;;
        han) echo --mca coll_han_priority 100 ;;
        gpurdma) echo --mca coll_gpurdma_priority 100 ;;
        gpurdma-nobarrier) echo --mca coll_gpurdma_priority 100 --mca coll_gpurdma_barrier_enable 0 ;;
    esac
}
for r in $(seq 1 "$rounds"); do
    for np in 2 4; do
        ov=""; [ "$np" -gt 2 ] && ov=--oversubscribe
        for cfg in tuned han gpurdma; do
            h=$(phase)
            v=$(timeout 120 mpirun -np "$np" $ov $(mca $cfg) "$osu/osu_barrier" 2>/dev/null | last)
            echo "$r barrier np$np $cfg $v $h" >> "$out/barrier.txt"
        done
    done
    for cfg in tuned han gpurdma gpurdma-nobarrier; do
        h=$(phase)
        timeout 120 mpirun -np 2 $(mca $cfg) "$osu/osu_allreduce" -m 8:256 2>/dev/null |
            awk -v r="$r" -v c="$cfg" -v h="$h" 'NF==2 && $1 ~ /^[0-9]+$/ {print r, "allreduce", $1, c, $2, h}' >> "$out/allreduce.txt"
    done
done
