#!/usr/bin/env bash
# infer serve's chat page in a real browser (tests/serve/test_web.py: Debian's
# chromium and chromedriver through selenium); registered where chromedriver
# is installed (WEB=1 bash scripts/setup.sh installs it; .ci/run does).
# usage: cli_serve_web.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
start_server --parallel 2 -c 1024 -t 2
python3 "$root/tests/serve/test_web.py" "$base" "$(dirname "$infer")/serve-web.png"
rc=$?
kill -TERM $pid
wait $pid || { echo "FAILED: infer serve exited $? after SIGTERM"; rc=1; }
pid=
exit $rc
