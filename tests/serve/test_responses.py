"""infer serve's Responses API (POST /v1/responses) through PyPI's `openai`
client: text answers created and streamed (the events in order, the deltas
adding up to the final text), usage against /v1/chat/completions' for the
same conversation, max_output_tokens cutting the answer (status incomplete),
function calls (tool_choice required and named; streamed), a
function_call_output round trip, and hostile bodies (each a 400 naming the
field), then (given the server's pid) a SIGTERM mid-stream: response.failed.
usage: test_responses.py BASE_URL [PID]"""
import http.client
import json
import sys
import urllib.parse

import jsonschema
import openai

from checks import check, report

base = sys.argv[1]
url = urllib.parse.urlparse(base)
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
q = "What is the capital of France?"
terse = "You are terse."


def post(body, raw=None):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    c.request("POST", "/v1/responses", body=raw if raw is not None else json.dumps(body).encode(),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.status, r.read().decode(errors="replace")
    c.close()
    return out


# a text answer: the same text and prompt as chat completions' at temperature 0
r = client.responses.create(model="any", input=q, instructions=terse, temperature=0, max_output_tokens=40)
text = r.output_text
check(r.object == "response" and r.id.startswith("resp_") and r.status == "completed" and text, f"create: {r}")
check([o.type for o in r.output] == ["message"] and r.output[0].role == "assistant" and r.output[0].id.startswith("msg_") and
      r.output[0].content[0].type == "output_text", f"create's output: {r.output}")
u = r.usage
check(u.input_tokens > 5 and 0 < u.output_tokens < 40 and u.total_tokens == u.input_tokens + u.output_tokens, f"usage: {u}")
chat = client.chat.completions.create(model="any", messages=[{"role": "system", "content": terse}, {"role": "user", "content": q}],
                                      temperature=0, max_tokens=40)
check(chat.choices[0].message.content == text and chat.usage.prompt_tokens == u.input_tokens and
      chat.usage.completion_tokens == u.output_tokens, f"as chat completions: {chat} vs {r}")
check(r.instructions == terse and r.max_output_tokens == 40 and r.tools == [] and r.incomplete_details is None and r.error is None,
      f"the request's fields repeated: {r}")
# input as items with input_text parts, and a developer message for the instructions: the same prompt and text
ri = client.responses.create(model="any", temperature=0, max_output_tokens=40,
                             input=[{"role": "developer", "content": terse},
                                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": q}]}])
check(ri.output_text == text and ri.usage.input_tokens == u.input_tokens, f"input items: {ri.output_text!r} vs {text!r}")
# another instruction changes the prompt
rp = client.responses.create(model="any", input=q, instructions="You are a pirate. Always answer in pirate speak.", temperature=0,
                             max_output_tokens=40)
check(rp.usage.input_tokens != u.input_tokens, f"instructions count: {rp.usage} vs {u}")

# streamed: the events in order, with rising sequence numbers; the deltas make the final text
events = list(client.responses.create(model="any", input=q, instructions=terse, temperature=0, max_output_tokens=40, stream=True))
types = [e.type for e in events]
head = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
tail = ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]
deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
check(types[:4] == head and types[-4:] == tail and types[4:-4] == ["response.output_text.delta"] * len(deltas) and len(deltas) >= 2,
      f"stream's events: {types}")
check([e.sequence_number for e in events] == list(range(len(events))), "sequence numbers 0, 1, ...")
final = events[-1].response
check("".join(deltas) == text and final.output_text == text and events[-4].text == text, f"stream: {deltas} vs {text!r}")
check(final.id == events[0].response.id and final.status == "completed" and final.usage.output_tokens == u.output_tokens and
      final.usage.input_tokens == u.input_tokens, f"stream's final response: {final}")
mid = events[2].item.id
check(mid.startswith("msg_") and all(getattr(e, "item_id", mid) == mid for e in events) and events[-2].item.id == mid,
      "the events name the message's id")
# the client's stream helper: text deltas and the final response
with client.responses.stream(model="any", input=q, instructions=terse, temperature=0, max_output_tokens=40) as s:
    got = "".join(e.delta for e in s if e.type == "response.output_text.delta")
    fr = s.get_final_response()
check(got == text and fr.output_text == text and fr.status == "completed", f"responses.stream: {got!r}, {fr}")

# max_output_tokens cuts: status incomplete, reason max_output_tokens, that many tokens
long_q = "Count from one to fifty in words, separated by commas."
ri = client.responses.create(model="any", input=long_q, temperature=0, max_output_tokens=5)
check(ri.status == "incomplete" and ri.incomplete_details.reason == "max_output_tokens" and ri.usage.output_tokens == 5 and ri.output_text
      and ri.output[0].status == "incomplete",
      f"max_output_tokens 5: {ri}")
ev = list(client.responses.create(model="any", input=long_q, temperature=0, max_output_tokens=5, stream=True))
check(ev[-1].type == "response.incomplete" and ev[-1].response.status == "incomplete" and ev[-1].response.output_text == ri.output_text,
      f"max_output_tokens 5, streamed: {ev[-1]}")

# function tools: tool_choice required gives a call whose arguments match its schema
weather = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
clock = {"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 30}}, "required": ["timezone"]}
tools = [{"type": "function", "name": "get_weather", "description": "The current weather in a city", "parameters": weather, "strict": True},
         {"type": "function", "name": "get_time", "description": "The time in a timezone", "parameters": clock, "strict": False}]
schemas = {"get_weather": weather, "get_time": clock}
tq = "What is the weather in Paris, in celsius?"


def valid_call(c):
    try:
        jsonschema.validate(json.loads(c.arguments), schemas[c.name])
        return True
    except (KeyError, ValueError, jsonschema.ValidationError):
        return False


r = client.responses.create(model="any", input=tq, tools=tools, tool_choice="required", temperature=0, max_output_tokens=200)
calls = [o for o in r.output if o.type == "function_call"]
check(r.status == "completed" and len(calls) == 1 and len(r.output) == 1 and calls[0].call_id.startswith("call_") and
      calls[0].id.startswith("fc_") and valid_call(calls[0]), f"tool_choice required: {r.output}")
check(r.tool_choice == "required" and [t.name for t in r.tools] == ["get_weather", "get_time"], f"tools repeated: {r.tools}")
# named: that function
rn = client.responses.create(model="any", input=tq, tools=tools, tool_choice={"type": "function", "name": "get_time"}, temperature=0,
                             max_output_tokens=200)
check([o.type for o in rn.output] == ["function_call"] and rn.output[0].name == "get_time" and valid_call(rn.output[0]),
      f"tool_choice get_time: {rn.output}")
# streamed: the call's events, the arguments' deltas making its arguments
ev = list(client.responses.create(model="any", input=tq, tools=tools, tool_choice="required", temperature=0, max_output_tokens=200,
                                  stream=True))
types = [e.type for e in ev]
check(types == ["response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
                "response.function_call_arguments.done", "response.output_item.done", "response.completed"], f"a call's events: {types}")
if len(ev) == 7:
    fc = ev[5].item
    check(ev[2].item.type == "function_call" and ev[2].item.arguments == "" and ev[3].delta == fc.arguments == ev[4].arguments and
          fc.name == calls[0].name and fc.arguments == calls[0].arguments and ev[6].response.output[0].call_id == fc.call_id,
          f"a call streamed: {ev}")
with client.responses.stream(model="any", input=tq, tools=tools, tool_choice="required", temperature=0, max_output_tokens=200) as s:
    for _ in s:
        pass
    fr = s.get_final_response()
check([o.type for o in fr.output] == ["function_call"] and fr.output[0].arguments == calls[0].arguments, f"responses.stream, a call: {fr}")

# the round trip: the call and its output in the input, a text answer that the output changes
c0 = calls[0]
turn = [{"role": "user", "content": tq}, {"type": "function_call", "call_id": c0.call_id, "name": c0.name, "arguments": c0.arguments}]
alone = client.responses.create(model="any", input=tq, temperature=0, max_output_tokens=1).usage.input_tokens
answers = []
for out in ("22 degrees celsius, sunny", "minus 5 degrees celsius, heavy snow"):
    ra = client.responses.create(model="any", input=turn + [{"type": "function_call_output", "call_id": c0.call_id, "output": out}],
                                 tools=tools, tool_choice="none", temperature=0, max_output_tokens=40)
    check([o.type for o in ra.output] == ["message"] and ra.output_text and ra.usage.input_tokens > alone + 10,
          f"a function_call_output's answer: {ra}")
    answers.append(ra)
check(answers[0].usage.input_tokens != answers[1].usage.input_tokens, "the function's output is in the prompt")
# the function tools offered again (auto): an answer in either form, the call valid where there is one
ra = client.responses.create(model="any", input=turn + [{"type": "function_call_output", "call_id": c0.call_id, "output": "22 C"}],
                             tools=tools, temperature=0, max_output_tokens=200)
check(ra.status == "completed" and ra.output and all(o.type == "message" and o.content[0].text or o.type == "function_call" and
                                                     valid_call(o) for o in ra.output), f"tool_choice auto after a result: {ra.output}")

# hostile: each a 400 naming the field
for body, param in (({"model": "any", "input": [{"type": "reasoning", "summary": []}]}, "input[0]"),
                    ({"model": "any", "input": [{"role": "user", "content": "hi"}, 3]}, "input[1]"),
                    ({"model": "any", "input": [{"role": "robot", "content": "hi"}]}, "input[0]"),
                    ({"model": "any", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
                     "input[0].content[0]"),
                    ({"model": "any", "input": [{"type": "function_call", "call_id": "c", "name": "f"}]}, "input[0]"),
                    ({"model": "any", "input": [{"type": "function_call_output", "call_id": "c", "output": 7}]}, "input[0].output"),
                    ({"model": "any", "input": []}, "input"),
                    ({"model": "any"}, "input"),
                    ({"model": "any", "input": "hi", "previous_response_id": "resp_123"}, "previous_response_id"),
                    ({"model": "any", "input": "hi", "tools": [{"type": "web_search"}]}, "tools[0]"),
                    ({"model": "any", "input": "hi", "tools": [tools[0], {"type": "function", "name": "bad name"}]}, "tools[1]"),
                    ({"model": "any", "input": "hi", "tools": tools, "tool_choice": {"type": "web_search"}}, "tool_choice"),
                    ({"model": "any", "input": "hi", "tools": tools, "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
                    ({"model": "any", "input": "hi", "tool_choice": "required"}, "tool_choice"),
                    ({"model": "any", "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
                    ({"model": "any", "input": "hi", "temperature": 7}, "temperature"),
                    ({"model": "any", "input": "hi", "instructions": 5}, "instructions"),
                    ({"model": "any", "input": "hi", "stream": "yes"}, "stream")):
    st, data = post(body)
    try:
        e = json.loads(data)["error"]
    except (ValueError, KeyError, TypeError):
        e = {}
    check(st == 400 and e.get("param") == param and e.get("message") and e.get("type") == "invalid_request_error",
          f"{body}: 400 naming {param} ({st} {data})")
for raw in (b"[1, 2]", b"not json", b'{"input": "hi"} {}', b""):
    st, data = post(None, raw=raw)
    check(st == 400 and "body" in data, f"body {raw!r}: 400 ({st} {data})")
try:
    client.responses.create(model="any", input="hi", previous_response_id="resp_1")
    check(False, "previous_response_id accepted")
except openai.BadRequestError as e:
    check(e.status_code == 400 and "previous_response_id" in str(e), f"the error as the client sees it: {e}")
# still serving
r2 = client.responses.create(model="any", input=q, instructions=terse, temperature=0, max_output_tokens=40)
check(r2.output_text == text, "after the hostile bodies: the same answer")

# SIGTERM mid-stream (the server's pid given): the stream ends with response.failed
if len(sys.argv) > 2:
    import os
    import signal
    ev = []
    with client.responses.create(model="any", input=long_q, temperature=0, max_output_tokens=1500, stream=True) as st:
        for e in st:
            ev.append(e)
            if len(ev) == 6:
                os.kill(int(sys.argv[2]), signal.SIGTERM)
    last = ev[-1] if ev else None
    check(last and last.type == "response.failed" and last.response.status == "failed" and last.response.error.code == "server_error" and
          last.response.error.message and len(ev) > 6, f"SIGTERM mid-stream: {[e.type for e in ev[-3:]]} {last}")

report("test_responses")
