#!/usr/bin/env bash
# Fails if the host reduction code contains a fused multiply-add (or any other
# instruction that rounds a product and a sum once): such a result differs in the
# last bit from Open MPI's own op, numpy and our other kernel variants, so the
# reduction must never contain one (src/reduce/kernel_loops.h). Compiler flags
# alone do not guarantee it: GCC 12 fuses vectorised complex products even with
# -ffp-contract=off. Run by `make check`.
#
# Usage: contrib/check-no-fma.sh [OBJECT|ARCHIVE|LIBRARY ...]
#   default: $GPURDMA_BUILDDIR/.libs/libgpurdma_reduce.a (every host reduction kernel)
set -u
build=${GPURDMA_BUILDDIR:-.}
if [ $# -eq 0 ]; then
    set -- "$build/.libs/libgpurdma_reduce.a"
fi
command -v objdump >/dev/null || { echo "SKIP: objdump not found (binutils)"; exit 77; }

# Mnemonics that fuse a multiply with an add, per architecture.
case "$(uname -m)" in
    x86_64|i?86)
        # FMA3/FMA4 (vfmadd*, vfmsub*, vfnmadd*, vfnmsub*, vfmaddsub*, vfmsubadd*) and the
        # AVX512-FP16 complex forms (vfmaddc*, vfcmaddc*, vfmulc*, vfcmulc*).
        fused='^v(fn?m(add|sub)|fc?(madd|mul)c)'
        canary='vfmaddsub231pd %zmm1,%zmm2,%zmm0' ;;
    aarch64)
        fused='^(fn?madd|fn?msub|fmla|fmls|fcmla|bfmla)'
        canary='fmadd d0, d1, d2, d3' ;;
    *)
        echo "SKIP: no list of fused instructions for $(uname -m)"; exit 77 ;;
esac

# Prints "symbol<TAB>mnemonic" for every fused instruction in objdump's listing, and
# on the last line "scanned N functions".
scan() {
    objdump -d -C --no-show-raw-insn "$1" | awk -F'\t' -v re="$fused" '
        /^[0-9a-f]+ <.*>:$/ { sym = $0; sub(/^[0-9a-f]+ </, "", sym); sub(/>:$/, "", sym); ++funcs; next }
        /^ *[0-9a-f]+:\t/ {
            insn = $2; sub(/[ \t].*/, "", insn)
            if (insn ~ re) print sym "\t" insn
        }
        END { print "scanned " funcs + 0 " functions" }'
}

# The check must be able to fail: assemble one fused instruction and find it.
if command -v as >/dev/null; then
    tmp=$(mktemp -d) || exit 1
    trap 'rm -rf "$tmp"' EXIT
    printf '.text\n.globl canary\ncanary:\n\t%s\n\tret\n' "$canary" > "$tmp/canary.s"
    if as -o "$tmp/canary.o" "$tmp/canary.s" 2>/dev/null; then
        if ! scan "$tmp/canary.o" | grep -q "^canary	"; then
            echo "FAIL: the check does not see '$canary' in objdump's listing (parser out of date)"
            exit 1
        fi
    fi
fi

status=0
# The AMD code objects hipcc built (src/reduce/reduce_kernels.hipfb), where it did and
# LLVM's tools are here (hipcc's own: clang-offload-bundler, llvm-objdump): each target's
# kernels must contain no floating-point multiply-add (clang contracts by default for
# HIP; Makefile.am builds with -ffp-contract=off). Integer ones (v_mad_u64_u32) are exact.
amd_fused='^v_(pk_)?(fmac?|mac|mad|fma_mix|dot[0-9]*)[a-z0-9_]*_f(16|32|64)'
scan_amd() {  # FILE MCPU: like scan, from llvm-objdump's listing
    "$objdump_amd" -d --mcpu="$2" "$1" | awk -v re="$amd_fused" '
        /^[0-9a-f]+ <.*>:$/ { sym = $2; gsub(/[<>:]/, "", sym); ++funcs; next }
        /^[ \t]+v_/ { insn = $1; if (insn ~ re) print sym "\t" insn }
        END { print "scanned " funcs + 0 " functions" }'
}
hipfb=$build/src/reduce/reduce_kernels.hipfb
if [ "$#" -eq 1 ] && [ "$1" = "$build/.libs/libgpurdma_reduce.a" ] && [ -f "$hipfb" ]; then
    llvm_bin=$(ls -d /usr/lib/llvm-*/bin /opt/rocm/llvm/bin 2>/dev/null | sort -V | tail -n 1)
    bundler=$(PATH=$PATH:$llvm_bin command -v clang-offload-bundler || ls /usr/bin/clang-offload-bundler-* 2>/dev/null | head -n 1)
    objdump_amd=$(PATH=$PATH:$llvm_bin command -v llvm-objdump || true)
    if [ -z "$bundler" ] || [ -z "$objdump_amd" ]; then
        echo "note: AMD code objects not checked (no clang-offload-bundler or llvm-objdump)"
    else
        tmp_amd=$(mktemp -d)
        # The check must be able to fail: one fused instruction, assembled, is seen.
        if PATH=$PATH:$llvm_bin command -v llvm-mc >/dev/null &&
            printf '\t.text\ncanary:\n\tv_fma_f32 v0, v1, v2, v3\n' |
            PATH=$PATH:$llvm_bin llvm-mc -triple=amdgcn-amd-amdhsa -mcpu=gfx90a -filetype=obj -o "$tmp_amd/canary.o" 2>/dev/null &&
            ! scan_amd "$tmp_amd/canary.o" gfx90a | grep -q 'v_fma_f32'; then
            echo "FAIL: the check does not see v_fma_f32 in llvm-objdump's listing (parser out of date)"
            status=1
        fi
        for target in $(PATH=$PATH:$llvm_bin "$bundler" --list --type=o --input="$hipfb" | grep amdgcn); do
            mcpu=${target##*--}
            out="$tmp_amd/$mcpu.co"
            if ! PATH=$PATH:$llvm_bin "$bundler" --unbundle --type=o --input="$hipfb" --targets="$target" --output="$out"; then
                echo "FAIL: could not unbundle $target from $hipfb"; status=1; continue
            fi
            res=$(scan_amd "$out" "$mcpu")
            summary=$(printf '%s\n' "$res" | tail -n 1)
            hits=$(printf '%s\n' "$res" | sed '$d')
            if [ "$summary" = "scanned 0 functions" ]; then
                echo "FAIL: no code found in $hipfb's $mcpu code object"; status=1
            elif [ -n "$hits" ]; then
                echo "FAIL: fused multiply-add in $hipfb's $mcpu kernels:"
                printf '%s\n' "$hits" | sort | uniq -c | sort -rn | sed 's/^ */  /; s/\t/: /' | head -n 20
                status=1
            else
                echo "ok: $hipfb ($mcpu): $summary, no floating-point multiply-add"
            fi
        done
        rm -rf "$tmp_amd"
    fi
fi
for f in "$@"; do
    [ -f "$f" ] || { echo "FAIL: $f not found (build first: make)"; status=1; continue; }
    out=$(scan "$f") || { echo "FAIL: objdump could not read $f"; status=1; continue; }
    summary=$(printf '%s\n' "$out" | tail -n 1)
    hits=$(printf '%s\n' "$out" | sed '$d')
    case "$summary" in
        "scanned 0 functions") echo "FAIL: no code found in $f"; status=1; continue ;;
    esac
    if [ -n "$hits" ]; then
        echo "FAIL: fused multiply-add in the reduction code of $f:"
        printf '%s\n' "$hits" | sort | uniq -c | sort -rn | sed 's/^ */  /; s/\t/: /' | head -n 40
        echo "  ($(printf '%s\n' "$hits" | wc -l) instructions in $(printf '%s\n' "$hits" | cut -f1 | sort -u | wc -l) functions)"
        status=1
    else
        echo "ok: $f: $summary, no fused multiply-add"
    fi
done
exit $status
