#!/usr/bin/env bash
# infer serve's chat page in a real browser (tests/serve/test_web.py: Debian's
# chromium and chromedriver through selenium); registered where chromedriver
# is installed (WEB=1 bash scripts/setup.sh installs it; .ci/run does).
# usage: cli_serve_web.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
model=$(bash "$root/scripts/fetch-model.sh" smollm2 2>"$tmp/fetch" | tail -1)
[ -f "$model" ] || { echo "FAILED: scripts/fetch-model.sh smollm2: $(cat "$tmp/fetch")"; exit 1; }
"$infer" serve -m "$model" --port 0 --parallel 2 -c 1024 -t 2 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 600); do grep -q "listening on" "$tmp/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
base=$(sed -n 's/^listening on //p' "$tmp/out")
[ -n "$base" ] || { echo "FAILED: infer serve did not start: $(cat "$tmp/err")"; exit 1; }
python3 "$root/tests/serve/test_web.py" "$base" "$(dirname "$infer")/serve-web.png"
rc=$?
kill -TERM $pid
wait $pid || { echo "FAILED: infer serve exited $? after SIGTERM"; rc=1; }
pid=
exit $rc
