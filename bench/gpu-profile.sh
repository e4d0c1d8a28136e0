#!/usr/bin/env bash
# Kernel times of GPU decode on the H200 machine (through `device`): builds
# infer with CUDA, makes random-weight Gemma 3 checkpoints (infer synth,
# q4_k_m) of the shapes in SHAPES (default 270m), and runs 8 decode steps
# after a 64-token prompt under ncu, printing each kernel's count and mean
# time (the graph's nodes one by one: launch gaps are not in these times).
# Output: $OUT/profile.txt. Carry: device-carry/debs.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
dpkg -i device-carry/debs/*.deb >/dev/null 2>&1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j16 --target infer_cli >/dev/null 2>>"$OUT/log.txt" || { echo "build failed"; exit 1; }
for shape in ${SHAPES:-270m}; do
    M=/tmp/gemma3-$shape.gguf
    ./build/infer synth --shape $shape --type q4_k_m -o $M >>"$OUT/log.txt" 2>&1 || { echo "synth failed"; continue; }
    echo "== $shape: decode kernels (one token's worth after the prompt and first steps)" | tee -a "$OUT/profile.txt"
    # (a 4-token prompt; the first 3 passes' kernels skipped, then one pass's worth profiled, caches as they are)
    N=$(./build/infer info -m $M 2>/dev/null | awk '/layers/ {print $2; exit}')
    # CMD: another command to profile (MODEL in it stands for the checkpoint), e.g. a batched bench:
    # CMD="./build/infer bench -m MODEL --device cuda --batch 64 -p 1 -n 3 -r 1" SKIP=0 COUNT=100000
    if [ -n "${CMD:-}" ]; then
        for b in 16 64; do for nl in "" --no-logits; do
            ./build/infer bench -m $M --device cuda --batch $b -p 128 -n 64 -r 2 $nl 2>>"$OUT/log.txt" | tail -1 | sed "s/$/ $nl/" | tee -a "$OUT/profile.txt"
        done; done
        ncu --cache-control none --launch-skip ${SKIP:-0} --launch-count ${COUNT:-100000} --metrics gpu__time_duration.sum \
            ${CMD//MODEL/$M} >"$OUT/ncu-$shape.txt" 2>&1
    else
    ncu --cache-control none --launch-skip ${SKIP:-900} --launch-count ${COUNT:-300} --metrics gpu__time_duration.sum \
        ./build/infer run -m $M --ids 2,100,200,300 -n 12 --ignore-eos --temp 0 --device cuda >"$OUT/ncu-$shape.txt" 2>&1
    fi
    python3 bench/ncu-summary.py "$OUT/ncu-$shape.txt" | tee -a "$OUT/profile.txt"
done
