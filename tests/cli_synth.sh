#!/usr/bin/env bash
# infer synth: a GGUF of random weights with Gemma 3's or Llama 3's shapes loads
# with the asked layers, vocabulary and file type, runs, and bad flags are refused by name.
# usage: cli_synth.sh INFER_BIN FIXTURES_DIR
infer=$1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$infer" synth --shape 1b --layers 2 --vocab 512 --type q8_0 -o "$tmp/s.gguf" 2>"$tmp/err" || { echo "FAILED: synth: $(cat "$tmp/err")"; fail=1; }
info=$("$infer" info -m "$tmp/s.gguf" 2>&1)
for want in "n_layer              = 2" "n_vocab              = 512" "n_embd               = 1152" "n_ff                 = 6912" "q8_0"; do
    grep -qF "$want" <<<"$info" || { echo "FAILED: synth's file: no \"$want\" in infer info"; fail=1; }
done
"$infer" run -m "$tmp/s.gguf" --ids 1,2,3 -n 4 --temp 0 >/dev/null 2>"$tmp/err" || { echo "FAILED: run on synth's file: $(cat "$tmp/err")"; fail=1; }
ls -a "$tmp" | grep -q infer-synth && { echo "FAILED: synth left its temporary directory"; fail=1; }

# Llama 3 8B's shapes: GQA 32/8, rope theta 500000, an lm_head of its own (16 q8_0
# matrices: 7 a layer, the embedding and the output)
"$infer" synth --arch llama --shape 8b --layers 2 --vocab 512 --type q8_0 -o "$tmp/l.gguf" 2>"$tmp/err" || { echo "FAILED: synth --arch llama: $(cat "$tmp/err")"; fail=1; }
info=$("$infer" info -m "$tmp/l.gguf" 2>&1)
for want in "model_type           = llama" "n_layer              = 2" "n_vocab              = 512" "n_embd               = 4096" \
    "n_ff                 = 14336" "n_head               = 32" "n_kv_head            = 8" "head_dim             = 128" \
    "n_ctx_train          = 8192" "eps=1e-05" "theta=500000" "q8_0 16"; do
    grep -qF "$want" <<<"$info" || { echo "FAILED: synth --arch llama's file: no \"$want\" in infer info"; fail=1; }
done
"$infer" run -m "$tmp/l.gguf" --ids 1,2,3 -n 4 --temp 0 >/dev/null 2>"$tmp/err" || { echo "FAILED: run on synth --arch llama's file: $(cat "$tmp/err")"; fail=1; }
# q4_k_m: llama.cpp's mix (q6_K output and the first layers' attn_v, ffn_down).
# No file but the output is written: with files capped at 160 MB (the output is
# 142 MB, a bf16 checkpoint of the model 444 MB) it is made all the same.
(ulimit -f $((160 * 1024)); "$infer" synth --arch llama --shape 8b --layers 1 --vocab 512 --type q4_k_m -o "$tmp/l4.gguf") 2>"$tmp/err" ||
    { echo "FAILED: synth --arch llama q4_k_m, files up to 160 MB: $(cat "$tmp/err")"; fail=1; }
info=$("$infer" info -m "$tmp/l4.gguf" 2>&1)
for want in "n_layer              = 1" "q4_K 6 q6_K 3"; do
    grep -qF "$want" <<<"$info" || { echo "FAILED: synth --arch llama q4_k_m's file: no \"$want\" in infer info"; fail=1; }
done
"$infer" run -m "$tmp/l4.gguf" --ids 1,2,3 -n 4 --temp 0 >/dev/null 2>"$tmp/err" || { echo "FAILED: run on synth --arch llama q4_k_m's file: $(cat "$tmp/err")"; fail=1; }
ls -a "$tmp" | grep -q infer-synth && { echo "FAILED: synth --arch llama left its temporary directory"; fail=1; }
[ "$(ls -A "$tmp" | sort | tr '\n' ' ')" = "err l.gguf l4.gguf s.gguf " ] || { echo "FAILED: synth left files: $(ls -A "$tmp")"; fail=1; }

# the same values as the bf16 checkpoint of --hf: infer convert of it (a directory
# named as synth names the model) writes synth's file, byte for byte
"$infer" synth --shape 1b --layers 2 --vocab 512 --hf "$tmp/synth-gemma3-1b" 2>"$tmp/err" || { echo "FAILED: synth --hf: $(cat "$tmp/err")"; fail=1; }
"$infer" convert "$tmp/synth-gemma3-1b" "$tmp/sc.gguf" --type q8_0 >/dev/null 2>"$tmp/err" || { echo "FAILED: convert of synth --hf: $(cat "$tmp/err")"; fail=1; }
cmp -s "$tmp/s.gguf" "$tmp/sc.gguf" || { echo "FAILED: synth's gemma3 file differs from infer convert of synth --hf's checkpoint"; fail=1; }
"$infer" synth --arch llama --shape 8b --layers 1 --vocab 512 --hf "$tmp/synth-llama-8b" 2>"$tmp/err" || { echo "FAILED: synth --arch llama --hf: $(cat "$tmp/err")"; fail=1; }
"$infer" convert "$tmp/synth-llama-8b" "$tmp/lc.gguf" --type q4_k_m >/dev/null 2>"$tmp/err" || { echo "FAILED: convert of synth --arch llama --hf: $(cat "$tmp/err")"; fail=1; }
cmp -s "$tmp/l4.gguf" "$tmp/lc.gguf" || { echo "FAILED: synth's llama q4_k_m file differs from infer convert of synth --hf's checkpoint"; fail=1; }
rm -rf "$tmp/synth-gemma3-1b" "$tmp/synth-llama-8b" "$tmp/sc.gguf" "$tmp/lc.gguf"

# with another GGUF's vocabulary: the file tokenizes text as that vocabulary does
# (llama.cpp's vocabulary files, from the llama-cpp-python sdist in the cache: fetched if absent)
vocab=${INFER_CACHE:-$HOME/.cache/infer}/llama.cpp/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf
[ -f "$vocab" ] || (cd "$(dirname "$0")/.." && python3 scripts/gen-tokenizer-llamacpp.py --fetch >&2)
if [ -f "$vocab" ]; then
    "$infer" synth --shape 270m --layers 1 --vocab-from "$vocab" --type q8_0 -o "$tmp/v.gguf" 2>"$tmp/err" || { echo "FAILED: synth --vocab-from: $(cat "$tmp/err")"; fail=1; }
    a=$("$infer" tokenize -m "$tmp/v.gguf" "Hello world, a test" 2>&1); b=$("$infer" tokenize -m "$vocab" "Hello world, a test" 2>&1)
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAILED: synth --vocab-from: tokens \"$a\", the vocabulary's own \"$b\""; fail=1; }
    grep -qF "n_vocab              = 32000" <<<"$("$infer" info -m "$tmp/v.gguf" 2>&1)" || { echo "FAILED: synth --vocab-from: not 32000 tokens"; fail=1; }
    "$infer" synth --arch llama --shape 8b --layers 1 --vocab-from "$vocab" --type q8_0 -o "$tmp/lv.gguf" 2>"$tmp/err" || { echo "FAILED: synth --arch llama --vocab-from: $(cat "$tmp/err")"; fail=1; }
    a=$("$infer" tokenize -m "$tmp/lv.gguf" "Hello world, a test" 2>&1)
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAILED: synth --arch llama --vocab-from: tokens \"$a\", the vocabulary's own \"$b\""; fail=1; }
else
    echo "FAILED: no $vocab"; fail=1
fi

expect_err() { # message fragment, args...
    local want=$1; shift
    if "$infer" synth "$@" >/dev/null 2>"$tmp/err"; then echo "FAILED: synth $* succeeded"; fail=1;
    elif ! grep -qF -e "$want" "$tmp/err"; then echo "FAILED: synth $*: \"$(cat "$tmp/err")\" does not say \"$want\""; fail=1; fi
}
expect_err 'unknown --shape "5b"' --shape 5b -o "$tmp/x.gguf"
expect_err 'unknown --arch "nosuch" (archs: gemma3, llama)' --arch nosuch --shape 1b -o "$tmp/x.gguf"
expect_err 'unknown --shape "27b" for --arch llama (shapes: 8b, 70b)' --arch llama --shape 27b -o "$tmp/x.gguf"
expect_err 'unknown --shape "8b" for --arch gemma3 (shapes: 270m, 1b, 4b, 12b, 27b)' --shape 8b -o "$tmp/x.gguf"
expect_err '--shape is required (--arch llama: 8b, 70b)' --arch llama -o "$tmp/x.gguf"
expect_err "exceeds the 8b shape's 32" --arch llama --shape 8b --layers 33 -o "$tmp/x.gguf"
expect_err '-o OUT.gguf is required' --shape 1b
expect_err '-o and --hf: one or the other' --shape 1b -o "$tmp/x.gguf" --hf "$tmp/x"
expect_err 'exceeds the 270m shape' --shape 270m --layers 99 -o "$tmp/x.gguf"
expect_err '--vocab must be at least 256' --shape 1b --vocab 10 -o "$tmp/x.gguf"
expect_err 'synth: --vocab-from' --shape 1b --vocab-from /nonexistent.gguf -o "$tmp/x.gguf"
[ $fail = 0 ] && echo "cli_synth: ok"
exit $fail
