#!/usr/bin/env bash
# gpurdma-fabric as a user runs it: `plan` on the 16 x 8 cluster description (per size the
# table, the planner's choice, its defaults beside the best found, a summary line; the CSV
# in a folder it makes), `sweep`'s recommendation, `validate` (the model against the DCQCN
# paper: every scenario row printed), `speed` (the
# 128-host ring that docs/FABRIC-MODEL.md times), and the
# errors a user gets for a bad key or value. The numbers themselves are the model's tests
# (tests/fabric/fabric_tests); here the command must work end to end.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${GPURDMA_BUILDDIR:-$src}
tool=$build/contrib/fabric/gpurdma-fabric
[ -x "$tool" ] || { echo "FAIL: $tool not built"; exit 1; }
out=$(mktemp -d "${TMPDIR:-/tmp}/gpurdma-fabric.XXXXXX")
trap 'rm -rf "$out"' EXIT
failed=0
check() {  # check NAME COMMAND...: the command must succeed
    if "${@:2}"; then echo "PASS $1"; else echo "FAIL $1"; failed=$((failed + 1)); fi
}

cluster=$src/contrib/fabric/clusters/16x8-400g.conf
# plan: two sizes, its folder made on the way (it does not exist yet).
"$tool" plan "$cluster" --size 1M,64M --out "$out/plan/out" >"$out/plan.txt" 2>&1
rc=$?
cat "$out/plan.txt"
check "plan exits 0" test $rc -eq 0
check "plan names the planner's choice for each size" \
    test "$(grep -c "gpurdma's planner (cost model from this cluster) chooses: " "$out/plan.txt")" -eq 2
# Per size: gpurdma's defaults, then 5 rail settings x 3 in-flight limits but the defaults' own.
check "plan prints 15 configurations per size" test "$(grep -cE '^\| (hier|auto/256K|ring/slice|rhd/slice|rhd/4096K) \| ' "$out/plan.txt")" -eq 30
check "plan prints gpurdma's defaults beside the best it found" \
    test "$(grep -c "^with gpurdma's defaults (.*): .* us, .* x ideal; best the model found: " "$out/plan.txt")" -eq 2
check "plan ends with one summary line per size" test "$(grep -cE '^summary: size=[0-9]+ choice=[a-z-]+ time_us=[0-9.]+ ideal_us=[0-9.]+ best=[^ ]+/[0-9]+/[0-9]+/[0-9]+ best_us=[0-9.]+ mem_per_rank_mib=[0-9.]+ pfc_pause_us=[0-9]+ order=fabric$' "$out/plan.txt")" -eq 2
check "plan made its folder and wrote the CSV" test "$(grep -c '^67108864,' "$out/plan/out/sweep.csv")" -eq 15
check "no configuration failed in the model" test "$(awk -F, 'NR > 2 && $NF != 1' "$out/plan/out/sweep.csv" | wc -l)" -eq 0
# Nodes scattered over 4 leaves: gpurdma numbers them by leaf when it knows the topology
# (Slurm's), in rank order when it does not; the summary says which.
for topology in known unknown; do
    "$tool" plan "$cluster" --size 1M --rails hier --slots 4 --set hosts_per_leaf=4 --set placement=random \
        --set topology=$topology >"$out/topology-$topology.txt" 2>&1
    check "plan with the topology $topology exits 0" test $? -eq 0
done
check "  known: nodes in fabric order" grep -q "^summary: .* order=fabric$" "$out/topology-known.txt"
check "  unknown: nodes in rank order" grep -q "^summary: .* order=rank$" "$out/topology-unknown.txt"
# The placement from a Slurm topology.conf (the file coll_gpurdma_fabric_topology reads):
# nodes n0..n7 by name, every other one under the other leaf.
printf 'SwitchName=leaf0 Nodes=n[0,2,4,6]\nSwitchName=leaf1 Nodes=n[1,3,5,7]\nSwitchName=spine Switches=leaf[0-1]\n' \
    >"$out/topology.conf"
"$tool" plan "$cluster" --size 1M --rails hier --slots 4 --set topology_file="$out/topology.conf" \
    --set hosts_per_leaf=4 --set spines=4 >"$out/topology-file.txt" 2>&1
check "plan with a topology.conf exits 0" test $? -eq 0
check "  places its 8 nodes on its 2 leaves" grep -q "^cluster: 8 nodes x .* 2 leaves of 4 nodes (placement from " \
    "$out/topology-file.txt"
check "  in fabric order" grep -q "^summary: .* order=fabric$" "$out/topology-file.txt"
"$tool" plan "$cluster" --set topology_file="$out/topology.conf" --set hosts_per_leaf=3 >"$out/bad.txt" 2>&1
check "a leaf of the file fuller than hosts_per_leaf is refused" grep -q "a leaf has more than hosts_per_leaf = 3" \
    "$out/bad.txt"
"$tool" plan "$cluster" --set topology_file="$out/none.conf" >"$out/bad.txt" 2>&1
check "an unreadable topology file is refused and named" grep -q "bad value .* for topology_file (cannot read " \
    "$out/bad.txt"
"$tool" plan "$cluster" --set topology=maybe >"$out/bad.txt" 2>&1
check "a topology other than known or unknown is refused" grep -q "bad value 'maybe' for topology" "$out/bad.txt"
touch "$out/a-file"
"$tool" plan "$cluster" --size 1M --out "$out/a-file/sub" >"$out/bad.txt" 2>&1
check "plan refuses a folder it cannot make" test $? -eq 1
check "  and says so in one line" grep -q "^gpurdma-fabric: --out .*a-file/sub: cannot create the folder" "$out/bad.txt"
# sweep: one size, every setting, a recommendation.
"$tool" sweep "$cluster" --size 16M --rails hier,ring --chunks 256K,1M --slots 2,4 >"$out/sweep.txt" 2>&1
check "sweep exits 0" test $? -eq 0
check "sweep recommends settings" grep -q "^recommended: --mca coll_gpurdma_chunk_size [0-9]* --mca coll_gpurdma_rail_slots [0-9]*" \
    "$out/sweep.txt"

"$tool" validate >"$out/validate.txt" 2>&1
check "validate exits 0" test $? -eq 0
for scenario in "fair share" "incast" "victim"; do
    check "validate reports '$scenario'" grep -qi "$scenario" "$out/validate.txt"
done

# speed: the 128-host ring (cells of 64 KiB here: 0.2 s, against 3 s at 4 KiB packets).
"$tool" speed --mtu 65536 >"$out/speed.txt" 2>&1
check "speed exits 0" test $? -eq 0
check "speed prints both topologies' rings, all 127 steps simulated" \
    test "$(grep -cE '^ring of 128 hosts, (16|32) per leaf, (16|32) spines, mtu 65536: simulated 1[0-9]{3} us in .* s, [0-9]+ events$' "$out/speed.txt")" -eq 2
"$tool" speed --mtu 10 >"$out/bad.txt" 2>&1
check "speed refuses an mtu under 64 bytes" test $? -eq 2

"$tool" plan "$cluster" --set nodes=1 >"$out/bad.txt" 2>&1
check "a bad value is refused" test $? -ne 0
check "  and named" grep -q "bad value '1' for nodes" "$out/bad.txt"
printf 'nodes = 4\nrails = 2\n' >"$out/bad.conf"
"$tool" plan "$out/bad.conf" >"$out/bad.txt" 2>&1
check "an unknown key is refused with its line" grep -q "bad.conf:2: unknown key 'rails'" "$out/bad.txt"

echo "fabric-command: $failed failed"
[ "$failed" -eq 0 ]
