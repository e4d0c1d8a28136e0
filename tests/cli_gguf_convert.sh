#!/bin/bash
# infer convert end to end: a bf16 checkpoint converted to bf16 GGUF gives
# bit-identical logits through the CLI (same values, same kernels), and bad
# arguments fail with a message. $1: the infer binary, $2: the fixtures dir.
set -u
BIN=$1 FIX=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

"$BIN" convert "$FIX/qwen3" "$TMP/q.gguf" --type bf16 2>"$TMP/err" || fail "convert: $(cat "$TMP/err")"
IDS=1,5,9,200,17,3,77
"$BIN" logits -m "$FIX/qwen3" --ids $IDS --out "$TMP/hf.f32" || fail "logits from the HF directory"
"$BIN" logits -m "$TMP/q.gguf" --ids $IDS --out "$TMP/gguf.f32" || fail "logits from the GGUF file"
cmp -s "$TMP/hf.f32" "$TMP/gguf.f32" || fail "bf16 GGUF logits differ from the HF directory's"
"$BIN" info -m "$TMP/q.gguf" | grep -q "gguf *= version 3" || fail "info does not describe the GGUF file"

"$BIN" convert "$FIX/qwen3" "$TMP/x.gguf" --type q9_9 2>"$TMP/err" && fail "an unknown --type was accepted"
grep -q "unknown --type \"q9_9\"" "$TMP/err" || fail "message for a bad --type: $(cat "$TMP/err")"
"$BIN" convert "$TMP/nowhere" "$TMP/x.gguf" 2>"$TMP/err" && fail "a missing model was accepted"
grep -q "nowhere" "$TMP/err" || fail "message for a missing model: $(cat "$TMP/err")"
"$BIN" convert "$TMP/q.gguf" "$TMP/y.gguf" 2>"$TMP/err" && fail "converting a GGUF file again was accepted"
echo "cli_gguf_convert: ok"
