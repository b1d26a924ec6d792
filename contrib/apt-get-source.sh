#!/usr/bin/env bash
# Downloads a Debian source package (its .dsc, upstream tarball and Debian tarball, not
# unpacked) into DIR with apt-get source. Where apt has no deb-src line, one is added
# first, built from this machine's own apt source (contrib/apt-source.sh: nothing here
# names a host), as /etc/apt/sources.list.d/gpurdma-deb-src.sources. Needs root (or sudo)
# only for that.
# Usage: contrib/apt-get-source.sh PACKAGE[=VERSION] DIR
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
package=${1:?usage: apt-get-source.sh PACKAGE[=VERSION] DIR}
dir=${2:?usage: apt-get-source.sh PACKAGE[=VERSION] DIR}
mkdir -p "$dir"
fetch() { (cd "$dir" && apt-get source -qq --download-only "$package" >/dev/null 2>&1); }
fetch && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
if ! apt-get indextargets --no-release-info 'Created-By: Sources' 2>/dev/null | grep -q .; then
    read -r uri keyring < <(bash "$top/contrib/apt-source.sh")
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    echo "== adding deb-src $uri $codename main (/etc/apt/sources.list.d/gpurdma-deb-src.sources)"
    {
        echo "Types: deb-src"
        echo "URIs: $uri"
        echo "Suites: $codename"
        echo "Components: main"
        if [ -n "${keyring:-}" ]; then echo "Signed-By: $keyring"; fi
    } | $sudo tee /etc/apt/sources.list.d/gpurdma-deb-src.sources >/dev/null
fi
$sudo apt-get update -qq
fetch || { echo "apt-get-source.sh: apt-get source $package failed" >&2; exit 1; }
