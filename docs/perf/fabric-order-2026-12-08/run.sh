#!/usr/bin/env bash
# Issue 57's runs of the fabric model: random placement (a scheduler's scattered
# allocation), gpurdma's defaults at the default chunk and in-flight limit, three seeds,
# with the topology known (Slurm's, so nodes in fabric order) and unknown (rank order),
# one and two QPs per rail peer, alone and beside a second job.
# Usage: run.sh BUILD_DIR OUT_FILE [CLUSTERS...]   (table.py OUT_FILE makes the table)
# (at 1024x8-400g the second-job runs with the order unknown take many minutes each)
set -u
build=$1 out=$2
shift 2
src=$(cd "$(dirname "$0")/../../.." && pwd)
[ $# -gt 0 ] && clusters=("$@") || clusters=(128x8-400g 1024x8-400g)
: >"$out"
for c in "${clusters[@]}"; do
    for job in alone second; do
        for size in 64M 256M; do
            for topology in known unknown; do
                for qps in 1 2; do
                    for seed in 1 2 3; do
                        extra=()
                        [ "$job" = second ] && extra=(--second-job)
                        line=$("$build/contrib/fabric/gpurdma-fabric" plan "$src/contrib/fabric/clusters/$c.conf" \
                            --size "$size" --rails hier --slots 4 "${extra[@]}" --set placement=random \
                            --set seed="$seed" --set topology="$topology" --set rail_qps="$qps" 2>&1 |
                            grep '^summary:')
                        echo "cluster=$c job=$job topology=$topology qps=$qps seed=$seed $line" | tee -a "$out"
                    done
                done
            done
        done
    done
done
