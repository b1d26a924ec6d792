#!/bin/bash
pkg=$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
d=$1; rounds=$2; shift 2
mkdir -p $d; rm -f $d/*.txt
for round in $(seq 1 $rounds); do
  case $((round % 3)) in 0) order="A B C";; 1) order="B C A";; 2) order="C A B";; esac
  for b in $order; do
    dir=/work/main/build; extra=(); [ $b != A ] && dir=/work/dev/build
    [ $b = C ] && extra=(--mca coll_gpurdma_shm_arena_size 0)
    OMPI_MCA_mca_base_component_path="$pkg:$dir/component" timeout 600 mpirun --oversubscribe "$@" \
      --mca coll_gpurdma_priority 100 "${extra[@]}" /tmp/osu/osu_allreduce ${OSU_ARGS:-} > $d/$b-$round.txt 2>&1
  done
done
