#!/usr/bin/env bash
# make check: README.md's parameter table against the core's parameter table
# (contrib/param-table prints it): every parameter listed once with its default, none
# that does not exist. Then, if ompi_info can load the built component, that it
# registers every row of the table with the table's help text and default.
# Exit 0 pass, 1 fail, 77 skip (automake's code).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${GPURDMA_SRCDIR:-$(cd "$here/.." && pwd)}
build=${GPURDMA_BUILDDIR:-$src/build}
readme=$src/README.md
table_prog=$build/contrib/param-table

[ -x "$table_prog" ] || { echo "SKIP: $table_prog not built"; exit 77; }
[ -f "$readme" ] || { echo "FAIL: no $readme"; exit 1; }

table=$(mktemp)
trap 'rm -f "$table" "$table.readme" "$table.ompi"' EXIT
"$table_prog" > "$table" || { echo "FAIL: $table_prog failed"; exit 1; }

# README rows: | `coll_gpurdma_a`, `coll_gpurdma_b` | 1, 2 | meaning |  ->  "name<TAB>default" lines.
awk -F'|' '
    /^## / { in_params = ($0 ~ /^## Parameters/) }
    in_params && /^\| *`coll_gpurdma_/ {
        n = 0
        cell = $2
        while (match(cell, /coll_gpurdma_[a-z0-9_]+/)) {
            names[++n] = substr(cell, RSTART, RLENGTH)
            cell = substr(cell, RSTART + RLENGTH)
        }
        d = $3
        gsub(/^ +| +$/, "", d)
        m = split(d, defaults, / *, */)
        if (m != n) { printf "ROW\t%s\t%d names, %d defaults\n", names[1], n, m; next }
        for (i = 1; i <= n; i++) printf "%s\t%s\n", names[i], defaults[i]
    }' "$readme" > "$table.readme"

failed=0
fail() { echo "FAIL: $*"; failed=1; }

while IFS=$'\t' read -r first name why; do
    [ "$first" = ROW ] && fail "README row of $name: $why"
done < "$table.readme"

# Each row of the table: in README once, with its default.
checked=0
while IFS=$'\t' read -r name type value agreed level help; do
    checked=$((checked + 1))
    hits=$(awk -F'\t' -v n="$name" '$1 == n' "$table.readme")
    count=$(printf '%s' "$hits" | grep -c . || true)
    if [ "$count" -eq 0 ]; then fail "$name ($type, default $value) is not in README.md's parameter table"
    elif [ "$count" -gt 1 ]; then fail "$name is in README.md's parameter table $count times"
    else
        readme_default=$(printf '%s\n' "$hits" | cut -f2)
        [ "$readme_default" = "$value" ] || fail "$name: README.md says default '$readme_default', the table $value"
    fi
done < "$table"

# README lists nothing that is not a parameter (priority is the component's own).
while IFS=$'\t' read -r name _; do
    [ "$name" = ROW ] && continue
    [ "$name" = coll_gpurdma_priority ] && continue
    cut -f1 "$table" | grep -qx "$name" || fail "README.md lists $name, which is not in the parameter table"
done < "$table.readme"

echo "README.md: $checked parameters of the table checked"

# ompi_info: the component registers each row, with the table's help and default.
component=$build/component/mca_coll_gpurdma.so
if command -v ompi_info >/dev/null 2>&1 && [ -e "$component" ]; then
    pkglibdir=${OMPI_PKGLIBDIR:-$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://')}
    OMPI_MCA_mca_base_component_path="$pkglibdir:$build/component" \
        ompi_info --param coll gpurdma --level 9 --parsable > "$table.ompi" 2>&1
    if ! grep -q "^mca:coll:gpurdma:param:coll_gpurdma_priority:" "$table.ompi"; then
        fail "ompi_info lists no coll_gpurdma_priority (component not loaded?)"
    fi
    while IFS=$'\t' read -r name type value agreed level help; do
        key="mca:coll:gpurdma:param:$name"
        given_help=$(grep -m1 "^$key:help:" "$table.ompi" | sed "s/^$key:help://")
        if [ -z "$given_help" ]; then fail "ompi_info does not list $name"; continue; fi
        [ "$given_help" = "$help" ] || fail "ompi_info's help of $name differs from the table's"
        # The default, unless the environment or a parameter file set it.
        grep -qx "$key:source:default" "$table.ompi" || continue
        given=$(grep -m1 "^$key:value:" "$table.ompi" | sed "s/^$key:value://")
        [ "$value" = "(empty)" ] && value=""
        case $type in
        string | enum) [ "$given" = "$value" ] || fail "ompi_info: $name defaults to '$given', the table '$value'" ;;
        *) awk -v a="$given" -v b="$value" 'BEGIN { exit !(a + 0 == b + 0) }' ||
            fail "ompi_info: $name defaults to $given, the table $value" ;;
        esac
    done < "$table"
    echo "ompi_info: every row registered with its help"
else
    echo "ompi_info or the built component missing: registration not checked"
fi

if [ $failed -ne 0 ]; then
    echo "The parameter table is src/core/params.cpp; README.md's is under '## Parameters'."
    exit 1
fi
echo "PASS"
