#!/usr/bin/env bash
# The kernels the built component carries (src/gpu/fatbin_blob.cpp embeds them): each
# image is read back out of .libs/mca_coll_gpurdma.so (between its _begin and _end
# symbols), its targets listed, and every kernel the host build has (the stand-in's
# gpurdma_rs_<op>_<type> entries, built from the same source) looked up by name in each
# GPU code object:
#   nvcc's fatbin (where configure found nvcc): an ELF per SASS target, the PTX;
#   hipcc's clang offload bundle (where configure found hipcc): a code object per AMD target.
# An image configure promised (config.h) and the component lacks, a target without
# code, or a kernel missing from a code object fails it. Needs python3 and binutils.
set -u
build=${GPURDMA_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
so=$build/.libs/mca_coll_gpurdma.so
stand_in=$build/tests/gpu/fake/libcuda.so.1
for f in "$so" "$stand_in" "$build/config.h"; do
    [ -f "$f" ] || { echo "FAIL: $f not built (make check builds it)"; exit 1; }
done
command -v python3 >/dev/null && command -v nm >/dev/null && command -v readelf >/dev/null ||
    { echo "SKIP: needs python3, nm and readelf"; exit 77; }
want_cuda=0 want_hip=0
grep -q '^#define GPURDMA_HAVE_CUDA 1' "$build/config.h" && want_cuda=1
grep -q '^#define GPURDMA_HAVE_ROCM 1' "$build/config.h" && want_hip=1
if [ $want_cuda = 0 ] && [ $want_hip = 0 ]; then
    echo "SKIP: built with neither nvcc nor hipcc (no kernels embedded)"
    exit 77
fi
python3 - "$so" "$want_cuda" "$want_hip" \
    "$(nm "$so" | grep -E ' gpurdma_(fatbin|hip_code)_(begin|end)$')" \
    "$(readelf -lW "$so" | awk '$1 == "LOAD" { print $2, $3, $5 }')" \
    "$(nm -D "$stand_in" | grep -oE 'gpurdma_rs_[0-9]+_[0-9]+$' | sort -u)" <<'PY'
import re, struct, sys
so, want_cuda, want_hip, syms, loads, names = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", sys.argv[4], sys.argv[5], sys.argv[6]
data = open(so, "rb").read()
addr = {l.split()[2]: int(l.split()[0], 16) for l in syms.splitlines() if l.strip()}
segments = [tuple(int(x, 16) for x in l.split()) for l in loads.splitlines() if l.strip()]
kernels = set(names.split())
failed = False

def image(name):
    if name + "_begin" not in addr:
        return None
    begin, end = addr[name + "_begin"], addr[name + "_end"]
    for off, vaddr, filesz in segments:
        if vaddr <= begin and end <= vaddr + filesz:
            return data[begin - vaddr + off:end - vaddr + off]
    return None

def names_in(blob):
    return set(m.decode() for m in re.findall(rb"gpurdma_rs_[0-9]+_[0-9]+(?=\0)", blob))

def check(label, blob, need_all):
    global failed
    found = names_in(blob) & kernels
    ok = not need_all or found == kernels
    print(f"  {label}: {len(blob)} bytes, {len(found)} of {len(kernels)} kernels" + ("" if ok else " (FAIL)"))
    if not ok:
        failed = True
        print("    missing: " + " ".join(sorted(kernels - found)[:8]) + (" ..." if len(kernels - found) > 8 else ""))

print(f"{len(kernels)} kernels in the host build (the stand-in's entries)")
fat = image("gpurdma_fatbin")
if want_cuda and not fat:
    print("FAIL: configure found nvcc, the component embeds no fatbin"); failed = True
elif fat:
    magic, _, header, body = struct.unpack_from("<IHHQ", fat, 0)
    print(f"CUDA fatbin, {len(fat)} bytes (magic {magic:#x}):")
    if magic != 0xBA55ED50:
        print("FAIL: not a fatbin"); failed = True
    at = header
    while at < header + body:
        kind, _, entry_header, padded = struct.unpack_from("<HHIQ", fat, at)
        sm = struct.unpack_from("<I", fat, at + 28)[0]
        payload = fat[at + entry_header:at + entry_header + padded]
        if kind == 2:
            check(f"sm_{sm} SASS (ELF)", payload, True)
        else:
            print(f"  compute_{sm} PTX: {len(payload)} bytes")
        at += entry_header + padded
hip = image("gpurdma_hip_code")
if want_hip and not hip:
    print("FAIL: configure found hipcc, the component embeds no AMD code objects"); failed = True
elif hip:
    print(f"AMD code objects (clang offload bundle), {len(hip)} bytes:")
    if not hip.startswith(b"__CLANG_OFFLOAD_BUNDLE__"):
        print("FAIL: not a clang offload bundle"); failed = True
    else:
        count = struct.unpack_from("<Q", hip, 24)[0]
        at, targets = 32, []
        for _ in range(count):
            off, size, tlen = struct.unpack_from("<QQQ", hip, at)
            triple = hip[at + 24:at + 24 + tlen].decode()
            at += 24 + tlen
            if "amdgcn" in triple:
                targets.append(triple.rsplit("-", 1)[-1])
                check(triple, hip[off:off + size], True)
            else:
                print(f"  {triple}: {size} bytes (host entry)")
        for need in ("gfx90a", "gfx942"):
            if need not in targets:
                print(f"FAIL: no {need} code object"); failed = True
print("FAIL" if failed else "PASS")
sys.exit(1 if failed else 0)
PY
