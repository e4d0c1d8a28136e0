#!/usr/bin/env bash
# Installs what the engine needs (Debian packages only) and builds it.
#   bash scripts/setup.sh            release build in build/
#   BUILD=build-asan SANITIZE=1 bash scripts/setup.sh   ASan + UBSan build
#   BUILD=build-tsan SANITIZE=thread bash scripts/setup.sh   ThreadSanitizer build
#   WEB=1 bash scripts/setup.sh      also what the chat page's browser test needs
#   BUILD=build-clang CC=clang bash scripts/setup.sh   the same with clang
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v cc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v pkg-config >/dev/null || need+=(pkg-config) # tests/cli_example.sh builds against the installed library
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
[ -f /usr/include/microhttpd.h ] || need+=(libmicrohttpd-dev) # infer serve's HTTP (the CLI only)
# CC=clang: clang and its runtimes (the sanitizers', libFuzzer's: tests/fuzz)
if [ "${CC:-}" = clang ]; then
    command -v clang >/dev/null || need+=(clang)
    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || need+=(libclang-rt-dev)
    [ -x /usr/bin/time ] || need+=(time) # (tests/fuzz/run.sh reports CPU time)
fi
if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}"
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The test suite rebuilds two reference tokenizer.json files from the fetched
# GGUFs with Hugging Face `tokenizers` (scripts/gen-tokenizer-expected.py),
# and talks to infer serve through OpenAI's and Anthropic's own clients
# (`openai`, `anthropic`): Python is for reference data only, never for the engine.
if ! python3 -c "import tokenizers, gguf, numpy, openai, anthropic" 2>/dev/null; then
    echo "setup: installing the Python reference tools of the tests (tokenizers, gguf, numpy, openai, anthropic)"
    python3 -m pip install --quiet tokenizers==0.23.3 gguf numpy openai anthropic >/dev/null 2>&1 ||
        echo "setup: pip could not install tokenizers/gguf/openai/anthropic; the tests that use them will say so" >&2
fi

# WEB=1: the chat page's browser test too (Debian's chromium and its driver,
# PyPI's selenium; tests/cli_serve_web.sh)
if [ "${WEB:-0}" = 1 ]; then
    if [ ! -x /usr/bin/chromedriver ]; then
        echo "setup: installing chromium and chromium-driver (the chat page's browser test)"
        sudo=""
        [ "$(id -u)" = 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
    fi
    python3 -c "import selenium" 2>/dev/null || python3 -m pip install --quiet selenium >/dev/null 2>&1 ||
        echo "setup: pip could not install selenium; the browser test is left out" >&2
fi

build=${BUILD:-build}
sanitize=${SANITIZE:-0}
opts=(-DCMAKE_BUILD_TYPE=Release)
# (the sanitizer builds leave the CUDA runtime out: it is not built for them)
[ "$sanitize" = 1 ] && opts=(-DCMAKE_BUILD_TYPE=Debug -DINFER_SANITIZE=ON -DINFER_CUDA=OFF)
[ "$sanitize" = thread ] && opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFER_TSAN=ON -DINFER_CUDA=OFF)
# CMAKE_EXTRA: more cmake options (e.g. -DINFER_CUDA=OFF)
[ -n "${CMAKE_EXTRA:-}" ] && read -ra extra <<<"$CMAKE_EXTRA" && opts+=("${extra[@]}")
cmake -S . -B "$build" "${opts[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
echo "setup: built $build/infer"
