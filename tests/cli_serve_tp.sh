#!/usr/bin/env bash
# infer serve --tp 2: rank 0 takes the requests and samples, rank 1 evaluates
# what rank 0 tells it each step; two greedy completions in flight at once
# equal the one-process server's (split by layers: the same floats) or
# `infer run --tp 2`'s (split by rows: the sums over the ranks round in
# another order than one process's, and on a quantized model a near tie may
# go the other way; test_tp holds the logits to the tolerance); SIGTERM to
# rank 0 ends both ranks. SmolLM2-135M (9 heads: refused by the row split,
# by name) runs split by layers, the default Gemma 3 270M by rows.
# usage: cli_serve_tp.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
rc=0
ask() { # the greedy completion of prompt $2 from the server at $1
    python3 - "$1" "$2" <<'PY'
import json, sys, urllib.request
body = json.dumps({"prompt": sys.argv[2], "max_tokens": 24, "temperature": 0}).encode()
r = urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/v1/completions", body, {"Content-Type": "application/json"}), timeout=120)
print(json.load(r)["choices"][0]["text"])
PY
}
both() { # two requests at once, their answers on two lines
    ask "$1" "The capital of France is" >"$tmp/a1" & p1=$!
    ask "$1" "Once upon a time" >"$tmp/a2" & p2=$!
    wait $p1 && wait $p2 && cat "$tmp/a1" "$tmp/a2"
}
stop() {
    kill -TERM $pid
    for _ in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    if kill -0 $pid 2>/dev/null; then echo "FAILED: $1: still running 30 s after SIGTERM"; rc=1; else wait $pid || { echo "FAILED: $1: exit status $? after SIGTERM: $(tail -3 "$tmp/err")"; rc=1; }; fi
    pid=
}
start() { # infer serve -m $1 ARGS...: pid, base
    local m=$1; shift
    "$infer" serve -m "$m" --port 0 "$@" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 600); do grep -q "listening on" "$tmp/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    base=$(sed -n 's/^listening on //p' "$tmp/out")
    [ -n "$base" ] || { echo "FAILED: infer serve $*: did not start: $(cat "$tmp/err")"; exit 1; }
}
sm=$(bash "$root/scripts/fetch-model.sh" smollm2 2>/dev/null | tail -1)
gm=$(bash "$root/scripts/fetch-model.sh" gemma3 2>/dev/null | tail -1)
[ -f "$sm" ] && [ -f "$gm" ] || { echo "FAILED: scripts/fetch-model.sh: no $sm or $gm"; exit 1; }

for split in layer row; do
    m=$sm
    if [ $split = row ]; then
        # (SmolLM2's 9 heads do not split over 2 ranks: said by name)
        "$infer" serve --tp 2 -m "$sm" --port 0 -t 1 >/dev/null 2>"$tmp/rerr"
        grep -q "do not split over 2" "$tmp/rerr" || { echo "FAILED: serve --tp 2 on SmolLM2: $(cat "$tmp/rerr")"; rc=1; }
        m=$gm
    fi
    if [ $split = layer ]; then
        start "$m" --parallel 2 -c 256 -t 1
        one=$(both "$base") || { echo "FAILED: $split: one process: no answer"; rc=1; }
        stop "one process"
    else # (the row split sums the ranks' parts in another order: `infer run --tp 2`, the same split, is the reference)
        a=$("$infer" run --tp 2 -m "$m" -p "The capital of France is" -n 24 --temp 0 -t 1 2>/dev/null)
        b=$("$infer" run --tp 2 -m "$m" -p "Once upon a time" -n 24 --temp 0 -t 1 2>/dev/null)
        one=$(printf '%s\n%s' "$a" "$b")
    fi
    start "$m" --tp 2 --split $split --parallel 2 -c 256 -t 1
    two=$(both "$base") || { echo "FAILED: $split: two ranks: no answer: $(tail -3 "$tmp/err")"; rc=1; }
    [ -n "$one" ] && [ "$one" = "$two" ] || { echo "FAILED: serve --tp 2 --split $split: \"$two\", want \"$one\""; rc=1; }
    kids=$(pgrep -P $pid)
    [ -n "$kids" ] || { echo "FAILED: serve --tp 2 --split $split: no rank 1 process"; rc=1; }
    stop "serve --tp 2 --split $split"
    for k in $kids; do kill -0 $k 2>/dev/null && { echo "FAILED: serve --tp 2 --split $split: rank 1 ($k) still runs after rank 0 stopped"; rc=1; }; done
done
exit $rc
