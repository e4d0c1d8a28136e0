#!/usr/bin/env bash
# infer serve when a step fails (as a device's operation can; here the
# engine's test seam INFER_FAULT_TOKEN fails every pass holding one token):
# the sequences of the failed batched step run again one by one, only the
# request whose own pass fails gets a 500 naming why, the others finish as
# they would alone, and the server goes on answering.
# usage: cli_serve_fault.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
model=$(bash "$root/scripts/fetch-model.sh" smollm2 2>/dev/null | tail -1)
id=$("$infer" tokenize -m "$model" -p " zebra" | sed -n "s/^ *\([0-9][0-9]*\) -> ' zebra'$/\1/p")
[ -n "$id" ] || { echo "FAILED: no token for ' zebra'"; exit 1; }
export INFER_FAULT_TOKEN=$id
start_server --parallel 4 -c 512 -t 2
unset INFER_FAULT_TOKEN

python3 - "$base" <<'PY'
import http.client, json, sys, threading, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])

def post(prompt, n):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    c.request("POST", "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read().decode()

def text(body):
    return json.loads(body)["choices"][0]["text"]

bad = 0
good = ["The capital of France is", "Once upon a time there", "The best way to learn is"]
got = {}
def run(p, n):
    got[p] = post(p, n)
def running():
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("GET", "/metrics")
    m = c.getresponse().read().decode()
    return float(next(l.split()[1] for l in m.splitlines() if l.startswith("infer_requests_running ")))
N = 160  # (long enough that the three still decode when the poisoned prompt comes, on a fast machine too)
ts = [threading.Thread(target=run, args=(p, N)) for p in good]
for t in ts: t.start()
t0 = time.time()
while running() < 3 and time.time() - t0 < 30:
    time.sleep(0.02)
time.sleep(0.1)  # (the three decoding: the poisoned prompt joins their steps)
poison = "A zebra has stripes because"
st, body = post(poison, 8)
for t in ts: t.join()
if st != 500 or "INFER_FAULT_TOKEN" not in body:
    print(f"FAILED: the poisoned request: {st} {body[:300]}"); bad = 1
for p in good:
    s, b = got[p]
    if s != 200:
        print(f"FAILED: {p!r} failed beside the poisoned one: {s} {b[:300]}"); bad = 1
        continue
    s2, b2 = post(p, N)  # alone, afterwards: the server goes on, and the same text
    if s2 != 200 or text(b2) != text(b):
        print(f"FAILED: {p!r} alone differs from beside the failure: {text(b)!r} / {s2} {b2[:300]}"); bad = 1
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
c.request("GET", "/metrics")
m = c.getresponse().read().decode()
retried = int(next(l.split()[1] for l in m.splitlines() if l.startswith("infer_steps_retried_total")))
if retried < 1:
    print("FAILED: no step was retried (the poisoned prompt ran alone?)"); bad = 1
print(f"cli_serve_fault: {retried} failed step(s) retried one by one; 3 requests beside them whole, the poisoned one a 500")
sys.exit(bad)
PY
rc=$?
stop_server 30
sanitizer_clean "$tmp/err"
exit $rc
