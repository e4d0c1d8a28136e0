#!/usr/bin/env bash
# The GPU run on the H200 machine (through `device`; no network there):
# builds infer with CUDA, runs the GPU parity tests (test_cuda, every fixture
# family on the cuda backend), makes a random-weight GGUF of Gemma 3 270M's
# shape with `infer synth` (q4_k_m), checks that greedy decoding on the GPU
# gives the CPU's tokens and compares the two's logits, and times `infer
# bench` on the GPU and the CPU. SHAPES="1b 4b" also benchmarks those shapes.
# LLAMA=1 also builds llama.cpp's llama-bench with CUDA from the carried
# source and runs it on the same files (-ngl 99 -fa 1).
#
# Carry (gitignored): device-carry/debs (libcjson), device-carry/fixtures
# (a copy of ../shared/fixtures), device-carry/llama-cuda.tgz (LLAMA=1:
# llama.cpp from the llama-cpp-python sdist, without models/ and docs/, with
# ggml-cuda). PREBUILT=1 takes infer and its tests from device-carry/bin.tgz
# (built here; see bench/gpu-quick.sh) instead of building. PARITY=0 skips the parity tests; BENCH="-p 512 -n 128" sets
# infer bench's and llama-bench's tests; TG_ENV="ENV=VALUE ..." decode A/B runs.
# Output: $OUT/gpu.txt and logs.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/gpu.txt"; }
dpkg -i --force-depends device-carry/debs/*.deb >/dev/null 2>&1

# Decode's share of the copy bandwidth: the file's weight bytes read once a
# token, times tg t/s, over BW (reads the bench table on stdin).
bw_fraction() {
    local bytes
    bytes=$(stat -c %s "$1")
    # (the test and t/s are the table's last two columns, whatever comes before them)
    awk -v bytes="$bytes" -v bw="${BW:-0}" -F'|' '$(NF-2) ~ /tg/ && bw > 0 {
        split($(NF-1), v, " "); printf "  %s: %.1f GB/s of weights, %.1f%% of the copy bandwidth\n", $(NF-2), bytes * v[1] / 1e9, 100 * bytes * v[1] / 1e9 / bw
    }' | tee -a "$OUT/gpu.txt"
}

# llama.cpp builds in the background while infer builds and the parity tests run (waited for before any timing)
if [ "${LLAMA:-0}" = 1 ]; then
    log "build llama-bench and llama-batched-bench (CUDA), in the background"
    mkdir -p /tmp/lcp-cuda && tar xf device-carry/llama-cuda.tgz -C /tmp/lcp-cuda
    srv=OFF targets="llama-bench"
    [ -n "${NPL:-}" ] && targets="$targets llama-batched-bench"
    [ "${SERVE:-0}" = 1 ] && srv=ON targets="$targets llama-server"
    ( cmake -S /tmp/lcp-cuda/llama.cpp -B /tmp/lcp/build-cuda -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=$srv >/dev/null 2>>"$OUT/llama-build.txt" &&
        cmake --build /tmp/lcp/build-cuda --target $targets -j16 >/dev/null 2>>"$OUT/llama-build.txt" ) &
    LLAMA_BUILD=$!
fi

if [ "${PREBUILT:-0}" = 1 ]; then # (the binaries built on the development machine: device-carry/bin.tgz, as bench/gpu-quick.sh)
    log "prebuilt infer (device-carry/bin.tgz)"
    mkdir -p build/tests /work/shared/fixtures && tar xf device-carry/bin.tgz -C /tmp || { log "no device-carry/bin.tgz"; exit 1; }
    cp /tmp/bin/infer build/ && for t in /tmp/bin/test_*; do cp "$t" build/tests/; done
    ln -sfn "$PWD/device-carry/fixtures/hf" /work/shared/fixtures/hf; [ -e /work/main ] || ln -s "$PWD" /work/main
else
    log "build infer (CUDA)"
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DINFER_SHARED="$PWD/device-carry" 2>&1 | grep "infer:" | tee -a "$OUT/gpu.txt"
    cmake --build build -j16 --target infer_cli test_cuda test_fixtures test_batch >/dev/null 2>>"$OUT/log.txt" || { log "build failed"; exit 1; }
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/gpu.txt"

# SHAPES: "1b 4b" (q4_k_m) or "4b:f16 4b:bf16" (shape:type): infer synth in the background while the parity
# tests run (a 4B file takes minutes: a bf16 checkpoint is written, then converted)
mkdir -p /tmp/ckpt
(
    for st in ${SHAPES:-}; do
        shape=${st%%:*}; type=q4_k_m; [ "$st" != "$shape" ] && type=${st#*:}
        f=/tmp/ckpt/gemma3-$shape-$type.gguf
        [ -s $f ] || ./build/infer synth --shape $shape --type $type -o $f >>"$OUT/log.txt" 2>&1 &
    done
    wait
) &
SYNTH=$!
# PREP: more synthetic files made in the background and not waited for (for a following run, while the machine is held)
for st in ${PREP:-}; do
    shape=${st%%:*}; type=q4_k_m; [ "$st" != "$shape" ] && type=${st#*:}
    f=/tmp/ckpt/gemma3-$shape-$type.gguf
    [ -s $f ] || nohup ./build/infer synth --shape $shape --type $type -o $f >>/tmp/prep.txt 2>&1 &
done


if [ "${PARITY:-1}" = 1 ]; then
    log "parity: kernels"
    ./build/tests/test_cuda >"$OUT/test_cuda.txt" 2>&1
    grep -v "^ok\|^  ok" "$OUT/test_cuda.txt" | tail -15 | tee -a "$OUT/gpu.txt"
    if [ "${EXTRA:-1}" = 1 ]; then
        INFER_CUDA_MV_GROUP=4 ./build/tests/test_cuda 2>&1 | tail -1 | sed 's/^/(groups of 4 tokens) /' | tee -a "$OUT/gpu.txt"
        INFER_CUDA_GEMM_KERNEL=1 ./build/tests/test_cuda 2>&1 | tail -1 | sed 's/^/(the first tensor-core kernel) /' | tee -a "$OUT/gpu.txt"
    fi
    [ "${EXTRA:-1}" = 1 ] && INFER_CUDA_NORM_WIDE=0 ./build/tests/test_cuda 2>&1 | tail -1 | sed 's/^/(INFER_CUDA_NORM_WIDE=0) /' | tee -a "$OUT/gpu.txt"
    grep -E "cuBLAS|k_gemm2" "$OUT/test_cuda.txt" | tee -a "$OUT/gpu.txt"
    log "parity: batched decode on the GPU against each sequence alone (test_batch)"
    [ -d device-carry/fixtures ] && ./build/tests/test_batch fixtures >"$OUT/test_batch.txt" 2>&1
    grep -E "cuda|checks|differ" "$OUT/test_batch.txt" | tail -20 | tee -a "$OUT/gpu.txt"
    [ -x ./build/tests/test_split ] && ./build/tests/test_split 2>&1 | grep -E "cuda|checks|FAIL" | tail -20 | tee -a "$OUT/gpu.txt"
    log "parity: fixture families on the cuda backend"
    [ -x ./build/tests/test_fixtures ] && for f in device-carry/fixtures/hf/*/ tests/data/fixtures/*/; do
        [ -f "$f/reference.json" ] || continue
        ./build/tests/test_fixtures "$(basename "$f")" "$(dirname "$f")" 2>&1 | grep -E "cuda|FAILED|checks" | tee -a "$OUT/gpu.txt"
    done
fi

log "checkpoint: infer synth (random weights, Gemma 3 270M's shape, q4_k_m)"
mkdir -p /tmp/ckpt
[ -s /tmp/ckpt/gemma3-270m-q4_k_m.gguf ] ||
    ./build/infer synth --shape 270m --type q4_k_m -o /tmp/ckpt/gemma3-270m-q4_k_m.gguf >>"$OUT/log.txt" 2>&1 || { log "synth failed"; exit 1; }
M=/tmp/ckpt/gemma3-270m-q4_k_m.gguf

log "greedy parity: 32 tokens, CPU and GPU"
for dev in cpu cuda; do
    ./build/infer run -m $M --ids 2,1000,2000,3000 -n 32 --temp 0 --ignore-eos --device $dev -t 16 >"$OUT/greedy-$dev.txt" 2>>"$OUT/log.txt"
done
if cmp -s "$OUT/greedy-cpu.txt" "$OUT/greedy-cuda.txt"; then log "greedy: the GPU's 32 tokens equal the CPU's"; else log "greedy: the GPU's tokens DIFFER from the CPU's"; fi
# the logits of a 64-token prompt on both, compared (random weights: near-ties make greedy runs part early)
IDS=$(python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(262144)) for _ in range(64)))")
for dev in cpu cuda; do ./build/infer logits -m $M --ids $IDS --out /tmp/logits-$dev.bin --backend $dev -t 16 2>>"$OUT/log.txt"; done
INFER_CUDA_FUSE=0 ./build/infer logits -m $M --ids $IDS --out /tmp/logits-unfused.bin --backend cuda 2>>"$OUT/log.txt"
if cmp -s /tmp/logits-cuda.bin /tmp/logits-unfused.bin; then log "fused kernels: the logits of the kernels apart (INFER_CUDA_FUSE=0), bit for bit"; else log "fused kernels: logits DIFFER from INFER_CUDA_FUSE=0's"; fi
python3 - <<EOF 2>&1 | tee -a "$OUT/gpu.txt"
import numpy as np
a = np.fromfile("/tmp/logits-cpu.bin", dtype=np.float32).reshape(64, -1).astype(np.float64)
b = np.fromfile("/tmp/logits-cuda.bin", dtype=np.float32).reshape(64, -1).astype(np.float64)
def sm(x): x = x - x.max(1, keepdims=True); e = np.exp(x); return e / e.sum(1, keepdims=True)
p, q = sm(a), sm(b)
kl = (p * (np.log(p + 1e-30) - np.log(q + 1e-30))).sum(1)
rel = np.abs(a - b).max() / np.sqrt((a * a).mean())
print(f"logits, 64 positions, GPU vs CPU: max error {rel:.2e} of the RMS, KL(cpu||gpu) mean {kl.mean():.2e} max {kl.max():.2e}, top-1 same at {(a.argmax(1) == b.argmax(1)).sum()}/64")
EOF

log "device-to-device copy bandwidth (torch, 4 GiB read + written, mean of 10 after 3)"
BW=$(python3 - <<'EOF' 2>>"$OUT/log.txt"
import torch
a = torch.empty(1 << 30, dtype=torch.float32, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): b.copy_(a)
e.record(); torch.cuda.synchronize()
print(f"{2 * a.numel() * 4 * 10 / (s.elapsed_time(e) / 1e3) / 1e9:.0f}")
EOF
)
log "copy bandwidth: ${BW:-?} GB/s"

# (the SHAPES files, made in the background from the start: wait for them before any timing)
wait $SYNTH || log "some synthetic checkpoints failed (log.txt)"
FILES=""
for st in ${SHAPES:-}; do
    shape=${st%%:*}; type=q4_k_m; [ "$st" != "$shape" ] && type=${st#*:}
    [ -s /tmp/ckpt/gemma3-$shape-$type.gguf ] && FILES="$FILES /tmp/ckpt/gemma3-$shape-$type.gguf"
done
if [ "${PARITY:-1}" = 1 ]; then # batched decode of the quantized shapes: every sequence bit for bit as alone (k_mmv)
    for f in $M $FILES; do
        case $f in *-f16.gguf|*-bf16.gguf) continue;; esac # (the quantized files: k_mmv's rows)
        log "parity: test_batch $(basename $f)"
        ./build/tests/test_batch $f 2>&1 | grep -E "checks|FAIL|differs" | head -5 | tee -a "$OUT/gpu.txt"
    done
fi
if [ "${LLAMA:-0}" = 1 ]; then # (the timings below on an idle machine)
    wait $LLAMA_BUILD || { log "llama.cpp build failed"; tail -5 "$OUT/llama-build.txt"; exit 1; }
    log "llama.cpp built"
fi

log "infer bench"
B=${BENCH:--p 512 -n 128}
./build/infer bench -m $M --device cuda -r 3 $B 2>>"$OUT/log.txt" | tee -a "$OUT/gpu.txt" | bw_fraction "$M"
if [ "${EXTRA:-1}" = 1 ]; then # (the kernels apart, and the CPU)
    INFER_CUDA_FUSE=0 ./build/infer bench -m $M --device cuda -r 3 $B 2>>"$OUT/log.txt" | tail -2 | sed 's/CUDA/CUDA unfused/' | tee -a "$OUT/gpu.txt"
    ./build/infer bench -m $M -t 16 -r 2 $B 2>>"$OUT/log.txt" | tail -2 | tee -a "$OUT/gpu.txt"
fi
for f in $FILES; do
    log "infer bench: $(basename $f)"
    ./build/infer bench -m $f --device cuda -r 3 $B 2>>"$OUT/log.txt" | tail -2 | tee -a "$OUT/gpu.txt" | bw_fraction $f
done
# a decode step's kernels alone (INFER_CUDA_GRAPH_TIME=1: GPU time of each graph replay) against its wall time
if [ "${GT:-1}" = 1 ]; then
    for f in $M $FILES; do
        log "decode: GPU time of a step's graph against the step's wall time: $(basename $f)"
        INFER_CUDA_GRAPH_TIME=1 ./build/infer bench -m $f --device cuda -r 3 -p 0 -n 128 2>&1 | grep -E "tg128|graph replays" | tee -a "$OUT/gpu.txt"
    done
fi
# PP_OFF="ENV=VALUE ...": the prompts again with each setting (e.g. INFER_CUDA_CUBLAS=0)
for v in ${PP_OFF:-}; do
    for f in $M $FILES; do
        echo "$(basename $f) $v: $(env $v ./build/infer bench -m $f --device cuda -r 3 -p 512 -n 0 2>>"$OUT/log.txt" | grep pp512 | awk -F'|' '{print $(NF-1)}')" | tee -a "$OUT/gpu.txt"
    done
done
# TG_ENV="ENV=VALUE ...": one-sequence decode again with each setting, alternating with the default (e.g. INFER_CUDA_MV_SPEC=0)
for v in ${TG_ENV:-}; do
    for f in $M $FILES; do
        a=$(./build/infer bench -m $f --device cuda -r 3 -p 0 -n 128 2>>"$OUT/log.txt" | grep tg128 | awk -F'|' '{print $(NF-1)}')
        b=$(env $v ./build/infer bench -m $f --device cuda -r 3 -p 0 -n 128 2>>"$OUT/log.txt" | grep tg128 | awk -F'|' '{print $(NF-1)}')
        echo "$(basename $f) tg128: default $a, $v $b" | tee -a "$OUT/gpu.txt"
    done
done
# ABLATE=1: one-sequence decode with each of the decode step's latency measures turned off in turn
if [ "${ABLATE:-0}" = 1 ]; then
    for f in $M $FILES; do
        case $f in *4b-f16*|*4b-bf16*) continue;; esac
        for v in INFER_CUDA_NONE=1 INFER_CUDA_PDL=0 INFER_CUDA_PREFETCH=0 INFER_CUDA_NORM_WIDE=0; do
            echo "$(basename $f) $v: $(env $v ./build/infer bench -m $f --device cuda -r 3 -p 0 -n 128 2>>"$OUT/log.txt" | grep tg128 | awk -F'|' '{print $(NF-1)}')" | tee -a "$OUT/gpu.txt"
        done
    done
fi
if [ "${GEMM:-0}" = 1 ]; then
    for f in $M $FILES; do
        log "infer bench without the tensor-core prompt products (INFER_CUDA_GEMM=0): $(basename $f)"
        INFER_CUDA_GEMM=0 ./build/infer bench -m $f --device cuda -r 3 -p 512 -n 0 2>>"$OUT/log.txt" | tail -1 | tee -a "$OUT/gpu.txt"
    done
fi
# NPL="16,64": batched decode, aggregate t/s (infer bench --batch; llama-batched-bench with LLAMA=1)
BATCHED=""
if [ -n "${NPL:-}" ]; then
    for f in $M $FILES; do case $f in *1b-q4_k_m*|*270m*) BATCHED="$BATCHED $f";; esac; done
    for f in $BATCHED; do
        log "infer bench --batch $NPL: $(basename $f)"
        ./build/infer bench -m $f --device cuda -r 2 -p 128 -n 128 --batch $NPL 2>>"$OUT/log.txt" | tee -a "$OUT/gpu.txt"
    done
    if [ "${VARIANTS:-0}" = 1 ]; then # (groups of 4 tokens; every pass of 16+ rows on the tensor cores; the first tensor-core kernel)
        for f in $M $FILES; do
            log "infer bench pp512, INFER_CUDA_GEMM_KERNEL=1: $(basename $f)"
            INFER_CUDA_GEMM_KERNEL=1 ./build/infer bench -m $f --device cuda -r 3 -p 512 -n 0 2>>"$OUT/log.txt" | tail -1 | tee -a "$OUT/gpu.txt"
        done
        for f in $BATCHED; do
            for v in INFER_CUDA_MV_GROUP=4 INFER_CUDA_BATCH_GEMM=1; do
                log "infer bench --batch $NPL, $v: $(basename $f)"
                env $v ./build/infer bench -m $f --device cuda -r 2 -p 128 -n 128 --batch $NPL 2>>"$OUT/log.txt" | grep tg | tee -a "$OUT/gpu.txt"
            done
        done
    fi
fi

if [ "${LLAMA:-0}" = 1 ]; then
    log "llama-bench -ngl 99 -fa 1 on the same files"
    for f in $M $FILES; do
        [ -f "$f" ] && /tmp/lcp/build-cuda/bin/llama-bench -m "$f" -ngl 99 -fa 1 -r 3 $B 2>>"$OUT/log.txt" | tee -a "$OUT/gpu.txt"
    done
    if [ -n "${NPL:-}" ]; then
        for f in $BATCHED; do
            log "llama-batched-bench $(basename $f): -npp 128 -ntg 128 -npl $NPL"
            /tmp/lcp/build-cuda/bin/llama-batched-bench -m "$f" -ngl 99 -fa 1 -c $((256 * ${NPL##*,} + 256)) -b 2048 -ub 512 \
                -npp 128 -ntg 128 -npl $NPL 2>>"$OUT/log.txt" | tee -a "$OUT/gpu.txt"
        done
    fi
fi
# gate KNN at the Gemma 3 4B shape (10240 x 2560, top 1024) on the GPU and on the CPU's 16 threads
if [ "${KNN:-0}" = 1 ]; then
    log "gate KNN (infer bench-knn)"
    ./build/infer bench-knn --device cuda -r 50 2>>"$OUT/log.txt" | tee -a "$OUT/gpu.txt"
    ./build/infer bench-knn -t 16 -r 20 2>>"$OUT/log.txt" | tee -a "$OUT/gpu.txt"
fi

# SERVE=1 (with LLAMA=1): infer serve against llama-server on the GPU, bench/serve-load's scenarios with
# PARALLEL slots (default 64), on the 270M shape with llama.cpp's SPM vocabulary (so both tokenize text)
if [ "${SERVE:-0}" = 1 ] && [ "${LLAMA:-0}" = 1 ]; then
    log "infer serve and llama-server on the GPU"
    V=/tmp/ckpt/gemma3-270m-spm-q4_k_m.gguf
    ./build/infer synth --shape 270m --type q4_k_m --vocab-from device-carry/vocab/ggml-vocab-llama-spm.gguf -o $V >>"$OUT/log.txt" 2>&1 &&
        DEVICE=cuda SERVER=/tmp/lcp/build-cuda/bin/llama-server THREADS=4 PARALLEL=${PARALLEL:-64} CTX=${CTX:-512} \
            bash bench/serve-compare.sh $V 2>&1 | tee -a "$OUT/gpu.txt"
fi
log "done"
