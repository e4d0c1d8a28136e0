#!/usr/bin/env python3
"""Expected Unicode normalization (NFD, NFKD, NFC, NFKC) for tests/test_normalize.c,
from unicodedata2 15.1.0 (the version of scripts/gen-unicode-table.py).

Writes tests/data/tokenizer/normalize.txt: sequences that exercise composition
(bases with combining marks in every order, Hangul jamo, singletons, excluded
composites), one per line, and tests/data/tokenizer/normalize.hash: the first
line the FNV-1a 32 hashes of every single code point's form, in order
(U+0000..U+10FFFF without surrogates, each followed by a 0xFF byte), then one
line per sequence of normalize.txt and of corpus.txt, four hashes each."""
import os, random
import unicodedata2 as ud

assert ud.unidata_version == "15.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
FORMS = ("NFD", "NFKD", "NFC", "NFKC")


def fnv(data, h=0x811C9DC5):
    for c in data:
        h = ((h ^ c) * 0x01000193) & 0xFFFFFFFF
    return h


rng = random.Random(15)
marks = [cp for cp in range(0x300, 0x370)] + [0x1DC0, 0x20D0, 0x0F71, 0x0F72, 0x0F74, 0x05B0, 0x0316, 0x0323, 0x031B]
bases = list("aeiouAEIOUnNcCsSzZyYwWgGhHkKlLrR") + ["\u0391", "\u03b9", "\u0415", "\u0435", "\u1100", "\u1161",
                                                      "\u11a8", "\uac00", "\u0b47", "\u0fb2", "\u212b", "\u0344"]
seqs = []
for _ in range(600):
    s = "".join(rng.choice(bases) + "".join(chr(rng.choice(marks)) for _ in range(rng.randint(0, 4)))
                for _ in range(rng.randint(1, 4)))
    seqs.append(s)
seqs += ["\u1100\u1161\u11a8", "\uac00\u11a8", "\u0344", "\u212b", "\u1e9b\u0323", "\u0958", "\ufb2c", "\u2126",
         "e\u0301\u0302", "\u0301e", "\u00c5\u0301", "\u0d4a", "\U0001d15e", "\ufdfa", "\u3300"]
with open(os.path.join(DATA, "normalize.txt"), "w", encoding="utf-8", newline="") as f:
    f.write("\n".join(seqs) + "\n")

single = []
for form in FORMS:
    h = 0x811C9DC5
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        h = fnv(ud.normalize(form, chr(cp)).encode("utf-8") + b"\xff", h)
    single.append(h)
corpus = open(os.path.join(DATA, "corpus.txt"), encoding="utf-8", newline="").read().split("\n")[:-1]
rows = [" ".join("%08x" % h for h in single)]
for s in seqs + corpus:
    rows.append(" ".join("%08x" % fnv(ud.normalize(form, s).encode("utf-8")) for form in FORMS))
with open(os.path.join(DATA, "normalize.hash"), "w") as f:
    f.write("\n".join(rows) + "\n")
print(len(seqs), "sequences,", len(corpus), "corpus lines")
