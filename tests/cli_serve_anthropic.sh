#!/usr/bin/env bash
# infer serve's Anthropic Messages API: PyPI's anthropic client against
# SmolLM2-135M-Instruct (tests/serve/test_anthropic.py: messages created and
# streamed, stop sequences, count_tokens, tool use, errors, x-api-key), then hostile
# requests to it (test_anthropic_hostile.py), which ends with a SIGTERM among
# live streams: the server must exit 0.
# usage: cli_serve_anthropic.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
start_server --parallel 2 --queue 2 -c 1024 -t 2 --max-body 2000000 --api-key k

python3 "$root/tests/serve/test_anthropic.py" "$base"
rc=$?
python3 "$root/tests/serve/test_anthropic_hostile.py" "$base" $pid || rc=1

stop_server 10 sent
sanitizer_clean "$tmp/err"
exit $rc
