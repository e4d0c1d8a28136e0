#!/usr/bin/env python3
"""Writes src/tokenizer/unicode_table.c: the Unicode data of the tokenizers,
from one pinned Unicode version, 15.1.0 -- the version of llama.cpp's
src/unicode-data.cpp (it has U+2EBF0, new in 15.1, and not U+1C89, new in 16.0).

  pip install unicodedata2==15.1.0
  python3 scripts/gen-unicode-table.py [OUT.c] [--check LLAMA_CPP/src/unicode-data.cpp]

Tables (all sorted):
  uni_flag_runs   {first code point, flags}: the general category as one bit
                  (llama.cpp's classes: undefined, N, L, Z, M, P, S, C), the
                  White_Space bit, an Mn bit, and what Hugging Face `tokenizers`
                  (pinned: TOKENIZERS_VERSION) does with the character in its
                  BERT and StripAccents steps (its own, older Unicode tables);
                  a run lasts until the next entry's first.
  uni_lower       {code point, simple lowercase mapping} (UnicodeData field 13).
  uni_nfd_ranges  {first, last, cp}: the first code point of the canonical
                  decomposition (NFD) of each code point in [first, last]; what
                  llama.cpp's WordPiece uses to strip accents.

Also writes src/tokenizer/normalize_table.c, for Hugging Face's NFC/NFD/NFKC/NFKD
normalizers (the Unicode normalization forms, UAX #15):
  uni_decomp      {code point, pool offset, NFD length | NFKD length << 8}: each code
                  point's full canonical decomposition (NFD) and, after it in the pool,
                  its full compatibility decomposition (NFKD; length 0: the same as NFD).
                  Hangul syllables are left to the algorithm.
  uni_decomp_pool the decompositions' code points
  uni_ccc         {first, last, canonical combining class}, classes other than 0
  uni_compose     {first, second, composite}: the primary composites (canonical pairs
                  that NFC composes), sorted by first, second

--check compares every table with llama.cpp's and fails on any difference."""
import os
import re
import sys

import unicodedata2 as ud

assert ud.unidata_version == "15.1.0", f"need unicodedata2==15.1.0, have {ud.unidata_version}"
N_CP = 0x110000

FLAG = {"Cn": 0x01, "Nd": 0x02, "Nl": 0x02, "No": 0x02, "Lu": 0x04, "Ll": 0x04, "Lt": 0x04, "Lm": 0x04,
        "Lo": 0x04, "Zs": 0x08, "Zl": 0x08, "Zp": 0x08, "Mn": 0x10, "Mc": 0x10, "Me": 0x10, "Pc": 0x20,
        "Pd": 0x20, "Ps": 0x20, "Pe": 0x20, "Pi": 0x20, "Pf": 0x20, "Po": 0x20, "Sm": 0x40, "Sc": 0x40,
        "Sk": 0x40, "So": 0x40, "Cc": 0x80, "Cf": 0x80, "Cs": 0x80, "Co": 0x80}
WHITESPACE = 0x100
NONSPACING = 0x200  # Mn, beyond llama.cpp's flags
# Hugging Face `tokenizers` (pinned below) classifies with its own, older Unicode
# tables; these bits are what it does, asked of the library character by character.
HF_MARK = 0x400        # StripAccents drops it
HF_NONSPACING = 0x800  # BertNormalizer(strip_accents) drops it (after NFD)
HF_PUNCT = 0x1000      # BertPreTokenizer isolates it
HF_CONTROL = 0x2000    # BertNormalizer(clean_text) drops it
HF_SPACE = 0x4000      # BertNormalizer(clean_text) makes it ' '
TOKENIZERS_VERSION = "0.23.3"


def hf_bits():
    import tokenizers
    from tokenizers import normalizers, pre_tokenizers
    assert tokenizers.__version__ == TOKENIZERS_VERSION, f"need tokenizers=={TOKENIZERS_VERSION}"
    sa = normalizers.StripAccents()
    bs = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    bc = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    bp = pre_tokenizers.BertPreTokenizer()
    bits = [0] * N_CP
    for cp in range(N_CP):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        b = 0
        b |= HF_MARK if sa.normalize_str("a" + c) == "a" else 0
        if ud.normalize("NFD", c) == c:  # (BERT decomposes first: a decomposable one is judged on its parts)
            b |= HF_NONSPACING if bs.normalize_str("a" + c) == "a" else 0
        b |= HF_PUNCT if len(bp.pre_tokenize_str("a" + c + "b")) == 3 else 0
        r = bc.normalize_str("a" + c + "b")
        b |= HF_CONTROL if r == "ab" else HF_SPACE if r == "a b" and c != " " else 0
        bits[cp] = b
    return bits
# PropList.txt White_Space
SPACES = list(range(0x09, 0x0E)) + [0x20, 0x85, 0xA0, 0x1680] + list(range(0x2000, 0x200B)) + \
         [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]


def flags_of(cp):
    cat = ud.category(chr(cp))
    return FLAG[cat] | (WHITESPACE if cp in SPACES_SET else 0) | (NONSPACING if cat == "Mn" else 0)


SPACES_SET = set(SPACES)


def lower_of(cp):
    # Simple lowercase mapping: str.lower() gives the full mapping, which
    # differs from the simple one only where it is longer than one character.
    c = chr(cp)
    if ud.category(c) == "Cn":
        return None
    low = c.lower()
    if cp == 0x130:
        return 0x69  # LATIN CAPITAL LETTER I WITH DOT ABOVE -> i
    if len(low) == 1 and low != c:
        return ord(low)
    return None


def build():
    hf = hf_bits()
    flags = [flags_of(cp) | hf[cp] for cp in range(N_CP)]
    runs = []
    for cp, f in enumerate(flags):
        if not runs or runs[-1][1] != f:
            runs.append((cp, f))
    lower = [(cp, l) for cp in range(N_CP) for l in [lower_of(cp)] if l is not None]
    nfd = []
    for cp in range(N_CP):
        if ud.category(chr(cp)) in ("Cn", "Cs"):
            continue
        d = ord(ud.normalize("NFD", chr(cp))[0])
        if d == cp:
            continue
        if nfd and nfd[-1][1] == cp - 1 and nfd[-1][2] == d:
            nfd[-1] = (nfd[-1][0], cp, d)
        else:
            nfd.append((cp, cp, d))
    return flags, runs, lower, nfd


def emit(path, runs, lower, nfd, flags):
    def rows(f, items, fmt, per):
        for i in range(0, len(items), per):
            f.write("    " + " ".join(fmt(x) for x in items[i:i + per]) + "\n")

    with open(path, "w") as f:
        f.write("// Generated by scripts/gen-unicode-table.py from unicodedata2 (Unicode "
                f"{ud.unidata_version}); do not edit.\n")
        f.write('#include "tokenizer/unicode.h"\n\n')
        f.write("// flags of the ASCII characters, looked up without the table\n")
        f.write("const uint16_t uni_ascii_flags[128] = {\n")
        rows(f, list(range(128)), lambda cp: f"0x{flags[cp]:X},", 12)
        f.write("};\n\n")
        f.write("// {first code point, flags}: a run lasts until the next entry's first.\n")
        f.write("const uint32_t uni_flag_runs[][2] = {\n")
        rows(f, runs, lambda r: f"{{0x{r[0]:X}, 0x{r[1]:X}}},", 6)
        f.write("};\n")
        f.write(f"const int uni_flag_runs_n = {len(runs)};\n\n")
        f.write("// {code point, simple lowercase}\n")
        f.write("const uint32_t uni_lower[][2] = {\n")
        rows(f, lower, lambda r: f"{{0x{r[0]:X}, 0x{r[1]:X}}},", 6)
        f.write("};\n")
        f.write(f"const int uni_lower_n = {len(lower)};\n\n")
        f.write("// {first, last, first code point of the NFD of each}\n")
        f.write("const uint32_t uni_nfd_ranges[][3] = {\n")
        rows(f, nfd, lambda r: f"{{0x{r[0]:X}, 0x{r[1]:X}, 0x{r[2]:X}}},", 4)
        f.write("};\n")
        f.write(f"const int uni_nfd_ranges_n = {len(nfd)};\n")


def check(cpp, flags, lower, nfd):
    text = open(cpp, encoding="utf-8").read()

    def table(name):
        m = re.search(name + r"[^{]*=\s*\{(.*?)\n\};", text, re.S)
        return [tuple(int(x, 16) for x in re.findall(r"0x([0-9A-Fa-f]+)", line))
                for line in m.group(1).splitlines() if "0x" in line]

    bad = 0
    lflags = [0] * N_CP
    runs = table("unicode_ranges_flags")
    for (a, fl), (b, _) in zip(runs, runs[1:]):
        for cp in range(a, b):
            lflags[cp] = fl
    for (cp,) in table("unicode_set_whitespace"):
        lflags[cp] |= WHITESPACE
    for cp in range(N_CP):
        if lflags[cp] != flags[cp] & 0x1FF:
            bad += 1
            if bad < 10:
                print(f"flags U+{cp:04X}: llama.cpp {lflags[cp]:#x}, ours {flags[cp]:#x}")
    if sorted(table("unicode_map_lowercase")) != lower:
        a, b = set(table("unicode_map_lowercase")), set(lower)
        print("lowercase differs: only llama.cpp", sorted(a - b)[:10], "only ours", sorted(b - a)[:10])
        bad += 1
    lnfd = {}
    for a, b, d in table("unicode_ranges_nfd"):
        for cp in range(a, b + 1):
            lnfd[cp] = d
    lnfd.pop(0, None)
    ours = {cp: d for a, b, d in nfd for cp in range(a, b + 1)}
    if lnfd != ours:
        ka, kb = set(lnfd.items()), set(ours.items())
        print("nfd differs: only llama.cpp", sorted(ka - kb)[:10], "only ours", sorted(kb - ka)[:10])
        bad += 1
    print("check against", cpp, "differences:", bad)
    return bad == 0


def emit_normalize(path):
    rows, pool = [], []
    for cp in range(N_CP):
        c = chr(cp)
        if ud.category(c) in ("Cn", "Cs") or 0xAC00 <= cp <= 0xD7A3:
            continue
        d, k = ud.normalize("NFD", c), ud.normalize("NFKD", c)
        if d == c and k == c:
            continue
        nd = 0 if d == c else len(d)
        nk = 0 if k == (d if nd else c) else len(k)
        rows.append((cp, len(pool), nd | nk << 8))
        if nd:
            pool += [ord(x) for x in d]
        if nk:
            pool += [ord(x) for x in k]
    ccc = []
    for cp in range(N_CP):
        k = ud.combining(chr(cp))
        if not k:
            continue
        if ccc and ccc[-1][1] == cp - 1 and ccc[-1][2] == k:
            ccc[-1] = (ccc[-1][0], cp, k)
        else:
            ccc.append((cp, cp, k))
    comp = []
    for cp in range(N_CP):
        dm = ud.decomposition(chr(cp))
        if not dm or dm.startswith("<"):
            continue
        parts = [int(x, 16) for x in dm.split()]
        if len(parts) == 2 and ud.normalize("NFC", chr(parts[0]) + chr(parts[1])) == chr(cp):
            comp.append((parts[0], parts[1], cp))
    comp.sort()
    with open(path, "w") as f:
        f.write("// Generated by scripts/gen-unicode-table.py from unicodedata2 (Unicode "
                f"{ud.unidata_version}); do not edit.\n")
        f.write('#include "tokenizer/unicode.h"\n\n')
        f.write("const uint32_t uni_decomp[][3] = {\n")
        for i in range(0, len(rows), 5):
            f.write("    " + " ".join(f"{{0x{a:X}, {b}, 0x{c:X}}}," for a, b, c in rows[i:i + 5]) + "\n")
        f.write(f"}};\nconst int uni_decomp_n = {len(rows)};\n\n")
        f.write("const uint32_t uni_decomp_pool[] = {\n")
        for i in range(0, len(pool), 12):
            f.write("    " + " ".join(f"0x{x:X}," for x in pool[i:i + 12]) + "\n")
        f.write("};\n\n")
        f.write("const uint32_t uni_ccc[][3] = {\n")
        for i in range(0, len(ccc), 5):
            f.write("    " + " ".join(f"{{0x{a:X}, 0x{b:X}, {c}}}," for a, b, c in ccc[i:i + 5]) + "\n")
        f.write(f"}};\nconst int uni_ccc_n = {len(ccc)};\n\n")
        f.write("const uint32_t uni_compose[][3] = {\n")
        for i in range(0, len(comp), 4):
            f.write("    " + " ".join(f"{{0x{a:X}, 0x{b:X}, 0x{c:X}}}," for a, b, c in comp[i:i + 4]) + "\n")
        f.write(f"}};\nconst int uni_compose_n = {len(comp)};\n")
    print(path, len(rows), "decompositions,", len(pool), "pool entries,", len(ccc), "ccc ranges,", len(comp),
          "compositions")


def main():
    args = sys.argv[1:]
    cpp = None
    if "--check" in args:
        i = args.index("--check")
        cpp = args[i + 1]
        del args[i:i + 2]
    path = args[0] if args else "src/tokenizer/unicode_table.c"
    emit_normalize(os.path.join(os.path.dirname(path), "normalize_table.c"))
    flags, runs, lower, nfd = build()
    emit(path, runs, lower, nfd, flags)
    print(path, len(runs), "flag runs,", len(lower), "lowercase pairs,", len(nfd), "NFD ranges")
    if cpp and not check(cpp, flags, lower, nfd):
        sys.exit(1)


main()
