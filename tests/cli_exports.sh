#!/usr/bin/env bash
# The libraries an application links (libinfer.a, libinfer.so) define exactly
# the functions include/infer.h declares (each marked INFER_API), no other; the
# internal library of the tests does hold the names that would clash (gguf_*).
# usage: cli_exports.sh INFER_BIN FIXTURES_DIR (the libraries are beside the binary)
build=$(dirname "$1")
header=$(dirname "$0")/../include/infer.h
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the functions infer.h declares
grep -o '^INFER_API [^(]*(' "$header" | sed 's/($//; s/.*[ *]//' | sort -u >"$tmp/api"
[ "$(wc -l <"$tmp/api")" -gt 50 ] || { echo "FAILED: only $(wc -l <"$tmp/api") INFER_API functions found in $header"; fail=1; }
# a declaration without INFER_API would be hidden from applications
if grep -E '^[a-z][a-z0-9_ ]*[ *]infer_[a-z0-9_]+\(' "$header" | grep -v '^typedef' >"$tmp/unmarked"; then
    echo "FAILED: declared in infer.h without INFER_API: $(tr '\n' ' ' <"$tmp/unmarked")"
    fail=1
fi

check() { # label, file of defined global names
    local label=$1 names=$2
    if grep -v '^infer_' "$names" >"$tmp/other"; then
        echo "FAILED: $label exports names without infer_: $(head -20 "$tmp/other" | tr '\n' ' ')"
        fail=1
    fi
    if ! comm -23 "$tmp/api" "$names" >"$tmp/missing" || [ -s "$tmp/missing" ]; then
        echo "FAILED: $label lacks infer.h's $(tr '\n' ' ' <"$tmp/missing")"
        fail=1
    fi
    if ! comm -13 "$tmp/api" "$names" >"$tmp/extra" || [ -s "$tmp/extra" ]; then
        echo "FAILED: $label exports infer_* names infer.h does not declare: $(tr '\n' ' ' <"$tmp/extra")"
        fail=1
    fi
}

nm -g --defined-only "$build/libinfer.a" | awk 'NF == 3 {print $3}' | sort -u >"$tmp/a"
check libinfer.a "$tmp/a"
nm -D --defined-only "$build/libinfer.so" | awk 'NF == 3 {print $3}' | sort -u >"$tmp/so"
check libinfer.so "$tmp/so"
nm -g --defined-only "$build/libinfer.so" | awk 'NF == 3 {print $3}' | sort -u >"$tmp/so_all"
check "libinfer.so (symbol table)" "$tmp/so_all"
nm -g --defined-only "$build/libinfer_internal.a" | grep -q ' T gguf_' ||
    { echo "FAILED: the internal library has no gguf_* functions: is the check looking at the right names?"; fail=1; }

echo "cli_exports: $(wc -l <"$tmp/api") functions, libinfer.a $(wc -l <"$tmp/a") and libinfer.so $(wc -l <"$tmp/so") global names"
[ "$fail" = 0 ]
