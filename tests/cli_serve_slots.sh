#!/usr/bin/env bash
# infer serve's slots on disk (tests/serve/test_slots.py): a long system
# prompt's slot saved under --slot-save-path, the server restarted, the slot
# restored: the same system prompt reuses it and answers as before; hostile
# names, ids and files refused; without the flag, save and restore are 501;
# under INFER_SERVE_REUSE=chunks (a GPU's way) only whole chunks are reused;
# a prompt copies a prefix it shares from a busy slot's cache.
# usage: cli_serve_slots.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
mkdir -p "$tmp/slots"
flags=(--parallel 2 -c 2048 -t 2 --slot-save-path "$tmp/slots")
rc=0

start_server "${flags[@]}"
python3 "$root/tests/serve/test_slots.py" "$base" save "$tmp/slots" || rc=1
stop_server 10
sanitizer_clean "$tmp/err"

start_server "${flags[@]}"
python3 "$root/tests/serve/test_slots.py" "$base" restore "$tmp/slots" || rc=1
stop_server 10
sanitizer_clean "$tmp/err"

start_server --parallel 2 -c 2048 -t 2
python3 "$root/tests/serve/test_slots.py" "$base" share "$tmp/slots" || rc=1
stop_server 10
sanitizer_clean "$tmp/err"

start_server --parallel 1 -c 512 -t 2
python3 "$root/tests/serve/test_slots.py" "$base" noflag || rc=1
stop_server 10
sanitizer_clean "$tmp/err"

INFER_SERVE_REUSE=chunks start_server --parallel 1 -c 2048 -t 2
python3 "$root/tests/serve/test_slots.py" "$base" chunks || rc=1
stop_server 10
sanitizer_clean "$tmp/err"

# the flag names a directory
"$infer" serve --slot-save-path "$tmp/none" --port 0 >/dev/null 2>"$tmp/flag"
[ $? -ne 0 ] && grep -q "slot-save-path" "$tmp/flag" || { echo "FAILED: --slot-save-path of a missing directory: $(cat "$tmp/flag")"; rc=1; }
exit $rc
