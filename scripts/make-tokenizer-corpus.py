#!/usr/bin/env python3
"""Writes tests/data/tokenizer/corpus.txt: >= 2,000 lines for the tokenizer
tests (English, many scripts, emoji with ZWJ and skin tones, CJK, code,
whitespace runs, numbers, contractions, special-token text). Deterministic
(fixed seed). Lines hold no \\n (a few hold \\r); tabs and runs of spaces are kept.
Run from the repository root."""
import random
import unicodedata

rng = random.Random(20261129)

english = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world!",
    "It's a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
    "I can't believe they're already here; we'll leave when you've finished, and I'd say he's ready.",
    "She said: \"Don't touch that!\" -- and then left.",
    "In 1969, Apollo 11 landed on the Moon at 20:17 UTC.",
    "Prices rose 3.5% year-over-year, to $1,234,567.89 in Q3.",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=two#frag.",
    "What's the difference between a list and a tuple?",
    "THE END. The End. the end.",
    "Mr. and Mrs. Dursley, of number four, Privet Drive, were proud to say that they were perfectly normal.",
    "Call me Ishmael.",
    "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "e.g. i.e. etc. vs. a.m. p.m.",
    "We're, you're, they're; I've, we've; I'm; he'll, she'll; it'd, you'd.",
    "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE 'VE 'M 'LL 'D",
    "rock'n'roll o'clock y'all ma'am",
    "...!!!???,,,;;;:::---___===+++",
    "(parentheses) [brackets] {braces} <angles>",
    "#hashtag @mention $dollar %percent ^caret &amp *star",
    "naïve café résumé coöperate façade jalapeño",
    "Once upon a time, there was a little tokenizer that could.",
]
words = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact be have do say get make go know take see come think look "
         "want give use find tell ask seem feel try leave call good new first last long great little own other old "
         "right big high different small large next early young important few public bad same able the a of and "
         "to in is you that it he was for on are as with his they I at be this from or one had by word but not "
         "what all were we when your can said there use an each which she how their if will up other about out "
         "many then them these so some her would make like him into has look two more write go see number no way "
         "could people my than first water been call who oil its now find long down day did get come made may part").split()
multilingual = [
    "Добро пожаловать в Москву! Как дела?",
    "Ελληνικά: Γειά σου Κόσμε, καλημέρα.",
    "עברית: שלום עולם, מה שלומך?",
    "العربية: مرحبا بالعالم، كيف حالك؟",
    "فارسی: سلام دنیا",
    "हिन्दी: नमस्ते दुनिया, आप कैसे हैं?",
    "বাংলা: হ্যালো বিশ্ব",
    "தமிழ்: வணக்கம் உலகம்",
    "తెలుగు: హలో ప్రపంచం",
    "ไทย: สวัสดีชาวโลก",
    "ລາວ: ສະບາຍດີ",
    "ქართული: გამარჯობა მსოფლიო",
    "Հայերեն: Բարեւ աշխարհ",
    "አማርኛ: ሰላም ልዑል",
    "日本語: こんにちは世界、今日はいい天気ですね。カタカナもある。",
    "中文：你好，世界！我爱编程。繁體中文：歡迎光臨。",
    "한국어: 안녕하세요 세계, 반갑습니다.",
    "Tiếng Việt: Xin chào thế giới, tôi là người Việt Nam.",
    "Türkçe: Merhaba dünya, nasılsın? İstanbul ığdır",
    "Polski: Zażółć gęślą jaźń.",
    "Čeština: Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Deutsch: Größe, Straße, Übermäßig, ẞ.",
    "Français: Où est la bibliothèque ? À bientôt !",
    "Español: ¿Dónde está la biblioteca? ¡Hola!",
    "Português: Ação, coração, não.",
    "Íslenska: Þetta er ð og æ.",
    "Monguolian: ᠮᠣᠩᠭᠣᠯ",
    "Tibetan: བོད་ཡིག",
    "Khmer: សួស្តីពិភពលោក",
    "Myanmar: မင်္ဂလာပါ",
    "Sinhala: ආයුබෝවන්",
    "Cherokee: ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ",
    "Runic: ᚠᚢᚦᚨᚱᚲ",
    "Gothic: 𐌲𐌿𐍄𐌹𐍃𐌺",
    "Math: ∀x∈ℝ, x²≥0; ∑ᵢ aᵢ = ∫₀^∞ f(x) dx ≈ 3.14159…",
    "Fullwidth: ＡＢＣ１２３！？",
    "Roman numerals: Ⅰ Ⅱ Ⅲ Ⅳ Ⅻ ⅻ",
    "Fractions: ½ ⅓ ¼ ⅞ and superscripts ¹²³",
    "Arabic digits: ٠١٢٣٤٥٦٧٨٩ Devanagari: ०१२३४५६७८९",
    "Combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323",
    "Zero width: a\u200bb\u200cc\u200dd\ufeffe",
    "Nonbreaking:\u00a0space\u2003em\u3000ideographic\u202fnarrow",
    "Box drawing: ┌─┬─┐ │ │ │ └─┴─┘",
    "Private use: \ue000\uf8ff",
]
emoji = [
    "😀 😃 😄 😁 😆 😅 😂 🤣",
    "👍 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿",
    "👨‍👩‍👧‍👦 family, 👩‍💻 technologist, 🏳️‍🌈 rainbow flag, 🏴‍☠️ pirate",
    "🧑🏽‍🚀 astronaut, 👩🏿‍❤️‍💋‍👨🏻 kiss",
    "🇺🇸 🇬🇧 🇯🇵 🇩🇪 🇫🇷 flags",
    "❤️ ♥ ☺️ ✌️ ☀️ ⭐ ✨",
    "1️⃣ 2️⃣ #️⃣ *️⃣ keycaps",
    "I love 🍕 and 🍣!!! 🎉🎉🎉",
    "🐶🐱🐭🐹🐰🦊🐻🐼",
    "emoji🙂glued🙃together",
]
code = [
    "def fib(n):", "    if n < 2:", "        return n", "    return fib(n - 1) + fib(n - 2)",
    "for i in range(10): print(i, end=' ')",
    "import numpy as np; x = np.zeros((3, 4), dtype=np.float32)",
    "class Foo(Bar):\tpass",
    "#include <stdio.h>", "int main(int argc, char **argv) {", "    printf(\"%d\\n\", argc);",
    "    return 0;", "}",
    "static inline uint32_t rotl(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }",
    "if (a != b && c >= d || !e) { x += 1; y -= 2; z *= 3; w /= 4; }",
    "{\"name\": \"infer\", \"version\": 1, \"tags\": [\"c\", \"llm\"], \"ok\": true, \"n\": null}",
    "[1, 2, 3, {\"a\": {\"b\": [4.5e-6, -7]}}]",
    "SELECT id, name FROM users WHERE age > 21 ORDER BY name DESC;",
    "<div class=\"container\"><p>Hello &amp; welcome</p></div>",
    "const f = async (x) => { await g(x ?? 0); };",
    "fn main() { let v: Vec<i32> = (0..10).collect(); println!(\"{:?}\", v); }",
    "$ ls -la /usr/local/bin | grep -E '^d' > out.txt 2>&1",
    "x=\"$(printf '%s' \"$y\")\"; echo ${x:-default}",
    "a_b_c = __init__.__name__ + '__main__'",
    "0x7FFFFFFF 0b1010 0o777 1e10 3.14f 1_000_000",
    "// TODO(fix): handle the edge case where n == 0",
    "/* multi-line comment start */",
]
special_text = [
    "<start_of_turn>user\tWhat is 2+2?<end_of_turn>",
    "<start_of_turn>model\tIt is 4.<end_of_turn>",
    "<bos>Hello<eos>",
    "<|im_start|>system You are a helpful assistant.<|im_end|>",
    "<|im_start|>user Hi!<|im_end|><|im_start|>assistant",
    "<|endoftext|>",
    "text<|im_end|>more text",
    "<start_of_image> <end_of_image>",
    "<pad><unk><mask>",
    "< start_of_turn > <|im_start |> <|im_ start|>",
    "<unused0><unused99> [multimodal]",
    "<|im_start|><start_of_turn><|im_end|><end_of_turn>",
    "<file_sep><filename>main.py<gh_stars>100",
]
whitespace = [
    "  leading two spaces", "trailing two spaces  ", "   ", " ", "\t", "\t\t\t", "a\tb\t\tc",
    "many     spaces     between", "tab\tthen space \t mixed \t\t ", " \t \t ", "end with tab\t",
    "    indented four", "        indented eight", "\t\tindented tabs",
    "a  b   c    d     e      f       g", "\u3000\u3000full width spaces",
    "x" + " " * 40 + "y", "                                                                ",
    "carriage\r", "windows line\r\x0bvertical tab\x0cform feed", " \r \r\r  x", "a\r\r\rb", "\r",
    "mixed \t\r\t end", "  \r  ", "'ll\r'S\r'Re",
]
numbers = [
    "0", "1", "12", "123", "1234", "12345", "123456789012345678901234567890",
    "3.14159265358979323846264338327950288419716939937510",
    "1,000,000", "1.000.000,00", "2026-11-29T07:28:51Z", "+1 (555) 123-4567",
    "v1.2.3-rc.4+build.5", "IPv4 192.168.0.1 and IPv6 2001:db8::ff00:42:8329",
    "-42", "−17 (unicode minus)", "10^100", "1e-9", "99.9%", "#1 #22 #333", "x1y22z333w4444",
]

lines = []
lines += english + multilingual + emoji + code + special_text + whitespace + numbers

def rand_sentence():
    n = rng.randint(3, 18)
    ws = [rng.choice(words) for _ in range(n)]
    if rng.random() < 0.5:
        ws[0] = ws[0].capitalize()
    s = " ".join(ws)
    if rng.random() < 0.3:
        i = rng.randrange(len(s) + 1)
        s = s[:i] + rng.choice(["'s", "'t", "'re", "'ll", "'ve", "'d", "'m", "n't"]) + s[i:]
    if rng.random() < 0.3:
        s += rng.choice([".", "!", "?", "...", ",", ";", ":", " --", "!?"])
    if rng.random() < 0.2:
        s = rng.choice([" ", "  ", "\t", "   "]) + s
    if rng.random() < 0.2:
        s = s + rng.choice([" ", "  ", "\t", " \t"])
    if rng.random() < 0.2:
        s = s.replace(" ", rng.choice(["  ", "\t", "   "]), rng.randint(1, 3))
    if rng.random() < 0.2:
        s += " " + str(rng.randint(0, 10 ** rng.randint(1, 15)))
    return s

# Code points from many blocks, skipping surrogates, controls and unassigned.
blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x530, 0x58F),
          (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0x980, 0x9FF), (0xE00, 0xE7F),
          (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x2000, 0x206F), (0x2190, 0x22FF),
          (0x2500, 0x25FF), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF),
          (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x10000, 0x1007F), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF)]

def rand_unicode():
    out = []
    for _ in range(rng.randint(1, 24)):
        a, b = rng.choice(blocks)
        cp = rng.randint(a, b)
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in ("Cn", "Cs", "Cc", "Zl", "Zp") or ch in "\n\r\x85":
            continue
        out.append(ch)
        if rng.random() < 0.15:
            out.append(rng.choice([" ", "  ", "\t", ".", "1", "'s"]))
    return "".join(out)

def mix():
    parts = [rng.choice(english + multilingual + emoji + code + special_text + numbers) for _ in range(rng.randint(2, 4))]
    return rng.choice([" ", "", "  ", "\t", " | "]).join(parts)

while len(lines) < 2100:
    r = rng.random()
    if r < 0.45:
        lines.append(rand_sentence())
    elif r < 0.7:
        lines.append(rand_unicode())
    elif r < 0.85:
        lines.append(mix())
    elif r < 0.92:
        lines.append(" ".join(rng.choice(emoji) for _ in range(rng.randint(1, 3))))
    else:
        lines.append("".join(rng.choice("0123456789., -") for _ in range(rng.randint(1, 40))))

# Dense mixes of the characters the pre-tokenizer rules turn on.
tricky = [" ", " ", "  ", "\t", "\r", "'", "'s", "'LL", "'re", "s", "a", "Z", "é", "ß", "1", "22", "333", "١", "½",
          "!", "?!", "...", "-", "_", "\u00a0", "\u3000", "漢", "の", "😀", "👍🏽", "\u200d", "\u0301", "<", ">", "<|", "|>",
          "<start_of_turn>", "<|im_start|>", "\x0b"]
for _ in range(300):
    lines.append("".join(rng.choice(tricky) for _ in range(rng.randint(1, 30))))

lines = [l for l in lines if "\n" not in l and l != ""]
with open("tests/data/tokenizer/corpus.txt", "w", encoding="utf-8", newline="\n") as f:
    for l in lines:
        f.write(l + "\n")
print(len(lines), "lines")
