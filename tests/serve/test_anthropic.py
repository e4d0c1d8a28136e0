"""infer serve's Anthropic Messages API through PyPI's `anthropic` client
(tests/cli_serve_anthropic.sh starts the server with --api-key k): messages
created and streamed, stop sequences, max_tokens, count_tokens, the system
prompt, tool use (tool_use blocks, streamed, a round trip with tool_result), the event sequence on the wire, errors in Anthropic's shape, and the
x-api-key header. usage: test_anthropic.py BASE_URL"""
import http.client
import json
import socket
import sys
import urllib.parse

from checks import check, report

try:
    import anthropic
except ImportError:
    print("FAILED: PyPI's anthropic client is not installed (scripts/setup.sh installs it)")
    sys.exit(1)

base = sys.argv[1]
url = urllib.parse.urlparse(base)
client = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
KEY = {"Content-Type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01"}


def request(method, path, body=None, raw=None, headers=None):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=KEY if headers is None else headers)
    r = c.getresponse()
    out = r.status, r.read().decode(errors="replace")
    c.close()
    return out


def sampling(kw):
    """temperature, top_p and top_k in the body (the client's newer versions no longer take them as arguments)"""
    extra = {k: kw.pop(k) for k in ("temperature", "top_p", "top_k") if k in kw}
    return dict(kw, extra_body=extra) if extra else kw


def create(**kw):
    return client.messages.create(**sampling(kw))


def stream(**kw):
    return client.messages.stream(**sampling(kw))


def text_of(m):
    check([b.type for b in m.content] == ["text"], f"one text block: {m.content}")
    return "".join(b.text for b in m.content if b.type == "text")


q = [{"role": "user", "content": "What is the capital of France?"}]
terse = "You are terse."

# created and streamed at temperature 0: the same text, stop reason and usage
m = create(model="any", max_tokens=40, temperature=0, system=terse, messages=q)
text = text_of(m)
check(m.type == "message" and m.role == "assistant" and m.id.startswith("msg_") and text, f"create: {m}")
check(m.stop_reason == "end_turn" and m.stop_sequence is None, f"create: the turn ends ({m.stop_reason}, {m.stop_sequence})")
check(0 < m.usage.output_tokens < 40 and m.usage.input_tokens > 5, f"create usage: {m.usage}")
with stream(model="any", max_tokens=40, temperature=0, system=terse, messages=q) as s:
    parts = [t for t in s.text_stream]
    final = s.get_final_message()
check("".join(parts) == text and len(parts) >= 2, f"stream: {parts!r} vs {text!r}")
check(final.stop_reason == m.stop_reason and final.usage.output_tokens == m.usage.output_tokens and
      final.usage.input_tokens == m.usage.input_tokens and text_of(final) == text, f"stream's final message: {final} vs {m}")

# count_tokens: the input_tokens of the same request
ct = client.messages.count_tokens(model="any", system=terse, messages=q)
check(ct.input_tokens == m.usage.input_tokens, f"count_tokens {ct.input_tokens} vs usage.input_tokens {m.usage.input_tokens}")

# the system prompt: as a string or text blocks (the same prompt), and it changes the answer
mb = create(model="any", max_tokens=40, temperature=0, messages=q,
                            system=[{"type": "text", "text": "You are "}, {"type": "text", "text": "terse."}])
check(text_of(mb) == text and mb.usage.input_tokens == m.usage.input_tokens, f"system as blocks: {text_of(mb)!r} vs {text!r}")
mf = create(model="any", max_tokens=40, temperature=0, messages=q,
                            system="You are a pirate. Always answer in pirate speak, starting with Arr.")
check(text_of(mf) != text and mf.usage.input_tokens != m.usage.input_tokens, f"another system prompt, another answer: {text_of(mf)!r}")
mc = create(model="any", max_tokens=40, temperature=0, system=terse,
                            messages=[{"role": "user", "content": [{"type": "text", "text": "What is the capital of France?"}]}])
check(text_of(mc) == text, f"content as text blocks: {text_of(mc)!r} vs {text!r}")

# stop sequences: the text ends before the first one met, stop_reason "stop_sequence"; one never met changes nothing
word = max(text.replace(".", " ").split(), key=len)
for streamed in (False, True):
    kw = dict(model="any", max_tokens=40, temperature=0, system=terse, messages=q, stop_sequences=["zzqx", word])
    if streamed:
        with stream(**kw) as s:
            st_text = "".join(s.text_stream)
            r = s.get_final_message()
    else:
        r = create(**kw)
        st_text = text_of(r) if r.content else ""
    check(r.stop_reason == "stop_sequence" and r.stop_sequence == word and st_text == text[:text.index(word)],
          f"stop_sequences {word!r} (streamed {streamed}): {st_text!r}, {r.stop_reason}, {r.stop_sequence}")
r = create(model="any", max_tokens=40, temperature=0, system=terse, messages=q, stop_sequences=["zzqx"])
check(text_of(r) == text and r.stop_reason == "end_turn" and r.stop_sequence is None, f"a stop sequence never met: {r}")

# max_tokens: stop_reason "max_tokens" with output_tokens equal to it
long_q = [{"role": "user", "content": "Count from one to fifty in words, separated by commas."}]
for streamed in (False, True):
    if streamed:
        with stream(model="any", max_tokens=5, temperature=0, messages=long_q) as s:
            "".join(s.text_stream)
            r = s.get_final_message()
    else:
        r = create(model="any", max_tokens=5, temperature=0, messages=long_q)
    check(r.stop_reason == "max_tokens" and r.usage.output_tokens == 5, f"max_tokens 5 (streamed {streamed}): {r.stop_reason} {r.usage}")

# sampled: top_p, top_k, metadata accepted
r = create(model="any", max_tokens=8, temperature=0.8, top_p=0.9, top_k=40, messages=q, metadata={"user_id": "u1"})
check(r.usage.output_tokens >= 1, f"sampled: {r}")
# an earlier assistant turn is rendered: a conversation
r = create(model="any", max_tokens=8, temperature=0, system=terse,
                           messages=q + [{"role": "assistant", "content": text}, {"role": "user", "content": "And of Italy?"}])
check(r.usage.input_tokens > m.usage.input_tokens + m.usage.output_tokens, f"a conversation's prompt: {r.usage}")

# tools: tool_choice "any" -> a tool_use block whose input matches the input_schema, stop_reason "tool_use"
weather = {"name": "get_weather", "description": "The weather of a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                            "required": ["city"]}}
clock = {"name": "get_time", "description": "The time in a time zone",
         "input_schema": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"]}}
wq = [{"role": "user", "content": "What is the weather in Paris?"}]


def input_ok(b, tool):
    """a tool_use block: its id, its tool's name, an input meeting the input_schema (required keys, types, enums)"""
    s = tool["input_schema"]
    types = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}
    ok = b.type == "tool_use" and b.id.startswith("toolu_") and b.name == tool["name"] and isinstance(b.input, dict)
    ok = ok and all(k in b.input for k in s["required"]) and set(b.input) <= set(s["properties"])
    for k, v in (b.input.items() if ok else ()):
        p = s["properties"][k]
        ok = ok and isinstance(v, types[p["type"]]) and not (p["type"] != "boolean" and isinstance(v, bool)) and v in p.get("enum", [v])
    return ok


tu = create(model="any", max_tokens=100, temperature=0, messages=wq, tools=[weather, clock], tool_choice={"type": "any"})
check(tu.stop_reason == "tool_use" and len(tu.content) == 1 and tu.content[0].type == "tool_use" and
      input_ok(tu.content[0], weather if tu.content[0].name == "get_weather" else clock), f"tool_choice any: {tu}")
# a named tool: that one, whatever the question
tn = create(model="any", max_tokens=100, temperature=0, messages=wq, tools=[weather, clock], tool_choice={"type": "tool", "name": "get_time"})
check(tn.stop_reason == "tool_use" and [b.type for b in tn.content] == ["tool_use"] and input_ok(tn.content[0], clock), f"tool_choice tool: {tn}")
# streamed: the same block, its input sent as input_json_delta
with stream(model="any", max_tokens=100, temperature=0, messages=wq, tools=[weather, clock], tool_choice={"type": "any"}) as s:
    evs = list(s)
    ts = s.get_final_message()
deltas = [e.delta.type for e in evs if e.type == "content_block_delta"]
check(ts.stop_reason == "tool_use" and [b.type for b in ts.content] == ["tool_use"] and ts.content[0].name == tu.content[0].name and
      ts.content[0].input == tu.content[0].input and ts.usage.output_tokens == tu.usage.output_tokens,
      f"streamed tool_use: {ts} vs {tu}")
check(deltas and set(deltas) == {"input_json_delta"}, f"streamed tool_use: input_json_delta events ({deltas})")
def count(msgs, tools=(weather, clock)):
    return client.messages.count_tokens(model="any", messages=msgs, tools=list(tools)).input_tokens


# the round trip: the call, its result, then an answer in text (tool_choice none, and auto)
trip = wq + [{"role": "assistant", "content": [{"type": "text", "text": "Let me look."}] + [b.model_dump() for b in tu.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tu.content[0].id,
                                           "content": [{"type": "text", "text": "Sunny, 24 degrees Celsius."}]}]}]
for choice in ({"type": "none"}, {"type": "auto"}):
    r = create(model="any", max_tokens=60, temperature=0, messages=trip, tools=[weather, clock], tool_choice=choice)
    if r.stop_reason == "tool_use":  # (auto: the model may call again; its call is then well formed)
        check(choice["type"] == "auto" and all(input_ok(b, weather if b.name == "get_weather" else clock) for b in r.content),
              f"round trip ({choice}): {r}")
    else:
        check(r.stop_reason in ("end_turn", "max_tokens") and text_of(r).strip(), f"round trip ({choice}): a text answer: {r}")
    before = count(wq) if choice["type"] == "auto" else count(wq, ())  # (tool_choice none: no tools in the prompt)
    check(r.usage.input_tokens > before + 20, f"round trip ({choice}): the tool turns are in the prompt: {r.usage} vs {before}")
# the tool turns reach the prompt: a longer result, a longer prompt; an error result (is_error) is marked as one
longer = json.loads(json.dumps(trip).replace("Sunny, 24 degrees Celsius.", "Sunny. " * 60))
check(count(longer) >= count(trip) + 50, f"count_tokens: a tool_result's text is in the prompt ({count(longer)} vs {count(trip)})")
as_str = trip[:2] + [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": tu.content[0].id,
                                                    "content": "Sunny, 24 degrees Celsius."}]}]
check(count(as_str) == count(trip), f"a tool_result's content as a string or text blocks: {count(as_str)} vs {count(trip)}")
failed_trip = json.loads(json.dumps(as_str))
failed_trip[2]["content"][0]["is_error"] = True
check(count(failed_trip) > count(as_str), f"is_error marks the result: {count(failed_trip)} vs {count(as_str)}")
check(count(wq) > count(wq, ()), f"the tools are in the prompt: {count(wq)} vs {count(wq, ())}")
silent = json.loads(json.dumps(trip))
silent[1]["content"] = silent[1]["content"][1:]  # (the assistant's text beside its tool_use dropped)
check(count(trip) > count(silent), f"an assistant's text beside tool_use is in the prompt: {count(trip)} vs {count(silent)}")
r = create(model="any", max_tokens=10, temperature=0, tools=[weather],
           messages=failed_trip + [{"role": "assistant", "content": "Sorry."}, {"role": "user", "content": "Try again."}])
check(r.usage.output_tokens >= 1, f"an is_error tool_result, and turns after it: {r}")
# tools under tool_choice auto: a call or a text answer, each well formed
r = create(model="any", max_tokens=100, temperature=0, messages=[{"role": "user", "content": "Hi! How are you?"}], tools=[weather])
check((r.stop_reason == "tool_use" and input_ok(r.content[0], weather)) or (r.stop_reason == "end_turn" and text_of(r)),
      f"tool_choice auto: {r}")

# the events on the wire: Anthropic's sequence, each event's name its data's type
st, body = request("POST", "/v1/messages", dict(model="any", max_tokens=6, temperature=0, messages=q, stream=True))
events = [b for b in body.split("\n\n") if b.strip()]
names, types = [], []
for e in events:
    lines = dict(l.split(": ", 1) for l in e.split("\n"))
    names.append(lines.get("event"))
    types.append(json.loads(lines.get("data", "{}")).get("type"))
seq = [n for n in names if n != "ping"]
check(st == 200 and names == types and seq[:2] == ["message_start", "content_block_start"] and
      seq[-3:] == ["content_block_stop", "message_delta", "message_stop"] and
      set(seq[2:-3]) == {"content_block_delta"}, f"the event sequence: {names}")
check("[DONE]" not in body, "no [DONE] in Anthropic's stream")

# errors: Anthropic's shape and status, as the client raises them
def raw_error(body, status, want, path="/v1/messages", headers=None):
    st, data = request("POST", path, raw=body if isinstance(body, bytes) else None,
                       body=None if isinstance(body, bytes) else body, headers=headers)
    try:
        j = json.loads(data)
        ok = st == status and j["type"] == "error" and isinstance(j["error"]["type"], str) and want in j["error"]["message"]
    except (ValueError, KeyError, TypeError):
        ok = False
    check(ok, f"{str(body)[:80]}: {status} naming {want!r} ({st} {data[:200]})")
    return json.loads(data)["error"]["type"] if ok else None


good = dict(model="any", max_tokens=4, messages=q)
check(raw_error(dict(model="any", messages=q), 400, "max_tokens") == "invalid_request_error", "missing max_tokens: invalid_request_error")
raw_error(dict(good, messages=[]), 400, "messages")
raw_error(dict(good, messages=[{"role": "system", "content": "x"}]), 400, "role")
raw_error(dict(good, messages=[{"role": "tool", "content": "x"}]), 400, "role")
raw_error(dict(good, messages="hi"), 400, "messages")
raw_error(dict(good, messages=[{"role": "user"}]), 400, "content")
raw_error(dict(good, messages=[{"role": "user", "content": 5}]), 400, "content")
raw_error(dict(good, messages=[{"role": "user", "content": [{"type": "image", "source": {}}]}]), 400, "image")
raw_error(dict(good, messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}]), 400, "text")
raw_error(dict(good, max_tokens="ten"), 400, "max_tokens")
raw_error(dict(good, max_tokens=0), 400, "max_tokens")
raw_error(dict(good, model=5), 400, "model")
raw_error(dict(max_tokens=4, messages=q), 400, "model")
raw_error(dict(good, system=5), 400, "system")
raw_error(dict(good, system=[{"type": "text"}]), 400, "system")
raw_error(dict(good, stop_sequences="x"), 400, "stop_sequences")
raw_error(dict(good, stop_sequences=[""]), 400, "stop_sequences")
raw_error(dict(good, stream="yes"), 400, "stream")
raw_error(dict(good, temperature=1.5), 400, "temperature")
raw_error(dict(good, top_k=-1), 400, "top_k")
raw_error(dict(good, metadata="x"), 400, "metadata")
raw_error(dict(good, messages=[{"role": "user", "content": "x " * 3000}]), 400, "context")
raw_error(b"{", 400, "JSON")
raw_error(b"[1]", 400, "object")
raw_error(dict(model="any", messages=5), 400, "messages", path="/v1/messages/count_tokens")
check(raw_error(good, 404, "no such endpoint", path="/v1/messages/batches") == "not_found_error", "an unknown path: not_found_error")
st, data = request("GET", "/v1/messages")
check(st == 405 and json.loads(data)["type"] == "error", f"GET /v1/messages: 405 ({st} {data[:100]})")
# a body past --max-body: refused from its Content-Length, before it is sent
so = socket.create_connection((url.hostname, url.port))
so.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\nContent-Type: application/json\r\nContent-Length: 2100000\r\n\r\n")
so.settimeout(10)
head = so.recv(4096).decode(errors="replace")
so.close()
check(head.startswith("HTTP/1.1 413") and '"type":"request_too_large"' in head and '"type":"error"' in head,
      f"a body past --max-body: 413 request_too_large: {head[-200:]!r}")
try:
    create(model="any", max_tokens=4, temperature=5, messages=q)
    check(False, "temperature 5 accepted")
except anthropic.BadRequestError as e:
    check(e.status_code == 400 and e.body["error"]["type"] == "invalid_request_error" and "temperature" in str(e),
          f"the error as the client raises it: {e}")

# the key: x-api-key or a bearer token, on every endpoint; none or a wrong one: 401 (authentication_error). (The
# client sends it as x-api-key, or in its newer versions as a bearer token: both are tried here by hand.)
check(raw_error(good, 401, "API key", headers={"Content-Type": "application/json"}) == "authentication_error", "no key: authentication_error")
raw_error(good, 401, "API key", headers={"Content-Type": "application/json", "x-api-key": "x"})
st, data = request("POST", "/v1/messages", good, headers={"Content-Type": "application/json", "Authorization": "Bearer k"})
check(st == 200, f"a bearer token on /v1/messages: {st} {data[:100]}")
st, data = request("POST", "/v1/messages", good, headers={"Content-Type": "application/json", "x-api-key": "k"})
check(st == 200, f"x-api-key without anthropic-version: {st} {data[:100]}")
st, data = request("GET", "/v1/models", headers={"x-api-key": "k"})
check(st == 200, f"x-api-key on /v1/models: {st}")
st, data = request("GET", "/v1/models", headers={"x-api-key": "x"})
check(st == 401 and "error" in json.loads(data), f"a wrong x-api-key on /v1/models: 401 in OpenAI's shape ({st} {data[:100]})")
try:
    anthropic.Anthropic(base_url=base, api_key="wrong", max_retries=0).messages.create(model="any", max_tokens=4, messages=q)
    check(False, "a wrong key accepted")
except anthropic.AuthenticationError as e:
    check(e.status_code == 401, f"a wrong key as the client raises it: {e}")
report("anthropic")
