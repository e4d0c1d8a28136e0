#!/usr/bin/env bash
# infer run --tp N: the command as N processes, each with its share of the
# model's heads, features and vocabulary (tensor parallel; --split layer: its
# run of layers), gives the whole
# model's greedy tokens and logits; a sampled run gives the same tokens as
# one process with the same seed; bad --tp values and commands that do not
# run split are refused by name. Two ranks started by hand with INFER_TP_ADDR
# (as on two hosts) meet over TCP and give the same tokens and logits.
# usage: cli_tp.sh INFER_BIN FIXTURES_DIR
infer=$1 fx=$2
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for fam in llama gemma3 qwen2; do
    m=$fx/$fam
    [ -d "$m" ] || { echo "FAILED: no fixture $m"; fail=1; continue; }
    a=$("$infer" run -m "$m" --ids 1,2,3,4 -n 12 --temp 0 2>"$tmp/err") || { echo "FAILED: $fam: $(cat "$tmp/err")"; fail=1; }
    b=$("$infer" run --tp 2 -m "$m" --ids 1,2,3,4 -n 12 --temp 0 2>"$tmp/err") || { echo "FAILED: $fam --tp 2: $(cat "$tmp/err")"; fail=1; }
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAILED: $fam: --tp 2 greedy \"$b\", one process \"$a\""; fail=1; }
    c=$("$infer" run --tp 2 --split layer -m "$m" --ids 1,2,3,4 -n 12 --temp 0 2>"$tmp/err") || { echo "FAILED: $fam --split layer: $(cat "$tmp/err")"; fail=1; }
    [ "$a" = "$c" ] || { echo "FAILED: $fam: --tp 2 --split layer greedy \"$c\", one process \"$a\""; fail=1; }
    a=$("$infer" run -m "$m" --ids 1,2,3,4 -n 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -s 7 2>/dev/null)
    b=$("$infer" run --tp=2 -m "$m" --ids 1,2,3,4 -n 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -s 7 2>/dev/null)
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAILED: $fam: --tp 2 sampled \"$b\", one process \"$a\""; fail=1; }
done
# mixtures of experts in GGUF files (each expert's features split; gpt-oss's
# gate and up biases stored apart there)
for fam in gpt_oss qwen3_moe; do
    "$infer" convert "$fx/$fam" "$tmp/$fam.gguf" --type q8_0 >/dev/null 2>"$tmp/err" || { echo "FAILED: convert $fam: $(cat "$tmp/err")"; fail=1; continue; }
    a=$("$infer" run -m "$tmp/$fam.gguf" --ids 1,2,3,4 -n 12 --temp 0 2>"$tmp/err") || { echo "FAILED: $fam.gguf: $(cat "$tmp/err")"; fail=1; }
    b=$("$infer" run --tp 2 -m "$tmp/$fam.gguf" --ids 1,2,3,4 -n 12 --temp 0 2>"$tmp/err") || { echo "FAILED: $fam.gguf --tp 2: $(cat "$tmp/err")"; fail=1; }
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAILED: $fam.gguf: --tp 2 greedy \"$b\", one process \"$a\""; fail=1; }
done
# logits: every rank's share gathered, within rounding of the whole model's
"$infer" logits -m "$fx/llama" --ids 5,6,7 --out "$tmp/one" 2>"$tmp/err" || { echo "FAILED: logits: $(cat "$tmp/err")"; fail=1; }
"$infer" logits --tp 2 -m "$fx/llama" --ids 5,6,7 --out "$tmp/two" 2>"$tmp/err" || { echo "FAILED: logits --tp 2: $(cat "$tmp/err")"; fail=1; }
python3 - "$tmp/one" "$tmp/two" <<'PY' || fail=1
import sys, struct
a, b = (open(p, "rb").read() for p in sys.argv[1:])
if not a or len(a) != len(b):
    print(f"FAILED: logits --tp 2: {len(b)} bytes, one process {len(a)}"); sys.exit(1)
x, y = (struct.unpack(f"<{len(a) // 4}f", s) for s in (a, b))
rms = (sum(v * v for v in x) / len(x)) ** 0.5
d = max(abs(u - v) for u, v in zip(x, y))
if d > 1e-4 * rms: print(f"FAILED: logits --tp 2 differ by {d} (RMS {rms})"); sys.exit(1)
PY
# ranks started by hand, as on two hosts: the environment names the job and
# rank 0's address (INFER_TP_ADDR), and they meet over TCP
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
a=$("$infer" run -m "$fx/llama" --ids 1,2,3,4 -n 12 --temp 0 2>/dev/null)
for split in row layer; do
    job="INFER_TP_WORLD=2 INFER_TP_ID=cli-tcp-$$-$split INFER_TP_ADDR=127.0.0.1:$(free_port) INFER_TP_SPLIT=$split INFER_TP_TIMEOUT=60"
    env $job INFER_TP_RANK=1 "$infer" run -m "$fx/llama" --ids 1,2,3,4 -n 12 --temp 0 >"$tmp/r1" 2>"$tmp/e1" &
    pid=$!
    b=$(env $job INFER_TP_RANK=0 "$infer" run -m "$fx/llama" --ids 1,2,3,4 -n 12 --temp 0 2>"$tmp/e0") || { echo "FAILED: tcp $split, rank 0: $(cat "$tmp/e0")"; fail=1; }
    wait $pid || { echo "FAILED: tcp $split, rank 1: $(cat "$tmp/e1")"; fail=1; }
    [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$(cat "$tmp/r1")" ] || { echo "FAILED: tcp $split: ranks \"$b\", \"$(cat "$tmp/r1")\"; one process \"$a\""; fail=1; }
done
job="INFER_TP_WORLD=2 INFER_TP_ID=cli-tcp-$$-logits INFER_TP_ADDR=127.0.0.1:$(free_port) INFER_TP_TIMEOUT=60"
env $job INFER_TP_RANK=1 "$infer" logits -m "$fx/llama" --ids 5,6,7 --out "$tmp/tcp1" 2>"$tmp/e1" &
pid=$!
env $job INFER_TP_RANK=0 "$infer" logits -m "$fx/llama" --ids 5,6,7 --out "$tmp/tcp0" 2>"$tmp/e0" || { echo "FAILED: tcp logits, rank 0: $(cat "$tmp/e0")"; fail=1; }
wait $pid || { echo "FAILED: tcp logits, rank 1: $(cat "$tmp/e1")"; fail=1; }
cmp -s "$tmp/tcp0" "$tmp/tcp1" || { echo "FAILED: tcp logits: ranks 0 and 1 differ"; fail=1; }
cmp -s "$tmp/tcp0" "$tmp/two" || { echo "FAILED: tcp logits: not the bits of --tp 2 (shared memory)"; fail=1; }
# a rank of another world is refused by name; its rank 0 then gives up
job="INFER_TP_ID=cli-tcp-$$-bad INFER_TP_ADDR=127.0.0.1:$(free_port) INFER_TP_TIMEOUT=3"
env $job INFER_TP_WORLD=2 INFER_TP_RANK=0 "$infer" run -m "$fx/llama" --ids 1 -n 1 >/dev/null 2>"$tmp/e0" &
pid=$!
env $job INFER_TP_WORLD=3 INFER_TP_RANK=1 "$infer" run -m "$fx/llama" --ids 1 -n 1 >/dev/null 2>"$tmp/e1" && { echo "FAILED: a rank of world 3 joined a job of 2"; fail=1; }
grep -q "world 3 is not rank 0's 2" "$tmp/e1" || { echo "FAILED: world 3 against 2: $(cat "$tmp/e1")"; fail=1; }
wait $pid && { echo "FAILED: rank 0 without its rank 1 ran"; fail=1; }
grep -q "1 of 2 ranks joined" "$tmp/e0" || { echo "FAILED: rank 0 without its rank 1: $(cat "$tmp/e0")"; fail=1; }
# --tp N keeps to shared memory, whatever INFER_TP_ADDR says
b=$(INFER_TP_ADDR=127.0.0.1:1 "$infer" run --tp 2 -m "$fx/llama" --ids 1,2,3,4 -n 12 --temp 0 2>"$tmp/err") || { echo "FAILED: --tp 2 beside INFER_TP_ADDR: $(cat "$tmp/err")"; fail=1; }
[ "$a" = "$b" ] || { echo "FAILED: --tp 2 beside INFER_TP_ADDR: \"$b\", one process \"$a\""; fail=1; }
# refused by name
for bad in "--tp 0" "--tp x" "--tp 65" "--tp" "--split layer" "--tp 2 --split rows"; do
    "$infer" run $bad -m "$fx/llama" --ids 1 -n 1 >/dev/null 2>"$tmp/err" && { echo "FAILED: run $bad accepted"; fail=1; }
    grep -q -- "--tp\|--split" "$tmp/err" || { echo "FAILED: run $bad: $(cat "$tmp/err")"; fail=1; }
done
timeout 60 "$infer" chat --tp 2 -m "$fx/llama" </dev/null >/dev/null 2>"$tmp/err" && { echo "FAILED: chat --tp 2 accepted"; fail=1; }
grep -q "does not run split" "$tmp/err" || { echo "FAILED: chat --tp 2: $(cat "$tmp/err")"; fail=1; }
INFER_TP_WORLD=2 "$infer" run --tp 2 -m "$fx/llama" --ids 1 -n 1 >/dev/null 2>"$tmp/err" && { echo "FAILED: --tp inside a job accepted"; fail=1; }
# heads that do not split
"$infer" run --tp 7 -m "$fx/llama" --ids 1 -n 1 >/dev/null 2>"$tmp/err" && { echo "FAILED: --tp 7 accepted"; fail=1; }
grep -q "do not split over 7" "$tmp/err" || { echo "FAILED: --tp 7: $(cat "$tmp/err")"; fail=1; }
exit $fail
