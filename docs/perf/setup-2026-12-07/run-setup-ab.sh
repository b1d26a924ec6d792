#!/bin/bash
# Interleaved: tuned, han, gpurdma A (the previous build), gpurdma B (this one);
# contrib/comm-setup-bench (50 communicators per launch). A_BUILD and B_BUILD are the two
# build directories (defaults: the worktrees these runs came from).
A_BUILD=${A_BUILD:-/work/main/build}; B_BUILD=${B_BUILD:-/work/dev/build}
pkg=$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$1; rounds=${2:-5}; mkdir -p $out; rm -f $out/all.txt
bench=$B_BUILD/contrib/comm-setup-bench
for round in $(seq $rounds); do
  for sc in "np2 -np 2" "np4 -np 4" "np4ln2 -np 4 --mca coll_gpurdma_logical_nodes 2"; do
    set -- $sc; tag=$1; shift
    for how in dup split; do
      cfgs="tuned han A B"; [ $((round % 2)) = 0 ] && cfgs="B A han tuned"
      for cfg in $cfgs; do
        dir=$B_BUILD; args=()
        case $cfg in
          han) args=(--mca coll_han_priority 100);;
          A) dir=$A_BUILD; args=(--mca coll_gpurdma_priority 100);;
          B) args=(--mca coll_gpurdma_priority 100);;
        esac
        OMPI_MCA_mca_base_component_path="$pkg:$dir/component" timeout 300 mpirun --oversubscribe "$@" "${args[@]}" \
          $bench --how $how --comms 50 2>&1 | grep "^comm-setup" | sed "s/^/$tag $how $cfg r$round: /" >> $out/all.txt
      done
    done
  done
done
