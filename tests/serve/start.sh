# Sourced by tests/cli_serve*.sh: start_server ARGS... fetches SmolLM2-135M-
# Instruct (scripts/fetch-model.sh), starts `$infer serve -m it --port 0
# ARGS` and sets model, pid, base (its URL); $tmp/err holds its stderr. The
# EXIT trap kills it and removes $tmp. stop_server and sanitizer_clean check
# its end (rc=1 and a line saying what failed). Needs $infer and $root.
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
start_server() {
    model=$(bash "$root/scripts/fetch-model.sh" smollm2 2>"$tmp/fetch" | tail -1)
    [ -f "$model" ] || { echo "FAILED: scripts/fetch-model.sh smollm2: $(cat "$tmp/fetch")"; exit 1; }
    # (--deterministic: the tests know the model's greedy answers, and a reused prompt's answer is the prompt's
    # alone bit for bit; on a CPU with AMX the default prompt paths are other floats)
    # (under ASan a freed block waits in a 256 MB quarantine before its memory is reused: the server's resident
    # size would grow by what requests freed, and test_serve bounds that growth; 16 MB keeps it to real growth)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16" \
        "$infer" serve -m "$model" --port 0 --deterministic "$@" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 600); do grep -q "listening on" "$tmp/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    base=$(sed -n 's/^listening on //p' "$tmp/out")
    [ -n "$base" ] || { echo "FAILED: infer serve did not start: $(cat "$tmp/err")"; exit 1; }
}

# stop_server SECONDS [sent]: SIGTERM (unless sent already), then the server
# must exit 0 within SECONDS
stop_server() {
    [ -n "${2:-}" ] || kill -TERM $pid
    for _ in $(seq $(($1 * 10))); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    if kill -0 $pid 2>/dev/null; then
        echo "FAILED: infer serve still runs $1 s after SIGTERM"; rc=1
    else
        wait $pid; st=$?
        [ $st = 0 ] || { echo "FAILED: infer serve exited $st after SIGTERM: $(tail -5 "$tmp/err")"; rc=1; }
    fi
    pid=
}

# sanitizer_clean FILE: no sanitizer reported in the server's stderr
sanitizer_clean() {
    grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|WARNING: ThreadSanitizer\|runtime error:" "$1" || return 0
    echo "FAILED: sanitizer report:"; cat "$1"; rc=1
}
