#!/usr/bin/env python3
"""Hugging Face tokenizer.json pipelines beyond the default models', for
tests/test_tokenizer_hf.c: WordPiece with BERT's normalizer, Unigram with
NFKC and Metaspace, SentencePiece BPE behind Metaspace with each
prepend_scheme, byte-level BPE behind NFC or accent-stripping normalizers.

No model of these kinds is on PyPI, so each tokenizer.json is built with
`tokenizers` from a vocabulary GGUF of llama.cpp's tree (scripts/gen-tokenizer-
llamacpp.py --fetch puts it in the cache): bert-bge (WordPiece), nomic-bert-moe
(Unigram), llama-spm (BPE from its scores, as transformers converts
SentencePiece), gpt-2 (byte-level BPE). They go to
${INFER_CACHE:-~/.cache/infer}/tokenizer-hf/<case>/tokenizer.json, and, unless
--export-only, the FNV-1a 32 hash of the ids `tokenizers` gives for every
corpus line and special-token text (add_special_tokens=True) to
tests/data/tokenizer/hf/<case>.hash.

  python3 scripts/gen-tokenizer-hf.py [--export-only] [CASE ...]
"""
import importlib.util, os, struct, subprocess, sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE, Unigram, WordPiece

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("INFER_CACHE") or os.path.expanduser("~/.cache/infer")
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")

def load_gte():
    """scripts/gen-tokenizer-expected.py as a module (read_meta, spm_merges)."""
    spec = importlib.util.spec_from_file_location("gte", os.path.join(ROOT, "scripts", "gen-tokenizer-expected.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return vars(m)


G = load_gte()


def tree():
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen-tokenizer-llamacpp.py"), "--fetch"],
                          check=True, capture_output=True, text=True).stdout.strip().splitlines()[0]


def meta(name):
    return G["read_meta"](os.path.join(tree(), "models", f"ggml-vocab-{name}.gguf"))


def add_specials(tok, m):
    tokens, types = m["tokens"], m["types"]
    tok.add_special_tokens([AddedToken(tokens[i], normalized=False, special=True)
                            for i, ty in enumerate(types) if ty == 3])
    tok.add_tokens([AddedToken(tokens[i], normalized=False, special=False) for i, ty in enumerate(types) if ty == 4])


def wordpiece(cased):
    m = meta("bert-bge")
    vocab = {}
    for i, (t, ty) in enumerate(zip(m["tokens"], m["types"])):
        if ty == 1:  # llama.cpp's converter wrote "▁word" for word starts and "piece" for "##piece"
            t = t[1:] if t.startswith("\u2581") else "##" + t
        vocab.setdefault(t, i)
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    if cased:
        tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                           special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
    else:
        tok.normalizer = normalizers.BertNormalizer()
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.BertProcessing(("[SEP]", 102), ("[CLS]", 101))
    tok.decoder = decoders.WordPiece()
    add_specials(tok, m)
    return tok


def unigram(scheme, split, norm):
    m = meta("nomic-bert-moe")
    tok = Tokenizer(Unigram([(t, s) for t, s in zip(m["tokens"], m["scores"])], unk_id=m["unk"], byte_fallback=False))
    tok.normalizer = norm
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split)
    tok.decoder = decoders.Metaspace(prepend_scheme=scheme, split=split)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    add_specials(tok, m)
    return tok


def spm(scheme, split, legacy=False):
    m = meta("llama-spm")
    tokens = m["tokens"]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(BPE(vocab, G["spm_merges"](tokens, m["scores"]), unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if legacy:  # Llama 2's tokenizer.json
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split)
        tok.decoder = decoders.Sequence([decoders.Metaspace(prepend_scheme=scheme, split=split), decoders.ByteFallback(),
                                         decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    add_specials(tok, m)
    return tok


def bytelevel(norm):
    m = meta("gpt-2")
    tok = Tokenizer(BPE({t: i for i, t in enumerate(m["tokens"])}, [tuple(x.split(" ", 1)) for x in m["merges"]]))
    tok.normalizer = norm
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    add_specials(tok, m)
    return tok


CASES = {
    "wordpiece": lambda: wordpiece(False),
    "wordpiece-cased": lambda: wordpiece(True),
    "unigram": lambda: unigram("always", True, normalizers.Sequence([normalizers.NFKC(),
                                                                     normalizers.Replace(Regex(" {2,}"), " ")])),
    "unigram-first": lambda: unigram("first", False, normalizers.NFKC()),
    "spm-first": lambda: spm("first", False),
    "spm-always-split": lambda: spm("always", True),
    "spm-never": lambda: spm("never", False),
    "spm-legacy": lambda: spm(None, False, legacy=True),
    "bytelevel-nfc": lambda: bytelevel(normalizers.NFC()),
    "bytelevel-strip": lambda: bytelevel(normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                                               normalizers.Lowercase(), normalizers.Strip()])),
}


def texts():
    lines = open(os.path.join(DATA, "corpus.txt"), "rb").read().split(b"\n")[:-1]
    out = [l.decode("utf-8") for l in lines]
    for s in open(os.path.join(DATA, "specials.txt"), "rb").read().split(b"\n"):
        if s:
            out.append(s.replace(b"\\n", b"\n").replace(b"\\t", b"\t").decode("utf-8"))
    return out


def fnv(data):
    h = 0x811C9DC5
    for c in data:
        h = ((h ^ c) * 0x01000193) & 0xFFFFFFFF
    return h


def main():
    args = sys.argv[1:]
    export_only = "--export-only" in args
    names = [a for a in args if not a.startswith("--")] or list(CASES)
    tx = None if export_only else texts()
    os.makedirs(os.path.join(DATA, "hf"), exist_ok=True)
    for name in names:
        tok = CASES[name]()
        d = os.path.join(CACHE, "tokenizer-hf", name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json.tmp"))
        os.replace(os.path.join(d, "tokenizer.json.tmp"), os.path.join(d, "tokenizer.json"))
        if export_only:
            continue
        rows = []
        for e in tok.encode_batch(tx):
            rows.append("%08x" % fnv(struct.pack(f"<{len(e.ids)}i", *e.ids)))
        with open(os.path.join(DATA, "hf", name + ".hash"), "w") as f:
            f.write("\n".join(rows) + "\n")
        print(name, len(rows), "texts")


main()
