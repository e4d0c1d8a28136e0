// tokenizer_from_vocab: checks a tok_vocab and builds the lookup tables
// (token text -> id, merge pair -> rank, added tokens, byte tokens).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

// Limits that no real vocabulary comes near; a file past them is hostile.
#define MAX_TOKENS (16 << 20)
#define MAX_TOKEN_BYTES 65536
#define MAX_MERGES (16 << 20)

// ---------------------------------------------------------------------------
// names

infer_status tok_kind_from_name(const char *name, tok_kind *out) {
    if (!strcmp(name, "llama")) *out = TOK_KIND_LLAMA;
    else if (!strcmp(name, "gpt2") || !strcmp(name, "gemma4")) *out = TOK_KIND_GPT2;
    else if (!strcmp(name, "bert")) *out = TOK_KIND_BERT;
    else if (!strcmp(name, "t5")) *out = TOK_KIND_T5;
    else if (!strcmp(name, "rwkv")) *out = TOK_KIND_RWKV;
    else
        return fail(INFER_ERR_UNSUPPORTED,
                    "tokenizer.ggml.model '%s' is not supported (supported: llama, gpt2, gemma4, bert, t5, rwkv)", name);
    return INFER_OK;
}

// ---------------------------------------------------------------------------
// hash tables

uint64_t tok_hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    // FNV's low bits are weak, and the tables index by them: mix (murmur3's fmix64)
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

static infer_status str_map_init(str_map *m, uint64_t entries) {
    m->cap = pow2_at_least(entries * 2);
    m->slots = malloc(sizeof(uint64_t) * m->cap);
    if (!m->slots) return fail(INFER_ERR_NOMEM, "tokenizer: hash table of %u slots", m->cap);
    memset(m->slots, 0xff, sizeof(uint64_t) * m->cap);
    return INFER_OK;
}

int32_t str_map_find(const tokenizer *t, const str_map *m, const char *s, size_t n) {
    if (!m->slots) return -1;
    uint32_t mask = m->cap - 1;
    uint64_t h = tok_hash(s, n), tag = h >> 32 << 32;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        uint64_t e = m->slots[i];
        if (e == UINT64_MAX) return -1;
        int32_t id = (int32_t)(uint32_t)e;
        if ((e >> 32 << 32) == tag && t->len[id] == n && !memcmp(t->text[id], s, n)) return id;
    }
}

int32_t tok_symbol(const tokenizer *t, const char *s, size_t n) {
    int32_t id = str_map_find(t, &t->by_text, s, n);
    return id >= 0 || !t->n_extra ? id : str_map_find(t, &t->extra, s, n);
}

// Adds token id unless a token with the same text is there (the first wins).
static void str_map_add(const tokenizer *t, str_map *m, int32_t id) {
    uint32_t mask = m->cap - 1;
    uint64_t h = tok_hash(t->text[id], t->len[id]), tag = h >> 32 << 32;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        uint64_t e = m->slots[i];
        if (e == UINT64_MAX) {
            m->slots[i] = tag | (uint32_t)id;
            return;
        }
        int32_t o = (int32_t)(uint32_t)e;
        if ((e >> 32 << 32) == tag && t->len[o] == t->len[id] && !memcmp(t->text[o], t->text[id], t->len[id])) return;
    }
}

static uint32_t pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static infer_status pair_map_init(pair_map *m, uint64_t entries) {
    m->cap = pow2_at_least(entries * 2);
    m->slots = malloc(sizeof(pair_slot) * m->cap);
    if (!m->slots) return fail(INFER_ERR_NOMEM, "tokenizer: merge table of %u slots", m->cap);
    for (uint32_t i = 0; i < m->cap; i++) m->slots[i].key = UINT64_MAX;
    return INFER_OK;
}

int32_t pair_map_find(const pair_map *m, int32_t l, int32_t r, int32_t *merged) {
    if (!m->slots) return -1;
    uint64_t k = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = pair_hash(k) & mask;; i = (i + 1) & mask) {
        const pair_slot *s = &m->slots[i];
        if (s->key == k) {
            *merged = s->merged;
            return s->rank;
        }
        if (s->key == UINT64_MAX) return -1;
    }
}

// Adds a merge unless the pair has one already (the lower rank wins).
static void pair_map_add(pair_map *m, int32_t l, int32_t r, int32_t rank, int32_t merged) {
    uint64_t k = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = pair_hash(k) & mask;; i = (i + 1) & mask) {
        pair_slot *s = &m->slots[i];
        if (s->key == k) return;
        if (s->key == UINT64_MAX) {
            *s = (pair_slot){k, rank, merged};
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// merges

// A string that llama.cpp's merges name but the vocabulary lacks: an extra
// symbol id (>= n). Returns the id, or -1 when out of memory.
static int32_t add_extra(tokenizer *t, const char *s, size_t n) {
    int32_t id = tok_symbol(t, s, n);
    if (id >= 0) return id;
    if (t->n_extra >= INT32_MAX - t->n - 1) return -1;
    int32_t total = t->n + t->n_extra;
    if ((uint64_t)(t->n_extra + 1) * 2 > t->extra.cap) { // grow the map, rehash
        str_map m;
        if (str_map_init(&m, (uint64_t)(t->n_extra + 1) * 2)) return -1;
        for (int32_t i = t->n; i < total; i++) str_map_add(t, &m, i);
        free(t->extra.slots);
        t->extra = m;
    }
    char **text = realloc(t->text, sizeof *text * (size_t)(total + 1));
    if (!text) return -1;
    t->text = text;
    uint32_t *len = realloc(t->len, sizeof *len * (size_t)(total + 1));
    if (!len) return -1;
    t->len = len;
    if (!(t->text[total] = malloc(n + 1))) return -1;
    memcpy(t->text[total], s, n);
    t->text[total][n] = 0;
    t->len[total] = (uint32_t)n;
    t->n_extra++;
    str_map_add(t, &t->extra, total);
    return total;
}

// Merges given as "left right" strings, rank = position.
//
// llama.cpp keys them by strings: the separator is the first space after the
// first byte, the parts and their join need not be tokens (such symbols fall
// back to bytes), and the first listing of a pair counts. Hugging Face wants
// two tokens whose join is a token; a token may itself hold a space, so every
// space is tried as the separator.
static infer_status merges_from_list(tokenizer *t, const tok_vocab *v) {
    if (v->n_merges < 0 || v->n_merges > MAX_MERGES)
        return fail(INFER_ERR_FORMAT, "tokenizer: %d merges", v->n_merges);
    if (v->n_merges && (!v->merges || !v->merge_lens))
        return fail(INFER_ERR_FORMAT, "tokenizer: merges missing");
    infer_status st = pair_map_init(&t->merges, (uint64_t)v->n_merges);
    if (st) return st;
    char *buf = NULL;
    size_t buf_cap = 0;
    for (int32_t r = 0; r < v->n_merges; r++) {
        const char *s = v->merges[r];
        uint32_t n = v->merge_lens[r];
        if (!s) {
            st = fail(INFER_ERR_FORMAT, "tokenizer: merge %d is NULL", r);
            break;
        }
        int32_t l = -1, rt = -1, m = -1;
        if (t->flavor == TOK_FLAVOR_LLAMACPP) {
            const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
            if (!sp) continue; // llama.cpp files it under ("", ""): it never applies
            size_t k = (size_t)(sp - s);
            if ((l = add_extra(t, s, k)) < 0 || (rt = add_extra(t, s + k + 1, n - k - 1)) < 0) {
                st = fail(INFER_ERR_NOMEM, "tokenizer: merge %d", r);
                break;
            }
            if (buf_cap < n) {
                char *b = realloc(buf, n);
                if (!b) {
                    st = fail(INFER_ERR_NOMEM, "tokenizer: merge %d", r);
                    break;
                }
                buf = b, buf_cap = n;
            }
            memcpy(buf, s, k);
            memcpy(buf + k, s + k + 1, n - k - 1);
            if ((m = add_extra(t, buf, n - 1)) < 0) {
                st = fail(INFER_ERR_NOMEM, "tokenizer: merge %d", r);
                break;
            }
            pair_map_add(&t->merges, l, rt, r, m);
            continue;
        }
        for (uint32_t k = 1; k + 1 < n && m < 0; k++) {
            if (s[k] != ' ') continue;
            l = str_map_find(t, &t->by_text, s, k);
            rt = str_map_find(t, &t->by_text, s + k + 1, n - k - 1);
            if (l < 0 || rt < 0) continue;
            size_t ml = (size_t)t->len[l] + t->len[rt];
            if (buf_cap < ml) {
                char *b = realloc(buf, ml);
                if (!b) {
                    st = fail(INFER_ERR_NOMEM, "tokenizer: merge %d", r);
                    break;
                }
                buf = b, buf_cap = ml;
            }
            memcpy(buf, t->text[l], t->len[l]);
            memcpy(buf + t->len[l], t->text[rt], t->len[rt]);
            m = str_map_find(t, &t->by_text, buf, ml);
        }
        if (st) break;
        if (m < 0) {
            st = fail(INFER_ERR_FORMAT, "tokenizer: merge %d '%.*s' is not two tokens whose join is a token", r,
                      (int)(n > 200 ? 200 : n), s);
            break;
        }
        pair_map_add(&t->merges, l, rt, r, m);
    }
    free(buf);
    return st;
}

// ---------------------------------------------------------------------------
// added tokens and byte tokens

static int cmp_u32_desc(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x < y) - (x > y);
}

static int is_added(int type) {
    return type == TOK_TYPE_CONTROL || type == TOK_TYPE_USER_DEFINED || type == TOK_TYPE_UNKNOWN;
}

static infer_status build_added(tokenizer *t) {
    int32_t count = 0;
    for (int32_t i = 0; i < t->n; i++)
        if (is_added(t->type[i]) && t->len[i]) count++;
    infer_status st = str_map_init(&t->added, (uint64_t)count);
    if (st) return st;
    uint32_t n_by_byte[256] = {0};
    for (int32_t i = 0; i < t->n; i++)
        if (is_added(t->type[i]) && t->len[i]) {
            str_map_add(t, &t->added, i);
            n_by_byte[(unsigned char)t->text[i][0]]++;
        }
    for (int b = 0; b < 256; b++) {
        if (!n_by_byte[b]) continue;
        uint32_t *L = malloc(sizeof(uint32_t) * (n_by_byte[b] + 1));
        if (!L) return fail(INFER_ERR_NOMEM, "tokenizer: added tokens");
        uint32_t k = 0;
        for (int32_t i = 0; i < t->n; i++)
            if (is_added(t->type[i]) && t->len[i] &&
                (unsigned char)t->text[i][0] == b)
                L[k++] = t->len[i];
        qsort(L, k, sizeof *L, cmp_u32_desc);
        uint32_t u = 0;
        for (uint32_t j = 0; j < k; j++)
            if (!u || L[u - 1] != L[j]) L[u++] = L[j];
        L[u] = 0;
        t->added_lens[b] = L;
    }
    return INFER_OK;
}

// byte_id: the <0xAB> tokens (SentencePiece's byte fallback), or for a
// byte-level vocabulary the token of each byte's mapped character; byte_sym:
// the symbol (token or extra) of each byte's mapped character.
static void build_byte_ids(tokenizer *t) {
    int hex = t->kind == TOK_KIND_LLAMA || (t->pre_flags & PRE_RAW);
    for (int b = 0; b < 256; b++) {
        char buf[8];
        int n = utf8_encode(gpt2_byte_to_cp((unsigned char)b), buf);
        t->byte_sym[b] = tok_symbol(t, buf, (size_t)n);
        if (hex) n = snprintf(buf, sizeof buf, "<0x%02X>", b);
        t->byte_id[b] = str_map_find(t, &t->by_text, buf, (size_t)n);
    }
}

// ---------------------------------------------------------------------------
// tokenizer_from_vocab

static infer_status check_id(const char *what, int32_t id, int32_t n) {
    if (id < -1 || id >= n) return fail(INFER_ERR_FORMAT, "tokenizer: %s token id %d outside [0, %d)", what, id, n);
    return INFER_OK;
}

infer_status tokenizer_from_vocab(const tok_vocab *v, tokenizer **out) {
    *out = NULL;
    if (v->kind != TOK_KIND_LLAMA && v->kind != TOK_KIND_GPT2 && v->kind != TOK_KIND_BERT && v->kind != TOK_KIND_T5 &&
        v->kind != TOK_KIND_RWKV)
        return fail(INFER_ERR_FORMAT, "tokenizer: kind %d", (int)v->kind);
    if (v->flavor != TOK_FLAVOR_HF && v->flavor != TOK_FLAVOR_LLAMACPP)
        return fail(INFER_ERR_FORMAT, "tokenizer: flavor %d", (int)v->flavor);
    if (v->kind == TOK_KIND_GPT2 && (v->pre < 0 || v->pre >= tok_pre_table_n))
        return fail(INFER_ERR_FORMAT, "tokenizer: pre-tokenizer %d", v->pre);
    if (v->n_tokens <= 0 || v->n_tokens > MAX_TOKENS)
        return fail(INFER_ERR_FORMAT, "tokenizer: %d tokens", v->n_tokens);
    if (!v->tokens || !v->token_lens) return fail(INFER_ERR_FORMAT, "tokenizer: token texts missing");
    if (v->kind == TOK_KIND_GPT2 && v->n_merges <= 0) return fail(INFER_ERR_FORMAT, "tokenizer: gpt2 model without merges");
    if (v->kind == TOK_KIND_LLAMA && v->flavor == TOK_FLAVOR_HF && v->n_merges <= 0)
        return fail(INFER_ERR_FORMAT, "tokenizer: SentencePiece BPE model without merges");
    infer_status st;
    if ((st = check_id("bos", v->bos, v->n_tokens)) || (st = check_id("eos", v->eos, v->n_tokens)) ||
        (st = check_id("eot", v->eot, v->n_tokens)) || (st = check_id("pad", v->pad, v->n_tokens)) ||
        (st = check_id("unk", v->unk, v->n_tokens)) || (st = check_id("sep", v->sep, v->n_tokens)))
        return st;
    if (v->add_bos && v->bos < 0) return fail(INFER_ERR_FORMAT, "tokenizer: add_bos without a bos token");
    if (v->add_eos && v->eos < 0) return fail(INFER_ERR_FORMAT, "tokenizer: add_eos without an eos token");
    if ((v->kind == TOK_KIND_BERT || v->kind == TOK_KIND_T5) && v->unk < 0)
        return fail(INFER_ERR_FORMAT, "tokenizer: %s model without an unknown token", v->kind == TOK_KIND_BERT ? "WordPiece" : "Unigram");

    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return fail(INFER_ERR_NOMEM, "tokenizer");
    t->kind = v->kind;
    t->flavor = v->flavor;
    t->pre = v->kind == TOK_KIND_GPT2 ? v->pre : 0;
    t->pre_flags = v->kind == TOK_KIND_GPT2 ? v->pre_flags : 0;
    t->n = v->n_tokens;
    t->bos = v->bos, t->eos = v->eos, t->eot = v->eot, t->pad = v->pad, t->unk = v->unk, t->sep = v->sep;
    t->add_bos = v->add_bos, t->add_eos = v->add_eos;
    t->add_space_prefix = v->add_space_prefix, t->ignore_merges = v->ignore_merges;
    t->lowercase = v->lowercase, t->strip_accents = v->strip_accents, t->remove_extra_ws = v->remove_extra_ws;
    if (v->n_hf_norm < 0 || v->n_hf_norm > (int)sizeof t->hf_norm)
        return tokenizer_free(t), fail(INFER_ERR_FORMAT, "tokenizer: %d normalizer steps", v->n_hf_norm);
    memcpy(t->hf_norm, v->hf_norm, sizeof t->hf_norm);
    t->n_hf_norm = v->n_hf_norm, t->hf_pre = v->hf_pre, t->hf_prepend = v->hf_prepend, t->hf_split = v->hf_split;
    t->byte_fallback = v->byte_fallback, t->wp_max_chars = v->wp_max_chars ? v->wp_max_chars : 100;
    t->text = calloc((size_t)t->n, sizeof *t->text);
    t->len = malloc(sizeof *t->len * (size_t)t->n);
    t->type = malloc((size_t)t->n);
    if (!t->text || !t->len || !t->type) {
        st = fail(INFER_ERR_NOMEM, "tokenizer: %d tokens", t->n);
        goto out;
    }
    size_t total = 0;
    for (int32_t i = 0; i < t->n; i++) total += (size_t)v->token_lens[i] + 1;
    if (!(t->arena = malloc(total ? total : 1))) {
        st = fail(INFER_ERR_NOMEM, "tokenizer: %zu bytes of token text", total);
        goto out;
    }
    if (v->scores && (v->kind == TOK_KIND_LLAMA || v->kind == TOK_KIND_T5) && !(t->score = malloc(sizeof *t->score * (size_t)t->n))) {
        st = fail(INFER_ERR_NOMEM, "tokenizer: %d scores", t->n);
        goto out;
    }
    char *at = t->arena;
    for (int32_t i = 0; i < t->n; i++) {
        uint32_t n = v->token_lens[i];
        if (!v->tokens[i] || n > MAX_TOKEN_BYTES) {
            st = fail(INFER_ERR_FORMAT, "tokenizer: token %d: %u bytes", i, n);
            goto out;
        }
        int32_t ty = v->types ? v->types[i] : TOK_TYPE_NORMAL;
        if (ty < TOK_TYPE_UNDEFINED || ty > TOK_TYPE_BYTE) {
            st = fail(INFER_ERR_FORMAT, "tokenizer: token %d has type %d (known: 0-6)", i, ty);
            goto out;
        }
        if (v->scores && isnan(v->scores[i])) {
            st = fail(INFER_ERR_FORMAT, "tokenizer: token %d has a NaN score", i);
            goto out;
        }
        if (t->score) t->score[i] = v->scores[i];
        t->type[i] = (uint8_t)ty;
        t->len[i] = n;
        if (n > t->max_token_len) t->max_token_len = n;
        t->text[i] = at;
        at += n + 1;
        memcpy(t->text[i], v->tokens[i], n);
        t->text[i][n] = 0;
    }
    if ((st = str_map_init(&t->by_text, (uint64_t)t->n))) goto out;
    for (int32_t i = 0; i < t->n; i++) str_map_add(t, &t->by_text, i);
    if (v->n_merges > 0 && !(v->kind == TOK_KIND_LLAMA && v->flavor == TOK_FLAVOR_LLAMACPP) &&
        (v->kind == TOK_KIND_LLAMA || v->kind == TOK_KIND_GPT2) &&
        (st = merges_from_list(t, v)))
        goto out;
    if ((st = build_added(t))) goto out;
    build_byte_ids(t);
    if (t->kind == TOK_KIND_T5 && (st = ugm_init(t, v->charsmap, v->charsmap_len))) goto out;
    if (t->kind == TOK_KIND_RWKV && (st = rwkv_init(t))) goto out;
    if (v->strip) {
        if (!(t->strip = malloc((size_t)t->n))) {
            st = fail(INFER_ERR_NOMEM, "tokenizer: strip flags");
            goto out;
        }
        memcpy(t->strip, v->strip, (size_t)t->n);
    }
    if (t->kind == TOK_KIND_GPT2) {
        const char *const *re = tok_pre_table[t->pre].regex;
        for (int k = 0; re[k] && !st; k++) {
            if (k >= (int)(sizeof t->pre_regex / sizeof *t->pre_regex)) {
                st = fail(INFER_ERR_FORMAT, "tokenizer: pre-tokenizer '%s' has too many expressions", tok_pre_table[t->pre].name);
                break;
            }
            if (!tok_pre_is_custom(re[k])) st = regex_compile(re[k], &t->pre_regex[k]);
        }
        if (st) goto out;
    }
    // Neither Gemma's GGUF nor a tokenizer.json names the end-of-turn token;
    // it is the chat template's turn terminator, found by its text.
    static const char *const eot_names[] = {"<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>"};
    for (size_t k = 0; k < sizeof eot_names / sizeof *eot_names && t->eot < 0; k++) {
        int32_t id = str_map_find(t, &t->by_text, eot_names[k], strlen(eot_names[k]));
        if (id >= 0 && (t->type[id] == TOK_TYPE_CONTROL || t->type[id] == TOK_TYPE_USER_DEFINED)) t->eot = id;
    }
    if (v->chat_template && !(t->chat_template = strdup(v->chat_template))) {
        st = fail(INFER_ERR_NOMEM, "tokenizer: chat template");
        goto out;
    }
    *out = t;
    return INFER_OK;
out:
    tokenizer_free(t);
    return st;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    for (int32_t i = t->n; i < t->n + t->n_extra; i++) free(t->text[i]);
    free(t->arena);
    free(t->text);
    free(t->len);
    free(t->type);
    free(t->score);
    free(t->by_text.slots);
    free(t->extra.slots);
    free(t->added.slots);
    free(t->merges.slots);
    for (int b = 0; b < 256; b++) free(t->added_lens[b]);
    for (size_t k = 0; k < sizeof t->pre_regex / sizeof *t->pre_regex; k++) regex_free(t->pre_regex[k]);
    free(t->chat_template);
    free(t->strip);
    free(t->charsmap);
    trie_free(&t->tok_trie);
    trie_free(&t->user_trie);
    free(t);
}

// ---------------------------------------------------------------------------
// accessors

int32_t tokenizer_n_vocab(const tokenizer *t) { return t->n; }
tok_kind tokenizer_kind(const tokenizer *t) { return t->kind; }
int32_t tokenizer_bos(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const tokenizer *t) { return t->eos; }
int32_t tokenizer_eot(const tokenizer *t) { return t->eot; }
int32_t tokenizer_pad(const tokenizer *t) { return t->pad; }
int32_t tokenizer_unk(const tokenizer *t) { return t->unk; }
const char *tokenizer_chat_template(const tokenizer *t) { return t->chat_template; }

int32_t tokenizer_find(const tokenizer *t, const char *s, size_t len) {
    return str_map_find(t, &t->by_text, s, len);
}

const char *tokenizer_token(const tokenizer *t, int32_t id, size_t *len, tok_type *type) {
    if (id < 0 || id >= t->n) return NULL;
    if (len) *len = t->len[id];
    if (type) *type = (tok_type)t->type[id];
    return t->text[id];
}
