#!/usr/bin/env bash
# The GPU check, in two halves:
#   contrib/gpu-check.sh --bundle DIR   here (build machine): builds the MPI-free launcher
#                                       and device_check, copies them, the component and
#                                       the shared libraries they need (ldd, glibc
#                                       excepted) into DIR (at most 64 MiB).
#   contrib/gpu-check.sh --run DIR      on a bare CUDA machine (driver, no MPI, no UCX, no
#                                       compiler), or an AMD one (ROCm's libamdhip64; the
#                                       same checks through HIP, with a bundle built
#                                       where configure found hipcc: Debian 13, or
#                                       --with-rocm): host mode, then the kernels against
#                                       the host reduction (tests/gpu/kernel_check: every
#                                       op x type, 1-16 sources, misaligned, five grids),
#                                       then device buffers on GPU 0
#                                       shared by 2 and 4 processes: every op x type
#                                       against a host reference, SUM float/int32 at
#                                       every power-of-4 size from 4 B to 256 MiB, bus
#                                       bandwidth beside cuMemcpyDtoD's and page-locked
#                                       host<->device copies'; np 4 from 8 B
#                                       to 1 MiB on the device path, then staged (the
#                                       crossover for coll_gpurdma_device_stage_max), and
#                                       again under MPS where the machine has it; then
#                                       reduce-scatter, allgather, bcast and reduce on
#                                       device buffers (one node, 2 logical nodes); then the
#                                       hierarchical device path with 2 logical nodes
#                                       on the one GPU (np 2 and 4): the same checks,
#                                       bus bandwidth, and rank 0's per-stage times
#                                       (node RS+D2H, inter-node, H2D, node AG), with
#                                       the rail stage where auto puts it (verbose 1
#                                       prints its estimate of both modes from this
#                                       GPU's copy rates and step cost), then on the
#                                       GPU and on the host (coll_gpurdma_rail_reduce
#                                       device, host; np 4): the estimate beside the
#                                       two modes' times;
#                                       then tests/mpi/device_check under mpirun
#                                       at 2 logical nodes (np 4), with the Open MPI
#                                       4.x of the build that the bundle carries
#                                       (relocated), else the machine's if it is the
#                                       same version. Every step's timeout
#                                       is cut to what is left of 400 s, so the whole
#                                       run ends within 7 minutes; a failed step is
#                                       reported and the next one runs.
#   --run DIR --host-only               only the host mode (any machine).
# Environment: GPURDMA_BUILD (build tree for --bundle; default build-gpu, else build).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
dir=${2:-}
[ -n "$mode" ] && [ -n "$dir" ] || { sed -n '2,44p' "$0"; exit 2; }

# --bundle: the build's own Open MPI 4.x (mpirun, orted, libraries, components, help
# files, and the PMIx and UCX modules they load), relocated under $dir/ompi with
# OPAL_PREFIX at run time, so that device_check runs under mpirun on a machine without
# Open MPI. Open MPI 5 (prterun) is not bundled: the --run step then needs the machine's.
# Adds its binaries and components to deps (their libraries are copied with the rest).
bundle_open_mpi() {
    local prefix libdir pkglibdir pkgdatadir runner version
    version=$(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p')
    case $version in 4.*) ;; *) echo "note: Open MPI ${version:-not found}: not bundled"; return 0 ;; esac
    path() { ompi_info --parsable --path "$1" | sed "s/^path:$1://"; }
    prefix=$(path prefix); libdir=$(path libdir); pkglibdir=$(path pkglibdir); pkgdatadir=$(path pkgdatadir)
    runner=$(readlink -f "$(command -v mpirun)")
    case $libdir/$pkglibdir/$pkgdatadir in "$prefix"/*) ;; *) echo "note: Open MPI's paths are not under $prefix: not bundled"; return 0 ;; esac
    local o=$dir/ompi
    mkdir -p "$o/bin" "$o${libdir#"$prefix"}" "$o${pkgdatadir#"$prefix"}" "$o/pmix" "$o/ucx"
    cp -L "$runner" "$o/bin/mpirun"
    cp -L "$(dirname "$runner")/orted" "$o/bin/orted"
    cp -rL "$libdir/." "$o${libdir#"$prefix"}/"
    rm -rf "$o${libdir#"$prefix"}/pkgconfig" "$o${pkglibdir#"$prefix"}"/*java* "$o${libdir#"$prefix"}"/*.a
    cp -rL "$pkgdatadir/." "$o${pkgdatadir#"$prefix"}/"
    # PMIx and UCX load modules of their own, from where they were installed.
    local pmix ucs
    pmix=$(ldd "$pkglibdir"/mca_pmix_*.so 2>/dev/null | awk '/libpmix\.so/{print $3; exit}')
    [ -n "$pmix" ] && pmix=$(readlink -f "$pmix")
    [ -n "$pmix" ] && [ -d "$(dirname "$pmix")/pmix" ] && cp -rL "$(dirname "$pmix")/pmix/." "$o/pmix/"
    ucs=$(ldd "$build/component/mca_coll_gpurdma.so" | awk '/libucs\.so/{print $3; exit}')
    [ -n "$ucs" ] && ucs=$(readlink -f "$ucs")
    [ -n "$ucs" ] && [ -d "$(dirname "$ucs")/ucx" ] && cp -L "$(dirname "$ucs")"/ucx/*.so* "$o/ucx/"
    printf '%s\n' "${pkglibdir#"$prefix"}" > "$o/PKGLIBDIR"
    deps+=("$o/bin/mpirun" "$o/bin/orted")
    while IFS= read -r -d '' f; do deps+=("$f"); done < <(find "$o" -name '*.so*' -type f -print0)
}

case "$mode" in
--bundle)
    build=${GPURDMA_BUILD:-}
    if [ -z "$build" ]; then
        build=$top/build-gpu
        [ -f "$build/Makefile" ] || build=$top/build
    fi
    [ -f "$build/Makefile" ] || { echo "no configured build in $build (run contrib/setup.sh)"; exit 1; }
    make -C "$build" -j2 tests/gpu/gpu_launcher tests/gpu/kernel_check tests/mpi/device_check tests/mpi/device_colls_check >/dev/null
    grep -q '^#define GPURDMA_HAVE_CUDA 1' "$build/config.h" ||
        echo "warning: $build was configured without CUDA: the bundle has no NVIDIA GPU kernels (device mode stages there)"
    grep -q '^#define GPURDMA_HAVE_ROCM 1' "$build/config.h" ||
        echo "note: $build was configured without hipcc: the bundle has no AMD GPU kernels (device mode stages there)"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$build/tests/gpu/gpu_launcher" "$build/tests/gpu/kernel_check" "$build/tests/mpi/device_check" \
        "$build/tests/mpi/device_colls_check" "$dir/"
    mkdir -p "$dir/component"
    cp -L "$build/component/mca_coll_gpurdma.so" "$dir/component/"
    strip --strip-debug "$dir/gpu_launcher" "$dir/kernel_check" "$dir/device_check" "$dir/device_colls_check" \
        "$dir/component/mca_coll_gpurdma.so" \
        2>/dev/null || true
    mpirun --version 2>/dev/null | head -n 1 > "$dir/OMPI_VERSION"
    deps=("$build/tests/gpu/gpu_launcher" "$build/tests/gpu/kernel_check" "$build/tests/mpi/device_check"
          "$build/tests/mpi/device_colls_check"
          "$build/component/mca_coll_gpurdma.so")
    bundle_open_mpi
    # Everything ldd resolves except glibc itself (the target's own glibc runs it).
    ldd "${deps[@]}" 2>/dev/null | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
        case "$(basename "$lib")" in
        libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) continue ;;
        esac
        [ -e "$dir/$(basename "$lib")" ] || cp -L "$lib" "$dir/"
    done
    cp "$0" "$dir/gpu-check.sh"
    (cd "$top" && git rev-parse --short HEAD 2>/dev/null || echo unknown) > "$dir/REVISION"
    kib=$(du -sk "$dir" | cut -f1)
    echo "bundle $dir: $(ls "$dir" | wc -l) files, $((kib / 1024)) MiB ($kib KiB)"
    [ "$kib" -le $((64 * 1024)) ] || { echo "FAIL: bundle over 64 MiB"; exit 1; }
    ;;
--run)
    dir=$(cd "$dir" && pwd)
    export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    launcher=$dir/gpu_launcher
    start=$(date +%s)
    # A step's time limit: its own cap, or what is left of the run's 400 s if less.
    limit() {
        local left=$((start + 400 - $(date +%s)))
        [ "$left" -ge 10 ] || { echo "FAIL: out of the run's 400 s before: $2" >&2; exit 1; }
        echo $(($1 < left ? $1 : left))
    }
    # A failed step is reported and the run goes on to the next (one run on a lent GPU
    # must tell as much as it can); the run fails at the end if any step did.
    failed=()
    # step NAME CAP CMD...: CMD under timeout, its failure recorded.
    step() {
        local name=$1 cap=$2 t rc=0
        shift 2
        t=$(limit "$cap" "$name")
        timeout "$t" "$@" || rc=$?
        if [ "$rc" -ne 0 ]; then
            echo "FAIL: $name (exit $rc$([ "$rc" -eq 124 ] && echo ", over its $t s"))"
            failed+=("$name")
        fi
        return 0
    }
    echo "== bundle revision $(cat "$dir/REVISION" 2>/dev/null || echo '?'); $(nproc) cores"
    echo "== host buffers (launcher + bootstrap + core, no MPI)"
    step "host buffers" 60 "$launcher" --mode host --np 2,4 --max-bytes 1048576 --limit 28
    if [ "${3:-}" = "--host-only" ]; then
        [ ${#failed[@]} -eq 0 ] || exit 1
        echo "PASS (host mode only)"
        exit 0
    fi
    if ! probe=$("$launcher" --mode probe); then
        echo "FAIL: no usable GPU runtime (CUDA driver, else HIP) and GPU here: $probe"
        exit 1
    fi
    echo "== the kernels against the host reduction on GPU 0 ($probe)"
    step "kernel_check" 60 "$dir/kernel_check"
    gpu_name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 ||
        rocm-smi --showproductname 2>/dev/null | grep -m1 -i 'card series' || echo n/a)
    echo "== device buffers on GPU 0 ($probe); GPU: ${gpu_name:-n/a}"
    step "one-node device path" 150 "$launcher" --mode device --np 2,4 --max-bytes $((256 << 20)) --expect-device --stage-max 0 --bench \
        --verbose 1 --limit 70
    # coll_gpurdma_device_stage_max's crossover: the same sizes on the device path, then staged.
    echo "== small messages on one node (np 4): the device path at every size, then staged through host memory"
    # small NAME LAUNCHER-ARGS...: the bench lines only (and any failure).
    small() {
        local name=$1 rc=0 t log
        shift
        log=$(mktemp)
        t=$(limit 30 "$name")
        timeout "$t" "$launcher" --mode device --np 4 --max-bytes $((1 << 20)) --bench --bench-min 8 --limit 15 "$@" \
            >"$log" 2>&1 || rc=$?
        grep -E '^  np |^rank|FAIL|rror' "$log" || true
        rm -f "$log"
        if [ "$rc" -ne 0 ]; then
            echo "FAIL: $name (exit $rc$([ "$rc" -eq 124 ] && echo ", over its $t s"))"
            failed+=("$name")
        fi
    }
    small "small messages, device path" --stage-max 0
    small "small messages, staged" --stage-max $((1 << 20))
    # Processes sharing one GPU without MPS take turns on it in time slices (a floor of
    # 0.3-1.1 ms a call on an H200): the same two runs under MPS, where the machine has
    # it, give per-call times closer to a GPU per rank's.
    if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
        CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)
        export CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        if nvidia-cuda-mps-control -d; then
            echo "== the same under MPS (one GPU shared without time slices)"
            small "small messages, device path, MPS" --stage-max 0
            small "small messages, staged, MPS" --stage-max $((1 << 20))
            echo quit | nvidia-cuda-mps-control || true
            sleep 1
        else
            echo "SKIP: MPS did not start"
        fi
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    else
        echo "SKIP: no nvidia-cuda-mps-control here (the small-message times above include time slicing)"
    fi
    echo "== reduce-scatter, allgather, bcast and reduce on GPU buffers (np 2,3,4 one node; np 4 at 2 logical nodes, an allreduce on the device path after each)"
    step "the other collectives, one node, on the GPUs at every size" 40 "$launcher" --mode device --colls --np 2,3,4 \
        --stage-max 0 --expect-device --max-bytes $((1 << 20)) --limit 30
    step "the other collectives, one node, small ones staged" 40 "$launcher" --mode device --colls --np 4 \
        --expect-device --max-bytes $((1 << 20)) --limit 30
    step "the other collectives, 2 logical nodes (node stage on the GPUs, rail from page-locked copies)" 40 \
        "$launcher" --mode device --colls --np 4 --logical-nodes 2 --interleave --stage-max 0 --max-bytes $((1 << 20)) \
        --limit 30
    step "the other collectives, 3+1+2 logical nodes, on the GPUs" 40 "$launcher" --mode device --colls --np 6 \
        --logical-nodes 3,1,2 --stage-max 0 --expect-device --max-bytes $((1 << 20)) --limit 30
    # hierarchical NAME CAP LAUNCHER-ARGS...: the hierarchical device path at 2 logical
    # nodes with verbose 2: everything but the per-call stage lines, then rank 0's last
    # call of each size from 1 MiB.
    hierarchical() {
        local name=$1 cap=$2 log rc=0 t
        shift 2
        log=$(mktemp)
        t=$(limit "$cap" "$name")
        timeout "$t" "$launcher" --mode device --logical-nodes 2 --algorithm hier \
            --expect-device --bench --verbose 2 "$@" >"$log" 2>&1 || rc=$?
        grep -v -e ' on GPU buffers across nodes ' -e '^gpurdma: [^:]*: allreduce [0-9]* x ' "$log" || true
        echo "-- rank 0, per-stage times of the last call of each size from 1 MiB (ms, summed over units):"
        grep ' rank 0 allreduce .* on GPU buffers across nodes ' "$log" |
            awk '{ for (i = 1; i < NF; i++) if ($i == "allreduce") n = $(i + 1); if (n + 0 >= 262144) last[n] = $0 }
                 END { for (n in last) print n "\t" last[n] }' | sort -n | cut -f2- || true
        rm -f "$log"
        if [ "$rc" -ne 0 ]; then
            echo "FAIL: $name (exit $rc$([ "$rc" -eq 124 ] && echo ", over its $t s"))"
            failed+=("$name")
        fi
    }
    echo "== hierarchical device path: 2 logical nodes on GPU 0 (np 2: 1+1, np 4: 2+2), the rail as auto picks it"
    hierarchical "hierarchical device path" 100 --np 2,4 --max-bytes $((64 << 20)) --limit 50
    echo "== the same, np 4, the rail on the GPU (coll_gpurdma_rail_reduce device: arrivals reduced by the kernel)"
    hierarchical "hierarchical device path, rail on the GPU" 45 --np 4 --rail-reduce device --max-bytes $((16 << 20)) \
        --limit 35
    echo "== the same, np 4, the rail on the host (coll_gpurdma_rail_reduce host: chunks staged, the CPU reducing)"
    hierarchical "hierarchical device path, rail on the host" 35 --np 4 --rail-reduce host --max-bytes $((16 << 20)) \
        --limit 25
    echo "== GPU buffers under mpirun: device_check at 2 logical nodes on GPU 0 (np 4: 2+2), every op x type"
    want=$(cat "$dir/OMPI_VERSION" 2>/dev/null || true)
    have=$(mpirun --version 2>/dev/null | head -n 1 || true)
    if [ -x "$dir/ompi/bin/mpirun" ]; then
        # The bundled Open MPI, relocated (single node: no ssh needed).
        o=$dir/ompi
        OPAL_PREFIX=$o PATH=$o/bin:$PATH OMPI_MCA_plm=isolated PMIX_MCA_mca_base_component_path=$o/pmix \
            UCX_MODULE_DIR=$o/ucx OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            OMPI_MCA_mca_base_component_path="$o$(cat "$o/PKGLIBDIR"):$dir/component" \
            step "device_check under the bundled mpirun" 60 "$o/bin/mpirun" --oversubscribe --bind-to none -np 4 \
            --mca pml ob1 --mca btl self,vader --mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 1 \
            --mca coll_gpurdma_logical_nodes 2 --mca coll_gpurdma_timeout 30 "$dir/device_check" \
            --max-bytes $((16 << 20)) --expect-device
        OPAL_PREFIX=$o PATH=$o/bin:$PATH OMPI_MCA_plm=isolated PMIX_MCA_mca_base_component_path=$o/pmix \
            UCX_MODULE_DIR=$o/ucx OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            OMPI_MCA_mca_base_component_path="$o$(cat "$o/PKGLIBDIR"):$dir/component" \
            step "device_colls_check under the bundled mpirun (one node, np 4)" 60 "$o/bin/mpirun" --oversubscribe \
            --bind-to none -np 4 --mca pml ob1 --mca btl self,vader --mca coll_gpurdma_priority 100 \
            --mca coll_gpurdma_verbose 1 --mca coll_gpurdma_device_stage_max 0 --mca coll_gpurdma_timeout 30 \
            "$dir/device_colls_check" --max-bytes $((16 << 20)) --expect-device
    elif [ -z "$have" ]; then
        echo "SKIP: no mpirun here, and the bundle carries none (built with Open MPI 5; this step needs ${want:-the Open MPI of the build})"
    elif [ "$have" != "$want" ]; then
        echo "SKIP: '$have' here; the bundle's component is built for '$want'"
    else
        pkglibdir=$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            OMPI_MCA_mca_base_component_path="$pkglibdir:$dir/component" \
            step "device_check under mpirun" 60 mpirun --oversubscribe --bind-to none -np 4 --mca pml ob1 --mca btl self,vader \
            --mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 1 --mca coll_gpurdma_logical_nodes 2 \
            --mca coll_gpurdma_timeout 30 "$dir/device_check" --max-bytes $((16 << 20)) --expect-device
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            OMPI_MCA_mca_base_component_path="$pkglibdir:$dir/component" \
            step "device_colls_check under mpirun (one node, np 4)" 60 mpirun --oversubscribe --bind-to none -np 4 \
            --mca pml ob1 --mca btl self,vader --mca coll_gpurdma_priority 100 --mca coll_gpurdma_verbose 1 \
            --mca coll_gpurdma_device_stage_max 0 --mca coll_gpurdma_timeout 30 "$dir/device_colls_check" \
            --max-bytes $((16 << 20)) --expect-device
    fi
    if [ ${#failed[@]} -gt 0 ]; then
        echo "FAIL ($(( $(date +%s) - start )) s): ${#failed[@]} step(s): $(printf '%s; ' "${failed[@]}")"
        exit 1
    fi
    echo "PASS ($(( $(date +%s) - start )) s)"
    ;;
*)
    sed -n '2,44p' "$0"
    exit 2
    ;;
esac
