#!/usr/bin/env bash
# Installs what gpurdma needs on Debian 12 (Open MPI 4.1) or Debian 13 (Open MPI 5.0),
# only what is missing, then builds it.
# Usage: contrib/setup.sh [configure options...]
#   GPURDMA_SETUP_PLOT=1   also python3-matplotlib, for the benchmark's plot (quickstart.sh
#                          sets it; the tests do not need it, and it is 44 packages, 45 s)
#   GPURDMA_SETUP_NO_BUILD=1  install only, build nothing
#   GPURDMA_SETUP_ROCM=0   on Debian 13, do not install hipcc (no AMD GPU kernels)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

packages=(build-essential autoconf automake libtool pkg-config openmpi-bin libopenmpi-dev
          libucx-dev libhwloc-dev libgtest-dev iproute2 python3 python3-numpy python3-mpi4py procps
          util-linux gfortran hpcc xz-utils gdb)
# gdb: a test's ranks that outlive its limit print their stacks before they are killed.
if [ "${GPURDMA_SETUP_PLOT:-0}" = 1 ]; then packages+=(python3-matplotlib); fi
# The tree is formatted with Debian 12's clang-format (14); other releases format
# differently, so contrib/check-format.sh runs there only.
if [ "$(. /etc/os-release && echo "$VERSION_ID")" = 12 ]; then packages+=(clang-format); fi
# MPICH for libgpurdma_pmpi.so and its tests (tests/mpich; Open MPI stays the default
# mpicc/mpirun). Debian 12 only, to keep CI's time: the Debian 13 root skips that step.
if [ "$(. /etc/os-release && echo "$VERSION_ID")" = 12 ]; then packages+=(mpich libmpich-dev); fi
# Slurm 22.05 (slurmctld, slurmd, srun, munge; its PMIx and topology/tree plugins) for
# tests/slurm, which runs a private one-host Slurm and launches the MPI tests with
# srun --mpi=pmix. Debian 12 only, as MPICH: the Debian 13 root skips those tests.
if [ "$(. /etc/os-release && echo "$VERSION_ID")" = 12 ]; then
    packages+=(slurmd slurmctld munge slurm-wlm-basic-plugins)
fi
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
# Debian 13's HIP compiler and runtime headers (HIP 5.7), where the release has them:
# configure finds hipcc and builds the AMD GPU kernels (gfx90a, gfx942) beside CUDA's.
# Optional: without them the build is unchanged. GPURDMA_SETUP_ROCM=0: never install.
if [ "$(. /etc/os-release && echo "$VERSION_ID")" != 12 ] && [ "${GPURDMA_SETUP_ROCM:-1}" = 1 ] &&
    ! dpkg-query -W -f='${Status}' hipcc 2>/dev/null | grep -q "install ok installed"; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    [ ${#missing[@]} -gt 0 ] || $sudo apt-get update -qq
    echo "== installing: hipcc libamdhip64-dev (the AMD GPU kernels; optional)"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends hipcc libamdhip64-dev ||
        echo "== hipcc not available here: no AMD GPU kernels (the HIP runtime is still used where present)"
fi

# Debian 13's libopenmpi-dev (5.0.7) installs opal_config.h, which names headers in
# opal/mca/threads/pthreads/ (threads_pthreads_threads.h, ...), but not that directory
# (Open MPI's install list misses it). Its headers are taken, unchanged, from the source
# package of the very version installed, into Open MPI's own include directory.
ompi_inc=""
for d in $(mpicc --showme:incdirs 2>/dev/null); do [ -f "$d/opal_config.h" ] && ompi_inc=$d; done
threads_missing=0
if [ -n "$ompi_inc" ]; then
    for h in $(grep -o '"opal/mca/threads/[a-z0-9_]*/[a-z0-9_]*\.h"' "$ompi_inc/opal_config.h" | tr -d '"'); do
        [ -f "$ompi_inc/$h" ] || threads_missing=1
    done
fi
if [ "$threads_missing" = 1 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    echo "== $ompi_inc/opal/mca/threads/pthreads/ is missing (Debian's libopenmpi-dev): taking it from the openmpi source package"
    need=()
    for p in xz-utils bzip2 ca-certificates; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
    done
    [ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
    version=$(dpkg-query -W -f='${source:Version}' libopenmpi-dev)
    src=$(mktemp -d)
    bash "$top/contrib/apt-get-source.sh" "openmpi=$version" "$src" || { rm -rf "$src"; exit 1; }
    # The upstream tarball, not its detached signature (.asc) beside it.
    tarball=$(ls "$src"/openmpi_*.orig.tar.* | grep -v '\.asc$' | head -n 1)
    tar -xf "$tarball" -C "$src" --wildcards '*/opal/mca/threads/pthreads/*.h'
    $sudo install -d "$ompi_inc/opal/mca/threads/pthreads"
    $sudo install -m 644 "$src"/openmpi-*/opal/mca/threads/pthreads/*.h "$ompi_inc/opal/mca/threads/pthreads/"
    rm -rf "$src"
    echo "== installed $(ls "$ompi_inc/opal/mca/threads/pthreads" | tr '\n' ' ')"
fi

if [ "${GPURDMA_SETUP_NO_BUILD:-0}" = 1 ]; then
    echo "== installed; not building (GPURDMA_SETUP_NO_BUILD=1)"
    exit 0
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
# configure again only when its options differ from the last run's (config.status keeps
# them, quoted as below): CI's Debian 13 tree is configured while the root is prepared,
# and its test command passes the same options again.
quoted=()
for a in "$@"; do quoted+=("'${a//\'/\'\\\'\'}'"); done
if [ ! -f Makefile ] || [ ! -x config.status ] || [ "$(./config.status --config)" != "${quoted[*]}" ] ||
    [ "$top/configure" -nt config.status ]; then
    "$top/configure" -q "$@"
fi
make -j"$(nproc)" >/dev/null
echo "== built: $build/.libs/mca_coll_gpurdma.so (component directory: $build/component)"
