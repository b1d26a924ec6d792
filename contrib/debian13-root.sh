#!/usr/bin/env bash
# Runs a command on Debian 13 (trixie, Open MPI 5.0.x) from this Debian machine: a
# minimal root made with debootstrap from this machine's own apt mirror, this tree
# copied into it (/gpurdma, built in /gpurdma/build-ompi5), /proc, /sys, /dev bound and
# a private /dev/shm, entered with pivot_root in a mount namespace of its own.
# Everything is unmounted and the root removed on exit, whatever happens (trap), unless
# GPURDMA_DEB13_ROOT names a root to keep between runs.
#
# Usage (as root): contrib/debian13-root.sh [COMMAND...]
#   default COMMAND: contrib/test.sh (the README's test command: installs what is
#   missing inside the root, builds, runs make check). The exit status is COMMAND's.
# Environment:
#   GPURDMA_DEB13_ROOT=DIR     keep the root in DIR (made if missing, reused if present;
#                              the tree is copied afresh, the build directory kept)
#   GPURDMA_DEB13_MIRROR=URI   Debian mirror (default: contrib/apt-source.sh's answer)
#   GPURDMA_DEB13_ENV="A=1 B"  variables passed into the root besides CI and GPURDMA_*
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "debian13-root.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }
[ $# -gt 0 ] || set -- bash contrib/test.sh

keep=${GPURDMA_DEB13_ROOT:-}
if [ -n "$keep" ]; then
    root=$keep
    mkdir -p "$root"
else
    root=$(mktemp -d /var/tmp/gpurdma-debian13.XXXXXX)
fi
root=$(cd "$root" && pwd -P)
root_id=$(stat -c %d:%i "$root")

# Everything mounted under the root, deepest first (tests inside may add their own).
mounts_under() { awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r; }
cleanup() {
    local rc=$?
    # Processes still running in the root (e.g. a daemon a test left): their root
    # directory is the root's (whatever mount namespace they are in).
    local p
    if [ -n "${root_id:-}" ]; then
        for p in /proc/[0-9]*; do
            [ "$(stat -L -c %d:%i "$p/root" 2>/dev/null)" = "$root_id" ] && kill -9 "${p#/proc/}" 2>/dev/null
        done
    fi
    local m
    for m in $(mounts_under); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
    if [ -n "$(mounts_under)" ]; then
        echo "debian13-root.sh: still mounted under $root, not removing it:" >&2
        mounts_under >&2
        [ $rc -ne 0 ] || rc=1
    elif [ -z "$keep" ]; then
        # --one-file-system: never follow into anything that is still mounted.
        rm -rf --one-file-system "$root"
    fi
    rm -f "$root.debootstrap.log"  # left if debootstrap itself was interrupted
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$SECONDS
if [ ! -x "$root/usr/bin/apt-get" ]; then
    if ! command -v debootstrap >/dev/null; then
        echo "== installing debootstrap"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    fi
    mirror=${GPURDMA_DEB13_MIRROR:-$("$top/contrib/apt-source.sh" | awk 'NR == 1 { print $1 }')}
    echo "== debootstrap trixie into $root"
    debootstrap --variant=minbase trixie "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
        { tail -20 "$root.debootstrap.log"; rm -f "$root.debootstrap.log"; exit 1; }
    rm -f "$root.debootstrap.log"
    echo "== root made in $((SECONDS - t0)) s"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Keep Debian's `hostname` answer resolvable inside (mpirun, the tests' messages).
grep -q "[[:space:]]$(hostname)\$" "$root/etc/hosts" 2>/dev/null || echo "127.0.1.1 $(hostname)" >>"$root/etc/hosts"

# The tree as a clean clone would have it (tracked and untracked, not ignored), so no
# build output of this machine's Open MPI 4.1 reaches the root.
echo "== copying the tree to $root/gpurdma"
mkdir -p "$root/gpurdma"
copy=$(mktemp -d "$root/.gpurdma-copy.XXXXXX")
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$top" && git ls-files -z -c -o --exclude-standard | while IFS= read -r -d '' f; do
        [ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -xf - -C "$copy"
else
    tar -C "$top" --exclude='./build*' -cf - . | tar -xf - -C "$copy"
fi
# A kept build directory (GPURDMA_DEB13_ROOT) rebuilds what changed since the last copy:
# tar keeps each file's own time, which can be older than the objects built from the
# previous copy, so a changed file takes the time of this copy and an unchanged one
# keeps the previous copy's.
if [ -d "$root/gpurdma/build-ompi5" ]; then
    (cd "$copy" && find . -type f -print0) | while IFS= read -r -d '' f; do
        if cmp -s "$copy/$f" "$root/gpurdma/$f"; then touch -r "$root/gpurdma/$f" "$copy/$f"; else touch "$copy/$f"; fi
    done
fi
# The build directory stays, and so do autoreconf's outputs (no tracked file among them):
# contrib/setup.sh makes them again when configure.ac or Makefile.am is newer (changed
# since the last copy, by the times above); made again unchanged they would still be
# newer than the build's config.status, and configure would run again for nothing.
for f in "$root/gpurdma"/* "$root/gpurdma"/.[!.]*; do
    [ -e "$f" ] || continue
    case ${f##*/} in
        build-ompi5) continue ;;
        configure | Makefile.in | aclocal.m4 | config.h.in | config | m4 | autom4te.cache)
            [ -e "$copy/${f##*/}" ] || continue ;;  # unless the copy brings its own (a tarball's tree)
    esac
    rm -rf "$f"
done
find "$copy" -mindepth 1 -maxdepth 1 -exec mv -t "$root/gpurdma" {} +
rmdir "$copy"

# Network namespaces are the kernel's, not the root's: the root's cluster tests take their
# own cluster id (names, subnet) so that they never meet a run on the host.
env_in=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
        TERM="${TERM:-dumb}" GPURDMA_BUILD=/gpurdma/build-ompi5 GPURDMA_CLUSTER_ID=13)
[ -n "${CI:-}" ] && env_in+=(CI="$CI")
while IFS='=' read -r name _; do
    case $name in GPURDMA_DEB13_*|GPURDMA_BUILD|GPURDMA_CLUSTER_ID) ;; GPURDMA_*) env_in+=("$name=${!name}") ;; esac
done < <(env)
for v in ${GPURDMA_DEB13_ENV:-}; do env_in+=("$v"); done
echo "== in the Debian 13 root: $*"
# The mounts are made in a mount namespace of their own (propagation private): none can
# reach the host's /dev or /dev/shm, and all of them go when it ends. Its own trap
# unmounts them in order as well.
set +e
unshare --mount --propagation private -- /bin/bash -c '
    root=$1; shift
    at=$root
    umount_all() {
        for m in dev/shm dev/pts dev sys proc run tmp; do
            umount "$at/$m" 2>/dev/null || umount -l "$at/$m" 2>/dev/null
        done
    }
    trap umount_all EXIT
    set -e
    # The root on itself, so that it is a mount point pivot_root can take.
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --bind /sys "$root/sys"
    mount --bind /dev "$root/dev"
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" || true
    # A private /dev/shm: shared-memory names inside never meet the host ones.
    mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
    mount -t tmpfs -o mode=755 tmpfs "$root/run"
    mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
    # pivot_root, not chroot: the root becomes this namespace'"'"'s "/", so the tests'"'"' own
    # namespaces (unshare -m, nsenter --mount into the namespace cluster) stay inside it.
    cd "$root"
    mkdir -p .host-root
    pivot_root . .host-root
    cd /
    umount -l /.host-root
    rmdir /.host-root
    at=""
    set +e
    /usr/bin/env -i "$@" </dev/null
' debian13-root "$root" "${env_in[@]}" /bin/bash -c 'cd /gpurdma && exec "$@"' bash "$@"
rc=$?
set -e
echo "== Debian 13 root: exit $rc after $((SECONDS - t0)) s"
exit $rc
