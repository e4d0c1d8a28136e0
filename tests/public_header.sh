#!/usr/bin/env bash
# include/infer.h is the roof of the engine's layers: inference and vindex,
# which define its functions, include it; the parts below them (base, tensor,
# compute, models, tokenizer) never do. It stands alone (an application
# includes nothing else), so what both sides need is written twice: in
# infer.h and in one internal header (base/status.h: infer_status;
# models/spec.h: infer_model_spec), as one block guarded by
# "#ifndef INFER_<NAME>_DEFINED", so a file that includes both gets the first.
# The two copies of every such block must be the same text, byte for byte:
# a constant added to one, a field moved in the other, fails here.
# usage: public_header.sh SOURCE_DIR
root=${1:-$(dirname "$0")/..}
header=$root/include/infer.h
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if grep -rn '^ *# *include *[<"]infer\.h[>"]' "$root"/src/{base,tensor,compute,models,tokenizer} >"$tmp/below"; then
    echo "FAILED: parts below inference include infer.h (take base/status.h, or the internal header of what they need):"
    sed "s|^$root/||" "$tmp/below"
    fail=1
fi

# the block guarded by $2 in file $1: its #ifndef line to the first #endif after it
block() { awk -v m="$2" '$0 == "#ifndef " m {on = 1} on {print} on && /^#endif/ {exit}' "$1"; }

grep -o '^#ifndef INFER_[A-Z0-9_]*_DEFINED$' "$header" | sed 's/^#ifndef //' | sort >"$tmp/public"
grep -rho --include='*.h' '^#ifndef INFER_[A-Z0-9_]*_DEFINED$' "$root/src" | sed 's/^#ifndef //' | sort >"$tmp/internal"
grep -qx INFER_STATUS_DEFINED "$tmp/public" ||
    { echo "FAILED: no INFER_STATUS_DEFINED block in $header: is the check looking at the right file?"; fail=1; }
if ! comm -3 "$tmp/public" "$tmp/internal" >"$tmp/odd" || [ -s "$tmp/odd" ]; then
    echo "FAILED: guarded blocks not in both infer.h and exactly one header under src/ (left: infer.h only; right: src/ only):"
    cat "$tmp/odd"
    fail=1
fi

for m in $(comm -12 "$tmp/public" "$tmp/internal"); do
    files=$(grep -rlx --include='*.h' "#ifndef $m" "$root/src")
    [ "$(echo "$files" | wc -l)" = 1 ] || { echo "FAILED: $m guards blocks in several headers: $files"; fail=1; continue; }
    block "$header" "$m" >"$tmp/a"
    block "$files" "$m" >"$tmp/b"
    for f in "$tmp/a" "$tmp/b"; do
        # (one #if per block: a nested one would end the block early)
        [ "$(grep -c '^#if' "$f")" = 1 ] && [ "$(tail -n1 "$f")" = "#endif" ] ||
            { echo "FAILED: $m's block is not one #ifndef ... #endif with no conditional inside"; fail=1; }
    done
    if ! diff -u --label "include/infer.h" --label "${files#$root/}" "$tmp/a" "$tmp/b"; then
        echo "FAILED: $m: the two copies differ (above); make them the same text"
        fail=1
    else
        echo "$m: infer.h and ${files#$root/} agree ($(wc -l <"$tmp/a") lines)"
    fi
done
[ "$fail" = 0 ]
