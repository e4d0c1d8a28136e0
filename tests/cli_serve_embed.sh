#!/usr/bin/env bash
# infer serve -m all-MiniLM-L6-v2 (scripts/fetch-model.sh minilm): POST
# /v1/embeddings through PyPI's openai client against sentence-transformers'
# embeddings, hostile bodies, chat refused (tests/serve/test_embed.py); then
# SIGTERM stops it cleanly.
# usage: cli_serve_embed.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
model=$(bash "$root/scripts/fetch-model.sh" minilm 2>"$tmp/fetch" | tail -1)
[ -d "$model" ] || { echo "FAILED: scripts/fetch-model.sh minilm: $(cat "$tmp/fetch")"; exit 1; }
"$infer" serve -m "$model" --port 0 -t 2 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 600); do grep -q "listening on" "$tmp/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
base=$(sed -n 's/^listening on //p' "$tmp/out")
[ -n "$base" ] || { echo "FAILED: infer serve did not start: $(cat "$tmp/err")"; exit 1; }

python3 "$root/tests/serve/test_embed.py" "$base" "$root/tests/data/embed/minilm.json"
rc=$?
stop_server 30
sanitizer_clean "$tmp/err"
exit $rc
