#!/usr/bin/env python3
"""Compares infer with llama.cpp (PyPI llama-cpp-python) on one GGUF:

  * greedy tokens for a prompt (both engines, same prompt ids, no early stop)
  * next-token distributions over a text of a few hundred tokens: mean and
    max KL(llama.cpp || infer), and top-1 agreement

With --write-expected FILE it also writes llama.cpp's greedy tokens and a few
of its next-token distributions (top-64 log-probs) as JSON, which the test
suite checks without Python or llama.cpp (tests/test_llamacpp.c).

usage: python3 scripts/compare-llamacpp.py [-m MODEL.gguf] [-p PROMPT] [-n 32]
           [--text tests/data/llamacpp/text.txt] [--write-expected FILE]
"""
import argparse, json, math, os, subprocess, sys, tempfile
import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.path.join(ROOT, "build", "infer")

def default_model():
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-model.sh"), "gemma3"], capture_output=True, text=True)
    if r.returncode:
        sys.exit("fetch-model.sh failed: " + r.stderr)
    return r.stdout.strip().splitlines()[-1]

def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))

def ours_logits(model, ids, threads):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.f32")
        subprocess.run([BIN, "logits", "-m", model, "-t", str(threads), "--ids", ",".join(map(str, ids)), "--out", out], check=True)
        return np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)

def ours_greedy(model, ids, n, threads):
    r = subprocess.run([BIN, "run", "-m", model, "-t", str(threads), "--ids", ",".join(map(str, ids)), "-n", str(n),
                        "--temp", "0", "--ignore-eos"], capture_output=True, text=True, check=True)
    return [int(t) for t in r.stdout.strip().split(",") if t]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model")
    ap.add_argument("-p", "--prompt", default="The capital of France is")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--text", default=os.path.join(ROOT, "tests", "data", "llamacpp", "text.txt"))
    ap.add_argument("--write-expected")
    a = ap.parse_args()
    model = a.model or default_model()

    from llama_cpp import Llama
    llm = Llama(model_path=model, n_ctx=2048, n_threads=a.threads, logits_all=True, verbose=False)
    n_vocab = llm.n_vocab()

    # greedy
    prompt_ids = llm.tokenize(a.prompt.encode(), add_bos=True, special=True)
    llm.reset()
    llm.eval(prompt_ids)
    ref_greedy = []
    for _ in range(a.n):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1][:n_vocab]))
        ref_greedy.append(tok)
        llm.eval([tok])
    got_greedy = ours_greedy(model, prompt_ids, a.n, a.threads)
    same = sum(1 for x, y in zip(ref_greedy, got_greedy) if x == y)
    first_diff = next((i for i, (x, y) in enumerate(zip(ref_greedy, got_greedy)) if x != y), None)
    print(f"prompt {a.prompt!r}: {len(prompt_ids)} ids")
    print(f"greedy: llama.cpp {ref_greedy}")
    print(f"greedy: infer     {got_greedy}")
    print(f"greedy: {same}/{a.n} equal" + ("" if first_diff is None else f", first difference at {first_diff}"))
    print("text:   " + repr(llm.detokenize(ref_greedy).decode(errors="replace")))

    # distributions over a text
    text = open(a.text, encoding="utf-8").read()
    ids = llm.tokenize(text.encode(), add_bos=True, special=False)
    llm.reset()
    llm.eval(ids)
    ref = np.array([llm.scores[i][:n_vocab] for i in range(len(ids))], dtype=np.float32)
    got = ours_logits(model, ids, a.threads)
    lp, lq = log_softmax(ref), log_softmax(got)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=-1)
    top1 = float((ref.argmax(1) == got.argmax(1)).mean())
    print(f"text: {len(ids)} tokens; KL(llama.cpp || infer) mean {kl.mean():.5f} max {kl.max():.5f}; top-1 agreement {top1 * 100:.1f}%")

    if a.write_expected:
        picks = sorted(set(int(i) for i in np.linspace(0, len(ids) - 1, 32)))
        dists = []
        for i in picks:
            top = np.argsort(-lp[i])[:64]
            dists.append({"position": i, "ids": [int(t) for t in top], "logprobs": [round(float(lp[i][t]), 6) for t in top]})
        exp = {"model": os.path.basename(model), "prompt": a.prompt, "prompt_ids": [int(t) for t in prompt_ids],
               "greedy": ref_greedy, "text_ids": [int(t) for t in ids], "distributions": dists,
               "note": "llama.cpp (llama-cpp-python) greedy tokens and top-64 next-token log-probs at a few positions of text_ids"}
        with open(a.write_expected, "w") as f:
            json.dump(exp, f, indent=1)
        print("wrote", a.write_expected)
    return 0 if same == a.n and kl.mean() <= 0.01 else 1

if __name__ == "__main__":
    sys.exit(main())
