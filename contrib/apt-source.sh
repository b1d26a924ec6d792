#!/usr/bin/env bash
# Prints this machine's Debian archive as apt uses it for its own release: "URI" or
# "URI SIGNED-BY" (the keyring named in its sources, if any). Read from the apt sources
# at run time (deb822 *.sources and one-line *.list), so that nothing here names a host.
# Used for the Debian 13 root (contrib/debian13-root.sh: debootstrap's mirror) and for the
# deb-src line contrib/setup.sh adds on Debian 13 (the source package's missing headers).
# Usage: contrib/apt-source.sh [CODENAME]   (default: this machine's VERSION_CODENAME)
set -euo pipefail
codename=${1:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
[ -n "$codename" ] || { echo "apt-source.sh: no VERSION_CODENAME in /etc/os-release" >&2; exit 1; }

# deb822: the first stanza with type deb whose Suites include the release itself.
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    found=$(awk -v want="$codename" '
        function flush() {
            # (exit still runs END, which flushes again: print once.)
            if (!done && types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") && uri != "" && enabled != "no") {
                print uri, keys; done = 1; exit
            }
            types = suites = uri = keys = enabled = ""
        }
        /^[ \t]*#/ { next }
        /^[ \t]*$/ { flush(); next }
        { key = tolower($1); sub(/:$/, "", key); $1 = "" ; sub(/^ /, "") }
        key == "types" { types = $0 }
        key == "suites" { suites = $0 }
        key == "uris" { split($0, u, " "); uri = u[1] }
        key == "signed-by" { if ($0 ~ /^\//) keys = $1 }
        key == "enabled" { enabled = tolower($1) }
        END { flush() }' "$f")
    [ -n "$found" ] && { echo "$found"; exit 0; }
done

# One-line format: deb [options] URI SUITE COMPONENTS...
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    found=$(sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk -v want="$codename" '$1 == "deb" && $3 == want { print $2; exit }')
    [ -n "$found" ] && { echo "$found"; exit 0; }
done
echo "apt-source.sh: no 'deb' source for $codename in /etc/apt/sources.list{,.d}" >&2
exit 1
