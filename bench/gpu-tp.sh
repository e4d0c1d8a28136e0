#!/usr/bin/env bash
# Issue 16 on the one-GPU machine (through `device`, prebuilt binaries:
# carry device-carry/debs, device-carry/fixtures and device-carry/bin.tgz
# holding infer and test_tp, made here as bench/gpu-quick.sh says): NCCL's
# version and the topology, test_tp with the GPU there (two ranks sharing
# the GPU against one, NCCL's calls in a job of one rank), then `infer run
# --tp 2 --device cuda` against one process on a synthetic Gemma 3 shape
# (greedy tokens equal) and `infer bench` of both, and the layer split's
# prompt with and without micro-batches on the CPU. Output: $OUT/tp.txt.
. "$(dirname "$0")/device-prebuilt.sh"
# NCCL as PyTorch's wheel has it (the engine opens it at run time)
lib=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
[ -n "$lib" ] && [ -f "$lib" ] && export INFER_NCCL_LIB=$lib
export NCCL_NVLS_ENABLE=0
I=/tmp/bin/infer S=${SHAPE:-1b}
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    nvidia-smi topo -m 2>&1 | head -8
    echo "INFER_NCCL_LIB=${INFER_NCCL_LIB:-none}"
    INFER_TEST_NCCL=1 timeout 400 /tmp/bin/test_tp 2>&1 | grep -v "^ok" | tail -200
    $I synth --shape "$S" --type q4_k_m -o /tmp/s.gguf >/dev/null 2>&1 || { echo "synth failed"; exit 1; }
    a=$($I run -m /tmp/s.gguf --device cuda --ids 1,2,3,4,5 -n 32 --temp 0 2>/tmp/ea)
    b=$($I run --tp 2 -m /tmp/s.gguf --device cuda --ids 1,2,3,4,5 -n 32 --temp 0 2>/tmp/eb); tail -n 1 /tmp/ea /tmp/eb
    [ -n "$a" ] && [ "$a" = "$b" ] && echo "greedy 32 tokens, --tp 2 on cuda = one process: yes" || echo "greedy: differ: [$a] [$b]"
    c=$($I run --tp 2 --split layer -m /tmp/s.gguf --device cuda --ids 1,2,3,4,5 -n 32 --temp 0 2>/tmp/ec); tail -n 1 /tmp/ec
    [ -n "$a" ] && [ "$a" = "$c" ] && echo "greedy 32 tokens, --tp 2 --split layer on cuda = one process: yes" || echo "greedy (layer): differ: [$a] [$c]"
    for sp in "--tp 1" "--tp 2" "--tp 2 --split layer"; do
        echo "## $sp, cuda"; timeout 120 $I bench $sp -m /tmp/s.gguf --device cuda -p 128 -n 32 -r 2 2>&1 | tail -2
    done
    echo "## --tp 1, cpu, 16 threads"; timeout 120 $I bench -m /tmp/s.gguf --device cpu -t 16 -p 128 -n 32 -r 2 2>&1 | tail -2
    echo "## --tp 2, cpu, 8 threads a rank"; timeout 120 $I bench --tp 2 -m /tmp/s.gguf --device cpu -t 8 -p 128 -n 32 -r 2 2>&1 | tail -2
    echo "## --tp 2 --split layer, cpu, 8 threads a rank"; timeout 120 $I bench --tp 2 --split layer -m /tmp/s.gguf --device cpu -t 8 -p 128 -n 32 -r 2 2>&1 | tail -2
    # the layer split's micro-batches (INFER_PP_ROWS=0: none) on a prompt of 512
    for rows in 0 64; do
        echo "## --tp 2 --split layer, cpu, 8 threads a rank, INFER_PP_ROWS=$rows"
        INFER_PP_ROWS=$rows timeout 120 $I bench --tp 2 --split layer -m /tmp/s.gguf --device cpu -t 8 -p 512 -n 0 -r 3 2>&1 | tail -1
    done
    echo "## --tp 1, cpu, 16 threads, pp512"; timeout 120 $I bench -m /tmp/s.gguf --device cpu -t 16 -p 512 -n 0 -r 3 2>&1 | tail -1
} 2>&1 | tee "$OUT/tp.txt"
