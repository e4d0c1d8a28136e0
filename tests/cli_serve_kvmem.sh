#!/usr/bin/env bash
# infer serve on the CPU when the KV caches' memory is short: the caches grow
# as their sequences do, within one budget (INFER_KV_MEM=MiB; host_mem.c),
# so 64 slots of 32768 positions start at once on a small model and hold
# next to nothing. A request is admitted with its prompt's memory and takes
# more as it goes: with a budget of two short requests' caches, eight at once
# all succeed (the rest wait: infer_kv_cache_waits_total); three that grow
# to the whole budget each all succeed, the oldest taking the newest's
# memory (infer_kv_cache_preemptions_total: its text evaluated again), each
# answer the prompt's alone; one that grows past the budget alone gets a 500
# naming it; and the server goes on answering.
# usage: cli_serve_kvmem.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
# SmolLM2-135M: 30 layers x 192 values of K and V in f16, 23040 bytes a position; a request of up to 256
# positions backs 256 (5.625 MiB): a budget of 12 MiB holds two at once, or one of 512 positions
export INFER_KV_MEM=12
start_server --parallel 64 -c 32768 -t 2
unset INFER_KV_MEM
grep -q "64 slots of 32768 positions (KV cache f16 / f16, 46080.0 MiB in all, taken as the sequences grow)" "$tmp/err" ||
    { echo "FAILED: startup does not say the caches grow: $(cat "$tmp/err")"; exit 1; }
# (not in a sanitizer build: ThreadSanitizer's metadata for the mappings alone is 1.5 GiB)
rss=$(awk '/VmRSS/ {print int($2 / 1024)}' /proc/$pid/status)
[ -n "${INFER_TEST_LIGHT:-}" ] || [ "$rss" -lt 1024 ] || { echo "FAILED: 64 slots of 32768 positions hold $rss MiB at the start"; exit 1; }

python3 - "$base" <<'PY'
import http.client, json, os, sys, threading, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])

def post(prompt, n, **kw):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0, **kw}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read().decode()

def metric(name):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("GET", "/metrics")
    m = c.getresponse().read().decode()
    return float(next(l.split()[1] for l in m.splitlines() if l.startswith(name + " ")))

bad = 0
prompts = [f"Question {i}: what is {i} plus {i}? Answer:" for i in range(8)]
got = {}
light = os.environ.get("INFER_TEST_LIGHT") == "1"  # (a sanitizer build: shorter answers)
n_short = 16 if light else 48
def run(p):
    got[p] = post(p, n_short)
ts = [threading.Thread(target=run, args=(p,)) for p in prompts]
for t in ts: t.start()
for t in ts: t.join()
for p in prompts:
    st, body = got[p]
    if st != 200:
        print(f"FAILED: {p!r} beside seven others: {st} {body[:300]}"); bad = 1
waits = metric("infer_kv_cache_waits_total")
if waits < 1:
    print("FAILED: no request waited for the caches' memory (the budget not applied?)"); bad = 1
backed = metric("infer_kv_cache_backed_bytes")
if backed > 12 * 2**20:
    print(f"FAILED: the caches hold {backed / 2**20:.1f} MiB, past the budget of 12"); bad = 1
for p in prompts[:2]:  # (alone, afterwards: the same answer)
    st, body = post(p, n_short)
    if st != 200 or json.loads(body)["choices"][0]["text"] != json.loads(got[p][1])["choices"][0]["text"]:
        print(f"FAILED: {p!r} alone differs from beside the others: {st} {body[:300]}"); bad = 1
# three requests whose ~245-token prompts fit 256 positions and whose 20 tokens grow past them (to 512:
# 11.25 MiB, the budget's all): the oldest takes the newest's memory (preempted: its text evaluated again
# once memory frees), every answer whole and, on this CPU under --deterministic, the same as alone
long = [f"Story {i}: " + "once upon a time " * 60 for i in range(3)]
got = {}
def run_long(p):
    got[p] = post(p, 20, ignore_eos=True)
ts = [threading.Thread(target=run_long, args=(p,)) for p in long]
for t in ts: t.start()
for t in ts: t.join()
pre = metric("infer_kv_cache_preemptions_total")
if pre < 1:
    print("FAILED: three requests growing past the budget together: none preempted"); bad = 1
for p in long:
    st, body = got[p]
    if st != 200:
        print(f"FAILED: {p[:10]!r} beside two others in a budget of one: {st} {body[:300]}"); bad = 1
        continue
    a = json.loads(body)
    st2, body2 = post(p, 20, ignore_eos=True)
    if st2 != 200 or json.loads(body2)["choices"][0]["text"] != a["choices"][0]["text"] or a["usage"]["completion_tokens"] != 20 \
            or not 240 <= a["usage"]["prompt_tokens"] <= 250:
        print(f"FAILED: {p[:10]!r} alone differs from beside the others (preempted?): {a['usage']} / {st2} {body2[:200]}"); bad = 1
# (~600 positions: 16.9 MiB for 768, past the budget alone: refused at its third chunk; not in a sanitizer
# build, whose prompts are slow: test_kvcache refuses such a reserve by name)
if not light:
    st, body = post("tell me " * 300, 8)
    if st < 500 or "INFER_KV_MEM" not in body:
        print(f"FAILED: a request growing past the budget alone: {st} {body[:300]}"); bad = 1
st, body = post(prompts[0], 8)
if st != 200:
    print(f"FAILED: after the refusal: {st} {body[:300]}"); bad = 1
print(f"cli_serve_kvmem: 8 requests in a budget of two, {int(waits)} admission(s) held back for memory, "
      f"the caches holding {backed / 2**20:.1f} MiB after them; 3 growing past it, {int(pre)} preemption(s)")
sys.exit(bad)
PY
rc=$?
stop_server 30
sanitizer_clean "$tmp/err"
exit $rc
