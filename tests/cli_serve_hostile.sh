#!/usr/bin/env bash
# infer serve against hostile requests (tests/serve/test_hostile.py): costly
# grammars, connection floods, slow headers, half-closed clients, bodies that
# are costly to parse, special tokens in chat content; the test ends with a
# SIGTERM among live requests, and the server must exit 0 within 5 s.
# usage: cli_serve_hostile.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
start_server --parallel 2 -c 2048 -t 2 --api-key k --timeout 3 --max-body 2000000

python3 "$root/tests/serve/test_hostile.py" "$base" $pid
rc=$?

# a file whose final norm holds one +inf: refused at load, naming the tensor (run and serve), not met as NaN logits
python3 - "$model" "$tmp/inf.gguf" <<'PY' || { echo "FAILED: could not make the +inf file (gguf)"; rc=1; }
import shutil, sys, gguf, numpy as np
shutil.copy(sys.argv[1], sys.argv[2])
t = next(t for t in gguf.GGUFReader(sys.argv[2]).tensors if t.name == "output_norm.weight")
with open(sys.argv[2], "r+b") as f:
    f.seek(t.data_offset + 4 * 7)
    f.write(np.array([np.inf], dtype=np.float32).tobytes())
PY
out=$("$infer" run -m "$tmp/inf.gguf" -p hi -n 2 --temp 0.8 2>&1); st=$?
[ $st = 1 ] && echo "$out" | grep -q "output_norm.weight: element 7 is +inf" || { echo "FAILED: run on a +inf norm: rc $st: $out"; rc=1; }
out=$(timeout 120 "$infer" serve -m "$tmp/inf.gguf" --port 0 2>&1); st=$?
[ $st = 1 ] && echo "$out" | grep -q "output_norm.weight: element 7 is +inf" || { echo "FAILED: serve on a +inf norm: rc $st: $out"; rc=1; }

# a NaN scale in the first block of the embeddings (the tied output head: token 0 NaN logits; not checked at load): each request a 500 naming it, the server
# stays up; --check-tensors names the tensor
python3 - "$model" "$tmp/nan.gguf" <<'PY' || { echo "FAILED: could not make the NaN file (gguf)"; rc=1; }
import shutil, sys, gguf
shutil.copy(sys.argv[1], sys.argv[2])
t = next(t for t in gguf.GGUFReader(sys.argv[2]).tensors if t.name == "token_embd.weight")
with open(sys.argv[2], "r+b") as f:  # (the first block's f16 scale d: NaN)
    f.seek(t.data_offset)
    f.write(b"\x00\x7e")
PY
out=$("$infer" run -m "$tmp/nan.gguf" -p hi -n 2 --check-tensors 2>&1); st=$?
[ $st = 1 ] && echo "$out" | grep -q "token_embd.weight: element 0 is NaN" || { echo "FAILED: --check-tensors on a NaN scale: rc $st: $out"; rc=1; }
pid_main=$pid
"$infer" serve -m "$tmp/nan.gguf" --port 0 -t 2 >"$tmp/out2" 2>"$tmp/err2" &
pid=$!
for _ in $(seq 300); do grep -q "listening on" "$tmp/out2" && break; sleep 0.1; done
nbase=$(sed -n 's/^listening on //p' "$tmp/out2")
python3 - "$nbase" <<'PY' || rc=1
import http.client, json, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
def post(body):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read().decode()
bad = 0
for temp in (0, 0.8, 0):
    st, body = post({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": temp})
    if st != 500 or "NaN" not in body:
        print(f"FAILED: NaN logits at temperature {temp}: {st} {body[:200]}"); bad = 1
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
c.request("GET", "/health")
if c.getresponse().status != 200:
    print("FAILED: the server on NaN logits is not alive"); bad = 1
sys.exit(bad)
PY
kill -TERM $pid; wait $pid || { echo "FAILED: the NaN server exited $?: $(tail -3 "$tmp/err2")"; rc=1; }
sanitizer_clean "$tmp/err2"
pid=$pid_main
stop_server 10 sent
sanitizer_clean "$tmp/err"
exit $rc
