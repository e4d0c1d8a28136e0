#!/usr/bin/env bash
# Issue 13's matrix on the device machine's host CPU (16-core Xeon, AVX-512,
# AMX; no network there): infer against llama.cpp's CPU build, side by side,
# alternating, at several thread counts, on synthetic Gemma 3 shapes made by
# `infer synth` (random weights: speed does not depend on the values).
#
# Through `device`, carrying (gitignored, made on the development machine):
#   device-carry/debs/          libcjson debs
#   device-carry/llama-full.tgz llama.cpp from the llama-cpp-python sdist (scripts/device-carry.sh makes it)
# then:  bash bench/cpu-matrix.sh
# Options (environment):
#   CELLS="270m:q4_k_m 1b:q4_k_m 4b:q4_k_m 1b:q8_0 1b:bf16"  shapes and file types
#   THREADS=1,2,4,8,16   thread counts (a table each)
#   DEPTH=4096 DEPTH_THREADS=4,16   the 1B q4_k_m rows at that depth too (DEPTH=0: none)
#   P=512 N=128 REPS=1   llama-bench's -p, -n, -r
#   LLAMA_BENCH=PATH, INFER_BIN=PATH   binaries already built (no build)
#   KEEP_BIN=1   copy both binaries (llama-bench linked statically) to $OUT/bin
# A call is at most 10 minutes: split the cells over calls (each rebuilds; the
# llama.cpp build takes ~2 minutes with -j16). Output: $OUT/matrix.txt (and
# log.txt); bench/compare-llamacpp prints each table and the ratios.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CELLS=${CELLS:-"270m:q4_k_m 1b:q4_k_m"}
THREADS=${THREADS:-1,2,4,8,16}
DEPTH=${DEPTH:-0}
DEPTH_THREADS=${DEPTH_THREADS:-4,16}
P=${P:-512} N=${N:-128} REPS=${REPS:-1}
J=$(nproc)
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/log.txt"; }

[ -d device-carry/debs ] && dpkg -i device-carry/debs/*.deb >/dev/null 2>&1
log "build infer (CPU only) and llama.cpp (CPU, GGML_NATIVE) side by side"
INFER=${INFER_BIN:-/tmp/infer-cpu/infer} # (INFER_BIN: one already built)
ib=
if [ -z "${INFER_BIN:-}" ]; then
    (cmake -S . -B /tmp/infer-cpu -DCMAKE_BUILD_TYPE=Release -DINFER_CUDA=OFF >/dev/null &&
        cmake --build /tmp/infer-cpu -j"$J" --target infer_cli >/dev/null 2>>"$OUT/log.txt") &
    ib=$!
fi
if [ -z "${LLAMA_BENCH:-}" ]; then
    mkdir -p /tmp/lcp && tar xf device-carry/llama-full.tgz -C /tmp/lcp
    cmake -S /tmp/lcp/llama.cpp -B /tmp/lcp/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null 2>>"$OUT/log.txt" &&
        cmake --build /tmp/lcp/build --target llama-bench -j"$J" >/dev/null 2>>"$OUT/log.txt" ||
        { log "llama-bench build failed"; exit 1; }
    export LLAMA_BENCH=/tmp/lcp/build/bin/llama-bench
fi
[ -z "$ib" ] || wait $ib || { log "infer build failed"; exit 1; }
export INFER_BIN=$INFER
if [ -n "${KEEP_BIN:-}" ]; then # (both binaries back under $OUT/bin, to be carried to the next call: LLAMA_BENCH=, INFER_BIN=)
    mkdir -p "$OUT/bin" && cp "$LLAMA_BENCH" "$INFER" "$OUT/bin/" && strip "$OUT/bin/"*
fi
grep -o -m1 'avx512[a-z_]*\|amx[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' ' >>"$OUT/log.txt"
lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node\(s\)" | tee -a "$OUT/matrix.txt"

models=()
for cell in $CELLS; do
    shape=${cell%%:*} type=${cell#*:}
    f=/tmp/synth-$shape-$type.gguf
    log "synth $shape $type"
    [ -f "$f" ] || "$INFER" synth --shape "$shape" --type "$type" -o "$f" >>"$OUT/log.txt" 2>&1 || { log "synth $cell failed"; continue; }
    models+=(-m "$f")
done
log "compare: ${CELLS} at -t $THREADS"
python3 bench/compare-llamacpp "${models[@]}" -t "$THREADS" -p "$P" -n "$N" -r "$REPS" 2>>"$OUT/log.txt" | tee -a "$OUT/matrix.txt"
if [ "$DEPTH" != 0 ] && [ -f /tmp/synth-1b-q4_k_m.gguf ]; then
    log "compare at depth $DEPTH: 1b q4_k_m at -t $DEPTH_THREADS"
    python3 bench/compare-llamacpp -m /tmp/synth-1b-q4_k_m.gguf -t "$DEPTH_THREADS" -d "$DEPTH" -p "$P" -n "$N" -r "$REPS" \
        2>>"$OUT/log.txt" | tee -a "$OUT/matrix.txt"
fi
log "done"
