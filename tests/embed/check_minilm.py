#!/usr/bin/env python3
"""tests/cli_embed.sh's check: `infer tokenize` and `infer embed` on
all-MiniLM-L6-v2 against tests/data/embed/minilm.json (transformers' ids and
sentence-transformers' embeddings, scripts/gen-embed-expected.py).

  check_minilm.py INFER_BIN MODEL_DIR REFERENCE_JSON
"""
import json, math, subprocess, sys

infer, model, ref = sys.argv[1:4]
cases = json.load(open(ref, encoding="utf-8"))["cases"]
fails = 0


def run(*args):
    p = subprocess.run([infer, *args], capture_output=True, text=True, encoding="utf-8")
    if p.returncode:
        raise SystemExit(f"FAILED: infer {' '.join(args[:3])} ...: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


args = ["embed", "-m", model, "-t", "2"]
for c in cases:
    args += ["-p", c["text"]]
lines = run(*args).splitlines()
if len(lines) != len(cases):
    raise SystemExit(f"FAILED: {len(cases)} texts gave {len(lines)} lines")
worst = 1.0
for c, line in zip(cases, lines):
    ids = json.loads(run("tokenize", "-m", model, "--ids", "-p", c["text"]))
    if ids != c["ids"]:
        print(f"FAILED: {c['text'][:40]!r}: ids {ids} != transformers' {c['ids']}")
        fails += 1
    e = [float(v) for v in line.split()]
    if len(e) != len(c["embedding"]):
        print(f"FAILED: {c['text'][:40]!r}: {len(e)} floats, expected {len(c['embedding'])}")
        fails += 1
        continue
    cos = cosine(e, c["embedding"])
    norm = math.sqrt(sum(x * x for x in e))
    worst = min(worst, cos)
    print(f"  cosine {cos:.9f} (1 - cos {1 - cos:.1e})  |e| {norm:.6f}  {len(ids):3d} tokens  {c['text'][:50]!r}")
    if not cos >= 0.9999:
        print(f"FAILED: {c['text'][:40]!r}: cosine {cos} < 0.9999 against sentence-transformers")
        fails += 1
    if abs(norm - 1) > 1e-4:
        print(f"FAILED: {c['text'][:40]!r}: |e| = {norm}, the model's Normalize module makes it 1")
        fails += 1

# --json: the OpenAI shape, the same vectors
js = json.loads(run("embed", "-m", model, "--json", "-p", cases[0]["text"], "-p", cases[1]["text"]))
if js.get("object") != "list" or [d["index"] for d in js["data"]] != [0, 1] or \
        js["usage"]["prompt_tokens"] != len(cases[0]["ids"]) + len(cases[1]["ids"]) or \
        cosine(js["data"][1]["embedding"], cases[1]["embedding"]) < 0.9999:
    print(f"FAILED: --json: {json.dumps(js)[:300]}")
    fails += 1
# cls pooling and no normalization change the vector
e = [float(v) for v in run("embed", "-m", model, "--pooling", "cls", "--no-normalize", "-p", cases[0]["text"]).split()]
if cosine(e, cases[0]["embedding"]) > 0.99 or abs(math.sqrt(sum(x * x for x in e)) - 1) < 1e-3:
    print("FAILED: --pooling cls --no-normalize gave the default's vector")
    fails += 1
print(f"worst cosine {worst:.7f} over {len(cases)} sentences")
sys.exit(1 if fails else 0)
