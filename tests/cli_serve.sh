#!/usr/bin/env bash
# infer serve: OpenAI's endpoints over HTTP (tests/serve/test_serve.py, the
# standard library's client, and test_openai.py, PyPI's openai client) on SmolLM2-135M-Instruct, four slots; then
# SIGTERM stops it cleanly.
# usage: cli_serve.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
start_server --parallel 4 -c 1024 -t 2 --max-body 16384 --queue 200
grep -q "4 slots of 1024 positions (KV cache" "$tmp/err" || { echo "FAILED: startup does not report the slots and KV memory: $(cat "$tmp/err")"; exit 1; }

python3 "$root/tests/serve/test_serve.py" "$base" "$infer" "$model" $pid
rc=$?
python3 "$root/tests/serve/test_openai.py" "$base" || rc=1

stop_server 30
sanitizer_clean "$tmp/err"
exit $rc
