#!/bin/bash
# ABBA-interleaved A/B (order alternates each round): real OSU 7.4 osu_allreduce defaults.
# usage: abba.sh OUTDIR ROUNDS MPIRUN-ARGS...
pkg=$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
d=$1; rounds=$2; shift 2
mkdir -p $d; rm -f $d/*.txt
for round in $(seq 1 $rounds); do
  order="A B"; [ $((round % 2)) = 0 ] && order="B A"
  for b in $order; do
    dir=/work/main/build; [ $b = B ] && dir=/work/dev/build
    OMPI_MCA_mca_base_component_path="$pkg:$dir/component" timeout 600 mpirun --oversubscribe "$@" \
      --mca coll_gpurdma_priority 100 /tmp/osu/osu_allreduce ${OSU_ARGS:-} > $d/$b-$round.txt 2>&1
  done
done
