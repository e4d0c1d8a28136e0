// The GGUF tokenizer against llama.cpp itself: for every case of
// tests/data/tokenizer/llamacpp/cases.txt -- every vocabulary-only GGUF in
// llama.cpp's tree, the default models, and vocabularies with keys removed or
// changed (every pre-tokenizer of the table) -- every text must encode to the
// ids llama.cpp's llama_tokenize gave (with and without special tokens), and
// decode to what llama_detokenize gave. scripts/gen-tokenizer-llamacpp.py
// recorded llama.cpp's answers as hashes; `--show CASE I` prints its ids.
//
// The vocabularies come from the llama-cpp-python sdist (PyPI) in the cache,
// fetched when missing; the test fails if that is impossible.
//
//   test_tokenizer_llamacpp [CASE]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer.h"
#include "base/error.h"
#include "check.h"
#include "models/gguf.h"
#include "models/gguf_write.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"

#define ROOT TEST_DATA_DIR "/../.."
#define DATA TEST_DATA_DIR "/tokenizer"
#define LCP_VERSION "0.3.36"
enum { N_BLOCKS = 60, BLOCK_LEN = 7 }; // as the generator

static char g_tree[2048];

static int find_tree(void) {
    snprintf(g_tree, sizeof g_tree, "%s/llama.cpp/llama_cpp_python-%s/vendor/llama.cpp/models", test_cache_dir(), LCP_VERSION);
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/ggml-vocab-gpt-2.gguf", g_tree);
    if (access(probe, R_OK) == 0) return 1;
    fprintf(stderr, "%s missing: fetching the llama-cpp-python sdist\n", probe);
    int rc = system("cd '" ROOT "' && python3 scripts/gen-tokenizer-llamacpp.py --fetch >&2");
    CHECK(rc == 0 && access(probe, R_OK) == 0, "could not fetch llama.cpp's vocabularies (needs pip and PyPI)");
    return rc == 0 && access(probe, R_OK) == 0;
}

// ---------------------------------------------------------------------------
// texts

typedef struct {
    char **s;
    size_t *n;
    int count, cap;
} texts;

static void add_text(texts *t, const char *s, size_t n) {
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->s = realloc(t->s, sizeof *t->s * (size_t)t->cap);
        t->n = realloc(t->n, sizeof *t->n * (size_t)t->cap);
    }
    t->s[t->count] = malloc(n + 1);
    memcpy(t->s[t->count], s, n);
    t->s[t->count][n] = 0;
    t->n[t->count++] = n;
}

static void free_texts(texts *t) {
    for (int i = 0; i < t->count; i++) free(t->s[i]);
    free(t->s);
    free(t->n);
}

// Splits data at sep (the pieces as the generator's bytes.split gives them).
static void split_add(texts *t, const char *d, size_t n, const char *sep, int drop_empty) {
    size_t sl = strlen(sep), a = 0;
    for (size_t i = 0; i + sl <= n;) {
        if (!memcmp(d + i, sep, sl)) {
            if (!(drop_empty && i == a)) add_text(t, d + a, i - a);
            i += sl;
            a = i;
        } else i++;
    }
    if (!(drop_empty && a == n)) add_text(t, d + a, n - a);
}

// The texts of a case, as scripts/gen-tokenizer-llamacpp.py's texts_of.
static int build_texts(const char *base, const char *set, texts *out) {
    char path[4096];
    size_t n;
    char *d = NULL;
    if (!strncmp(base, "tree:", 5)) {
        snprintf(path, sizeof path, "%s/%s.inp", g_tree, base + 5);
        d = test_read_file(path, &n);
    }
    if (!d) {
        snprintf(path, sizeof path, "%s/ggml-vocab-llama-bpe.gguf.inp", g_tree);
        d = test_read_file(path, &n);
    }
    CHECK(d != NULL, "%s unreadable", path);
    if (!d) return 0;
    split_add(out, d, n, "\n__ggml_vocab_test__\n", 0);
    free(d);
    d = test_read_file(DATA "/corpus.txt", &n);
    CHECK(d != NULL, "corpus.txt unreadable");
    if (!d) return 0;
    texts lines = {0};
    if (n && d[n - 1] == '\n') n--;
    split_add(&lines, d, n, "\n", 0);
    free(d);
    if (!strcmp(set, "full")) {
        for (int i = 0; i < lines.count; i++) add_text(out, lines.s[i], lines.n[i]);
        int stride = lines.count / N_BLOCKS;
        for (int b = 0; b < N_BLOCKS; b++) {
            size_t len = 0;
            for (int k = 0; k < BLOCK_LEN; k++) len += lines.n[b * stride + k] + 1;
            char *blk = malloc(len), *p = blk;
            for (int k = 0; k < BLOCK_LEN; k++) {
                if (k) *p++ = '\n';
                memcpy(p, lines.s[b * stride + k], lines.n[b * stride + k]);
                p += lines.n[b * stride + k];
            }
            add_text(out, blk, (size_t)(p - blk));
            free(blk);
        }
    } else
        for (int i = 0; i < lines.count; i += 8) add_text(out, lines.s[i], lines.n[i]);
    free_texts(&lines);
    d = test_read_file(DATA "/specials.txt", &n);
    CHECK(d != NULL, "specials.txt unreadable");
    if (!d) return 0;
    texts sp = {0};
    split_add(&sp, d, n, "\n", 1);
    free(d);
    for (int i = 0; i < sp.count; i++) { // "\n" and "\t" escapes
        char *s = sp.s[i];
        size_t k = 0;
        for (size_t j = 0; j < sp.n[i]; j++) {
            if (s[j] == '\\' && j + 1 < sp.n[i] && (s[j + 1] == 'n' || s[j + 1] == 't')) {
                s[k++] = s[j + 1] == 'n' ? '\n' : '\t';
                j++;
            } else s[k++] = s[j];
        }
        add_text(out, s, k);
    }
    free_texts(&sp);
    return 1;
}

// ---------------------------------------------------------------------------
// vocabularies

static int base_path(const char *base, char *out, size_t cap) {
    if (!strncmp(base, "tree:", 5)) {
        snprintf(out, cap, "%s/%s", g_tree, base + 5);
        return 1;
    }
    if (!strcmp(base, "made:rwkv")) { // made by the generator's --fetch from PyPI's rwkv
        snprintf(out, cap, "%s/llama.cpp/tokenizer-variants/rwkv-world.gguf", test_cache_dir());
        if (access(out, R_OK) && system("cd '" ROOT "' && python3 scripts/gen-tokenizer-llamacpp.py --fetch >&2")) {}
        CHECK(access(out, R_OK) == 0, "could not make %s (needs pip, PyPI and the gguf package)", out);
        return access(out, R_OK) == 0;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd '%s' && scripts/fetch-model.sh %s", ROOT, base + 6);
    FILE *p = popen(cmd, "r");
    int ok = p && fgets(out, (int)cap, p) != NULL;
    if (p) ok &= pclose(p) == 0;
    if (ok) out[strcspn(out, "\n")] = 0;
    CHECK(ok, "could not fetch the model %s", base + 6);
    return ok;
}

// The vocabulary with the case's edits ("key=type:value" sets, "-key" removes).
static tokenizer *open_case(const char *name, const char *base, char **edits, int n_edits) {
    char path[4096];
    if (!base_path(base, path, sizeof path)) return NULL;
    gguf_file *g = NULL;
    infer_status st = gguf_open(&g, path);
    CHECK(st == INFER_OK, "%s: %s", name, infer_last_error());
    if (st) return NULL;
    char tmp[256] = "";
    if (n_edits) {
        gguf_writer *w = gguf_writer_new();
        for (uint64_t i = 0; i < g->n_kv; i++) {
            int drop = 0;
            for (int e = 0; e < n_edits; e++) {
                const char *k = edits[e] + (edits[e][0] == '-');
                size_t kl = strcspn(k, "=");
                drop |= strlen(g->keys[i]) == kl && !strncmp(g->keys[i], k, kl);
            }
            if (!drop) gguf_set_value(w, g->keys[i], &g->vals[i]);
        }
        for (int e = 0; e < n_edits; e++) {
            if (edits[e][0] == '-') continue;
            char key[256];
            const char *eq = strchr(edits[e], '='), *colon = eq ? strchr(eq, ':') : NULL;
            CHECK(eq && colon, "%s: bad edit %s", name, edits[e]);
            if (!eq || !colon) continue;
            snprintf(key, sizeof key, "%.*s", (int)(eq - edits[e]), edits[e]);
            if (!strncmp(eq + 1, "str:", 4)) gguf_set_str(w, key, colon + 1);
            else if (!strncmp(eq + 1, "bool:", 5)) gguf_set_bool(w, key, atoi(colon + 1));
            else gguf_set_u32(w, key, (uint32_t)strtoul(colon + 1, NULL, 10));
        }
        snprintf(tmp, sizeof tmp, "/tmp/infer-tokcase-%d.gguf", (int)getpid());
        st = gguf_write_file(w, tmp);
        gguf_writer_free(w);
        gguf_close(g);
        g = NULL;
        CHECK(st == INFER_OK, "%s: %s", name, infer_last_error());
        if (!st) st = gguf_open(&g, tmp);
    }
    tokenizer *t = NULL;
    if (!st) st = tokenizer_from_gguf(g, &t);
    CHECK(st == INFER_OK && t, "%s: %s", name, infer_last_error());
    gguf_close(g);
    if (tmp[0]) unlink(tmp);
    return t;
}

// ---------------------------------------------------------------------------

static uint32_t fnv(const void *p, size_t n) {
    const unsigned char *s = p;
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x01000193u;
    return h;
}

static void print_ids(const char *what, const int32_t *v, size_t n) {
    fprintf(stderr, "    %s:", what);
    for (size_t i = 0; i < n && i < 48; i++) fprintf(stderr, " %d", v[i]);
    fprintf(stderr, n > 48 ? " ...\n" : "\n");
}

static void run_case(const char *name, const char *base, const char *set, char **edits, int n_edits) {
    char path[512];
    snprintf(path, sizeof path, DATA "/llamacpp/%s.hash", name);
    size_t hn;
    char *hashes = test_read_file(path, &hn);
    CHECK(hashes != NULL, "%s missing", path);
    if (!hashes) return;
    texts tx = {0};
    tokenizer *t = open_case(name, base, edits, n_edits);
    if (!t || !build_texts(base, set, &tx)) {
        free(hashes);
        free_texts(&tx);
        tokenizer_free(t);
        return;
    }
    int ok[3] = {0}, total[3] = {0}, shown = 0, line = 0;
    char *h = hashes;
    for (; line < tx.count && *h; line++) {
        char want[3][16];
        if (sscanf(h, "%15s %15s %15s", want[0], want[1], want[2]) != 3) break;
        h = strchr(h, '\n');
        h = h ? h + 1 : hashes + hn;
        int32_t *ids[2] = {NULL, NULL};
        size_t n[2] = {0, 0};
        uint32_t got[3] = {0};
        infer_status st = tokenizer_encode(t, tx.s[line], tx.n[line], true, true, &ids[0], &n[0]);
        if (!st) st = tokenizer_encode(t, tx.s[line], tx.n[line], false, false, &ids[1], &n[1]);
        char *dec = NULL;
        size_t dl = 0;
        if (!st) st = tokenizer_decode(t, ids[1], n[1], false, &dec, &dl);
        CHECK(st == INFER_OK, "%s text %d: %s", name, line, infer_last_error());
        if (!st) {
            got[0] = fnv(ids[0], n[0] * sizeof(int32_t));
            got[1] = fnv(ids[1], n[1] * sizeof(int32_t));
            got[2] = fnv(dec, dl);
            for (int m = 0; m < 3; m++) {
                if (want[m][0] == '-') continue; // llama.cpp threw on this one
                total[m]++;
                unsigned w = (unsigned)strtoul(want[m], NULL, 16);
                if (w == got[m]) ok[m]++;
                else if (shown++ < 4) {
                    fprintf(stderr, "%s text %d (%s) differs from llama.cpp: \"%.*s\"\n", name, line,
                            m == 0 ? "special" : m == 1 ? "plain" : "decode", (int)(tx.n[line] > 200 ? 200 : tx.n[line]),
                            tx.s[line]);
                    if (m < 2) print_ids("ours", ids[m], n[m]);
                    else fprintf(stderr, "    ours: \"%.*s\"\n", (int)(dl > 200 ? 200 : dl), dec);
                    fprintf(stderr, "    llama.cpp's: python3 scripts/gen-tokenizer-llamacpp.py --show %s %d\n", name, line);
                }
            }
        }
        free(ids[0]);
        free(ids[1]);
        free(dec);
    }
    CHECK(line == tx.count, "%s: %d hashes for %d texts (regenerate with scripts/gen-tokenizer-llamacpp.py)", name, line,
          tx.count);
    printf("%-28s %4d texts: special %d/%d, plain %d/%d, decode %d/%d\n", name, tx.count, ok[0], total[0], ok[1],
           total[1], ok[2], total[2]);
    CHECK(ok[0] == total[0] && ok[1] == total[1], "%s: %d + %d texts tokenize differently from llama.cpp", name,
          total[0] - ok[0], total[1] - ok[1]);
    CHECK(ok[2] == total[2], "%s: %d texts decode differently from llama.cpp", name, total[2] - ok[2]);
    free(hashes);
    free_texts(&tx);
    tokenizer_free(t);
}

int main(int argc, char **argv) {
    if (!find_tree()) return check_summary("test_tokenizer_llamacpp");
    size_t n;
    char *cases = test_read_file(DATA "/llamacpp/cases.txt", &n);
    CHECK(cases != NULL, "cases.txt missing");
    int n_cases = 0;
    for (char *line = cases; cases && line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (line[0] && line[0] != '#') {
            char *f[16];
            int nf = 0;
            for (char *tok = strtok(line, " "); tok && nf < 16; tok = strtok(NULL, " ")) f[nf++] = tok;
            CHECK(nf >= 3, "cases.txt: bad line");
            if (nf >= 3 && (argc < 2 || !strcmp(argv[1], f[0]))) {
                run_case(f[0], f[1], f[2], f + 3, nf - 3);
                n_cases++;
            }
        }
        line = next;
    }
    CHECK(n_cases > 0, "no case ran");
    free(cases);
    return check_summary("test_tokenizer_llamacpp");
}
