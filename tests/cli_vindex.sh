#!/bin/bash
# infer extract and infer verify end to end on fixtures: a vindex is written
# and verifies, a damaged one fails naming the file, and bad command lines get
# one line on stderr and exit status 1. $1: the infer binary, $2: the fixtures dir.
set -u
BIN=$1 FIX=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

"$BIN" extract -m "$FIX/gemma3" -o "$TMP/g.vindex" -t 2 2>"$TMP/err" || fail "extract: $(cat "$TMP/err")"
grep -q "wrote $TMP/g.vindex (gate f16, ffn q8_0, lm_head q5_0" "$TMP/err" || fail "extract's summary: $(cat "$TMP/err")"
grep -q "lm_head: q4_K blocks of 256 do not divide rows of 64: wrote q5_0" "$TMP/err" || fail "the q4_K fallback is not said"
grep -q "down_meta .*100%" "$TMP/err" || fail "no down_meta progress"
grep -q '"lm_head":[[:space:]]*"q5_0"' "$TMP/g.vindex/index.json" || fail "index.json types"
"$BIN" verify "$TMP/g.vindex" >"$TMP/out" 2>"$TMP/err" || fail "verify: $(cat "$TMP/err")"
grep -q "^OK $TMP/g.vindex" "$TMP/out" || fail "verify prints OK"

# positional MODEL OUT, a plain MLP, every type flag
"$BIN" extract "$FIX/gpt2" "$TMP/p.vindex" --gate q4 --ffn f16 --lm-head f16 --down-top 0 2>"$TMP/err" || fail "extract gpt2: $(cat "$TMP/err")"
grep -q '"gated":[[:space:]]*false' "$TMP/p.vindex/index.json" || fail "gpt2 is not marked as not gated"
grep -q '"gate":[[:space:]]*"q4_0"' "$TMP/p.vindex/index.json" || fail "--gate q4 is not q4_0"
"$BIN" verify "$TMP/p.vindex/" >/dev/null 2>&1 || fail "verify with a trailing slash"

# infer walk: for each asked layer, the k features of largest |gate . x| with
# their scores and the tokens they write (down_meta)
"$BIN" walk -x "$TMP/g.vindex" --ids 2,10,20,30 --layers 0-1 -k 3 >"$TMP/out" 2>"$TMP/err" || fail "walk: $(cat "$TMP/err")"
[ "$(grep -c '^layer ' "$TMP/out")" = 2 ] || fail "walk: not 2 layers: $(cat "$TMP/out")"
[ "$(grep -c '^  f[0-9]* *gate ' "$TMP/out")" = 6 ] || fail "walk: not 3 features per layer: $(cat "$TMP/out")"
grep '^  f' "$TMP/out" | grep -q 'writes: [0-9]' || fail "walk: no down_meta tokens: $(cat "$TMP/out")"
# the features come by |score|, descending
awk '/^layer /{prev=1e30} /^  f/{s=$3; if (s < 0) s = -s; if (s > prev + 1e-6) bad=1; prev=s} END{exit bad}' "$TMP/out" || fail "walk: features not ordered by |score|"
# predict with the vindex: a walk graph reports its error against dense
"$BIN" predict -m "$FIX/gemma3" -x "$TMP/g.vindex" --ids 2,10,20,30 --graph walk@25% >"$TMP/out" 2>"$TMP/err" || fail "predict: $(cat "$TMP/err")"
grep -q "^vs dense: KL [0-9.]*, top-1" "$TMP/out" || fail "predict: no KL against dense: $(cat "$TMP/out")"

# run under a graph: generation walks the vindex and reports its error against a dense context beside it;
# the walk over every feature is the dense FFN (the same greedy tokens as the model alone)
"$BIN" run -m "$FIX/gemma3" -x "$TMP/g.vindex" --ids 2,10,20,30 -n 6 --temp 0 --graph walk@25% >"$TMP/out" 2>"$TMP/err" || fail "run --graph: $(cat "$TMP/err")"
grep -q "^graph walk@25% vs dense: mean KL [0-9.]* over 6 positions, top-1 the same at [0-9]* " "$TMP/err" || fail "run --graph: no KL: $(cat "$TMP/err")"
a=$("$BIN" run -m "$FIX/gemma3" --ids 2,10,20,30 -n 6 --temp 0 2>/dev/null)
b=$("$BIN" run -m "$FIX/gemma3" -x "$TMP/g.vindex" --ids 2,10,20,30 -n 6 --temp 0 --graph walk -k 100000 2>"$TMP/err")
[ -n "$a" ] && [ "$a" = "$b" ] || fail "run --graph walk over all features: $b, dense: $a"
grep -q "mean KL 0.0" "$TMP/err" || fail "run --graph walk over all features: $(cat "$TMP/err")"
"$BIN" run -m "$FIX/gemma3" --ids 2,10 -n 2 -k 5 >/dev/null 2>"$TMP/err" && fail "run -k without a graph"
grep -q "give a --graph" "$TMP/err" || fail "run -k without a graph: $(cat "$TMP/err")"
"$BIN" run -m "$FIX/gemma3" --ids 2,10 -n 2 --graph walk@10% >/dev/null 2>"$TMP/err" && fail "run a walk graph without a vindex"
grep -q "need a vindex" "$TMP/err" || fail "run a walk graph without a vindex: $(cat "$TMP/err")"
"$BIN" run -m "$FIX/gemma3" --ids 2,10 -n 2 --graph cached:0-1 >/dev/null 2>"$TMP/err" && fail "run cached layers"
grep -q "cached layers hold one template" "$TMP/err" || fail "run cached layers: $(cat "$TMP/err")"

# the lm_head index: extracted with --lm-index, verified, used by run --lm-probe (probing every cluster gives the
# dense head's greedy tokens); refusals name what is wrong
"$BIN" extract -m "$FIX/gemma3" -o "$TMP/l.vindex" --lm-index 4 2>"$TMP/err" || fail "extract --lm-index: $(cat "$TMP/err")"
grep -q '"lm_index.bin"' "$TMP/l.vindex/index.json" || fail "lm_index.bin not listed in index.json"
"$BIN" verify "$TMP/l.vindex" >/dev/null 2>"$TMP/err" || fail "verify with an lm index: $(cat "$TMP/err")"
a=$("$BIN" run -m "$FIX/gemma3" --ids 2,10,20,30 -n 6 --temp 0 2>/dev/null)
b=$("$BIN" run -m "$FIX/gemma3" -x "$TMP/l.vindex" --ids 2,10,20,30 -n 6 --temp 0 --lm-probe 4 2>"$TMP/err")
[ -n "$a" ] && [ "$a" = "$b" ] || fail "run --lm-probe over every cluster: $b, dense: $a ($(cat "$TMP/err"))"
"$BIN" run -m "$FIX/gemma3" --ids 2,10 -n 2 --lm-probe 4 >/dev/null 2>"$TMP/err" && fail "run --lm-probe without a vindex"
grep -q "give -x VINDEX" "$TMP/err" || fail "run --lm-probe without a vindex: $(cat "$TMP/err")"
"$BIN" run -m "$FIX/gemma3" -x "$TMP/g.vindex" --ids 2,10 -n 2 --lm-probe 4 >/dev/null 2>"$TMP/err" && fail "run --lm-probe on a vindex without an index"
grep -q "has no lm_head index" "$TMP/err" || fail "run --lm-probe without an index: $(cat "$TMP/err")"
"$BIN" extract -m "$FIX/gemma3" -o "$TMP/x.vindex" --lm-index 0 >/dev/null 2>"$TMP/err" && fail "extract --lm-index 0"
grep -q "at least 1" "$TMP/err" || fail "extract --lm-index 0: $(cat "$TMP/err")"

# walk-only: the model's FFN pages go, the vindex serves the FFN, memory is reported
"$BIN" predict -m "$FIX/gemma3" -x "$TMP/g.vindex" --ids 2,10,20,30 --walk-only >"$TMP/out" 2>"$TMP/err" || fail "predict --walk-only: $(cat "$TMP/err")"
grep -q "^walk-only: resident [0-9.]* MiB with the model's FFN, [0-9.]* MiB after dropping it ([0-9.]* MiB of FFN pages)" "$TMP/out" || fail "walk-only report: $(cat "$TMP/out")"
# its answer is the vindex's dense FFN: the same top token as the vindex alone
a=$("$BIN" predict -m "$FIX/gemma3" -x "$TMP/g.vindex" --ids 2,10,20,30 --walk-only --top 1 -o json 2>/dev/null | grep -o '"id": [0-9]*' | head -1)
b=$("$BIN" predict -x "$TMP/g.vindex" --ids 2,10,20,30 --top 1 -o json 2>/dev/null | grep -o '"id": [0-9]*' | head -1)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "walk-only top token $a differs from the vindex model's $b"

# a Hugging Face source's tokenizer travels with the vindex (its GGUF holds no
# vocabulary): listed and hashed in index.json, used for -p, checked by verify
mkdir "$TMP/hf"
cp "$FIX/qwen3/config.json" "$FIX/qwen3/model.safetensors" "$TMP/hf/"
echo '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3}, "merges": ["a b"]}}' >"$TMP/hf/tokenizer.json"
"$BIN" extract -m "$TMP/hf" -o "$TMP/h.vindex" 2>"$TMP/err" || fail "extract with a tokenizer: $(cat "$TMP/err")"
grep -q '"tokenizer.json"' "$TMP/h.vindex/index.json" || fail "tokenizer.json not listed in index.json"
"$BIN" predict -x "$TMP/h.vindex" -p abc -o json >"$TMP/out" 2>"$TMP/err" || fail "predict -p on a vindex: $(cat "$TMP/err")"
grep -q '"tokens": 2' "$TMP/out" || fail "the vindex's tokenizer: $(cat "$TMP/out")"
"$BIN" verify "$TMP/h.vindex" >/dev/null 2>&1 || fail "verify with a tokenizer"
printf 'x' | dd of="$TMP/h.vindex/tokenizer.json" bs=1 seek=3 conv=notrunc status=none
"$BIN" verify "$TMP/h.vindex" >"$TMP/out" 2>"$TMP/err" && fail "a changed tokenizer.json verified"
grep -q "tokenizer.json: sha256" "$TMP/err" || fail "changed tokenizer.json: $(cat "$TMP/err")"

# a flipped byte: verify fails, naming the file, in one line
printf '\x55' | dd of="$TMP/g.vindex/ffn.bin" bs=1 seek=100 conv=notrunc status=none
"$BIN" verify "$TMP/g.vindex" >"$TMP/out" 2>"$TMP/err" && fail "a damaged ffn.bin verified"
[ "$(wc -l <"$TMP/err")" = 1 ] && grep -q "ffn.bin: sha256" "$TMP/err" || fail "damaged ffn.bin: $(cat "$TMP/err")"

n=0 bad=0
expect_error() { # label, substring, command...
    local label=$1 want=$2
    shift 2
    n=$((n + 1))
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" != 1 ] || [ "$(wc -l <"$TMP/err")" != 1 ] || ! grep -q -- "$want" "$TMP/err"; then
        echo "FAILED: $label: exit $rc, want one line with \"$want\":"
        cat "$TMP/err"
        bad=$((bad + 1))
    fi
}
m=$FIX/llama
expect_error "unknown gate type" "unknown type \"q8\" (f32, f16, q4)" "$BIN" extract -m "$m" -o "$TMP/x" --gate q8
expect_error "unknown ffn type" "unknown type \"q4_0\" (f16, q8_0, q4_k)" "$BIN" extract -m "$m" -o "$TMP/x" --ffn q4_0
expect_error "unknown lm-head type" "--lm-head: unknown type" "$BIN" extract -m "$m" -o "$TMP/x" --lm-head bf16
expect_error "flag without value" "needs a value" "$BIN" extract -m "$m" -o "$TMP/x" --ffn
expect_error "negative down-top" "not an integer" "$BIN" extract -m "$m" -o "$TMP/x" --down-top -1
expect_error "down-top too big" "not an integer in \[0, 4096\]" "$BIN" extract -m "$m" -o "$TMP/x" --down-top 5000
expect_error "down-top beyond the vocabulary" "outside \[0, 512\]" "$BIN" extract -m "$m" -o "$TMP/x" --down-top 1000
expect_error "bad threads" "not an integer" "$BIN" extract -m "$m" -o "$TMP/x" -t many
expect_error "no output" "usage: infer extract" "$BIN" extract -m "$m"
expect_error "unknown option" "unknown option \"--bogus\"" "$BIN" extract -m "$m" -o "$TMP/x" --bogus
expect_error "extra argument" "unexpected argument" "$BIN" extract "$m" "$TMP/x" "$TMP/y"
expect_error "missing model" "no such file" "$BIN" extract -m "$TMP/none" -o "$TMP/x"
expect_error "mixture of experts" "mixture of experts" "$BIN" extract -m "$FIX/mixtral" -o "$TMP/x"
expect_error "output is a file" "exists and is not a directory" "$BIN" extract -m "$m" -o "$TMP/g.vindex/index.json"
expect_error "verify without a dir" "usage: infer verify" "$BIN" verify
expect_error "verify two dirs" "unexpected argument" "$BIN" verify "$TMP/g.vindex" "$TMP/p.vindex"
expect_error "verify an option" "unknown option" "$BIN" verify --deep "$TMP/g.vindex"
expect_error "verify nothing there" "cannot open" "$BIN" verify "$TMP/none"
echo "cli_vindex: $n error checks, $bad failed"
[ "$bad" = 0 ]
