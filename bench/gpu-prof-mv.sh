#!/usr/bin/env bash
# Where the one-token products' time goes on the H200 (binaries carried as device-carry/bin.tgz:
# infer, test_cuda, test_batch, bench_cuda_ops; see bench/gpu-quick.sh; fixtures as device-carry/fixtures):
# test_cuda, test_batch, the decode products from memory (bench_cuda_ops cold) with k_mv's kernels
# of one weight type (the default) and its kernel of any type (INFER_CUDA_MV_SPEC=0), ncu's stall
# reasons, instruction counts and memory throughput for the 4B gate+up product (q4_K) and its f16
# form, and infer bench's decode on synthetic 270M, 1B and 4B shapes both ways.
# Output: $OUT/prof.txt, $OUT/ncu-*.txt.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
dpkg -i --force-depends device-carry/debs/*.deb >/dev/null 2>&1
tar xf device-carry/bin.tgz -C /tmp || { echo "no device-carry/bin.tgz"; exit 1; }
B=/tmp/bin
mkdir -p /tmp/ck /work/shared/fixtures && ln -sfn "$PWD/device-carry/fixtures/hf" /work/shared/fixtures/hf
[ -e /work/main ] || ln -s "$PWD" /work/main
( for sh in 270m 1b 4b; do $B/infer synth --shape $sh --type q4_k_m -o /tmp/ck/$sh.gguf >/dev/null 2>&1 & done; wait ) &
SY=$!
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps,launch__occupancy_limit_blocks,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_generic_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
prof() { # name env... -- index
    local name=$1 idx=$2; shift 2
    env "$@" timeout 120 ncu --metrics "$M" -k "regex:k_mv" -s 4 -c 1 $B/bench_cuda_ops cold $idx >"$OUT/ncu-$name.txt" 2>&1
    echo "-- ncu $name ($*)"
    grep -E "k_mv|duration|dram__|inst_executed|issue_active|warps_active|registers|occupancy_limit|wavefronts|requests|lts__t|stalled" "$OUT/ncu-$name.txt" |
        awk '$NF+0 > 0.05 || !/stalled/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -60
}
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    echo "== test_cuda"; timeout 240 $B/test_cuda >"$OUT/test_cuda.txt" 2>&1; grep -E "k_mvt|checks" "$OUT/test_cuda.txt"; grep -m10 FAIL "$OUT/test_cuda.txt"
    echo "== test_batch fixtures"; timeout 200 $B/test_batch fixtures 2>&1 | grep -E "checks|FAIL" | tail -4
    for v in "INFER_CUDA_MV_SPEC=1" "INFER_CUDA_MV_SPEC=0"; do
        echo "== cold products, $v"; env $v timeout 120 $B/bench_cuda_ops cold | grep matmul
    done
    prof kany-q4k 2 INFER_CUDA_MV_SPEC=0
    prof kspec-q4k 2 INFER_CUDA_MV_SPEC=1
    prof kspec-f16 7 INFER_CUDA_MV_SPEC=1
    while pgrep -f "infer synth" >/dev/null; do sleep 2; done
    [ -f /tmp/ck/1b.gguf ] && { echo "== test_batch 1b"; timeout 120 $B/test_batch /tmp/ck/1b.gguf 2>&1 | grep -E "checks|FAIL|differs" | head -5; }
    for s in 270m 1b 4b; do for v in "INFER_CUDA_MV_SPEC=1" "INFER_CUDA_MV_SPEC=0" "INFER_CUDA_MV_SPEC=1"; do
        echo "$s $v: $(env $v timeout 60 $B/infer bench -m /tmp/ck/$s.gguf --device cuda -r 3 -p 64 -n 128 | grep tg)"
    done; done
    for v in 1 0; do echo "1b batched INFER_CUDA_MVT=$v: $(INFER_CUDA_MVT=$v timeout 60 $B/infer bench -m /tmp/ck/1b.gguf --device cuda -r 2 -p 128 -n 128 --batch 16,64 | grep tg | tr '\n' ' ')"; done
} 2>&1 | tee "$OUT/prof.txt"
