#!/usr/bin/env python3
"""Writes the fuzzers' small seed corpora (tests/fuzz/corpus/NAME/) from the shared
fixtures, shrunk: every fixture family's config.json and safetensors with the hidden,
head, FFN and vocabulary sizes divided by 4 (a few KB each), four small tokenizer.json
files (byte-level BPE, SentencePiece-style BPE with byte fallback, WordPiece, Unigram),
GGUF files converted from the shrunk checkpoints by `infer convert` (several types,
with and without a vocabulary), vindexes extracted from them by `infer extract`, and
request bodies of infer serve.  Run once; the output is committed.
usage: make_seeds.py INFER_BIN FIXTURES_HF_DIR"""
import json, os, random, shutil, struct, subprocess, sys, tempfile

infer, fixtures = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
corpus = os.environ.get("FUZZ_CORPUS_OUT") or os.path.join(here, "corpus")
SEP = b"\n@@file:"
rng = random.Random(7)


def out(kind, name, data):
    d = os.path.join(corpus, kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def pack(files):
    return b"".join(SEP + n.encode() + b"\n" + b for n, b in files)


# --- shrunk Hugging Face checkpoints ------------------------------------------------------
SHRINK = {"hidden_size", "intermediate_size", "head_dim", "vocab_size", "moe_intermediate_size", "n_embd", "n_positions",
          "n_inner", "hidden_size_per_layer_input", "vocab_size_per_layer_input", "query_pre_attn_scalar",
          "max_position_embeddings", "original_max_position_embeddings", "global_head_dim"}


def shrink_config(c):
    if isinstance(c, dict):
        return {k: (v // 4 if k in SHRINK and isinstance(v, int) and not isinstance(v, bool) and v >= 16 and v % 4 == 0
                    else shrink_config(v)) for k, v in c.items()}
    return c


def st_read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n])


def st_write(tensors):  # [(name, dtype, shape)] -> safetensors bytes, small random values
    size = {"F32": 4, "F16": 2, "BF16": 2}
    hdr, data = {}, b""
    for name, dt, shape in tensors:
        n = 1
        for s in shape:
            n *= s
        if dt == "F32":
            raw = struct.pack(f"<{n}f", *[rng.uniform(-0.5, 0.5) for _ in range(n)])
        elif dt == "F16":
            raw = struct.pack(f"<{n}e", *[rng.uniform(-0.5, 0.5) for _ in range(n)])
        else:  # bf16: the top half of an f32
            raw = b"".join(struct.pack("<f", rng.uniform(-0.5, 0.5))[2:] for _ in range(n))
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + n * size[dt]]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def shrink_dim(d):
    return d // 4 if d >= 16 and d % 4 == 0 else d


tmp = tempfile.mkdtemp()
models, with_tok = {}, []
for fam in sorted(os.listdir(fixtures)):
    d = os.path.join(fixtures, fam)
    if not os.path.isfile(os.path.join(d, "config.json")):
        continue
    cfg = shrink_config(json.load(open(os.path.join(d, "config.json"))))
    tensors = []
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            tensors += [(k, v["dtype"], [shrink_dim(s) for s in v["shape"]]) for k, v in st_read(os.path.join(d, f)).items()
                        if k != "__metadata__"]
    st = st_write(tensors)
    cj = json.dumps(cfg, indent=1).encode()
    md = os.path.join(tmp, fam)
    os.makedirs(md)
    open(os.path.join(md, "config.json"), "wb").write(cj)
    open(os.path.join(md, "model.safetensors"), "wb").write(st)
    r = subprocess.run([infer, "info", "-m", md], capture_output=True, text=True, errors="replace")
    if r.returncode:
        print(f"{fam}: the shrunk checkpoint does not load ({r.stderr.strip()[:200]}); left out")
        continue
    models[fam] = md
    out("hf", fam, pack([("config.json", cj), ("model.safetensors", st)]))
    if fam in ("llama", "gpt2"):  # with a tokenizer (made below) in the directory
        with_tok.append((fam, cj, st))
    # the same as two shards with their index
    half = len(tensors) // 2
    s1, s2 = st_write(tensors[:half]), st_write(tensors[half:])
    index = {"metadata": {}, "weight_map": {t[0]: ("model-00001-of-00002.safetensors" if i < half else
                                                     "model-00002-of-00002.safetensors") for i, t in enumerate(tensors)}}
    if fam in ("llama", "qwen3_moe"):
        out("hf", fam + "-shards", pack([("config.json", cj), ("model.safetensors.index.json", json.dumps(index).encode()),
                                         ("model-00001-of-00002.safetensors", s1), ("model-00002-of-00002.safetensors", s2)]))

# --- tokenizer.json ------------------------------------------------------------------------
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b), cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


CHATML_HF = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
             "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
added = lambda toks: [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                       "special": True} for i, t in toks]
b2u = bytes_to_unicode()
bl_vocab = {"<|endoftext|>": 0}
for ch in b2u:
    bl_vocab[ch] = len(bl_vocab)
merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["l", "l"], ["he", "ll"], ["hell", "o"], ["Ġ", "w"], ["o", "r"]]
for a, b in merges:
    bl_vocab[a + b] = len(bl_vocab)
toks = {
    "bpe-bytelevel": {
        "version": "1.0", "added_tokens": added([(0, "<|endoftext|>")]), "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": bl_vocab, "merges": merges}},
}
spm_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
for b in range(256):
    spm_vocab[f"<0x{b:02X}>"] = len(spm_vocab)
for p in ["▁", "▁t", "he", "▁the", "▁H", "el", "ell", "ello", "▁w", "or", "ld", "l", "o", "e", "h", "t", "w", "r", "d", "H"]:
    spm_vocab.setdefault(p, len(spm_vocab))
toks["bpe-spm"] = {
    "version": "1.0", "added_tokens": added([(0, "<unk>"), (1, "<s>"), (2, "</s>")]),
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": None,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                {"Sequence": {"id": "A", "type_id": 0}}],
                       "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                 {"type": "ByteFallback"}, {"type": "Fuse"},
                                                 {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False, "vocab": spm_vocab,
              "merges": [["▁", "t"], ["h", "e"], ["▁t", "he"], ["▁", "H"], ["e", "l"], ["el", "l"], ["ell", "o"], ["▁", "w"], ["o", "r"],
                         ["l", "d"]]}}
wp_vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "the", ",", "!", "'",
                                        "h", "##e", "##l", "##o", "w", "##or", "##ld", "it", "##s", "caf", "##e"])}
toks["wordpiece"] = {
    "version": "1.0", "added_tokens": added([(0, "[PAD]"), (1, "[UNK]"), (2, "[CLS]"), (3, "[SEP]"), (4, "[MASK]")]),
    "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
                   "lowercase": True},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                                                {"Sequence": {"id": "A", "type_id": 0}},
                                                                {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                       "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                       "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                          "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
    "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
              "vocab": wp_vocab}}
toks["unigram"] = {
    "version": "1.0", "added_tokens": added([(0, "<pad>"), (1, "</s>"), (2, "<unk>")]),
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
    "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                                                {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                       "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}],
                       "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
    "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
    "model": {"type": "Unigram", "unk_id": 2, "byte_fallback": False,
              "vocab": [["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["▁", -2.0], ["▁hello", -5.0], ["▁world", -5.5],
                        ["h", -4.0], ["e", -4.0], ["l", -4.0], ["o", -4.0], ["w", -4.5], ["r", -4.5], ["d", -4.5],
                        ["▁he", -6.0], ["llo", -6.0], [",", -3.0], ["!", -3.0]]}}
for fam, cj, st in with_tok:
    t = toks["bpe-bytelevel" if fam == "gpt2" else "bpe-spm"]
    out("hf", fam + "-tokenizer", pack([("config.json", cj), ("model.safetensors", st),
                                        ("tokenizer.json", json.dumps(t, ensure_ascii=False).encode()),
                                        ("tokenizer_config.json", json.dumps({"chat_template": CHATML_HF}).encode())]))
for name, t in toks.items():
    b = json.dumps(t, ensure_ascii=False, indent=1).encode()
    p = os.path.join(tmp, name + ".json")
    open(p, "wb").write(b)
    r = subprocess.run([infer, "tokenize", "-m", p, "-p", "Hello world, the café!"], capture_output=True, text=True, errors="replace")
    print(f"tokenizer {name}: {'loads' if r.returncode == 0 else 'does not load: ' + r.stderr.strip()[:200]}")
    out("tokenizer", name, b)

# --- GGUF files -----------------------------------------------------------------------------
# vocabularies of 128 tokens (the shrunk models' size) as GGUF metadata, written by PyPI's gguf:
# SentencePiece (llama), byte-level BPE (gpt2) and WordPiece (bert), with a chat template
import gguf
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def vocab_gguf(path, kind):
    w = gguf.GGUFWriter(path, "llama")
    if kind == "spm":
        toks = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "\u2581"] + [f"<0x{b:02X}>" for b in range(32, 64)]
        toks += [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["\u2581" + chr(c) for c in range(ord("a"), ord("z") + 1)]
        toks += ["\u2581the", "\u2581hello", "ll", "or", "he", "in", "er", "an"]
        while len(toks) < 128:
            toks.append(f"x{len(toks)}")
        types = [2, 3, 3, 4, 4] + [1] + [6] * 32 + [1] * (128 - 38)
        w.add_tokenizer_model("llama")
        w.add_token_list(toks[:128]); w.add_token_scores([-float(i) for i in range(128)]); w.add_token_types(types)
        w.add_bos_token_id(1); w.add_eos_token_id(2); w.add_unk_token_id(0); w.add_add_bos_token(True)
    elif kind == "bpe":
        toks = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + b2u[33:127] + ["\u0120t", "he", "\u0120the", "ll", "o\u0120"]
        while len(toks) < 128:
            toks.append(f"y{len(toks)}")
        w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("gpt-2")
        w.add_token_list(toks[:128]); w.add_token_types([3, 4, 4] + [1] * 125)
        w.add_token_merges(["\u0120 t", "h e", "\u0120t he", "l l", "o \u0120"])
        w.add_bos_token_id(0); w.add_eos_token_id(0)
    else:
        toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
        toks += ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)] + ["hello", "world", "the", ",", "!", "."]
        while len(toks) < 128:
            toks.append(f"z{len(toks)}")
        w.add_tokenizer_model("bert")
        w.add_token_list(toks[:128]); w.add_token_types([3, 1, 3, 3, 3] + [1] * 123)
        w.add_bos_token_id(2); w.add_eos_token_id(3); w.add_unk_token_id(1)
    w.add_chat_template(CHATML)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.close()


for kind in ("spm", "bpe", "wpm"):
    vocab_gguf(os.path.join(tmp, f"vocab-{kind}.gguf"), kind)
for fam, types in (("llama", ["f32", "q8_0", "q4_k_m"]), ("gemma3", ["f16", "q5_0"]), ("qwen3_moe", ["q4_0"]),
                   ("gpt2", ["f16"]), ("phi3", ["bf16"]), ("gpt_oss", ["q8_0"]), ("gemma4", ["f16"]),
                   ("mixtral", ["q6_k"]), ("starcoder2", ["f16"])):
    if fam not in models:
        continue
    for ty in types:
        for vk in ("", "spm", "bpe", "wpm"):
            if vk and ty not in ("f32", "f16"):
                continue
            g = os.path.join(tmp, f"{fam}-{ty}{'-' + vk if vk else ''}.gguf")
            cmd = [infer, "convert", models[fam], g, "--type", ty] + (["--vocab-from", os.path.join(tmp, f"vocab-{vk}.gguf")] if vk else [])
            r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
            if r.returncode:
                print(f"gguf {fam} {ty} {vk}: {r.stderr.strip()[:200]}")
                continue
            if vk:
                r = subprocess.run([infer, "tokenize", "-m", g, "-p", "hello the world"], capture_output=True, text=True, errors="replace")
                if r.returncode:
                    print(f"gguf {fam} {ty} {vk}: does not tokenize: {r.stderr.strip()[:200]}")
            out("gguf", os.path.basename(g)[:-5], open(g, "rb").read())

# --- vindexes ---------------------------------------------------------------------------------
for fam in ("llama", "gemma3", "qwen3_moe"):
    if fam not in models:
        continue
    vx = os.path.join(tmp, fam + ".vindex")
    r = subprocess.run([infer, "extract", "-m", models[fam], "-o", vx, "--down-top", "2"], capture_output=True, text=True, errors="replace")
    if r.returncode:
        print(f"vindex {fam}: {r.stderr.strip()[:200]}")
        continue
    out("vindex", fam, pack([(f, open(os.path.join(vx, f), "rb").read()) for f in sorted(os.listdir(vx))]))
    if fam == "llama":  # and one with an lm_head index (lm_index.bin)
        vl = os.path.join(tmp, fam + "-lm.vindex")
        r = subprocess.run([infer, "extract", "-m", models[fam], "-o", vl, "--down-top", "2", "--lm-index", "3"], capture_output=True,
                           text=True, errors="replace")
        if r.returncode:
            print(f"vindex {fam} --lm-index: {r.stderr.strip()[:200]}")
        else:
            out("vindex", fam + "-lm", pack([(f, open(os.path.join(vl, f), "rb").read()) for f in sorted(os.listdir(vl))]))

# --- infer serve request bodies ----------------------------------------------------------------
reqs = {
    "chat": {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 8},
    "chat-opts": {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                  "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 3, "stop": ["\n", "END"],
                  "presence_penalty": 0.5, "frequency_penalty": 0.2, "repeat_penalty": 1.1, "n": 1, "stream": True,
                  "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 3, "max_completion_tokens": 4},
    "chat-json": {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}},
    "chat-schema": {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {
        "name": "s", "schema": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0},
                                                                 "b": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                                                                 "c": {"enum": ["x", "y"]}}, "required": ["a"]}}}},
    "chat-tools": {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                                {"role": "tool", "tool_call_id": "1", "content": "2"}],
                   "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
    "completion": {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "logprobs": 2, "echo": False},
    "completion-grammar": {"prompt": "x", "grammar": "root ::= [a-z]+ (\" \" [0-9]{1,3})?", "max_tokens": 4},
    "messages": {"model": "m", "max_tokens": 8, "system": [{"type": "text", "text": "Be"}],
                 "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [{"type": "text", "text": "Yo"}]},
                              {"role": "user", "content": "Go"}], "stop_sequences": ["\n", "END"], "temperature": 0.5,
                 "top_p": 0.9, "top_k": 40, "stream": True, "metadata": {"user_id": "u"}},
    "messages-count": {"model": "m", "system": "Be brief.", "messages": [{"role": "user", "content": "Hi"}]},
}
for name, r in reqs.items():  # the first byte: 1 chat, 0 completion, 2 /v1/messages, 3 its count_tokens
    first = {"messages": b"\x02", "messages-count": b"\x03"}.get(name, b"\x00" if name.startswith("completion") else b"\x01")
    out("request", name, first + json.dumps(r).encode())
shutil.rmtree(tmp)
