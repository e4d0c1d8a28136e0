// The tokenizer against Hugging Face `tokenizers` on two real vocabularies
// (Gemma 3: SentencePiece BPE; SmolLM2: byte-level BPE): every line of
// tests/data/tokenizer/corpus.txt, and multi-line blocks of it, must encode
// to the ids scripts/gen-tokenizer-expected.py recorded, and decode back.
// The tokenizer.json files live in the model cache (never in the repo); when
// absent they are made by scripts/fetch-model.sh + the generator, and if that
// is impossible the test fails.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer.h"
#include "base/error.h"
#include "check.h"
#include "tokenizer/tok_internal.h"

#define ROOT TEST_DATA_DIR "/../.."

// Same numbers as scripts/gen-tokenizer-expected.py.
// Block b joins lines [b * stride, b * stride + BLOCK_LEN), stride = lines / N_BLOCKS.
enum { N_BLOCKS = 60, BLOCK_LEN = 7 };

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *d = malloc((size_t)n + 1);
    if (d && fread(d, 1, (size_t)n, f) != (size_t)n) {
        free(d);
        d = NULL;
    }
    fclose(f);
    if (d) d[n] = 0;
    if (len) *len = (size_t)n;
    return d;
}

// Splits text at '\n' in place (the final newline ends the last line).
static int split_lines(char *text, char ***lines) {
    int n = 0, cap = 1024;
    char **v = malloc(sizeof *v * (size_t)cap);
    for (char *p = text; *p;) {
        char *nl = strchr(p, '\n');
        if (n == cap) v = realloc(v, sizeof *v * (size_t)(cap *= 2));
        v[n++] = p;
        if (!nl) break;
        *nl = 0;
        p = nl + 1;
    }
    *lines = v;
    return n;
}

static size_t parse_ids(const char *s, int32_t *out, size_t cap) {
    size_t n = 0;
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        if (n < cap) out[n] = (int32_t)v;
        n++;
        s = end;
    }
    return n;
}

// name: gemma3, smollm2, or smollm2-llama3 / smollm2-qwen2 (SmolLM2's
// vocabulary behind the Llama 3 / Qwen 2 pre-tokenizer) / smollm2-strip
// (<|im_start|> with lstrip, <|im_end|> with rstrip).
static tokenizer *open_model(const char *name) {
    char path[1200], cmd[4096];
    const char *dash = strchr(name, '-');
    if (dash) snprintf(path, sizeof path, "%s/%.*s/tokenizer%s.json", test_cache_dir(), (int)(dash - name), name, dash);
    else snprintf(path, sizeof path, "%s/%s/tokenizer.json", test_cache_dir(), name);
    FILE *f = fopen(path, "rb");
    int base = dash ? (int)(dash - name) : (int)strlen(name);
    if (!f) {
        fprintf(stderr, "%s missing: fetching the model and building its tokenizer.json\n", path);
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && scripts/fetch-model.sh %.*s >/dev/null && "
                 "python3 scripts/gen-tokenizer-expected.py --export-only %.*s >/dev/null",
                 ROOT, base, name, base, name);
        int rc = system(cmd);
        CHECK(rc == 0, "could not fetch %s or build its tokenizer.json (needs network, pip, python3 "
                       "with tokenizers and gguf): `%s` exited %d", name, cmd, rc);
        if (rc) return NULL;
    } else fclose(f);
    tokenizer *t = NULL;
    infer_status st = tokenizer_load_json(path, &t);
    CHECK(st == INFER_OK, "%s: %s", path, infer_last_error());
    return t;
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static void print_ids(const char *what, const int32_t *v, size_t n) {
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", v[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

// Encodes each text and compares with one line of the expected file; returns
// the number that match. Also checks decode(encode(x)) == x.
static int run_texts(const tokenizer *t, const char *name, const char *kind, char **texts, int n,
                     const char *expected_path) {
    size_t elen;
    char *exp_text = slurp(expected_path, &elen);
    CHECK(exp_text != NULL, "%s missing", expected_path);
    if (!exp_text) return 0;
    char **exp;
    int ne = split_lines(exp_text, &exp);
    CHECK(ne == n, "%s: %d lines for %d texts", expected_path, ne, n);
    int match = 0, shown = 0, roundtrip = 0;
    int32_t *want = malloc(sizeof(int32_t) * 1 << 20);
    for (int i = 0; i < n && i < ne; i++) {
        size_t nw = parse_ids(exp[i], want, 1 << 20);
        int32_t *ids;
        size_t nids;
        infer_status st = tokenizer_encode(t, texts[i], strlen(texts[i]), true, true, &ids, &nids);
        CHECK(st == INFER_OK, "%s: encode: %s", name, infer_last_error());
        if (st) continue;
        if (same_ids(ids, nids, want, nw)) match++;
        else if (shown++ < 5) {
            fprintf(stderr, "%s %s %d mismatch: \"%s\"\n", name, kind, i, texts[i]);
            print_ids("want", want, nw);
            print_ids("got ", ids, nids);
        }
        free(ids);
        // round trip, without BOS/EOS
        st = tokenizer_encode(t, texts[i], strlen(texts[i]), false, true, &ids, &nids);
        char *back;
        size_t blen;
        if (!st) st = tokenizer_decode(t, ids, nids, false, &back, &blen);
        CHECK(st == INFER_OK, "%s: %s", name, infer_last_error());
        if (!st) {
            if (blen == strlen(texts[i]) && !memcmp(back, texts[i], blen)) roundtrip++;
            else if (!strstr(name, "-strip") && shown++ < 8) fprintf(stderr, "%s %s %d round trip: \"%s\" -> \"%s\"\n", name, kind, i, texts[i], back);
            free(back);
        }
        free(ids);
    }
    printf("%s %s: %d/%d match (%.2f%%), %d/%d round-trip\n", name, kind, match, n, 100.0 * match / (n ? n : 1),
           roundtrip, n);
    CHECK(match == n, "%s %s: %d of %d differ from HF tokenizers", name, kind, n - match, n);
    // lstrip/rstrip added tokens swallow whitespace: no round trip there
    CHECK(roundtrip == n || strstr(name, "-strip"), "%s %s: %d of %d do not round-trip", name, kind, n - roundtrip, n);
    free(want);
    free(exp);
    free(exp_text);
    return match;
}

// Hostile bytes: random strings (invalid UTF-8, NULs, partial sequences)
// must encode without error and decode to the same bytes, except, in a
// byte-level vocabulary, bytes it has no token for (SmolLM2 lacks 21, e.g.
// 0x04 and 0xFF): with no unknown token HF drops them, and so do we.
static void check_random_bytes(const tokenizer *t, const char *name) {
    unsigned s = 12345;
    int ok = 0;
    char text[300];
    for (int k = 0; k < 300; k++) {
        size_t n = (size_t)(k % 97) + 1;
        for (size_t i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            unsigned r = s >> 16;
            // a mix of ASCII, spaces, UTF-8 lead and continuation bytes
            text[i] = (char)(r % 4 == 0 ? ' ' : r % 4 == 1 ? 'a' + r % 26 : r % 4 == 2 ? 0x80 + r % 64 : r & 0xFF);
        }
        int32_t *ids;
        size_t nids;
        infer_status st = tokenizer_encode(t, text, n, false, false, &ids, &nids);
        if (st) continue;
        char *back;
        size_t blen;
        char want[300];
        size_t nw = 0;
        for (size_t i = 0; i < n; i++)
            if (tokenizer_kind(t) == TOK_KIND_LLAMA || t->byte_id[(unsigned char)text[i]] >= 0)
                want[nw++] = text[i];
        if (!tokenizer_decode(t, ids, nids, false, &back, &blen)) {
            ok += blen == nw && !memcmp(back, want, nw);
            free(back);
        }
        free(ids);
    }
    CHECK(ok == 300, "%s: %d/300 random byte strings round-trip", name, ok);
}

// full: also the random-byte and special-token checks.
static void check_model(const char *name, bool full) {
    tokenizer *t = open_model(name);
    if (!t) return;
    size_t clen;
    char *corpus = slurp(TEST_DATA_DIR "/tokenizer/corpus.txt", &clen);
    CHECK(corpus != NULL, "corpus.txt missing");
    if (!corpus) {
        tokenizer_free(t);
        return;
    }
    char **lines;
    int n = split_lines(corpus, &lines);
    CHECK(n >= 2000, "corpus has %d lines", n);
    char path[512];
    snprintf(path, sizeof path, TEST_DATA_DIR "/tokenizer/%s.ids", name);
    run_texts(t, name, "lines", lines, n, path);

    // Multi-line blocks: corpus lines joined with '\n'.
    char *blocks[N_BLOCKS];
    int BLOCK_STRIDE = n / N_BLOCKS;
    for (int b = 0; b < N_BLOCKS; b++) {
        size_t len = 0;
        for (int k = 0; k < BLOCK_LEN; k++) len += strlen(lines[b * BLOCK_STRIDE + k]) + 1;
        blocks[b] = malloc(len + 1);
        char *p = blocks[b];
        for (int k = 0; k < BLOCK_LEN; k++) {
            if (k) *p++ = '\n';
            size_t l = strlen(lines[b * BLOCK_STRIDE + k]);
            memcpy(p, lines[b * BLOCK_STRIDE + k], l);
            p += l;
        }
        *p = 0;
    }
    snprintf(path, sizeof path, TEST_DATA_DIR "/tokenizer/%s.blocks.ids", name);
    run_texts(t, name, "blocks", blocks, N_BLOCKS, path);
    for (int b = 0; b < N_BLOCKS; b++) free(blocks[b]);

    if (!full) goto done;
    check_random_bytes(t, name);

    // parse_special off: special-token text is plain text.
    const char *sp = tokenizer_kind(t) == TOK_KIND_LLAMA ? "<start_of_turn>" : "<|im_start|>";
    int32_t id = tokenizer_find(t, sp, strlen(sp)), *ids;
    size_t nids;
    CHECK(id >= 0, "%s: %s not in vocabulary", name, sp);
    if (!tokenizer_encode(t, sp, strlen(sp), false, false, &ids, &nids)) {
        CHECK(nids > 1, "%s: %s with parse_special off became %zu token(s)", name, sp, nids);
        free(ids);
    }
    if (!tokenizer_encode(t, sp, strlen(sp), false, true, &ids, &nids)) {
        CHECK(nids == 1 && ids[0] == id, "%s: %s with parse_special on", name, sp);
        free(ids);
    }
    const char *eot = tokenizer_kind(t) == TOK_KIND_LLAMA ? "<end_of_turn>" : "<|im_end|>";
    CHECK(tokenizer_eot(t) == tokenizer_find(t, eot, strlen(eot)) && tokenizer_eot(t) >= 0, "%s: eot %d", name,
          tokenizer_eot(t));
    CHECK(tokenizer_bos(t) >= 0 && tokenizer_eos(t) >= 0, "%s: bos %d eos %d", name, tokenizer_bos(t), tokenizer_eos(t));
    CHECK(tokenizer_chat_template(t) != NULL || tokenizer_kind(t) == TOK_KIND_LLAMA, "%s: no chat template", name);
    int32_t bad = tokenizer_n_vocab(t);
    char *out;
    size_t olen;
    CHECK(tokenizer_decode(t, &bad, 1, false, &out, &olen) == INFER_ERR_ARG, "%s: decode of id %d", name, bad);
done:
    free(lines);
    free(corpus);
    tokenizer_free(t);
}

// Malformed vocabularies and files are refused, not cast.
static void check_rejects(void) {
    const char *toks[] = {"a", "b", "ab"};
    uint32_t lens[] = {1, 1, 2};
    int32_t types[] = {1, 1, 9};
    float scores[] = {0, 0, 1};
    tok_vocab v = {.kind = TOK_KIND_LLAMA, .n_tokens = 3, .tokens = toks, .token_lens = lens, .scores = scores,
                   .types = types, .bos = -1, .eos = -1, .eot = -1, .pad = -1, .unk = -1, .sep = -1};
    tokenizer *t = NULL;
    CHECK(tokenizer_from_vocab(&v, &t) == INFER_ERR_FORMAT && !t, "token type 9 accepted");
    types[2] = 1;
    v.bos = 7;
    CHECK(tokenizer_from_vocab(&v, &t) == INFER_ERR_FORMAT, "bos id 7 of 3 accepted");
    v.bos = -1;
    const char *merges[] = {"a c"};
    uint32_t mlens[] = {3};
    v.kind = TOK_KIND_GPT2;
    v.n_merges = 1, v.merges = merges, v.merge_lens = mlens;
    CHECK(tokenizer_from_vocab(&v, &t) == INFER_ERR_FORMAT, "merge of an unknown token accepted");
    v.kind = TOK_KIND_LLAMA;
    v.n_merges = 0;
    CHECK(tokenizer_from_vocab(&v, &t) == INFER_ERR_FORMAT, "SentencePiece BPE (tokenizer.json) without merges accepted");
    v.flavor = TOK_FLAVOR_LLAMACPP; // llama.cpp's SPM: merges by score
    CHECK(tokenizer_from_vocab(&v, &t) == INFER_OK, "llama vocab from scores: %s", infer_last_error());
    if (t) {
        int32_t *ids;
        size_t n;
        if (!tokenizer_encode(t, "abab", 4, true, true, &ids, &n)) {
            CHECK(n == 2 && ids[0] == 2 && ids[1] == 2, "derived merges: 'abab' -> %zu ids", n);
            free(ids);
        }
        tokenizer_free(t);
    }
    // A vocabulary without "▁" and with byte tokens: each space falls back to
    // three byte tokens (E2 96 81); nothing may overflow.
    {
        const char *bt[256 + 1];
        uint32_t bl[256 + 1];
        int32_t ty[256 + 1];
        float sc[256 + 1];
        char names[256][7];
        for (int b = 0; b < 256; b++) {
            snprintf(names[b], sizeof names[b], "<0x%02X>", b);
            bt[b] = names[b], bl[b] = 6, ty[b] = TOK_TYPE_BYTE, sc[b] = 0;
        }
        bt[256] = "x", bl[256] = 1, ty[256] = TOK_TYPE_NORMAL, sc[256] = 0;
        tok_vocab bv = {.kind = TOK_KIND_LLAMA, .n_tokens = 257, .tokens = bt, .token_lens = bl, .scores = sc,
                        .types = ty, .bos = -1, .eos = -1, .eot = -1, .pad = -1, .unk = -1, .sep = -1, .add_space_prefix = true,
                        .flavor = TOK_FLAVOR_LLAMACPP};
        tokenizer *bt_tok = NULL;
        CHECK(tokenizer_from_vocab(&bv, &bt_tok) == INFER_OK, "byte vocab: %s", infer_last_error());
        if (bt_tok) {
            int32_t *ids;
            size_t n;
            if (!tokenizer_encode(bt_tok, "     x  ", 8, false, false, &ids, &n)) {
                CHECK(n == 3 * 8 + 1, "byte vocab: %zu ids for 7 spaces + prefix + x", n);
                free(ids);
            }
            tokenizer_free(bt_tok);
        }
    }
    CHECK(tok_pre_find("no-such-pre") < 0, "unknown pre-tokenizer name accepted");

    static const char *bad_json[] = {
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"0\"}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1.5}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": 3}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"byte_fallback\": \"yes\"}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999999}}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 9999999}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": \"Precompiled\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": 1}]}",
        "[1, 2",
    };
    char path[] = "/tmp/infer_tok_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    for (size_t k = 0; k < sizeof bad_json / sizeof *bad_json; k++) {
        FILE *f = fopen(path, "wb");
        fputs(bad_json[k], f);
        fclose(f);
        t = NULL;
        infer_status st = tokenizer_load_json(path, &t);
        CHECK(st != INFER_OK && !t, "bad tokenizer.json %zu accepted", k);
        if (!st) tokenizer_free(t);
        else printf("rejected as expected: %s\n", infer_last_error());
    }
    remove(path);
}

int main(void) {
    check_rejects();
    check_model("gemma3", true);
    check_model("smollm2", true);
    check_model("smollm2-llama3", false);
    check_model("smollm2-qwen2", false);
    check_model("smollm2-strip", false);
    return check_summary("test_tokenizer");
}
