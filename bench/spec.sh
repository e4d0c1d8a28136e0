#!/usr/bin/env bash
# Speculative decoding with the n-gram drafter: greedy decode tokens a second
# with and without it, on texts that repeat their prompt, for each model:
# `infer bench --spec-ngram K -f TEXT` (one token a pass against K drafted
# tokens checked in one pass of K + 1 rows, alternating; the bench fails
# unless both ways give the same tokens). Prints one markdown table.
#   bench/spec.sh [MODEL...]   env: THREADS=2 N=128 REPS=3 K=8 TEXTS="bench/data/spec-edit.txt"
#                                   INFER_BIN=build/infer
# (default models: Gemma 3 270M Q4_K_M and SmolLM2-135M-Instruct Q4_1, fetched)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${INFER_BIN:-$root/build/infer}
t=${THREADS:-2} n=${N:-128} reps=${REPS:-3} k=${K:-8}
texts=${TEXTS:-$root/bench/data/spec-edit.txt}
[ -x "$bin" ] || { echo "spec.sh: no $bin (build first, or set INFER_BIN)" >&2; exit 1; }
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
    models=("$(bash "$root/scripts/fetch-model.sh" gemma3 | tail -1)" "$(bash "$root/scripts/fetch-model.sh" smollm2 | tail -1)")
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "spec.sh: $(git -C "$root" rev-parse --short HEAD) $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) cores), $t threads, -n $n, K $k, $reps alternating runs"
echo
echo "| model | text | prompt | greedy t/s | spec-ngram K$k t/s | speed-up | tokens a pass | accepted |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in "${models[@]}"; do
    for f in $texts; do
        "$bin" bench -m "$m" -t "$t" -n "$n" -r "$reps" --spec-ngram "$k" -f "$f" -o json >"$tmp/out" 2>"$tmp/err" ||
            { cat "$tmp/err" >&2; exit 1; }
        python3 - "$tmp/out" "$tmp/err" "$(basename "$m")" "$(basename "$f")" <<'PY'
import json, re, sys
rows = json.load(open(sys.argv[1]))
err = open(sys.argv[2]).read()
m = re.search(r"prompt (\d+) tokens.*?([\d.]+) tokens a pass \((\d+) drafted, (\d+) accepted, ([\d.]+)%\)", err)
a, b = rows[0], rows[1]
print(f"| {sys.argv[3]} | {sys.argv[4]} | {m.group(1)} | {a['avg_ts']:.2f} ± {a['stddev_ts']:.2f} | {b['avg_ts']:.2f} ± {b['stddev_ts']:.2f} "
      f"| {b['avg_ts'] / a['avg_ts']:.2f}x | {m.group(2)} | {m.group(5)}% |")
PY
    done
done
