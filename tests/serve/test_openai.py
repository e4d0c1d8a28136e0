"""infer serve through PyPI's `openai` client: chat and completions, streamed
and not, models, and an error as the client raises it. usage:
test_openai.py BASE_URL"""
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
report("openai")
