#!/usr/bin/env bash
# Issue 13's figures that fit one device call (10 minutes): bench/cpu-matrix.sh
# builds both engines and the synthetic shapes and runs them all at 16
# threads (and the 1B Q4_K_M at depth 4096), then more thread counts for the
# cells that fit. Through `device`, carrying device-carry/debs and
# device-carry/llama-full.tgz (see bench/cpu-matrix.sh):
#   bash bench/cpu-issue13.sh        output: $OUT/matrix.txt, $OUT/log.txt
set -uo pipefail
OUT=${OUT:-/tmp/out}
export OUT
mkdir -p "$OUT"
CELLS="4b:q4_k_m 1b:q8_0 270m:q4_k_m 1b:q4_k_m 1b:bf16" THREADS=16 DEPTH=${DEPTH:-4096} DEPTH_THREADS=16 \
    timeout "${T1:-380}" bash bench/cpu-matrix.sh
export LLAMA_BENCH=/tmp/lcp/build/bin/llama-bench INFER_BIN=/tmp/infer-cpu/infer
s=/tmp/synth
cmp() { # time limit, then compare-llamacpp's arguments
    local t=$1
    shift
    timeout "$t" python3 bench/compare-llamacpp "$@" -p 512 -n 128 -r 1 2>>"$OUT/log.txt" | tee -a "$OUT/matrix.txt"
}
cmp "${T2:-110}" -m $s-4b-q4_k_m.gguf -m $s-1b-q8_0.gguf -m $s-270m-q4_k_m.gguf -t 4
cmp "${T3:-80}" -m $s-270m-q4_k_m.gguf -m $s-1b-q8_0.gguf -t 1
echo "[$(date +%T)] all done" | tee -a "$OUT/log.txt"
