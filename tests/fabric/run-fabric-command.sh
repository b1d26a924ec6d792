#!/usr/bin/env bash
# gpurdma-fabric as a user runs it: `plan` on the 16 x 8 cluster description (the table,
# the planner's choice, a recommendation, the CSV with one row per configuration),
# `validate` (the model against the DCQCN paper: every scenario row printed), `speed` (the
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
"$tool" plan "$cluster" --size 64M --out "$out" >"$out/plan.txt" 2>&1
rc=$?
cat "$out/plan.txt"
check "plan exits 0" test $rc -eq 0
check "plan names the planner's choice" grep -q "gpurdma's planner (cost model from this cluster) chooses: " "$out/plan.txt"
check "plan prints 16 configurations (4 chunks x 4 in-flight limits)" \
    test "$(grep -c '^| hier | ' "$out/plan.txt")" -eq 16
check "plan prints gpurdma's defaults" grep -q "^with gpurdma's defaults (256 KiB chunks, 4 in flight per rail peer): " \
    "$out/plan.txt"
check "plan recommends settings" grep -q "^recommended: --mca coll_gpurdma_chunk_size [0-9]* --mca coll_gpurdma_rail_slots [0-9]*" \
    "$out/plan.txt"
check "plan writes the CSV" test "$(grep -c '^hier,' "$out/sweep.csv")" -eq 16
check "no configuration failed in the model" test "$(awk -F, 'NR > 2 && $NF != 1' "$out/sweep.csv" | wc -l)" -eq 0

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
