#!/usr/bin/env bash
# Issue 15's GPU rows on the H200 machine (through `device`, prebuilt
# binaries: carry device-carry/debs, device-carry/fixtures and
# device-carry/bin.tgz holding infer, test_vindex and test_walk, made here as
# bench/gpu-quick.sh says): the lm_head index's and the walk's tests with the
# GPU there, then on a random-weight Gemma 3 shape (SHAPE, default 270m,
# q4_k_m; no tokenizer, so bench-lm reads pseudo-random token ids) its vindex
# with an lm_head index, bench-lm on the GPU and on the CPU's threads, and
# decode with the walk graphs on both. Output: $OUT/lm.txt.
. "$(dirname "$0")/device-prebuilt.sh"
I=/tmp/bin/infer S=${SHAPE:-270m} M=/tmp/$S.gguf X=/tmp/$S.vindex T=$(nproc)
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    for t in test_vindex test_walk; do timeout 180 /tmp/bin/$t 2>&1 | grep -E "cuda|checks|FAIL" | tail -6; done
    $I synth --shape "$S" -o "$M" >/dev/null 2>&1 || { echo "synth failed"; exit 1; }
    /usr/bin/time -f "extract: %e s" $I extract -m "$M" -o "$X" --down-top 0 --lm-index auto -t "$T" 2>&1 | tail -2
    for d in cuda cpu; do
        echo "## bench-lm --device $d (-t $T)"
        timeout 240 $I bench-lm -m "$M" -x "$X" --tokens 128 --probes 64,256,768,1024 --device $d -t "$T" 2>&1 | tail -8
    done
    B="-r 2 -p 64 -n 64"
    for g in dense walk walk@10% walk@2%; do
        echo "## $g, the vindex, cuda"; timeout 120 $I bench -m "$X" --device cuda --graph $g $B 2>&1 | tail -1
        echo "## $g, the vindex, cpu -t $T"; timeout 120 $I bench -m "$X" --device cpu -t "$T" --graph $g $B 2>&1 | tail -1
    done
} 2>&1 | tee "$OUT/lm.txt"
