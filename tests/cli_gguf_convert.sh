#!/bin/bash
# infer convert end to end: a bf16 checkpoint converted to bf16 GGUF gives
# bit-identical logits through the CLI with INFER_BF16_EXACT=1 (same values,
# same kernels); by default the GGUF's bf16 products take bf16 activations as
# llama.cpp's do, which moves the logits a little (within 5% of their RMS,
# the same top token at each position) but not nothing. Bad arguments fail with a message.
# $1: the infer binary, $2: the fixtures dir.
set -u
BIN=$1 FIX=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

"$BIN" convert "$FIX/qwen3" "$TMP/q.gguf" --type bf16 2>"$TMP/err" || fail "convert: $(cat "$TMP/err")"
IDS=1,5,9,200,17,3,77
"$BIN" logits -m "$FIX/qwen3" --ids $IDS --out "$TMP/hf.f32" || fail "logits from the HF directory"
"$BIN" logits -m "$TMP/q.gguf" --ids $IDS --out "$TMP/gguf.f32" || fail "logits from the GGUF file"
INFER_BF16_EXACT=1 "$BIN" logits -m "$TMP/q.gguf" --ids $IDS --out "$TMP/exact.f32" || fail "logits from the GGUF file (exact)"
cmp -s "$TMP/hf.f32" "$TMP/exact.f32" || fail "bf16 GGUF logits (INFER_BF16_EXACT=1) differ from the HF directory's"
python3 - "$TMP/hf.f32" "$TMP/gguf.f32" 7 <<'PY' || fail "bf16 GGUF logits with bf16 activations"
import struct, sys
a, b = (open(f, "rb").read() for f in sys.argv[1:3])
assert len(a) == len(b) and len(a) > 0, "logit files of different sizes"
x, y = (struct.unpack(f"{len(a) // 4}f", v) for v in (a, b))
rms = (sum(v * v for v in x) / len(x)) ** 0.5
err = max(abs(p - q) for p, q in zip(x, y))
assert err > 0, "the bf16 activations changed nothing"
assert err <= 0.05 * rms, f"max error {err:.3g} over 5% of the RMS {rms:.3g}"
T = int(sys.argv[3]); V = len(x) // T
top = lambda v, t: max(range(V), key=lambda i: v[t * V + i])
assert all(top(x, t) == top(y, t) for t in range(T)), "the top token changed"
print(f"cli_gguf_convert: bf16 activations move the logits by at most {err / rms:.2%} of their RMS")
PY
"$BIN" info -m "$TMP/q.gguf" | grep -q "gguf *= version 3" || fail "info does not describe the GGUF file"

"$BIN" convert "$FIX/qwen3" "$TMP/x.gguf" --type q9_9 2>"$TMP/err" && fail "an unknown --type was accepted"
grep -q "unknown --type \"q9_9\"" "$TMP/err" || fail "message for a bad --type: $(cat "$TMP/err")"
"$BIN" convert "$TMP/nowhere" "$TMP/x.gguf" 2>"$TMP/err" && fail "a missing model was accepted"
grep -q "nowhere" "$TMP/err" || fail "message for a missing model: $(cat "$TMP/err")"
"$BIN" convert "$TMP/q.gguf" "$TMP/y.gguf" 2>"$TMP/err" && fail "converting a GGUF file again was accepted"
echo "cli_gguf_convert: ok"
