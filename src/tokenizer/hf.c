// Hugging Face's tokenization pipeline (tokenizer.json) on one segment of
// raw text between added tokens, as the `tokenizers` library runs it: the
// normalizer steps in order, the pre-tokenizer's pieces, then the model on
// each piece -- SentencePiece-style BPE with byte fallback (llama kind),
// byte-level BPE (gpt2), WordPiece (bert) or Unigram (t5).
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode.h"

static const char META[] = "\xE2\x96\x81"; // U+2581

static int put_cp(tok_buf *b, uint32_t cp) {
    char c[4];
    return tok_buf_put(b, c, (size_t)utf8_encode(cp, c));
}

// The character at s[i..n) (a byte that is not UTF-8 is its own, UNI_INVALID); returns its length.
static size_t char_at(const char *s, size_t n, size_t i, uint32_t *cp) {
    return (size_t)utf8_decode((const unsigned char *)s + i, n - i, cp);
}

// Rust's char::is_whitespace (White_Space), and BERT's notions (as the library has them).
static int is_ws(uint32_t cp) { return (uni_flags(cp) & UNI_WS) != 0; }
static int bert_ws(uint32_t cp) { return cp == ' ' || (uni_flags(cp) & UNI_HF_SPACE); }
static int bert_control(uint32_t cp) { return (uni_flags(cp) & UNI_HF_CONTROL) != 0; }
static int bert_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}
static int bert_punct(uint32_t c) { return (uni_flags(c) & UNI_HF_PUNCT) != 0; }

// One normalizer step over in[0..n) into out (cleared first).
static infer_status norm_step(int op, const char *in, size_t n, tok_buf *out) {
    out->n = 0;
    if (tok_buf_put(out, "", 0)) return fail(INFER_ERR_NOMEM, "tokenizer: normalizer");
    if (op >= HF_NFC && op <= HF_NFKD) {
        static const int form[] = {[HF_NFC] = UNI_NFC, [HF_NFD] = UNI_NFD, [HF_NFKC] = UNI_NFKC, [HF_NFKD] = UNI_NFKD};
        char *o;
        size_t on;
        infer_status st = uni_normalize(form[op], in, n, &o, &on);
        if (st) return st;
        free(out->v);
        out->v = o, out->n = on, out->cap = on + 1;
        return INFER_OK;
    }
    if (op == HF_BERT_STRIP) { // NFD, then drop the nonspacing marks (Mn)
        char *d;
        size_t dn;
        infer_status st = uni_normalize(UNI_NFD, in, n, &d, &dn);
        if (st) return st;
        int bad = 0;
        for (size_t i = 0, l; i < dn; i += l) {
            uint32_t cp;
            l = char_at(d, dn, i, &cp);
            if (!(uni_flags(cp) & UNI_HF_MN)) bad |= tok_buf_put(out, d + i, l);
        }
        free(d);
        return bad ? fail(INFER_ERR_NOMEM, "tokenizer: normalizer") : INFER_OK;
    }
    if (op == HF_PREPEND_META) return (n && tok_buf_put(out, META, 3)) || tok_buf_put(out, in, n) ? fail(INFER_ERR_NOMEM, "tokenizer") : INFER_OK;
    if (op == HF_STRIP_LEFT || op == HF_STRIP_RIGHT) {
        size_t a = 0, b = 0;
        for (size_t i = 0, l; i < n; i += l) {
            uint32_t cp;
            l = char_at(in, n, i, &cp);
            if (is_ws(cp)) continue;
            if (!b) a = i; // the first non-space
            b = i + l;     // the end of the last one
        }
        if (op == HF_STRIP_LEFT) b = n;
        else if (b) a = 0;
        return tok_buf_put(out, in + a, b > a ? b - a : 0) ? fail(INFER_ERR_NOMEM, "tokenizer") : INFER_OK;
    }
    int bad = 0, prev_space = 0;
    for (size_t i = 0, l; i < n; i += l) {
        uint32_t cp;
        l = char_at(in, n, i, &cp);
        if (cp == UNI_INVALID) {
            bad |= tok_buf_put(out, in + i, l);
            continue;
        }
        switch (op) {
        case HF_LOWERCASE:
            if (cp == 0x130) bad |= tok_buf_put(out, "i\xCC\x87", 3); // the one full lowercase mapping longer than its letter
            else bad |= put_cp(out, uni_tolower(cp));
            break;
        case HF_STRIP_MARKS:
            if (!(uni_flags(cp) & UNI_HF_MARK)) bad |= tok_buf_put(out, in + i, l);
            break;
        case HF_BERT_CLEAN:
            if (bert_control(cp)) break; // (U+0000 and U+FFFD among them)
            if (bert_ws(cp)) bad |= tok_buf_put(out, " ", 1);
            else bad |= tok_buf_put(out, in + i, l);
            break;
        case HF_BERT_CJK:
            if (bert_cjk(cp)) bad |= tok_buf_put(out, " ", 1) || tok_buf_put(out, in + i, l) || tok_buf_put(out, " ", 1);
            else bad |= tok_buf_put(out, in + i, l);
            break;
        case HF_SPACE_TO_META:
            bad |= cp == ' ' ? tok_buf_put(out, META, 3) : tok_buf_put(out, in + i, l);
            break;
        case HF_COLLAPSE_SPACES:
            if (!(cp == ' ' && prev_space)) bad |= tok_buf_put(out, in + i, l);
            prev_space = cp == ' ';
            break;
        default: return fail(INFER_ERR_FORMAT, "tokenizer: normalizer step %d", op);
        }
    }
    return bad ? fail(INFER_ERR_NOMEM, "tokenizer: normalizer") : INFER_OK;
}

// ---------------------------------------------------------------------------
// models on one piece

// SentencePiece-style BPE (llama kind): each character a token, or its bytes'
// <0xAB> tokens, or the unknown token (consecutive ones fused); then the merges.
static infer_status piece_spm_bpe(const tokenizer *t, tok_scratch *sc, const char *s, size_t n, id_list *out) {
    if (t->ignore_merges) {
        int32_t id = str_map_find(t, &t->by_text, s, n);
        if (id >= 0) return ids_push(out, id);
    }
    infer_status st = scratch_sym(sc, n + 1);
    if (st) return st;
    size_t k = 0;
    int last_unk = 0;
    for (size_t i = 0, l; i < n; i += l) {
        uint32_t cp;
        l = char_at(s, n, i, &cp);
        int32_t id = str_map_find(t, &t->by_text, s + i, l);
        if (id >= 0) {
            sc->sym[k++] = (tok_sym){id, 0, 1};
            last_unk = 0;
            continue;
        }
        int all = 1;
        for (size_t b = 0; b < l; b++) all &= t->byte_id[(unsigned char)s[i + b]] >= 0;
        if (all) {
            for (size_t b = 0; b < l; b++) sc->sym[k++] = (tok_sym){t->byte_id[(unsigned char)s[i + b]], 0, 1};
            last_unk = 0;
        } else if (t->unk >= 0 && !last_unk) {
            sc->sym[k++] = (tok_sym){t->unk, 0, 1};
            last_unk = 1;
        }
    }
    return bpe_merge(t, "", sc->sym, k, out);
}

// WordPiece: the longest vocabulary entries from the word's start, continuing
// pieces looked up with "##"; a word with a position no entry starts at, or
// longer than wp_max_chars characters, is the unknown token.
static infer_status piece_wordpiece(const tokenizer *t, tok_scratch *sc, const char *s, size_t n, id_list *out) {
    size_t chars = 0;
    for (size_t i = 0; i < n; chars++) {
        uint32_t cp;
        i += char_at(s, n, i, &cp);
    }
    if (chars > t->wp_max_chars) return ids_push(out, t->unk);
    infer_status st = scratch_buf(sc, n + 2);
    if (st) return st;
    size_t before = out->n;
    for (size_t i = 0; i < n;) {
        int32_t id = -1;
        size_t end = n;
        for (; end > i; end--) {
            // only whole characters
            if (end < n && ((unsigned char)s[end] & 0xC0) == 0x80) continue;
            if (i == 0) id = str_map_find(t, &t->by_text, s, end);
            else {
                memcpy(sc->buf, "##", 2);
                memcpy(sc->buf + 2, s + i, end - i);
                id = str_map_find(t, &t->by_text, sc->buf, end - i + 2);
            }
            if (id >= 0) break;
        }
        if (id < 0) {
            out->n = before;
            return ids_push(out, t->unk);
        }
        if ((st = ids_push(out, id))) return st;
        i = end;
    }
    return INFER_OK;
}

// Unigram: the segmentation of highest total score (Viterbi over the token
// trie); a character no token covers is unknown at the lowest score minus 10;
// runs of unknown characters fuse into one unknown token, which byte fallback
// turns into the <0xAB> tokens of its bytes.
static infer_status piece_unigram(const tokenizer *t, const char *s, size_t n, id_list *out) {
    typedef struct {
        int32_t id;
        size_t from;
        double score;
    } best;
    best *b = malloc(sizeof *b * (n + 1));
    if (!b) return fail(INFER_ERR_NOMEM, "tokenizer: piece of %zu bytes", n);
    for (size_t i = 0; i <= n; i++) b[i] = (best){-1, 0, -1e300};
    b[0].score = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t cl = (size_t)utf8_decode((const unsigned char *)s + i, n - i, &cp);
        int single = 0;
        int32_t node = 0;
        for (size_t k = i; k < n;) {
            node = trie_child(&t->tok_trie, node, (unsigned char)s[k++]);
            if (node < 0) break;
            int32_t id = t->tok_trie.value[node];
            if (id < 0) continue;
            if (k - i == cl) single = 1;
            double sc = b[i].score + (t->score ? (double)t->score[id] : 0.0);
            if (sc > b[k].score) b[k] = (best){id, i, sc};
        }
        if (!single) {
            double sc = b[i].score + t->unk_score;
            if (sc > b[i + cl].score) b[i + cl] = (best){t->unk, i, sc};
        }
        i += cl;
    }
    // back from the end into (start, end, id) spans, fusing unknown runs
    size_t count = 0;
    for (size_t at = n; at > 0; at = b[at].from) count++;
    size_t *ends = malloc(sizeof *ends * (count + 1));
    infer_status st = ends ? INFER_OK : fail(INFER_ERR_NOMEM, "tokenizer: piece");
    size_t k = count;
    for (size_t at = n; ends && at > 0; at = b[at].from) ends[--k] = at;
    for (size_t j = 0; j < count && !st;) {
        size_t from = j ? ends[j - 1] : 0, to = ends[j];
        int32_t id = b[to].id;
        if (id == t->unk) {
            while (j + 1 < count && b[ends[j + 1]].id == t->unk) to = ends[++j];
            int all = t->byte_fallback;
            for (size_t x = from; x < to && all; x++) all = t->byte_id[(unsigned char)s[x]] >= 0;
            if (all)
                for (size_t x = from; x < to && !st; x++) st = ids_push(out, t->byte_id[(unsigned char)s[x]]);
            else st = ids_push(out, t->unk);
        } else st = ids_push(out, id);
        j++;
    }
    free(ends);
    free(b);
    return st;
}

static infer_status model(const tokenizer *t, tok_scratch *sc, const char *s, size_t n, id_list *out) {
    if (!n) return INFER_OK;
    switch (t->kind) {
    case TOK_KIND_LLAMA: return piece_spm_bpe(t, sc, s, n, out);
    case TOK_KIND_BERT: return piece_wordpiece(t, sc, s, n, out);
    case TOK_KIND_T5: return piece_unigram(t, s, n, out);
    default: return bpe_word(t, sc, s, n, out);
    }
}

typedef struct {
    const tokenizer *t;
    tok_scratch *sc;
    id_list *out;
} word_ctx;

static infer_status bytelevel_word(void *ctx, const char *w, size_t n) {
    word_ctx *c = ctx;
    return bpe_word(c->t, c->sc, w, n, c->out);
}

// ---------------------------------------------------------------------------

infer_status hf_encode(const tokenizer *t, tok_scratch *sc, const char *s, size_t n, int first, id_list *out) {
    tok_buf a = {0}, b = {0};
    infer_status st = INFER_OK;
    const char *x = s;
    size_t xn = n;
    for (int k = 0; k < t->n_hf_norm && !st; k++) {
        st = norm_step(t->hf_norm[k], x, xn, &b);
        tok_buf tmp = a;
        a = b, b = tmp;
        x = a.v, xn = a.n;
    }
    if (!st) switch (t->hf_pre) {
        case HF_PRE_BYTELEVEL: {
            word_ctx c = {t, sc, out};
            st = pretokenize(t, x, xn, bytelevel_word, &c);
            break;
        }
        case HF_PRE_METASPACE: { // spaces -> "▁", the prefix by its scheme, pieces that start at each "▁"
            b.n = 0;
            int prepend = (t->hf_prepend == HF_PREPEND_ALWAYS || (t->hf_prepend == HF_PREPEND_FIRST && first)) &&
                          !(xn >= 3 && !memcmp(x, META, 3)) && !(xn && x[0] == ' ');
            if ((prepend && tok_buf_put(&b, META, 3)) || tok_buf_put(&b, "", 0)) st = fail(INFER_ERR_NOMEM, "tokenizer");
            for (size_t i = 0; i < xn && !st; i++)
                if (x[i] == ' ' ? tok_buf_put(&b, META, 3) : tok_buf_put(&b, x + i, 1)) st = fail(INFER_ERR_NOMEM, "tokenizer");
            size_t start = 0;
            for (size_t i = 0; i < b.n && !st; i++)
                if (t->hf_split && i > start && i + 3 <= b.n && !memcmp(b.v + i, META, 3)) {
                    st = model(t, sc, b.v + start, i - start, out);
                    start = i;
                }
            if (!st) st = model(t, sc, b.v + start, b.n - start, out);
            break;
        }
        case HF_PRE_BERT:
        case HF_PRE_WHITESPACE_SPLIT: { // words at whitespace; BERT also isolates punctuation
            size_t start = 0;
            int bert = t->hf_pre == HF_PRE_BERT;
            for (size_t i = 0, l; i < xn && !st; i += l) {
                uint32_t cp;
                l = char_at(x, xn, i, &cp);
                if (is_ws(cp)) {
                    st = model(t, sc, x + start, i - start, out);
                    start = i + l;
                } else if (bert && bert_punct(cp)) {
                    if (!(st = model(t, sc, x + start, i - start, out))) st = model(t, sc, x + i, l, out);
                    start = i + l;
                }
            }
            if (!st) st = model(t, sc, x + start, xn - start, out);
            break;
        }
        default: st = model(t, sc, x, xn, out);
        }
    free(a.v);
    free(b.v);
    return st;
}
