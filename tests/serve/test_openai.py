"""infer serve through PyPI's `openai` client: chat and completions, streamed
and not, models, and an error as the client raises it. usage:
test_openai.py BASE_URL"""
import json
import sys

import openai

from checks import check, report

base = sys.argv[1]


client = openai.OpenAI(base_url=base + "/v1", api_key="unused")
ids = [m.id for m in client.models.list()]
check(len(ids) == 1, f"models.list: {ids}")
msgs = [{"role": "user", "content": "What is the capital of France?"}]
r = client.chat.completions.create(model="any", messages=msgs, temperature=0, max_tokens=16)
text = r.choices[0].message.content
check(r.model == ids[0] and text and r.choices[0].finish_reason in ("stop", "length"), f"chat: {r}")
check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, f"chat usage: {r.usage}")
parts, usage, finish = [], None, []
for ch in client.chat.completions.create(model="any", messages=msgs, temperature=0, max_tokens=16, stream=True,
                                         stream_options={"include_usage": True}):
    if ch.usage:
        usage = ch.usage
    for c in ch.choices:
        if c.delta.content:
            parts.append(c.delta.content)
        if c.finish_reason:
            finish.append(c.finish_reason)
check("".join(parts) == text, f"chat stream: {''.join(parts)!r} vs {text!r}")
check(finish == [r.choices[0].finish_reason], f"chat stream finish: {finish}")
check(usage and usage.completion_tokens == r.usage.completion_tokens and usage.prompt_tokens == r.usage.prompt_tokens,
      f"chat stream usage: {usage} vs {r.usage}")
c = client.completions.create(model="any", prompt="The capital of France is", temperature=0, max_tokens=8)
check(c.choices[0].text and c.choices[0].finish_reason in ("stop", "length"), f"completions: {c}")
s = "".join(ch.choices[0].text for ch in client.completions.create(model="any", prompt="The capital of France is", temperature=0,
                                                                   max_tokens=8, stream=True) if ch.choices)
check(s == c.choices[0].text, f"completions stream: {s!r} vs {c.choices[0].text!r}")
lr = client.chat.completions.create(model="any", messages=msgs, temperature=0, max_tokens=8, logprobs=True, top_logprobs=2)
ents = lr.choices[0].logprobs.content
check(len(ents) == lr.usage.completion_tokens and all(len(e.top_logprobs) == 2 for e in ents), f"chat logprobs: {lr.choices[0].logprobs}")
try:
    client.chat.completions.create(model="any", messages=msgs, temperature=5)
    check(False, "temperature 5 accepted")
except openai.BadRequestError as e:
    check(e.status_code == 400 and "temperature" in str(e), f"the error as the client sees it: {e}")

# response_format: JSON by grammar-constrained sampling
person = {"type": "object", "additionalProperties": False, "required": ["name", "age", "city"],
          "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
                         "city": {"enum": ["Paris", "London", "Rome"]}, "retired": {"type": "boolean"},
                         "pets": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}}}


def valid(v, s):
    """v against schema s (the subset used here)"""
    if "enum" in s:
        return v in s["enum"]
    t = s.get("type")
    if t == "object":
        props = s.get("properties", {})
        return (isinstance(v, dict) and all(k in v for k in s.get("required", [])) and
                (s.get("additionalProperties", True) is not False or all(k in props for k in v)) and
                all(valid(v[k], props[k]) for k in v if k in props))
    if t == "array":
        return (isinstance(v, list) and s.get("minItems", 0) <= len(v) <= s.get("maxItems", len(v)) and
                all(valid(x, s.get("items", {})) for x in v))
    if t == "string":
        return isinstance(v, str) and len(v) <= s.get("maxLength", len(v))
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "boolean":
        return isinstance(v, bool)
    return t is None


def parsed(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": person, "strict": True}}
pm = [{"role": "user", "content": "Invent a person who lives in a European capital. Answer in JSON."}]
answers = []
for kw in (dict(temperature=0), dict(temperature=0.8, seed=7), dict(temperature=0.8, seed=8)):
    r = client.chat.completions.create(model="any", messages=pm, response_format=rf, max_tokens=300, **kw)
    out = r.choices[0].message.content
    check(valid(parsed(out), person) and r.choices[0].finish_reason == "stop", f"json_schema {kw}: {out!r} ({r.choices[0].finish_reason})")
    answers.append(out)
parts = [c.delta.content or "" for ch in client.chat.completions.create(model="any", messages=pm, response_format=rf, max_tokens=300,
                                                                         temperature=0, stream=True) for c in ch.choices]
check("".join(parts) == answers[0], f"json_schema streamed: {''.join(parts)!r} vs {answers[0]!r}")
r = client.chat.completions.create(model="any", messages=pm, response_format=rf, max_tokens=300, temperature=0.8, seed=9,
                                   logprobs=True, top_logprobs=3)
ents = r.choices[0].logprobs.content
check(valid(parsed(r.choices[0].message.content), person) and len(ents) >= r.usage.completion_tokens - 1 and
      all(e.logprob <= 0 and all(t.logprob > -1e30 for t in e.top_logprobs) for e in ents),
      f"json_schema with logprobs (of the masked distribution): {r.choices[0].message.content!r}")
r = client.chat.completions.create(model="any", messages=[{"role": "user", "content": "List three fruits and their colors as a JSON object."}],
                                   response_format={"type": "json_object"}, max_tokens=300, temperature=0)
v = parsed(r.choices[0].message.content)
check(isinstance(v, dict) and r.choices[0].finish_reason == "stop", f"json_object: {r.choices[0].message.content!r}")
c = client.completions.create(model="any", prompt="The capital of France, as JSON:", temperature=0, max_tokens=100,
                              extra_body={"json_schema": {"type": "object", "properties": {"capital": {"type": "string", "maxLength": 30}},
                                                          "required": ["capital"]}})
v = parsed(c.choices[0].text)
check(isinstance(v, dict) and isinstance(v.get("capital"), str) and list(v) == ["capital"], f"completions with json_schema: {c.choices[0].text!r}")
c = client.completions.create(model="any", prompt="Is Paris in France? Answer:", temperature=0.8, seed=3, max_tokens=10,
                              extra_body={"grammar": 'root ::= " " ("yes" | "no") "."'})
check(c.choices[0].text in (" yes.", " no.") and c.choices[0].finish_reason == "stop", f"completions with a GBNF grammar: {c.choices[0].text!r}")
for bad_rf, want in (({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^a"}}}, "pattern"),
                     ({"type": "json_schema", "json_schema": {"name": "x"}}, "schema"),
                     ({"type": "json_schema"}, "json_schema"),
                     ({"type": "xml"}, "type"),
                     ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "maxItems": 100000}}}, "maxItems")):
    try:
        client.chat.completions.create(model="any", messages=pm, response_format=bad_rf, max_tokens=5)
        check(False, f"response_format {bad_rf} accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and e.param == "response_format" and want in str(e), f"response_format {bad_rf}: {e}")
try:
    client.completions.create(model="any", prompt="x", max_tokens=5, extra_body={"grammar": "root ::= undefined"})
    check(False, "a grammar with an undefined rule accepted")
except openai.BadRequestError as e:
    check(e.status_code == 400 and e.param == "grammar" and "undefined" in str(e), f"bad grammar: {e}")

# tool calls: the functions offered, the answer held to a call of one of them with arguments of its schema
weather = {"type": "object", "additionalProperties": False, "required": ["city"],
           "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}}}
tools = [{"type": "function", "function": {"name": "get_weather", "description": "The current weather in a city", "parameters": weather}},
         {"type": "function", "function": {"name": "get_time", "description": "The local time in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
                                                          "required": ["city"], "additionalProperties": False}}}]
def tool_counts():  # /metrics' tool counters
    import urllib.request
    m = urllib.request.urlopen(base + "/metrics").read().decode()
    v = {l.split()[0]: float(l.split()[1]) for l in m.splitlines() if l and not l.startswith("#")}
    return [v.get(k, -1) for k in ("infer_tool_answers_total", "infer_tool_call_answers_total", "infer_tool_calls_total")]
before = tool_counts()
tm = [{"role": "user", "content": "What is the weather like in Paris today?"}]
r = client.chat.completions.create(model="any", messages=tm, tools=tools, tool_choice="required", temperature=0, max_tokens=200)
calls = r.choices[0].message.tool_calls or []
check(r.choices[0].finish_reason == "tool_calls" and len(calls) == 1 and r.choices[0].message.content is None and
      calls[0].type == "function" and calls[0].id and calls[0].function.name in ("get_weather", "get_time") and
      valid(parsed(calls[0].function.arguments), weather if calls[0].function.name == "get_weather" else tools[1]["function"]["parameters"]),
      f"tool_choice required: {r.choices[0]}")
# streamed: the same call, as OpenAI streams it (delta.tool_calls with an index)
acc, finish = {}, []
for ch in client.chat.completions.create(model="any", messages=tm, tools=tools, tool_choice="required", temperature=0, max_tokens=200,
                                         stream=True):
    for c in ch.choices:
        for d in c.delta.tool_calls or []:
            a = acc.setdefault(d.index, {"name": "", "arguments": "", "id": None})
            a["id"] = a["id"] or d.id
            a["name"] += d.function.name or ""
            a["arguments"] += d.function.arguments or ""
        if c.finish_reason:
            finish.append(c.finish_reason)
check(finish == ["tool_calls"] and len(acc) == 1 and acc[0]["name"] == calls[0].function.name and
      parsed(acc[0]["arguments"]) == parsed(calls[0].function.arguments) and acc[0]["id"], f"tool calls streamed: {acc} {finish}")
# a named function
r = client.chat.completions.create(model="any", messages=tm, tools=tools, tool_choice={"type": "function", "function": {"name": "get_time"}},
                                   temperature=0, max_tokens=200)
c0 = (r.choices[0].message.tool_calls or [None])[0]
check(c0 and c0.function.name == "get_time" and valid(parsed(c0.function.arguments), tools[1]["function"]["parameters"]),
      f"tool_choice get_time: {r.choices[0]}")
# the tool's result back, and a final answer in text
tm2 = tm + [{"role": "assistant", "content": None, "tool_calls": [calls[0].model_dump()]},
            {"role": "tool", "tool_call_id": calls[0].id, "content": "18 degrees celsius and sunny"}]
r = client.chat.completions.create(model="any", messages=tm2, tools=tools, tool_choice="none", temperature=0, max_tokens=40)
check(r.choices[0].message.content and not r.choices[0].message.tool_calls and r.choices[0].finish_reason in ("stop", "length"),
      f"a tool's result turned into an answer: {r.choices[0]}")
ra = client.chat.completions.create(model="any", messages=tm2, tools=tools, temperature=0, max_tokens=200)
check(ra.choices[0].finish_reason in ("stop", "tool_calls") and (ra.choices[0].message.content or ra.choices[0].message.tool_calls),
      f"tool_choice auto after a result: {ra.choices[0]}")
# /metrics: five answers offered tools, three at least called one (required, streamed, named), one call each;
# the auto answer adds its calls
after = tool_counts()
auto = len(ra.choices[0].message.tool_calls or [])
check(min(before) >= 0 and after[0] - before[0] >= 4 and after[1] - before[1] == 3 + (auto > 0) and after[2] - before[2] == 3 + auto,
      f"/metrics tool counters: {before} -> {after} (auto's calls {auto})")
for kw, param in ((dict(tools=[{"type": "function", "function": {"name": "bad name"}}]), "tools[0]"),
                  (dict(tools=tools, tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
                  (dict(tools=tools, tool_choice="sometimes"), "tool_choice"),
                  (dict(tool_choice="required"), "tool_choice"),
                  (dict(tools=tools + tools[:1]), "tools[2]"),
                  (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "pattern": "^a"}}}]), "tools"),
                  (dict(tools=tools, response_format={"type": "json_object"}), "response_format")):
    try:
        client.chat.completions.create(model="any", messages=tm, max_tokens=5, **kw)
        check(False, f"tools {kw} accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and e.param == param, f"tools {kw}: {e}")
report("openai")
