#!/usr/bin/env bash
# Installs what gpurdma needs on Debian 12 (only what is missing), then builds it.
# Usage: contrib/setup.sh [configure options...]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

packages=(build-essential autoconf automake libtool pkg-config openmpi-bin libopenmpi-dev
          libucx-dev libhwloc-dev libgtest-dev iproute2 python3 python3-matplotlib procps util-linux)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Out-of-tree build in $GPURDMA_BUILD (default build/), so other configurations
# (e.g. build-asan/ with --enable-sanitizers) can sit beside it.
build=${GPURDMA_BUILD:-$top/build}
echo "== building gpurdma in $build"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    autoreconf -fi >/dev/null
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$#" -gt 0 ] || [ "$top/configure" -nt config.status ]; then
    "$top/configure" -q "$@"
fi
make -j"$(nproc)" >/dev/null
echo "== built: $build/.libs/mca_coll_gpurdma.so (component directory: $build/component)"
