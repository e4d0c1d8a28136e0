#!/usr/bin/env bash
# bench/compare-llamacpp on the device machine's CPU (no network there): runs
# through `device` with the carried files below, builds llama-bench, this
# tree's infer and an earlier commit's, makes random-weight checkpoints of
# real shapes with transformers (speed does not depend on the values), converts
# them with infer convert, and compares the three engines alternately.
#
# Carry (gitignored, made on the development machine):
#   device-carry/debs/          libcjson debs (the engine's one dependency)
#   device-carry/llama-full.tgz llama.cpp from the llama-cpp-python sdist, without models/docs/GPU backends
#   device-carry/before.tgz     `git archive <commit>` of the earlier tree (optional)
# BATCH=1,2,4,8,16: batched decode instead (llama-batched-bench), Gemma shape.
# Output: $OUT/compare.txt or compare-batch.txt (and logs).
set -uo pipefail
OUT=${OUT:-/tmp/out}
T=${THREADS:-16}
mkdir -p "$OUT"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/log.txt"; }

dpkg -i device-carry/debs/*.deb >/dev/null 2>&1
log "build infer"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j16 --target infer_cli >/dev/null 2>>"$OUT/log.txt" || exit 1
BEFORE=()
if [ -f device-carry/before.tgz ]; then
    log "build the earlier infer"
    rm -rf /tmp/before && mkdir -p /tmp/before && tar xf device-carry/before.tgz -C /tmp/before
    (cd /tmp/before && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j16 --target infer_cli >/dev/null) &&
        BEFORE=(--before /tmp/before/build/infer --before-label "${BEFORE_LABEL:-earlier}")
fi
log "build llama-bench"
mkdir -p /tmp/lcp && tar xf device-carry/llama-full.tgz -C /tmp/lcp
cmake -S /tmp/lcp/llama.cpp -B /tmp/lcp/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null 2>>"$OUT/log.txt" &&
    cmake --build /tmp/lcp/build --target llama-bench llama-batched-bench -j16 >/dev/null 2>>"$OUT/log.txt" ||
    { log "llama-bench build failed"; exit 1; }
export LLAMA_BENCH=/tmp/lcp/build/bin/llama-bench LLAMA_BATCHED_BENCH=/tmp/lcp/build/bin/llama-batched-bench

log "make checkpoints"
python3 - <<'EOF' 2>>"$OUT/log.txt"
import torch, transformers as tf
torch.manual_seed(0)
shapes = {
    # Gemma 3 270M's shape (the default model here)
    "gemma3-270m": (tf.Gemma3TextConfig, tf.Gemma3ForCausalLM, dict(vocab_size=262144, hidden_size=640, intermediate_size=2048,
        num_hidden_layers=18, num_attention_heads=4, num_key_value_heads=1, head_dim=256, sliding_window=512,
        query_pre_attn_scalar=256, tie_word_embeddings=True)),
    # Llama 3.2 1B's shape
    "llama-1b": (tf.LlamaConfig, tf.LlamaForCausalLM, dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64, tie_word_embeddings=True,
        rope_parameters=dict(rope_type="default", rope_theta=500000.0))),
}
for name, (cc, mc, kw) in shapes.items():
    with torch.device("cpu"):
        m = mc(cc(**kw)).to(torch.bfloat16)
    m.save_pretrained(f"/tmp/ckpt/{name}")
    print(name, sum(p.numel() for p in m.parameters()))
EOF
for n in gemma3-270m llama-1b; do
    ./build/infer convert /tmp/ckpt/$n /tmp/ckpt/$n-q4_k_m.gguf --type q4_k_m >>"$OUT/log.txt" 2>&1 || { log "convert $n failed"; exit 1; }
done
if [ -n "${BATCH:-}" ]; then # batched decode only (BATCH=1,2,4,8,16), on the Gemma 3 270M shape
    log "compare --batch $BATCH"
    python3 bench/compare-llamacpp --batch "$BATCH" -m /tmp/ckpt/gemma3-270m-q4_k_m.gguf -t "$T" -p 32 -n 32 \
        -r "${REPS:-3}" 2>>"$OUT/log.txt" | tee "$OUT/compare-batch.txt"
    log "done"
    exit 0
fi
log "compare"
python3 bench/compare-llamacpp -m /tmp/ckpt/gemma3-270m-q4_k_m.gguf -m /tmp/ckpt/llama-1b-q4_k_m.gguf -t "$T" \
    -r "${REPS:-3}" "${BEFORE[@]}" 2>>"$OUT/log.txt" | tee "$OUT/compare.txt"
log "done"
