#!/usr/bin/env bash
# The barrier measurements of docs/PERFORMANCE.md (2026-12-07): real OSU 7.4 launches
# interleaved, Open MPI's default binding and mapping, OSU's default iterations.
#   osu_barrier np 2 and 4 (4: oversubscribed): tuned, han, gpurdma
#   osu_allreduce -m 8:256 np 2: tuned, gpurdma with its barrier, gpurdma without it
#     (coll_gpurdma_barrier_enable 0: OSU's MPI_Barrier after each sample is tuned's)
# Usage: run.sh OSU_DIR COMPONENT_DIR OUT_DIR [ROUNDS]
set -u
osu=$1 comp=$2 out=$3 rounds=${4:-9}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mca_base_component_path="$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://'):$comp"
last() { awk 'NF==1 && $1 ~ /^[0-9.]+$/ {v=$1} END {print v}'; }
for r in $(seq 1 "$rounds"); do
    for np in 2 4; do
        ov=""; [ "$np" -gt 2 ] && ov=--oversubscribe
        for cfg in tuned han gpurdma; do
            case $cfg in tuned) m=();; han) m=(--mca coll_han_priority 100);; gpurdma) m=(--mca coll_gpurdma_priority 100);; esac
            v=$(timeout 120 mpirun -np "$np" $ov "${m[@]}" "$osu/osu_barrier" 2>/dev/null | last)
            echo "$r barrier np$np $cfg $v" >> "$out/barrier.txt"
        done
    done
    for cfg in tuned gpurdma gpurdma-nobarrier; do
        case $cfg in
            tuned) m=();;
            gpurdma) m=(--mca coll_gpurdma_priority 100);;
            gpurdma-nobarrier) m=(--mca coll_gpurdma_priority 100 --mca coll_gpurdma_barrier_enable 0);;
        esac
        timeout 120 mpirun -np 2 "${m[@]}" "$osu/osu_allreduce" -m 8:256 2>/dev/null |
            awk -v r="$r" -v c="$cfg" 'NF==2 && $1 ~ /^[0-9]+$/ {print r, "allreduce", $1, c, $2}' >> "$out/allreduce.txt"
    done
done
