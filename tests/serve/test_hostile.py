"""infer serve against hostile requests (tests/cli_serve_hostile.sh starts
the server with --api-key k --timeout 3 and runs this): costly grammars, flood
connections, slow headers, half-closed clients, huge bodies to parse, special
tokens in chat content, and the small ones; after each, the server is alive
and a neighbour's 10-token request takes at most twice its time alone.
usage: test_hostile.py BASE_URL SERVER_PID. Prints FAILED lines; exits 1 on any."""
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse

from checks import check, report

base, server_pid = sys_argv = __import__("sys").argv[1], int(__import__("sys").argv[2])
url = urllib.parse.urlparse(base)
light = os.environ.get("INFER_TEST_LIGHT") == "1"
AUTH = {"Content-Type": "application/json", "Authorization": "Bearer k"}


def request(method, path, body=None, raw=None, headers=None, timeout=300):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=headers or AUTH)
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


def post(path, body, timeout=300):
    st, data = request("POST", path, body, timeout=timeout)
    try:
        return st, json.loads(data)
    except ValueError:
        return st, {"raw": data[:200]}


def alive(what):
    try:
        st, data = request("GET", "/health", timeout=5)
        return check(st == 200, f"{what}: /health answers ({st})")
    except Exception as e:
        return check(False, f"{what}: /health: {e}")


chat = {"messages": [{"role": "user", "content": "Count from one to twenty."}], "temperature": 0, "max_tokens": 10, "ignore_eos": True}


def neighbour():
    t0 = time.time()
    st, r = post("/v1/chat/completions", chat)
    check(st == 200 and r.get("usage", {}).get("completion_tokens") == 10, f"the neighbour's request: {st} {str(r)[:160]}")
    return time.time() - t0


alone = sorted(neighbour() for _ in range(3))[1]
# the bound beside a hostile request: 2x (+0.2 s of slack); a sanitizer build's timings are not the engine's (5x + 1 s)
bound = 5 * alone + 1.0 if light else 2 * alone + 0.2


def beside_once(hostile):
    th = threading.Thread(target=hostile)
    th.start()
    time.sleep(0.05)
    t = neighbour()
    th.join()
    return t


# a benign request of the same length beside it: what sharing the steps costs the neighbour anyway (a prompt chunk
# of the other's, batched rows)
benign_req = dict(chat, max_tokens=40, temperature=0.8, logprobs=True, top_logprobs=2)
benign = sorted(beside_once(lambda: post("/v1/chat/completions", benign_req)) for _ in range(3))[1]
print(f"  the neighbour alone {alone:.3f} s, beside a benign request {benign:.3f} s")


def beside(what, hostile):
    """the neighbour's time beside hostile(): within 2x alone (+0.2 s of slack) and within 1.5x of beside a benign request"""
    t = sorted(beside_once(hostile) for _ in range(3))[1]
    print(f"  {what}: the neighbour {t:.3f} s beside it")
    check(t <= bound and t <= (3 if light else 1.5) * benign + 0.05,
          f"{what}: the neighbour took {t:.3f} s beside it, {alone:.3f} s alone, {benign:.3f} s beside a benign request")
    alive(what)


# grammars: a crash (deep nesting) and an explosion (nested optional repetitions) refused naming the limit
for n in (1024, 64, 16, 8):
    g = f'root ::= ((("a"{{0,{n}}}){{0,{n}}}){{0,{n}}})'
    t0 = time.time()
    st, r = post("/v1/chat/completions", dict(chat, grammar=g))
    msg = r.get("error", {}).get("message", "")
    if n >= 64:
        check(st == 400 and ("too costly" in msg or "bounds" in msg), f"grammar {{0,{n}}}^3: 400 naming the limit ({st} {msg[:120]})")
    else:
        check(st in (200, 400), f"grammar {{0,{n}}}^3: answered ({st} {msg[:120]})")
    check(time.time() - t0 < 10, f"grammar {{0,{n}}}^3 answered in {time.time() - t0:.1f} s")
    alive(f"grammar {{0,{n}}}^3")
# (log-probabilities: a mask every token, made on the grammar thread)
for g in ('root ::= ("a"{0,300}){0,300}', 'root ::= (("a"{0,7}){0,7}){0,7}', 'root ::= ([a-z ]{0,60}){0,16}', 'root ::= ([a-z]{0,30} " "){0,40}'):
    beside(g, lambda g=g: post("/v1/chat/completions", dict(benign_req, grammar=g)))
st, r = post("/v1/chat/completions", dict(chat, grammar="root ::= [^\\x00-\\U0010FFFF]"))
check(st == 400 and "no token" in r.get("error", {}).get("message", ""), f"a grammar nothing can match: 400 ({st} {str(r)[:160]})")
chain = "root ::= a0\n" + "".join(f"a{i} ::= a{i + 1}\n" for i in range(15000)) + 'a15000 ::= "x"'
st, r = post("/v1/chat/completions", dict(chat, grammar=chain))
check(st == 200, f"a chain of 15000 rules: {st} {str(r)[:160]}")
alive("grammars")

# the small ones
st, r = post("/v1/chat/completions", dict(chat, repeat_penalty=0))
check(st == 400 and r.get("error", {}).get("param") == "repeat_penalty", f"repeat_penalty 0: 400 ({st} {str(r)[:120]})")
st, data = request("POST", "/v1/chat/completions", raw=json.dumps(chat).encode() + b" garbage")
check(st == 400, f"text after the JSON body: 400 ({st} {data[:120]})")
st, data = request("POST", "/tokenize", raw=b'{"content": "x"} {}')
check(st == 400, f"/tokenize: text after the JSON: 400 ({st})")
st, data = request("POST", "/detokenize", {"tokens": [2]})
st, ids = post("/tokenize", {"content": "\u00e9\u00e9\u00e9 \U0001F600"})
toks = ids.get("tokens", [])
for k in range(1, len(toks) + 1):
    st, data = request("POST", "/detokenize", {"tokens": toks[:k]})
    try:
        data.decode("utf-8")
        ok = st == 200 and isinstance(json.loads(data)["content"], str)
    except Exception:
        ok = False
    check(ok, f"/detokenize of {toks[:k]}: valid UTF-8 JSON ({st} {data[:80]!r})")
st, data = request("POST", "/v1/chat/completions", chat, headers={"Content-Type": "application/json", "Authorization": "bearer k"})
check(st == 200, f"'bearer' in lower case: {st}")
st, data = request("POST", "/v1/chat/completions", chat, headers={"Content-Type": "application/json", "Authorization": "Bearer x"})
check(st == 401, f"a wrong key: 401 ({st})")
c = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
c.request("HEAD", "/health")
r = c.getresponse()
check(r.status == 200 and r.read() == b"", f"HEAD /health: 200 without a body ({r.status})")
c.close()


def metric(name):
    st, data = request("GET", "/metrics")
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


before = metric("infer_tokens_generated_total")
st, r = post("/v1/completions", {"prompt": "Hello", "max_tokens": 1, "temperature": 0})
after = metric("infer_tokens_generated_total")
check(st == 200 and after - before == r["usage"]["completion_tokens"] == 1, f"/metrics counts the first token: {before} -> {after}")

# special tokens in chat content are text: the user's <|im_end|> costs its text's tokens, not one control token
st, a = post("/v1/chat/completions", dict(chat, max_tokens=1, messages=[{"role": "user", "content": "hi"}]))
st2, b = post("/v1/chat/completions", dict(chat, max_tokens=1, messages=[{"role": "user", "content": "hi<|im_end|>"}]))
st3, ids = post("/tokenize", {"content": "<|im_end|>", "parse_special": False})
if check(st == st2 == st3 == 200, f"special tokens: {st} {st2} {st3}"):
    d = b["usage"]["prompt_tokens"] - a["usage"]["prompt_tokens"]
    check(d == len(ids["tokens"]) and d > 1, f"a user's <|im_end|> is text: {d} tokens more, its text is {len(ids['tokens'])}")
st, r = post("/v1/completions", {"prompt": "<|im_end|>", "max_tokens": 1, "temperature": 0})
st2, r2 = post("/v1/completions", {"prompt": "<|im_end|>", "max_tokens": 1, "temperature": 0, "parse_special": True})
check(st == st2 == 200 and r["usage"]["prompt_tokens"] > r2["usage"]["prompt_tokens"],
      f"completions: text unless parse_special ({r.get('usage')} vs {r2.get('usage')})")

# a huge body to parse: 40k messages, answered (400: too long for the context) in linear time
body = json.dumps({"messages": [{"role": "user", "content": "x"}] * 40000, "max_tokens": 1}).encode()
t0 = time.time()
st, data = request("POST", "/v1/chat/completions", raw=body)
check(st == 400 and time.time() - t0 < (6 if light else 2), f"40k messages ({len(body)} bytes): {st} in {time.time() - t0:.2f} s")
stops = json.dumps(dict(chat, stop=["a"] * 17)).encode()
st, data = request("POST", "/v1/chat/completions", raw=stops)
check(st == 400, f"17 stop strings: 400 ({st})")
alive("huge bodies")

# half-closed clients: the request, then shutdown(SHUT_WR): the whole answer still comes, waited for and streamed
for streamed in (False, True):
    body = json.dumps(dict(chat, stream=streamed)).encode()
    so = socket.create_connection((url.hostname, url.port))
    so.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    so.shutdown(socket.SHUT_WR)
    so.settimeout(60)
    got = b""
    while True:
        try:
            part = so.recv(65536)
        except Exception:
            break
        if not part:
            break
        got += part
        if (b"[DONE]" in got) if streamed else got.rstrip().endswith(b"0\r\n\r\n") or b'"usage"' in got and got.rstrip().endswith(b"}"):
            break
    so.close()
    text = got.decode(errors="replace")
    if streamed:
        check(text.startswith("HTTP/1.1 200") and "[DONE]" in text and '"finish_reason":"length"' in text, f"a half-closed stream gets it all: {text[-200:]!r}")
    else:
        check(text.startswith("HTTP/1.1 200") and '"completion_tokens":10' in text, f"a half-closed request gets its answer: {text[-200:]!r}")
alive("half-closed clients")

# floods: idle connections and headers a byte a second; /health within 1 s throughout
n_idle = 60 if light else 200
idle = []
for _ in range(n_idle):
    try:
        idle.append(socket.create_connection((url.hostname, url.port), timeout=5))
    except Exception:
        break
slow = []
for _ in range(n_idle):
    try:
        so = socket.create_connection((url.hostname, url.port), timeout=5)
        so.sendall(b"GET /health HTTP/1.1\r\nHo")
        slow.append(so)
    except Exception:
        break
check(len(idle) == len(slow) == n_idle, f"{n_idle} idle and {n_idle} slow connections opened ({len(idle)}, {len(slow)})")
worst = 0
for i in range(8):
    for so in slow:
        try:
            so.send(b"s")
        except Exception:
            pass
    t0 = time.time()
    try:
        st, data = request("GET", "/health", timeout=5)
    except Exception:
        st = 0
    worst = max(worst, time.time() - t0 if st == 200 else 99)
    time.sleep(0.5)
check(worst < 1.0, f"/health beside {n_idle} idle and {n_idle} slow connections: the slowest answer {worst:.2f} s")
time.sleep(4)  # past the --timeout of 3 s: the server has closed them
closed = 0
for so in idle + slow:
    so.settimeout(0.5)
    try:
        closed += so.recv(100) == b"" or True
    except Exception:
        pass
    so.close()
check(closed >= len(idle + slow) * 9 // 10, f"idle and slow connections closed by the server after --timeout ({closed} of {len(idle + slow)})")
t = neighbour()
check(t <= bound, f"after the floods the neighbour takes {t:.2f} s ({alone:.2f} alone)")

# SIGTERM with live streams and waiting requests: every stream an error event and [DONE], every waiting one a 503, exit within 5 s
results = []


def live(streamed):
    body = json.dumps(dict(chat, max_tokens=500, stream=streamed)).encode()
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        c.request("POST", "/v1/chat/completions", body=body, headers=AUTH)
        r = c.getresponse()
        results.append((streamed, r.status, r.read().decode(errors="replace")))
    except Exception as e:
        results.append((streamed, 0, str(e)))


ths = [threading.Thread(target=live, args=(i % 2 == 0,)) for i in range(6)]
for th in ths:
    th.start()
time.sleep(1.5)
os.kill(server_pid, 15)
t0 = time.time()
for th in ths:
    th.join(10)
gone = False
while time.time() - t0 < 8:
    try:
        os.kill(server_pid, 0)
    except OSError:
        gone = True
        break
    time.sleep(0.05)
check(gone and time.time() - t0 < 5, f"the server exits within 5 s of SIGTERM ({time.time() - t0:.1f} s)")
for streamed, st, text in results:
    if streamed:
        check(st == 200 and '"error"' in text and text.rstrip().endswith("data: [DONE]"), f"a live stream at SIGTERM: an error event and [DONE] ({st} {text[-160:]!r})")
    else:
        check(st == 503, f"a waiting request at SIGTERM: 503 ({st} {text[:160]!r})")
report("hostile")
