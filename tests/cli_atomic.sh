#!/usr/bin/env bash
# Files written whole or not at all: infer convert, quantize and extract are
# stopped at random moments (SIGINT, SIGTERM, SIGKILL) while replacing an
# earlier output, and run under a small file-size limit (RLIMIT_FSIZE). The
# destination then holds the earlier output or the complete new one (byte for
# byte one of the two, and it loads or verifies); after SIGINT and SIGTERM
# nothing else is left, after SIGKILL at most a temporary that load and
# verify refuse; a failed write says why and leaves no file. An output that
# is its own input is refused. Uses SmolLM2-135M (scripts/fetch-model.sh) and
# a random Hugging Face checkpoint of ~60 MB made here.
# usage: cli_atomic.sh INFER_BIN FIXTURES_DIR
set -u
BIN=$1 FIX=$2
root=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failed=0
fail() { echo "FAILED: $*"; failed=$((failed + 1)); }
sha() { if [ -d "$1" ]; then (cd "$1" && cat index.json weights.gguf ffn.bin | sha256sum | cut -c1-16); else sha256sum <"$1" | cut -c1-16; fi; }

model=$(bash "$root/scripts/fetch-model.sh" smollm2 2>"$T/fetch" | tail -1)
[ -f "$model" ] || { echo "FAILED: scripts/fetch-model.sh smollm2: $(cat "$T/fetch")"; exit 1; }
# a Hugging Face checkpoint large enough to stop part way (random llama weights, f32)
python3 - "$T/hf" <<'EOF' || { echo "FAILED: could not make the checkpoint"; exit 1; }
import json, os, struct, sys
import numpy as np
d = sys.argv[1]; os.makedirs(d)
H, F, L, V = 512, 1536, 6, 2048
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": F,
       "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": L, "vocab_size": V,
       "rms_norm_eps": 1e-5, "max_position_embeddings": 2048, "tie_word_embeddings": False}
json.dump(cfg, open(f"{d}/config.json", "w"))
shapes = {"model.embed_tokens.weight": [V, H], "lm_head.weight": [V, H], "model.norm.weight": [H]}
for i in range(L):
    p = f"model.layers.{i}."
    shapes.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                   p + "self_attn.q_proj.weight": [H, H], p + "self_attn.k_proj.weight": [H, H],
                   p + "self_attn.v_proj.weight": [H, H], p + "self_attn.o_proj.weight": [H, H],
                   p + "mlp.gate_proj.weight": [F, H], p + "mlp.up_proj.weight": [F, H], p + "mlp.down_proj.weight": [H, F]})
rng = np.random.default_rng(1)
hdr, blobs, off = {}, [], 0
for n, s in shapes.items():
    a = (rng.standard_normal(s, dtype=np.float32) * 0.02).tobytes()
    hdr[n] = {"dtype": "F32", "shape": s, "data_offsets": [off, off + len(a)]}
    blobs.append(a); off += len(a)
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
with open(f"{d}/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h)
    for b in blobs: f.write(b)
EOF

# The three writers: NAME -> a command writing TYPE to DEST
run_tool() { # tool dest variant [exec: the background job becomes infer itself, so signals reach it]
    case $1 in
    convert) ${4:-} "$BIN" convert "$T/hf" "$2" --type "$3" ;;
    quantize) ${4:-} "$BIN" quantize "$model" "$2" "$3" ;;
    extract) ${4:-} "$BIN" extract -m "$model" -o "$2" --down-top 0 --ffn "$3" -t 2 ;;
    esac
}
check_loads() { # dest: a GGUF that loads or a vindex that verifies
    if [ -d "$1" ]; then "$BIN" verify "$1" >/dev/null 2>&1; else "$BIN" info -m "$1" >/dev/null 2>&1; fi
}
rounds="1 2" # (each round stops a writer with each signal; one round in the sanitizer builds)
[ -n "${INFER_TEST_LIGHT:-}" ] && rounds=1
declare -A va=([convert]=f16 [quantize]=q8_0 [extract]=q8_0) vb=([convert]=q8_0 [quantize]=q4_0 [extract]=f16)

for tool in convert quantize extract; do
    ext=.gguf
    [ $tool = extract ] && ext=.vindex
    dest=$T/$tool$ext
    # the two complete outputs, made once each (the writers are deterministic)
    run_tool $tool "$T/b$ext" "${vb[$tool]}" >/dev/null 2>"$T/err" || { fail "$tool: $(cat "$T/err")"; continue; }
    new=$(sha "$T/b$ext")
    rm -rf "$T/b$ext"
    run_tool $tool "$dest" "${va[$tool]}" >/dev/null 2>"$T/err" || { fail "$tool: $(cat "$T/err")"; continue; }
    old=$(sha "$dest")
    t0=$(date +%s%N)
    run_tool $tool "$T/timing$ext" "${vb[$tool]}" >/dev/null 2>&1
    ms=$((($(date +%s%N) - t0) / 1000000 + 50))
    rm -rf "$T/timing$ext"
    stops=0
    for i in $rounds; do
        for sig in INT TERM KILL; do
            run_tool $tool "$dest" "${vb[$tool]}" exec >/dev/null 2>&1 &
            p=$!
            sleep "$(awk -v r=$RANDOM -v ms=$ms 'BEGIN{printf "%.3f", r / 32768 * ms / 1000}')"
            kill -$sig $p 2>/dev/null && stops=$((stops + 1))
            wait $p 2>/dev/null
            now=$(sha "$dest" 2>/dev/null)
            [ "$now" = "$old" ] || [ "$now" = "$new" ] || fail "$tool stopped by SIG$sig: $dest is neither the old nor the new output"
            check_loads "$dest" || fail "$tool stopped by SIG$sig: $dest does not load"
            for left in "$T"/$tool$ext.tmp.* "$T"/$tool$ext.old.*; do
                [ -e "$left" ] || continue
                if [ $sig != KILL ]; then fail "$tool stopped by SIG$sig left $(basename "$left")"; fi
                # (SIGKILL in the instant between the last write and the swap, or the swap and the
                # replaced one's first unlink, can leave a whole copy of the new or the old output;
                # never a part of one that loads)
                if check_loads "$left"; then
                    l=$(sha "$left" 2>/dev/null)
                    [ "$l" = "$old" ] || [ "$l" = "$new" ] || fail "$tool stopped by SIG$sig: the leftover $(basename "$left") loads"
                fi
                rm -rf "$left"
            done
            # (the next round replaces whichever output is there)
            old=$(sha "$dest")
        done
    done
    echo "$tool: stopped $stops times part way through ~$ms ms runs; the destination was always whole"

    # a small file-size limit: the write fails with a message, the old output stays
    before=$(sha "$dest")
    (ulimit -f 2048; run_tool $tool "$dest" "${va[$tool]}") >/dev/null 2>"$T/err"
    rc=$?
    [ $rc = 1 ] || fail "$tool under ulimit -f: exit $rc: $(cat "$T/err")"
    grep -q "File too large" "$T/err" || fail "$tool under ulimit -f: the message does not say why: $(cat "$T/err")"
    [ "$(sha "$dest")" = "$before" ] || fail "$tool under ulimit -f: the old output changed"
    (ulimit -f 2048; run_tool $tool "$T/fresh$ext" "${va[$tool]}") >/dev/null 2>&1
    [ -e "$T/fresh$ext" ] && fail "$tool under ulimit -f: a partial $T/fresh$ext was left"
    ls "$T" | grep -q "\.tmp\." && fail "$tool under ulimit -f left a temporary: $(ls "$T")"
done

# a vindex destination given with a trailing slash: replaced in place, nothing left beside or inside it
"$BIN" extract -m "$FIX/llama" -o "$T/slash.vindex/" >/dev/null 2>&1 &&
    "$BIN" extract -m "$FIX/llama" -o "$T/slash.vindex//" >/dev/null 2>"$T/err" ||
    fail "extract to a path with a trailing slash: $(cat "$T/err")"
"$BIN" verify "$T/slash.vindex" >/dev/null 2>&1 || fail "the vindex written through a trailing slash does not verify"
[ -n "$(find "$T" -maxdepth 2 -name "*.tmp.*")" ] && fail "extract through a trailing slash left a staging directory: $(find "$T" -maxdepth 2 -name "*.tmp.*")"

# an output that is its own input
"$BIN" quantize "$model" "$model" q8_0 >/dev/null 2>"$T/err" && fail "quantize onto its input was accepted"
grep -q "a file the model is read from" "$T/err" || fail "quantize onto its input: $(cat "$T/err")"
"$BIN" convert "$T/hf" "$T/hf/model.safetensors" >/dev/null 2>"$T/err" && fail "convert onto its input was accepted"
grep -q "a file the model is read from" "$T/err" || fail "convert onto its input: $(cat "$T/err")"
"$BIN" extract -m "$T/hf" -o "$T/hf" >/dev/null 2>"$T/err" && fail "extract into its input was accepted"
grep -q "the directory the model is read from" "$T/err" || fail "extract into its input: $(cat "$T/err")"
"$BIN" info -m "$T/hf" >/dev/null 2>&1 || fail "the checkpoint was damaged"
echo "atomic: $failed failed"
[ $failed = 0 ]
