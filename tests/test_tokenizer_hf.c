// Hugging Face tokenizer.json pipelines against the `tokenizers` library:
// WordPiece behind BERT's normalizer and pre-tokenizer, Unigram behind NFKC
// and Metaspace, SentencePiece BPE behind Metaspace with each prepend_scheme
// (and Llama 2's Prepend + Replace normalizer), byte-level BPE behind NFC or
// accent-stripping normalizers. scripts/gen-tokenizer-hf.py builds each
// tokenizer.json (into the cache) from a vocabulary of llama.cpp's tree and
// recorded the hash of the ids `tokenizers` gives for every corpus line and
// special-token text; they must be ours.
//
//   test_tokenizer_hf [CASE]
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer.h"
#include "base/error.h"
#include "check.h"
#include "tokenizer/tokenizer.h"

#define ROOT TEST_DATA_DIR "/../.."
#define DATA TEST_DATA_DIR "/tokenizer"

static uint32_t fnv(const void *p, size_t n) {
    const unsigned char *s = p;
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x01000193u;
    return h;
}

static char *g_specials; // the buffer the special-token texts point into

// corpus lines, then specials.txt lines with \n and \t escapes (as the generator)
static int load_texts(char ***out) {
    size_t n, m;
    char *c = test_read_file(DATA "/corpus.txt", &n), *sp = test_read_file(DATA "/specials.txt", &m);
    CHECK(c && sp, "corpus.txt or specials.txt unreadable");
    g_specials = sp;
    if (!c || !sp) {
        free(c);
        return 0;
    }
    int count = 0, cap = 4096;
    char **v = malloc(sizeof *v * (size_t)cap);
    for (char *p = c; *p;) {
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = 0;
        v[count++] = p;
        p = nl + 1;
        if (count == cap) v = realloc(v, sizeof *v * (size_t)(cap *= 2));
    }
    for (char *p = sp; *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (*p) {
            char *w = p, *r = p;
            for (; *r; r++) {
                if (r[0] == '\\' && (r[1] == 'n' || r[1] == 't')) *w++ = r[1] == 'n' ? '\n' : '\t', r++;
                else *w++ = *r;
            }
            *w = 0;
            v[count++] = p;
            if (count == cap) v = realloc(v, sizeof *v * (size_t)(cap *= 2));
        }
        if (!nl) break;
        p = nl + 1;
    }
    *out = v;
    return count;
}

static void run_case(const char *name, char **texts, int n) {
    char path[4096], hp[4096];
    snprintf(path, sizeof path, "%s/tokenizer-hf/%s/tokenizer.json", test_cache_dir(), name);
    if (access(path, R_OK)) {
        fprintf(stderr, "%s missing: building it\n", path);
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "cd '%s' && python3 scripts/gen-tokenizer-hf.py --export-only %s >&2", ROOT, name);
        int rc = system(cmd);
        CHECK(rc == 0 && !access(path, R_OK), "could not build %s (needs pip, PyPI, tokenizers and gguf)", path);
        if (rc || access(path, R_OK)) return;
    }
    snprintf(hp, sizeof hp, DATA "/hf/%s.hash", name);
    size_t hn;
    char *hashes = test_read_file(hp, &hn);
    tokenizer *t = NULL;
    infer_status st = tokenizer_load_json(path, &t);
    CHECK(st == INFER_OK && hashes, "%s: %s", name, st ? infer_last_error() : "no hashes");
    if (st || !hashes) {
        free(hashes);
        return;
    }
    int ok = 0, lines = 0, shown = 0;
    char *h = hashes;
    for (int i = 0; i < n && *h; i++, lines++) {
        unsigned want = (unsigned)strtoul(h, &h, 16);
        while (*h == '\n') h++;
        int32_t *ids;
        size_t nids;
        if (tokenizer_encode(t, texts[i], strlen(texts[i]), true, true, &ids, &nids)) {
            CHECK(0, "%s text %d: %s", name, i, infer_last_error());
            continue;
        }
        if (fnv(ids, nids * sizeof *ids) == want) ok++;
        else if (shown++ < 4) {
            fprintf(stderr, "%s text %d differs from tokenizers: \"%.160s\"\n    ours:", name, i, texts[i]);
            for (size_t k = 0; k < nids && k < 40; k++) fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, "\n");
        }
        free(ids);
    }
    printf("%-18s %d/%d texts as tokenizers gives them\n", name, ok, n);
    CHECK(lines == n, "%s: %d hashes for %d texts", name, lines, n);
    CHECK(ok == n, "%s: %d of %d texts differ from tokenizers", name, n - ok, n);
    free(hashes);
    tokenizer_free(t);
}

int main(int argc, char **argv) {
    char **texts = NULL;
    int n = load_texts(&texts);
    DIR *d = opendir(DATA "/hf");
    CHECK(d != NULL, "%s/hf missing", DATA);
    int cases = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".hash")) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(l - 5), e->d_name);
        if (argc > 1 && strcmp(argv[1], name)) continue;
        run_case(name, texts, n);
        cases++;
    }
    if (d) closedir(d);
    CHECK(cases > 0, "no case ran");
    if (n) free(texts[0]); // the corpus buffer
    free(texts);
    free(g_specials);
    return check_summary("test_tokenizer_hf");
}
