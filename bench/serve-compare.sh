#!/usr/bin/env bash
# infer serve against llama.cpp's llama-server, side by side in one run, with
# bench/serve-load's scenarios (the issue's): one stream of 128 tokens; 4
# clients x 128 tokens; 16 clients x 20 requests of 32 tokens, half streamed,
# answers checked against alone. Same GGUF, same threads, --parallel slots
# (llama-server's -c is divided among its slots, so it gets PARALLEL x CTX).
# llama-server is built once from the llama-cpp-python sdist's llama.cpp
# (bench/compare-llamacpp fetches it) into ~/.cache/infer/llama.cpp/build-server.
#   bench/serve-compare.sh [MODEL]    env: THREADS=2 PARALLEL=4 CTX=1024 INFER_BIN=build/infer
# On a GPU: DEVICE=cuda (infer serve --device cuda; llama-server -ngl 99 -fa on)
# and SERVER=path/to/llama-server (a CUDA build, as `bench/device serve` makes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-$(bash "$root/scripts/fetch-model.sh" gemma3 | tail -1)}
t=${THREADS:-2} np=${PARALLEL:-4} ctx=${CTX:-1024}
cache=${INFER_CACHE:-$HOME/.cache/infer}/llama.cpp
src=$cache/llama_cpp_python-0.3.36/vendor/llama.cpp
server=${SERVER:-$cache/build-server/bin/llama-server}
dev=${DEVICE:-cpu}
infer_dev=() llama_dev=()
[ "$dev" = cpu ] || infer_dev=(--device "$dev") llama_dev=(-ngl 99 -fa on)
if [ ! -x "$server" ]; then
    [ -d "$src" ] || python3 "$root/bench/compare-llamacpp" --help >/dev/null # (fetches the sdist)
    echo "serve-compare: building llama-server (CPU, native)" >&2
    cmake -S "$src" -B "$cache/build-server" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >/dev/null
    cmake --build "$cache/build-server" --target llama-server -j"$(nproc)" >/dev/null
fi
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_up() { # (python, not curl: the GPU machine may lack curl)
    python3 - "$1/health" <<'PY'
import sys, time, urllib.request
for _ in range(1200):
    try:
        urllib.request.urlopen(sys.argv[1], timeout=1).read(); sys.exit(0)
    except Exception: time.sleep(0.1)
sys.exit(1)
PY
}
load() { # URL LABEL
    "$root/bench/serve-load" "$1" --clients 1 --requests 3 --tokens 128 --label "$2: 1 stream"
    "$root/bench/serve-load" "$1" --clients "$np" --requests 2 --tokens 128 --label "$2: $np streams"
    "$root/bench/serve-load" "$1" --clients 16 --requests 20 --tokens 32 --stream half --check-alone --label "$2: 16 clients"
}
echo "serve-compare: $(basename "$model"), $t threads, $np slots of $ctx positions, $dev, $(date -u +%F) on $(nproc) cores"
port=$(free_port)
"${INFER_BIN:-$root/build/infer}" serve -m "$model" --port "$port" -t "$t" --parallel "$np" -c "$ctx" "${infer_dev[@]}" >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
wait_up "http://127.0.0.1:$port" || { echo "infer serve did not start"; exit 1; }
load "http://127.0.0.1:$port" "infer serve" || true
kill $pid; wait $pid 2>/dev/null || true
port=$(free_port)
"$server" -m "$model" --port "$port" -t "$t" -np "$np" -c $((np * ctx)) "${llama_dev[@]}" --log-disable >/dev/null 2>&1 &
pid=$!
wait_up "http://127.0.0.1:$port" || { echo "llama-server did not start"; exit 1; }
load "http://127.0.0.1:$port" "llama-server" || true
kill $pid; wait $pid 2>/dev/null || true
