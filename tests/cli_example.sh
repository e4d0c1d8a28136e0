#!/usr/bin/env bash
# An application of the installed library: cmake --install to a temporary
# prefix, examples/generate.c built with pkg-config against libinfer.so and
# against libinfer.a (also beside functions named as the engine's internals,
# as llama.cpp's gguf_* are), each generating the same greedy tokens as
# infer run --temp 0 on a fixture.
# usage: cli_example.sh INFER_BIN FIXTURES_DIR
# env: CMAKE_COMMAND (default cmake), INFER_EXAMPLE_CFLAGS (the build's sanitizer flags)
bin=$1
fx=$2
build=$(dirname "$bin")
src=$(cd "$(dirname "$0")/.." && pwd)
cflags=${INFER_EXAMPLE_CFLAGS:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

"${CMAKE_COMMAND:-cmake}" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || fail "install: $(cat "$tmp/install.log")"
pc=$(find "$tmp/prefix" -name infer.pc)
[ -n "$pc" ] && [ -f "$tmp/prefix/include/infer.h" ] || fail "install: no infer.pc or infer.h under the prefix: $(find "$tmp/prefix")"
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir infer)
[ -f "$libdir/libinfer.a" ] && [ -f "$libdir/libinfer.so" ] || fail "install: libinfer.a or libinfer.so missing from $libdir"

# shared: -linfer finds libinfer.so
# shellcheck disable=SC2046,SC2086
cc $cflags "$src/examples/generate.c" $(pkg-config --cflags --libs infer) -o "$tmp/gen_shared" 2>"$tmp/err" ||
    fail "cc with pkg-config: $(cat "$tmp/err")"
# static, with the application's own functions named as the engine's internals
cat >"$tmp/clash.c" <<'EOF'
void gguf_type_name(void) {}
void gguf_set_str(void) {}
void gguf_set_arr_str(void) {}
void gguf_open(void) {}
void matmul(void) {}
void fail(void) {}
void pool_new(void) {}
EOF
# shellcheck disable=SC2046,SC2086
cc $cflags "$src/examples/generate.c" "$tmp/clash.c" $(pkg-config --cflags infer) \
    $(pkg-config --libs infer | sed "s|-linfer|$libdir/libinfer.a|") -o "$tmp/gen_static" 2>"$tmp/err" ||
    fail "cc with libinfer.a beside gguf_*, matmul, fail, pool_new: $(cat "$tmp/err")"

m=$fx/qwen3
want=$("$bin" run -m "$m" --ids 1,2,3 -n 6 --temp 0 2>/dev/null) || fail "infer run on $m"
echo "$want" | grep -Eq '^[0-9]+(,[0-9]+)*$' || fail "infer run printed \"$want\""
for gen in gen_shared gen_static; do
    got=$(LD_LIBRARY_PATH=$libdir "$tmp/$gen" "$m" -n 6 --ids 1,2,3 2>"$tmp/err") || fail "$gen: exit $?: $(cat "$tmp/err")"
    [ "$got" = "$want" ] || fail "$gen printed \"$got\", infer run --temp 0 \"$want\""
done
LD_LIBRARY_PATH=$libdir ldd "$tmp/gen_shared" | grep -q "$libdir/libinfer.so" || fail "gen_shared does not use the installed libinfer.so: $(ldd "$tmp/gen_shared")"
"$tmp/gen_static" "$m" 2>"$tmp/err" && fail "generate without a prompt exited 0"
echo "cli_example: ok ($want)"
