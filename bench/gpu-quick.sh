#!/usr/bin/env bash
# A short GPU run without a build there: the binaries built on the development
# machine (where nvcc compiles for sm_90 but nothing CUDA runs), carried as
# device-carry/bin.tgz, saving the few minutes the CUDA layer takes to compile
# on the H200 machine. Make the tarball here (after `cmake --build build`):
#   mkdir -p device-carry/bin && cp build/infer build/tests/test_{cuda,batch,fixtures,split} device-carry/bin/ &&
#     tar czf device-carry/bin.tgz -C device-carry bin && rm -rf device-carry/bin
# then, through `device`, carrying device-carry/debs, device-carry/fixtures and device-carry/bin.tgz:
#   bash bench/gpu-quick.sh
# Runs the GPU parity tests (test_cuda, test_batch on every fixture family,
# the fixtures on cuda), then on synthetic 270M and 1B shapes test_batch and
# `infer bench` (prompt and decode; batched decode at 16 and 64 sequences with
# k_mmv and without), gate KNN at the 4B shape, and with PROFILE=KERNEL ncu's
# analysis of that kernel. Output: $OUT/quick.txt (and ncu.txt).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bin
dpkg -i --force-depends device-carry/debs/*.deb >/dev/null 2>&1
tar xf device-carry/bin.tgz -C /tmp || { echo "no device-carry/bin.tgz"; exit 1; }
# (the tests look for the fixtures where they were built: /work/shared and /work/main)
mkdir -p /work/shared/fixtures && ln -sfn "$PWD/device-carry/fixtures/hf" /work/shared/fixtures/hf
[ -e /work/main ] || ln -s "$PWD" /work/main
{
    timeout 120 $B/test_cuda >"$OUT/test_cuda.txt" 2>&1; tail -1 "$OUT/test_cuda.txt"; grep -m8 FAIL "$OUT/test_cuda.txt"
    timeout 120 $B/test_batch fixtures 2>&1 | grep -E "cuda|checks|FAIL" | tail -20
    # programmatic dependent launch (INFER_CUDA_PDL=1): the same checks with every kernel launched early
    echo "INFER_CUDA_PDL=1:"
    INFER_CUDA_PDL=1 timeout 120 $B/test_cuda >"$OUT/test_cuda_pdl.txt" 2>&1; tail -1 "$OUT/test_cuda_pdl.txt"; grep -m8 FAIL "$OUT/test_cuda_pdl.txt"
    INFER_CUDA_PDL=1 timeout 120 $B/test_batch fixtures 2>&1 | grep -E "checks|FAIL" | tail -4
    [ -x $B/test_fixtures ] && for f in device-carry/fixtures/hf/*/; do timeout 30 $B/test_fixtures "$(basename "$f")" device-carry/fixtures/hf 2>&1 | grep -E "cuda|FAIL"; done
    # contexts split between the GPU and the CPU (-ngl, pipelined layers) against the unsplit reference
    timeout 300 $B/test_split 2>&1 | grep -E "cuda|FAIL|checks" | tail -22
    for s in 270m 1b; do
        $B/infer synth --shape $s -o /tmp/$s.gguf >/dev/null 2>&1 || { echo "synth $s failed"; continue; }
        # batched decode of the quantized shape, every sequence bit for bit as alone (k_mmv's rows)
        timeout 120 $B/test_batch /tmp/$s.gguf 2>&1 | grep -E "checks|FAIL|differs" | head -5
        for pdl in 0 1; do echo "INFER_CUDA_PDL=$pdl"; INFER_CUDA_PDL=$pdl timeout 60 $B/infer bench -m /tmp/$s.gguf --device cuda -r 3 -p 512 -n 128 | tail -2; done
        echo "INFER_CUDA_PDL=1, batched"; INFER_CUDA_PDL=1 timeout 60 $B/infer bench -m /tmp/$s.gguf --device cuda -r 2 -p 128 -n 128 --batch 16,64 | grep tg
        for v in 1 0; do echo "INFER_CUDA_MMV=$v"; INFER_CUDA_MMV=$v timeout 60 $B/infer bench -m /tmp/$s.gguf --device cuda -r 2 -p 128 -n 128 --batch 16,64 | grep tg; done
        echo "greedy tokens instead of logits"; timeout 60 $B/infer bench -m /tmp/$s.gguf --device cuda -r 2 -p 128 -n 128 --batch 16,64 --greedy | grep tg
    done
    timeout 60 $B/infer bench-knn --device cuda -r 50
    # STEPS=1: every kernel's time (ncu) in batched decode steps of 64 sequences at the 1B shape (one
    # token each: -p 1), against the steps' wall time with and without the logits read back
    if [ "${STEPS:-0}" = 1 ] && [ -f /tmp/1b.gguf ]; then
        for nl in "" --no-logits; do timeout 60 $B/infer bench -m /tmp/1b.gguf --device cuda -r 2 -p 1 -n 32 --batch 64 $nl | grep tg; done
        timeout 240 ncu --metrics gpu__time_duration.sum $B/infer bench -m /tmp/1b.gguf --device cuda -r 1 -p 1 -n 3 --batch 64 \
            >"$OUT/ncu-steps.txt" 2>&1
        python3 bench/ncu-summary.py "$OUT/ncu-steps.txt" 30
    fi
    # STEP1=1: every kernel's time (ncu) in one-sequence decode steps at the 270M and 1B shapes (-p 1 -n 4: five
    # one-token passes, the last three replayed from the captured graph)
    if [ "${STEP1:-0}" = 1 ]; then
        for s in 270m 1b; do
            [ -f /tmp/$s.gguf ] || continue
            timeout 240 ncu --metrics gpu__time_duration.sum $B/infer bench -m /tmp/$s.gguf --device cuda -r 1 -p 1 -n 4 \
                >"$OUT/ncu-step1-$s.txt" 2>&1
            echo "one-sequence decode, $s shape, 5 passes:"; python3 bench/ncu-summary.py "$OUT/ncu-step1-$s.txt" 40
        done
    fi
    # PROFILE=KERNEL (a regex, e.g. k_gemm2 or k_mv): ncu's speed-of-light, memory, warp-state and occupancy
    # sections for 3 launches of it in a 1B-shape prompt of 512 tokens
    if [ -n "${PROFILE:-}" ] && [ -f /tmp/1b.gguf ]; then
        timeout 240 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
            --section LaunchStats -k "regex:${PROFILE}" -s 20 -c 3 $B/infer bench -m /tmp/1b.gguf --device cuda -r 1 -p 512 -n 0 \
            >"$OUT/ncu.txt" 2>&1
        grep -E "^  [a-z_]+|Duration|Throughput|Warp Cycles|Stall|Achieved Occupancy|Registers|Theoretical Occupancy|Block Limit|Memory \[%\]|L1/TEX Hit|L2 Hit|Issued" "$OUT/ncu.txt" | head -80
    fi
} 2>&1 | tee "$OUT/quick.txt"
