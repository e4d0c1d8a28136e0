#!/usr/bin/env bash
# infer serve's Responses API (POST /v1/responses): PyPI's openai client
# against SmolLM2-135M-Instruct (tests/serve/test_responses.py: text answers
# created and streamed, max_output_tokens, function calls and their outputs,
# hostile bodies), ending with a SIGTERM
# mid-stream: the stream ends with response.failed, the server exits 0.
# usage: cli_serve_responses.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
start_server --parallel 2 -c 2048 -t 2

python3 "$root/tests/serve/test_responses.py" "$base" $pid
rc=$?

stop_server 10 sent
sanitizer_clean "$tmp/err"
exit $rc
