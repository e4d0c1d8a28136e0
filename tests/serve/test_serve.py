"""infer serve against OpenAI's wire format, with the standard library only
(tests/cli_serve.sh starts the server and runs this): usage: test_serve.py
BASE_URL INFER_BIN MODEL [SERVER_PID]. Prints FAILED lines; exits 1 on any."""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

from checks import check, report

base, infer, model = sys.argv[1], sys.argv[2], sys.argv[3]
server_pid = int(sys.argv[4]) if len(sys.argv) > 4 else 0
light = os.environ.get("INFER_TEST_LIGHT") == "1"  # (a sanitizer build: fewer clients, more time)
url = urllib.parse.urlparse(base)


def request(method, path, body=None, raw=None, headers=None):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=300)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.status, r.getheader("Content-Type"), r.read()
    c.close()
    return out


def post(path, body):
    st, ty, data = request("POST", path, body)
    return st, json.loads(data)


def stream(path, body):
    """The events of a streamed request: (status, [parsed json or '[DONE]'])."""
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=300)
    c.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    events = []
    if r.status == 200:
        check(r.getheader("Content-Type") == "text/event-stream", "a stream's Content-Type is text/event-stream")
        for line in r.read().decode().split("\n"):
            if line.startswith("data: "):
                events.append("[DONE]" if line[6:] == "[DONE]" else json.loads(line[6:]))
            else:
                check(line == "", f"stream lines are 'data: ...' or empty (got {line[:60]!r})")
    c.close()
    return r.status, events


# health and models
st, ty, data = request("GET", "/health")
check(st == 200 and json.loads(data) == {"status": "ok"} and ty == "application/json", f"/health: {st} {data[:80]}")
st, ty, data = request("GET", "/v1/models")
models = json.loads(data) if st == 200 else {}
check(st == 200 and models.get("object") == "list" and len(models.get("data", [])) == 1, f"/v1/models: {st} {data[:120]}")
mid = models["data"][0]["id"] if st == 200 else "?"
st, ty, data = request("GET", "/v1/models/" + mid)
check(st == 200 and json.loads(data).get("id") == mid, f"/v1/models/{mid}: {st}")

# chat, waited for and streamed: the same greedy text, finish and usage
chat = {"model": "anything", "messages": [{"role": "system", "content": "You are brief."},
                                          {"role": "user", "content": "What is the capital of France?"}],
        "temperature": 0, "max_tokens": 16}
st, r = post("/v1/chat/completions", chat)
ok = check(st == 200 and r["object"] == "chat.completion" and r["model"] == mid, f"chat: {st} {r}")
if ok:
    msg = r["choices"][0]["message"]
    text, finish, usage = msg["content"], r["choices"][0]["finish_reason"], r["usage"]
    check(msg["role"] == "assistant" and text.strip(), f"chat: an assistant answer (got {msg})")
    check(finish in ("stop", "length"), f"chat: finish_reason {finish}")
    check(usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] and usage["completion_tokens"] <= 16,
          f"chat: usage {usage}")
    st, ev = stream("/v1/chat/completions", dict(chat, stream=True, stream_options={"include_usage": True}))
    check(st == 200 and ev and ev[-1] == "[DONE]", f"stream: ends with [DONE] ({st}, {len(ev)} events)")
    chunks = [e for e in ev if e != "[DONE]"]
    check(chunks and chunks[0]["choices"][0]["delta"].get("role") == "assistant", "stream: the first chunk carries the role")
    deltas = "".join(e["choices"][0]["delta"].get("content", "") for e in chunks if e["choices"])
    check(deltas == text, f"stream: the deltas make the waited-for text ({deltas!r} vs {text!r})")
    fin = [e["choices"][0]["finish_reason"] for e in chunks if e["choices"] and e["choices"][0]["finish_reason"]]
    check(fin == [finish], f"stream: one finish_reason, the same ({fin} vs {finish})")
    counts = lambda u: {k: u[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}  # (cached_tokens: the slot's cache)
    check(chunks[-1]["choices"] == [] and counts(chunks[-1].get("usage", {}) or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}) == counts(usage),
          f"stream: the usage chunk equals the usage ({chunks[-1]} vs {usage})")

# completions: greedy text equals infer run's on the same prompt
prompt = "The capital of France is"
st, r = post("/v1/completions", {"prompt": prompt, "temperature": 0, "max_tokens": 12})
if check(st == 200 and r["object"] == "text_completion", f"completions: {st} {r}"):
    got = r["choices"][0]["text"]
    run = subprocess.run([infer, "run", "-m", model, "-p", prompt, "-n", "12", "--temp", "0", "-t", "2"], capture_output=True, text=True)
    check(run.returncode == 0 and run.stdout.rstrip("\n").endswith(got.rstrip("\n")) and got.strip(),
          f"completions: greedy text equals infer run's ({got!r} vs {run.stdout!r})")
    # a stop string: the text ends before it, finish stop
    if check(len(got) >= 6, f"completions: some text to stop in ({got!r})"):
        stop = got[len(got) // 2:len(got) // 2 + 3]
        st, r2 = post("/v1/completions", {"prompt": prompt, "temperature": 0, "max_tokens": 12, "stop": [stop, "zzz"]})
        t2 = r2["choices"][0]["text"] if st == 200 else None
        check(st == 200 and t2 == got[:got.index(stop)] and r2["choices"][0]["finish_reason"] == "stop",
              f"stop {stop!r}: {t2!r} from {got!r}")
        st, ev = stream("/v1/completions", {"prompt": prompt, "temperature": 0, "max_tokens": 12, "stop": stop, "stream": True})
        t3 = "".join(e["choices"][0]["text"] for e in ev if e != "[DONE]" and e["choices"])
        check(st == 200 and t3 == t2, f"stop {stop!r}, streamed: {t3!r} (waited for: {t2!r})")

# a seed repeats a sampled answer
samp = dict(chat, temperature=0.8, seed=1234, max_tokens=12)
a, b = post("/v1/chat/completions", samp), post("/v1/chat/completions", samp)
check(a[0] == 200 and a == b or (a[0] == 200 and a[1]["choices"] == b[1]["choices"]), "the same seed gives the same text")

# four at once (the engine's batched steps) give what each gives alone
qs = ["Name a color.", "What is 2 + 2?", "Say hello.", "Name a fruit."]
alone = []
for q in qs:
    st, r = post("/v1/chat/completions", dict(chat, messages=[{"role": "user", "content": q}]))
    alone.append(r["choices"][0]["message"]["content"] if st == 200 else None)
together = [None] * len(qs)


def one(i):
    st, r = post("/v1/chat/completions", dict(chat, messages=[{"role": "user", "content": qs[i]}]))
    together[i] = r["choices"][0]["message"]["content"] if st == 200 else None


ths = [threading.Thread(target=one, args=(i,)) for i in range(len(qs))]
[t.start() for t in ths]
[t.join() for t in ths]
check(None not in alone and together == alone, f"four requests at once answer as alone ({together} vs {alone})")

# errors: status, JSON shape, the parameter named
def err(method, path, body=None, raw=None, status=400, param=None, code=None):
    st, ty, data = request(method, path, body, raw)
    try:
        e = json.loads(data)["error"]
        shaped = set(e) == {"message", "type", "param", "code"} and e["message"]
    except Exception:
        e, shaped = {}, False
    check(st == status and shaped and ty == "application/json" and (param is None or e.get("param") == param) and
          (code is None or e.get("code") == code), f"{method} {path} {str(body or raw)[:60]}: want {status} {param or ''} {code or ''}, got {st} {data[:160]}")


err("POST", "/v1/chat/completions", raw=b"{not json")
err("POST", "/v1/chat/completions", raw=b"[1, 2]")
err("POST", "/v1/chat/completions", raw=b'{"messages": [{"role": "user", "content": "a\x00b"}]}')
err("POST", "/v1/chat/completions", {"model": "x"}, param="messages")
err("POST", "/v1/chat/completions", {"messages": "hi"}, param="messages")
err("POST", "/v1/chat/completions", {"messages": [{"role": "robot", "content": "hi"}]}, param="messages[0]")
err("POST", "/v1/chat/completions", dict(chat, temperature="hot"), param="temperature")
err("POST", "/v1/chat/completions", dict(chat, temperature=5), param="temperature")
err("POST", "/v1/chat/completions", dict(chat, max_tokens=0), param="max_tokens")
err("POST", "/v1/chat/completions", dict(chat, n=2), param="n")
err("POST", "/v1/chat/completions", dict(chat, tools=[{"type": "function"}]), param="tools[0]")  # (a tool without its function)
err("POST", "/v1/chat/completions", dict(chat, logit_bias={"1": 5}), param="logit_bias")
err("POST", "/v1/chat/completions", dict(chat, stop=[""]), param="stop")
err("POST", "/v1/chat/completions", dict(chat, stream="yes"), param="stream")
err("POST", "/v1/completions", {"prompt": 5}, param="prompt")
err("POST", "/v1/chat/completions", dict(chat, messages=[{"role": "user", "content": "word " * 3000}]), code="context_length_exceeded")
err("POST", "/v1/chat/completions", raw=b'{"messages": "' + b"x" * 20000 + b'"}', status=413)
err("GET", "/v1/chat/completions", status=405)
err("GET", "/nowhere", status=404)
st, r = post("/v1/chat/completions", chat)
check(st == 200 and r["choices"][0]["message"]["content"] == text, "after the errors a request still succeeds, with the same answer")

# a repeated prompt reuses a slot's cache (and answers the same)
st, r1 = post("/v1/chat/completions", chat)
st2, r2 = post("/v1/chat/completions", chat)
if check(st == 200 and st2 == 200, "repeated chat requests"):
    cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"]
    check(0 < cached < r2["usage"]["prompt_tokens"], f"the repeat's prompt came from a slot's cache ({r2['usage']})")
    check(r2["choices"][0]["message"]["content"] == r1["choices"][0]["message"]["content"], "the cached prompt gives the same answer")

# llama-server's tokenize / detokenize
st, ty, data = request("POST", "/tokenize", {"content": "Hello world, 你好"})
toks = json.loads(data).get("tokens") if st == 200 else None
check(st == 200 and toks and all(isinstance(t, int) for t in toks), f"/tokenize: {st} {data[:100]}")
if toks:
    st, ty, data = request("POST", "/detokenize", {"tokens": toks})
    check(st == 200 and json.loads(data).get("content") == "Hello world, 你好", f"/detokenize round trip: {st} {data[:100]}")
err("POST", "/detokenize", {"tokens": [-1]}, param="tokens")
err("POST", "/tokenize", {"content": 3}, param="content")


def metric(name):
    st, ty, data = request("GET", "/metrics")
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


check(metric("infer_tokens_generated_total") > 0 and metric("infer_slots") == 4, "/metrics: tokens generated, 4 slots")
kv, cap, ratio, kvb = (metric(k) for k in ("infer_kv_cache_tokens", "infer_kv_cache_capacity_tokens", "infer_kv_cache_usage_ratio",
                                            "infer_kv_cache_bytes"))
check(cap == 4 * 1024 and kv is not None and 0 < kv <= cap and abs(ratio - kv / cap) < 1e-5 and kvb and kvb > 0 and kvb % cap == 0,
      f"/metrics KV cache: {kv} of {cap} positions, ratio {ratio}, {kvb} bytes")

# a step takes the chunks of several waiting prompts (-b: 256 tokens a step on the CPU by default), each
# computed as alone: four prompts of about 80 tokens at once
words = "the cat sat on a mat and the dog ran to the park with a ball".split()
long_qs = [" ".join(words[(i + j) % len(words)] for j in range(80)) for i in range(4)]
long_alone = [post("/v1/completions", {"prompt": q, "max_tokens": 4, "temperature": 0}) for q in long_qs]
long_together = [None] * 4


def long_one(i):
    long_together[i] = post("/v1/completions", {"prompt": long_qs[i], "max_tokens": 4, "temperature": 0})


ths = [threading.Thread(target=long_one, args=(i,)) for i in range(4)]
[t.start() for t in ths]
[t.join() for t in ths]
check(all(a[0] == 200 for a in long_alone) and [a[1]["choices"][0]["text"] for a in long_alone] ==
      [b[1]["choices"][0]["text"] if b and b[0] == 200 else None for b in long_together], "four prompts at once answer as alone")
check(metric("infer_step_prompt_chunks_max") >= 2, f"a step held several prompts' chunks: {metric('infer_step_prompt_chunks_max')}")

# clients that leave: a waited-for request and a stream, dropped mid-way; their slots free up

for streamed in (False, True):
    body = json.dumps(dict(chat, max_tokens=400, stream=streamed, messages=[{"role": "user", "content": "Write a long story."}]))
    s_ = socket.create_connection((url.hostname, url.port))
    s_.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
    time.sleep(0.5)
    s_.close()
    t0, drop_bound = time.time(), 30 if light else 5  # (a sanitizer build beside other tests: steps of seconds)
    while time.time() - t0 < drop_bound and metric("infer_requests_running") != 0:
        time.sleep(0.05)
    check(metric("infer_requests_running") == 0,
          f"a dropped {'stream' if streamed else 'request'}: its slot is free within {drop_bound} s ({time.time() - t0:.1f} s)")
check(metric("infer_client_disconnects_total") >= 2, "/metrics counts the clients that left")

# log-probabilities: chat's (top_logprobs) and completions' (logprobs n), greedy: the chosen token is the top one
st, r = post("/v1/chat/completions", dict(chat, logprobs=True, top_logprobs=3))
if check(st == 200 and r["choices"][0].get("logprobs"), f"chat logprobs: {st} {str(r)[:200]}"):
    ents = r["choices"][0]["logprobs"]["content"]
    check(len(ents) == r["usage"]["completion_tokens"], f"one entry a token ({len(ents)} vs {r['usage']})")
    check("".join(e["token"] for e in ents) == r["choices"][0]["message"]["content"], "the entries' tokens make the text")
    check(all(len(e["top_logprobs"]) == 3 and e["top_logprobs"][0]["token"] == e["token"] and
              abs(e["top_logprobs"][0]["logprob"] - e["logprob"]) < 1e-6 and e["logprob"] <= 0 and
              e["top_logprobs"][0]["logprob"] >= e["top_logprobs"][1]["logprob"] >= e["top_logprobs"][2]["logprob"] and
              bytes(e["bytes"]).decode() == e["token"] for e in ents), f"greedy entries: the top alternative is the token ({ents[:2]})")
st, r = post("/v1/completions", {"prompt": prompt, "temperature": 0, "max_tokens": 6, "logprobs": 2})
if check(st == 200 and r["choices"][0].get("logprobs"), f"completions logprobs: {st} {str(r)[:200]}"):
    lp = r["choices"][0]["logprobs"]
    check("".join(lp["tokens"]) == r["choices"][0]["text"] and len(lp["token_logprobs"]) == len(lp["tokens"]) == len(lp["top_logprobs"]) and
          all(len(t) == 2 for t in lp["top_logprobs"]) and lp["text_offset"][0] == 0, f"completions logprobs: {lp}")
err("POST", "/v1/chat/completions", dict(chat, top_logprobs=3), param="top_logprobs")
err("POST", "/v1/chat/completions", dict(chat, logprobs=True, top_logprobs=21), param="top_logprobs")
err("POST", "/v1/completions", {"prompt": "x", "logprobs": 6}, param="logprobs")

# ignore_eos (llama-server's, for benchmarks): exactly max_tokens
st, r = post("/v1/chat/completions", dict(chat, max_tokens=40, ignore_eos=True))
check(st == 200 and r["usage"]["completion_tokens"] == 40 and r["choices"][0]["finish_reason"] == "length", f"ignore_eos: {r.get('usage')}")

# hostile input: deep nesting, a huge announced body (refused before it is read), headers a byte at a time
err("POST", "/v1/chat/completions", raw=b"[" * 1000 + b"]" * 1000)
err("POST", "/v1/chat/completions", raw=b'{"a":' * 2000 + b"1" + b"}" * 2000)
s_ = socket.create_connection((url.hostname, url.port))
s_.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n")
s_.settimeout(10)
head = s_.recv(200).decode(errors="replace")
s_.close()
check(head.startswith("HTTP/1.1 413"), f"a 5 MB body is refused from its Content-Length: {head[:40]!r}")
s_ = socket.create_connection((url.hostname, url.port))
for ch in b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n":
    s_.send(bytes([ch]))
    time.sleep(0.002)
s_.settimeout(10)
head = s_.recv(200).decode(errors="replace")
s_.close()
check(head.startswith("HTTP/1.1 200") and '{"status":"ok"}' in head, f"headers sent a byte at a time: {head[:60]!r}")
st, r = post("/v1/chat/completions", chat)
check(st == 200, "after the hostile input a request still succeeds")

# many clients that leave: 100 mid-stream and 20 mid-prefill (long prompts); every slot is free
# within 1 s of the last one leaving and the server's memory stays within 50 MB of where it was
def rss_mib():
    try:
        with open(f"/proc/{server_pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024
    except Exception:
        return None


if server_pid:
    before = rss_mib()

    def leave(n_words, read_first):
        body = json.dumps({"prompt": "tell me " * n_words, "max_tokens": 200, "stream": True, "temperature": 0}).encode()
        so = socket.create_connection((url.hostname, url.port))
        so.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                   + str(len(body)).encode() + b"\r\n\r\n" + body)
        return so

    n_pre, n_mid, words, bound = (4, 12, 60, 30.0) if light else (20, 100, 300, 1.0)
    socks = [leave(words, False) for _ in range(n_pre)] + [leave(5, True) for _ in range(n_mid)]  # (the long prompts first)
    time.sleep(1.0)
    for so in socks[n_pre:]:  # mid-stream (some still queued)
        so.settimeout(0.05)
        try:
            so.recv(64)
        except Exception:
            pass
    for so in socks:
        so.close()
    t0 = time.time()
    while time.time() - t0 < bound and (metric("infer_requests_running") or metric("infer_requests_queued")):
        time.sleep(0.02)
    check(metric("infer_requests_running") == 0 and metric("infer_requests_queued") == 0,
          f"{n_pre + n_mid} clients gone: every slot free and the queue empty within {bound} s "
          f"(running {metric('infer_requests_running')}, queued {metric('infer_requests_queued')})")
    after = rss_mib()
    check(before is not None and after is not None and after - before <= 50, f"memory after {n_pre + n_mid} dropped clients: {before} -> {after} MiB")
    st, r = post("/v1/chat/completions", chat)
    check(st == 200 and r["choices"][0]["message"]["content"] == text, "after the dropped clients a request gets the same answer")

report("serve")
