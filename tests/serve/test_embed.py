"""POST /v1/embeddings of `infer serve -m all-MiniLM-L6-v2` through PyPI's
`openai` client (floats and its default base64) against the reference
embeddings of sentence-transformers (tests/data/embed/minilm.json), then
hostile bodies: each a 400 naming what is wrong, and the server still
answers. Chat and completions refuse the encoder with a 400.
usage: test_embed.py BASE_URL REFERENCE_JSON"""
import base64
import json
import math
import struct
import sys
import urllib.error
import urllib.request

import openai

from checks import check, report

base, ref = sys.argv[1], sys.argv[2]
cases = [c for c in json.load(open(ref, encoding="utf-8"))["cases"] if c["text"]]  # (OpenAI refuses "" too)


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


client = openai.OpenAI(base_url=base + "/v1", api_key="unused")
texts = [c["text"] for c in cases]
for fmt in ("float", "default"):  # (unless told, the client asks for base64 and decodes it)
    r = client.embeddings.create(model="any", input=texts, **({"encoding_format": fmt} if fmt == "float" else {}))
    check(r.object == "list" and [d.index for d in r.data] == list(range(len(cases))), f"{fmt}: data {r.data[:1]}")
    check(r.usage.prompt_tokens == sum(len(c["ids"]) for c in cases) == r.usage.total_tokens, f"{fmt}: usage {r.usage}")
    for c, d in zip(cases, r.data):
        cos = cosine(d.embedding, c["embedding"])
        check(len(d.embedding) == 384 and cos >= 0.9999, f"{fmt}: {c['text'][:30]!r}: cosine {cos}")
r = client.embeddings.create(model="any", input=texts[0])
check(len(r.data) == 1 and cosine(r.data[0].embedding, cases[0]["embedding"]) >= 0.9999, f"one string: {r.data[:1]}")
r = client.embeddings.create(model="any", input=cases[1]["ids"], encoding_format="float")  # token ids
check(cosine(r.data[0].embedding, cases[1]["embedding"]) >= 0.9999, "token ids: not the text's embedding")
r = client.embeddings.create(model="any", input=[cases[2]["ids"], cases[3]["ids"]], encoding_format="float")
check(len(r.data) == 2 and cosine(r.data[1].embedding, cases[3]["embedding"]) >= 0.9999, "arrays of token ids")
try:
    client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    check(False, "chat on an encoder: answered")
except openai.BadRequestError as e:
    check("encoder" in str(e), f"chat on an encoder: {e}")


def post(body, path="/v1/embeddings"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as f:
            return f.status, json.loads(f.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


st, j = post({"input": texts[:2], "encoding_format": "base64"})  # base64 asked for: little-endian float32
got = [list(struct.unpack("<384f", base64.b64decode(d["embedding"]))) for d in j["data"]] if st == 200 else []
check(len(got) == 2 and cosine(got[1], cases[1]["embedding"]) >= 0.9999, f"base64: {st} {json.dumps(j)[:200]}")

long_ids = [1000] * 600
hostile = [
    (b"", None), (b"{", None), (b"[1,2]", None), (b"{\"input\": \"a\"} trailing", None),
    ({}, "input"), ({"input": None}, "input"), ({"input": ""}, "input"), ({"input": []}, "input"),
    ({"input": [""]}, "input"), ({"input": ["ok", ""]}, "input"), ({"input": 42}, "input"), ({"input": {"a": 1}}, "input"),
    ({"input": [[]]}, "input"), ({"input": [1, "a"]}, "input"), ({"input": [-1]}, "input"), ({"input": [1.5]}, "input"),
    ({"input": [10 ** 12]}, "input"), ({"input": [30522]}, "input"), ({"input": ["a", 3]}, "input"),
    ({"input": [["a"]]}, "input"), ({"input": long_ids}, "input"), ({"input": "word " * 700}, "input"),
    ({"input": ["a"] * 2049}, "input"), ({"input": "a", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "a", "encoding_format": 1}, "encoding_format"), ({"input": "a", "model": 3}, "model"),
    ({"input": "a", "dimensions": 128}, "dimensions"),
]
for body, param in hostile:
    st, j = post(body)
    err = j.get("error", {}) if isinstance(j, dict) else {}
    check(st == 400 and err.get("message") and (param is None or err.get("param") == param),
          f"hostile {str(body)[:60]}: {st} {json.dumps(j)[:200]}")
st, j = post({"input": "long " * 600})
check("tokens" in j.get("error", {}).get("message", ""), f"too long: the message says nothing of tokens: {j}")
st, j = post({"prompt": "hi"}, "/v1/completions")
check(st == 400 and "encoder" in j["error"]["message"], f"completions on an encoder: {st} {j}")
st, j = post({"input": "still here"})
check(st == 200 and len(j["data"][0]["embedding"]) == 384, f"after the hostile bodies: {st}")
report("test_embed")
