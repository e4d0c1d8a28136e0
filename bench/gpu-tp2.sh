#!/usr/bin/env bash
# Issue 16's figures on a machine with two GPUs of one host (`device` kind
# nvidia-h200-x2), in phases that each fit one call (a call's machine is a
# fresh one: every phase makes its own files). Prebuilt binaries as
# bench/device-prebuilt.sh says (device-carry/bin.tgz with infer, test_tp and
# bench_allreduce; device-carry/debs; device-carry/fixtures); PHASE=llama
# also carries device-carry/llama-cuda.tgz (scripts/device-carry.sh).
#   PHASE=check  topology, NCCL, test_tp with a GPU a rank (NCCL between
#                them), µs per all-reduce (bench_allreduce --gpu), the 4B
#                shape one GPU against --tp 2 and --split layer (decode
#                graphs with the collectives: INFER_TP_GRAPH=1 as well)
#   PHASE=12b    the 12B shape in BF16: one GPU against --tp 2 (the issue:
#                decode >= 1.6x)
#   PHASE=llama  llama.cpp's llama-bench built there; the 27B shape in BF16
#                and the 70B Llama shape in Q4_K_M, --tp 2 and --split layer
#                against llama-bench -sm row and -sm layer on the same files
#                (the issue: >= 1.2x its best), one GPU beside them
# Output: $OUT/tp2-$PHASE.txt. Not yet run: no machine with two GPUs has
# been lent (2026-12-04).
. "$(dirname "$0")/device-prebuilt.sh"
lib=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
[ -n "$lib" ] && [ -f "$lib" ] && export INFER_NCCL_LIB=$lib
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 # (NVLink multicast: never; device KINDS.md)
I=/tmp/bin/infer PHASE=${PHASE:-check} log=$OUT/tp2-${PHASE:-check}.txt
n_gpu=$(nvidia-smi -L | wc -l)
timed() { # the command, with its time and peak memory where /usr/bin/time is
    if [ -x /usr/bin/time ]; then /usr/bin/time -f "synth: %e s, max RSS %M KB" "$@"; else local t0=$SECONDS; "$@"; echo "synth: $((SECONDS - t0)) s"; fi
}
tg() { # model, label, args...: infer bench's decode and prompt rows (--tp rows only with a GPU a rank, or FORCE_TP=1)
    local m=$1 label=$2; shift 2
    [ "${1:-}" = --tp ] && [ "$n_gpu" -lt 2 ] && [ "${FORCE_TP:-0}" != 1 ] && { echo "## $label: left out (one GPU)"; return; }
    echo "## $label"; timeout 240 $I bench "$@" -m "$m" --device cuda -p 512 -n 128 -r 3 2>&1 | tail -2
}
{
    echo "GPUs: $n_gpu"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    [ "$n_gpu" -ge 2 ] || echo "fewer than two GPUs: --tp 2 runs both ranks on one (correctness only)"
    case $PHASE in
    check)
        nvidia-smi topo -m
        echo "INFER_NCCL_LIB=${INFER_NCCL_LIB:-none}"
        INFER_TEST_NCCL=1 timeout 300 /tmp/bin/test_tp 2>&1 | grep -v "^ok" | grep -E "FAIL|nccl|transport|checks|split:" | head -80
        /tmp/bin/bench_allreduce --world 2 --gpu --iters 2000
        $I synth --shape 4b --type q4_k_m -o /tmp/s4.gguf >/dev/null 2>&1 || echo "synth 4b failed"
        tg /tmp/s4.gguf "4b q4_k_m, one GPU"
        tg /tmp/s4.gguf "4b q4_k_m, --tp 2" --tp 2
        INFER_TP_GRAPH=1 tg /tmp/s4.gguf "4b q4_k_m, --tp 2, INFER_TP_GRAPH=1" --tp 2
        tg /tmp/s4.gguf "4b q4_k_m, --tp 2 --split layer" --tp 2 --split layer
        INFER_TP_GRAPH=1 tg /tmp/s4.gguf "4b q4_k_m, --split layer, INFER_TP_GRAPH=1" --tp 2 --split layer
        a=$($I run -m /tmp/s4.gguf --device cuda --ids 1,2,3,4,5 -n 32 --temp 0 2>/dev/null)
        b=$($I run --tp 2 -m /tmp/s4.gguf --device cuda --ids 1,2,3,4,5 -n 32 --temp 0 2>/tmp/eb); tail -n 1 /tmp/eb
        [ -n "$a" ] && [ "$a" = "$b" ] && echo "greedy 32 tokens, --tp 2 = one GPU: yes" || echo "greedy: differ: [$a] [$b]"
        ;;
    12b)
        timed $I synth --shape 12b --type bf16 -o /tmp/s12.gguf 2>&1 | tail -2
        tg /tmp/s12.gguf "12b bf16, one GPU"
        tg /tmp/s12.gguf "12b bf16, --tp 2" --tp 2
        INFER_TP_GRAPH=1 tg /tmp/s12.gguf "12b bf16, --tp 2, INFER_TP_GRAPH=1" --tp 2
        tg /tmp/s12.gguf "12b bf16, --split layer" --tp 2 --split layer
        ;;
    llama)
        mkdir -p /tmp/lcp && tar xf device-carry/llama-cuda.tgz -C /tmp/lcp
        ( cmake -S /tmp/lcp/llama.cpp -B /tmp/lcp/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null &&
            cmake --build /tmp/lcp/build --target llama-bench -j"$(nproc)" >/dev/null ) 2>"$OUT/llama-build.txt" &
        build=$!
        for spec in ${BIG:-gemma3:27b:bf16 llama:70b:q4_k_m}; do
            IFS=: read -r arch shape type <<<"$spec"
            f=/tmp/big.gguf
            rm -f "$f"
            timed $I synth --arch "$arch" --shape "$shape" --type "$type" -o "$f" 2>&1 | tail -2
            [ -n "${build:-}" ] && { wait "$build"; build=; }
            L=/tmp/lcp/build/bin/llama-bench
            for sm in row layer; do
                echo "## llama.cpp $arch $shape $type -sm $sm"
                [ -x "$L" ] && timeout 300 "$L" -m "$f" -ngl 99 -fa 1 -sm "$sm" -p 512 -n 128 -r 3 2>&1 | grep -E "^\|" | tail -2
            done
            tg "$f" "$arch $shape $type, one GPU"
            tg "$f" "$arch $shape $type, --tp 2" --tp 2
            tg "$f" "$arch $shape $type, --tp 2 --split layer" --tp 2 --split layer
        done
        ;;
    esac
} 2>&1 | tee "$log"
