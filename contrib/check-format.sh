#!/usr/bin/env bash
# Holds the C and C++ sources to .clang-format. Run by `make check`.
# Formatting differs between clang-format releases: the tree follows the release the
# style was written with (14, Debian 12's); another release skips (77) and says so.
set -u
top=${GPURDMA_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 1
want=14
if ! command -v clang-format >/dev/null 2>&1; then
    echo "SKIP check-format: clang-format is not installed (contrib/setup.sh installs it on Debian 12)"
    exit 77
fi
have=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$have" != "$want" ]; then
    echo "SKIP check-format: clang-format $have here; the tree is formatted with clang-format $want"
    exit 77
fi
mapfile -t files < <(git ls-files 'src/*.h' 'src/*.cpp' 'src/*.cu' 'mca/*.c' 'mca/*.h' 'include/*.h' \
    'pmpi/*.c' 'pmpi/*.h' 'mpi-common/*.h' \
    'tests/unit/*.cpp' 'tests/support/*.h' 'tests/support/*.cpp' 'tests/gpu/*.cpp' 'tests/fuzz/*.cpp' 2>/dev/null ||
    find src mca include pmpi mpi-common tests/unit tests/support tests/gpu tests/fuzz -name '*.[ch]' -o -name '*.cpp' -o -name '*.cu')
# One clang-format per file, as many at once as there are cores (CI's wall time).
mapfile -t differ < <(printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 8 sh -c \
    'for f; do clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || echo "$f"; done' sh | sort)
bad=${#differ[@]}
for f in "${differ[@]}"; do echo "not formatted: $f (clang-format -i $f)"; done
if [ "$bad" -gt 0 ]; then
    echo "check-format: $bad of ${#files[@]} files differ from .clang-format"
    exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format (clang-format $have)"
