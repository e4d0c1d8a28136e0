#!/usr/bin/env bash
# The vindex walk on the H200 machine (through `device`, prebuilt binaries:
# carry device-carry/debs, device-carry/fixtures and device-carry/bin.tgz
# holding infer, test_walk and test_graph): the walk tests on the GPU, then a
# vindex of the Gemma 3 SHAPE (default 270m, q4_k_m; gate f16, ffn q8_0, no
# down_meta) and decode / prompt speed of dense and walk graphs on the GPU
# and on the CPU's 16 threads. Output: $OUT/walk.txt.
. "$(dirname "$0")/device-prebuilt.sh"
I=/tmp/bin/infer S=${SHAPE:-270m} M=/tmp/$S.gguf X=/tmp/$S.vindex
{
    for t in test_walk test_graph; do [ -x /tmp/bin/$t ] && timeout 120 /tmp/bin/$t 2>&1 | grep -E "cuda|checks|FAIL" | tail -6; done
    $I synth --shape $S -o $M >/dev/null 2>&1 || { echo "synth failed"; exit 1; }
    $I extract -m $M -o $X --down-top 0 -t 16 2>&1 | tail -1
    B="-r 2 -p 64 -n 64"
    echo "## dense, the GGUF"; timeout 120 $I bench -m $M --device cuda $B 2>&1 | tail -2
    for g in dense walk walk@10% walk@2%; do
        echo "## $g, the vindex, cuda"; timeout 120 $I bench -m $X --device cuda --graph $g $B 2>&1 | tail -2
        echo "## $g, the vindex, cpu -t 16"; timeout 120 $I bench -m $X --device cpu -t 16 --graph $g $B 2>&1 | tail -2
    done
} 2>&1 | tee "$OUT/walk.txt"
