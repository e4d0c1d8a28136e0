#!/usr/bin/env python3
"""Reference tokenizers for the tests, built with Hugging Face `tokenizers`.

For each model (gemma3, smollm2) this
  1. reads the tokenizer metadata (tokenizer.ggml.*) of the cached GGUF
     (scripts/fetch-model.sh puts it in ${INFER_CACHE:-~/.cache/infer}/<name>/),
  2. builds the model's Hugging Face fast tokenizer in its upstream
     configuration and saves tokenizer.json + tokenizer_config.json next to
     the GGUF (never in the repository),
  3. unless --export-only, encodes tests/data/tokenizer/corpus.txt and writes
     tests/data/tokenizer/<name>.ids (one line of space-separated ids per corpus
     line) and <name>.blocks.ids (one line per multi-line block, see N_BLOCKS).
For smollm2 it also saves three variants (tokenizer-llama3.json,
tokenizer-qwen2.json, tokenizer-strip.json, see VARIANTS) and their ids.

Needs: pip install tokenizers gguf (and transformers for --compare-transformers).
The corpus itself comes from scripts/make-tokenizer-corpus.py.

Encoding is HF's default: add_special_tokens=True (Gemma prepends <bos>,
SmolLM2 adds nothing), and special-token text in the input is recognised.

Why not AutoTokenizer.from_pretrained(dir, gguf_file=...): transformers 5.x
builds Gemma 3 from a GGUF as a *Unigram* model (Gemma 3's SentencePiece model
is BPE) with only 5 added tokens and no <bos>, and SmolLM2 without its
individual-digits pre-tokenizer and with eos = <|im_start|>; neither is the
tokenizer the models were trained with. --compare-transformers reports how
often that build agrees with ours (on the 2,400-line corpus: Gemma 3 on
0 lines, 885 when <bos> is left out on both sides; SmolLM2 on 2,305).

Usage: python3 scripts/gen-tokenizer-expected.py [--export-only] [--compare-transformers] [gemma3|smollm2 ...]
"""
import json
import os
import sys

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE

CACHE = os.environ.get("INFER_CACHE", os.path.expanduser("~/.cache/infer"))
MODELS = {"gemma3": "gemma-3-270m-q4_k_m.gguf", "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf"}
# Variants that exercise the Llama 3 and Qwen 2 pre-tokenizers (no small model
# of those families is at hand): SmolLM2's vocabulary and merges behind the
# Llama 3 split (with ignore_merges, as Llama 3 has it) or the Qwen 2 split.
# Saved as <cache>/smollm2/tokenizer-<variant>.json, expected ids in smollm2-<variant>.ids.
RE_LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
RE_QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# "strip": SmolLM2 as it is, but <|im_start|> takes the whitespace before it
# (lstrip) and <|im_end|> the whitespace after it (rstrip).
VARIANTS = {"llama3": (RE_LLAMA3, True), "qwen2": (RE_QWEN2, False), "strip": (None, False)}
STRIP = {"<|im_start|>": dict(lstrip=True), "<|im_end|>": dict(rstrip=True)}
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tokenizer")

# Multi-line blocks: block b is corpus lines [b*stride, b*stride + BLOCK_LEN)
# joined with "\n", for b in range(N_BLOCKS), stride = lines // N_BLOCKS.
# tests/test_tokenizer.c uses the same numbers.
N_BLOCKS, BLOCK_LEN = 60, 7


def read_meta(path):
    r = gguf.GGUFReader(path)
    f = r.fields

    def scalar(k, default=None):
        if k not in f:
            return default
        v = f[k].parts[f[k].data[0]]
        if f[k].types[0] == gguf.GGUFValueType.STRING:
            return bytes(v).decode("utf-8")
        return v.tolist()[0]

    def array(k):
        if k not in f:
            return None
        fl = f[k]
        if fl.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(fl.parts[i]).decode("utf-8") for i in fl.data]
        return [fl.parts[i].tolist()[0] for i in fl.data]

    return {
        "model": scalar("tokenizer.ggml.model"), "pre": scalar("tokenizer.ggml.pre"),
        "tokens": array("tokenizer.ggml.tokens"), "scores": array("tokenizer.ggml.scores"),
        "types": array("tokenizer.ggml.token_type"), "merges": array("tokenizer.ggml.merges"),
        "bos": scalar("tokenizer.ggml.bos_token_id"), "eos": scalar("tokenizer.ggml.eos_token_id"),
        "unk": scalar("tokenizer.ggml.unknown_token_id"), "pad": scalar("tokenizer.ggml.padding_token_id"),
        "add_bos": scalar("tokenizer.ggml.add_bos_token", False),
        "add_eos": scalar("tokenizer.ggml.add_eos_token", False),
        "chat_template": scalar("tokenizer.chat_template"),
    }


def spm_merges(tokens, scores):
    """All (l, r) with l, r and l+r in the vocabulary, ordered as transformers'
    generate_merges orders them: merged piece's score descending, then longer
    left piece first, then merged id, left id, right id ascending."""
    vocab = {t: i for i, t in enumerate(tokens)}
    out = []
    for i, t in enumerate(tokens):
        for k in range(1, len(t)):
            l, r = t[:k], t[k:]
            if l in vocab and r in vocab:
                out.append((-scores[i], -len(l), i, vocab[l], vocab[r], l, r))
    out.sort()
    return [(x[5], x[6]) for x in out]


def build(name, m, variant=None):
    tokens, types = m["tokens"], m["types"]
    vocab = {t: i for i, t in enumerate(tokens)}
    if m["model"] == "llama":
        # Gemma 3 upstream: SentencePiece BPE with byte fallback; spaces become ▁ in the normalizer.
        tok = Tokenizer(BPE(vocab, spm_merges(tokens, m["scores"]), unk_token=tokens[m["unk"]],
                            fuse_unk=True, byte_fallback=True))
        tok.normalizer = normalizers.Replace(" ", "\u2581")
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    elif m["model"] == "gpt2":
        merges = [tuple(x.split(" ", 1)) for x in m["merges"]]
        tok = Tokenizer(BPE(vocab, merges, ignore_merges=bool(variant and VARIANTS[variant][1])))
        seq = []
        regex = variant and VARIANTS[variant][0]
        if regex:
            seq.append(pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False))
        elif m["pre"] == "smollm":
            seq.append(pre_tokenizers.Digits(individual_digits=True))
        elif m["pre"] not in ("gpt2", "default", None):
            raise SystemExit(f"{name}: pre-tokenizer {m['pre']!r} not handled here")
        seq.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=not regex))
        tok.pre_tokenizer = pre_tokenizers.Sequence(seq)
        tok.decoder = decoders.ByteLevel()
    else:
        raise SystemExit(f"{name}: tokenizer model {m['model']!r}")
    # Control tokens (type 3) are special added tokens; user-defined ones (4) are
    # plain added tokens (always split out, as SentencePiece does).
    strip = STRIP if variant == "strip" else {}
    tok.add_special_tokens([AddedToken(tokens[i], normalized=False, special=True, **strip.get(tokens[i], {}))
                            for i, ty in enumerate(types) if ty == 3])
    tok.add_tokens([AddedToken(tokens[i], normalized=False, special=False)
                    for i, ty in enumerate(types) if ty == 4])
    single = "$A"
    specials = []
    if m["add_bos"]:
        single = f"{tokens[m['bos']]} " + single
        specials.append((tokens[m["bos"]], m["bos"]))
    if m["add_eos"]:
        single = single + f" {tokens[m['eos']]}"
        specials.append((tokens[m["eos"]], m["eos"]))
    if specials:
        tok.post_processor = processors.TemplateProcessing(single=single, special_tokens=specials)
    config = {
        "add_bos_token": bool(m["add_bos"]), "add_eos_token": bool(m["add_eos"]),
        "bos_token": tokens[m["bos"]] if m["bos"] is not None else None,
        "eos_token": tokens[m["eos"]] if m["eos"] is not None else None,
        "unk_token": tokens[m["unk"]] if m["unk"] is not None else None,
        "pad_token": tokens[m["pad"]] if m["pad"] is not None else None,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    if m["chat_template"]:
        config["chat_template"] = m["chat_template"]
    return tok, config


def corpus():
    with open(os.path.join(DATA, "corpus.txt"), encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    assert lines[-1] == ""
    return lines[:-1]


def blocks(lines):
    stride = len(lines) // N_BLOCKS
    return ["\n".join(lines[b * stride: b * stride + BLOCK_LEN]) for b in range(N_BLOCKS)]


def main():
    args = sys.argv[1:]
    export_only = "--export-only" in args
    compare = "--compare-transformers" in args
    names = [a for a in args if not a.startswith("--")] or list(MODELS)
    for name in names:
        gg = os.path.join(CACHE, name, MODELS[name])
        if not os.path.exists(gg):
            raise SystemExit(f"{gg} missing: run scripts/fetch-model.sh {name}")
        meta = read_meta(gg)
        tok, config = build(name, meta)
        out_dir = os.path.join(CACHE, name)
        tok.save(os.path.join(out_dir, "tokenizer.json"))
        with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
            json.dump(config, f, indent=1, ensure_ascii=False)
        print(os.path.join(out_dir, "tokenizer.json"))
        variants = [(v, build(name, meta, v)[0]) for v in VARIANTS] if name == "smollm2" else []
        for v, vt in variants:
            vt.save(os.path.join(out_dir, f"tokenizer-{v}.json"))
        if export_only:
            continue
        lines = corpus()
        for tag, tk in [(name, tok)] + [(f"{name}-{v}", vt) for v, vt in variants]:
            for suffix, texts in (("ids", lines), ("blocks.ids", blocks(lines))):
                encs = tk.encode_batch(texts)
                for t, e in zip(texts, encs):  # the reference must round-trip too (but strip drops spaces)
                    assert tag.endswith("-strip") or tk.decode(e.ids, skip_special_tokens=False).endswith(t), (tag, t)
                with open(os.path.join(DATA, f"{tag}.{suffix}"), "w") as f:
                    for e in encs:
                        f.write(" ".join(map(str, e.ids)) + "\n")
        if compare:
            import tempfile
            from transformers import AutoTokenizer
            with tempfile.TemporaryDirectory() as tmp:  # a folder holding only the GGUF
                os.symlink(gg, os.path.join(tmp, MODELS[name]))
                ht = AutoTokenizer.from_pretrained(tmp, gguf_file=MODELS[name])
            same = sum(ht(t).input_ids == e.ids for t, e in zip(lines, tok.encode_batch(lines)))
            print(f"{name}: transformers' GGUF-built tokenizer agrees on {same}/{len(lines)} lines")


if __name__ == "__main__":
    main()
