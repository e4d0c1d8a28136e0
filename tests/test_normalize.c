// The Unicode normalization forms (NFD, NFKD, NFC, NFKC) against Python's
// unicodedata2 15.1 (scripts/gen-normalize-expected.py): every single code
// point, sequences of bases and combining marks in many orders (composition,
// blocking, canonical ordering, Hangul), and every corpus line. Bytes that are
// not UTF-8 must pass through unchanged.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tokenizer/unicode.h"

#define DATA TEST_DATA_DIR "/tokenizer"

static uint32_t fnv(const void *p, size_t n, uint32_t h) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x01000193u;
    return h;
}

static const int forms[4] = {UNI_NFD, UNI_NFKD, UNI_NFC, UNI_NFKC};
static const char *const names[4] = {"NFD", "NFKD", "NFC", "NFKC"};

static int lines_of(const char *path, char ***out) {
    size_t n;
    char *d = test_read_file(path, &n);
    CHECK(d != NULL, "%s unreadable", path);
    if (!d) return 0;
    int count = 0, cap = 4096;
    char **v = malloc(sizeof *v * (size_t)cap);
    for (char *p = d; *p;) {
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = 0;
        if (count == cap) v = realloc(v, sizeof *v * (size_t)(cap *= 2));
        v[count++] = p;
        p = nl + 1;
    }
    *out = v;
    return count;
}

int main(void) {
    char **hash, **seq, **corpus;
    int nh = lines_of(DATA "/normalize.hash", &hash), ns = lines_of(DATA "/normalize.txt", &seq),
        nc = lines_of(DATA "/corpus.txt", &corpus);
    CHECK(nh == 1 + ns + nc, "normalize.hash has %d lines for %d sequences and %d corpus lines", nh, ns, nc);
    if (nh != 1 + ns + nc || !ns || !nc) return check_summary("test_normalize");
    // every code point alone
    unsigned want[4];
    sscanf(hash[0], "%x %x %x %x", &want[0], &want[1], &want[2], &want[3]);
    for (int f = 0; f < 4; f++) {
        uint32_t h = 0x811C9DC5u;
        int bad = 0;
        for (uint32_t cp = 0; cp < 0x110000; cp++) {
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            char in[4], *out;
            size_t on;
            int l = utf8_encode(cp, in);
            if (uni_normalize(forms[f], in, (size_t)l, &out, &on)) {
                bad++;
                continue;
            }
            h = fnv(out, on, h);
            h = fnv("\xff", 1, h);
            free(out);
        }
        CHECK(!bad && h == want[f], "%s of every code point differs from unicodedata2", names[f]);
    }
    // sequences and corpus lines
    int ok[4] = {0};
    for (int i = 0; i < ns + nc; i++) {
        const char *s = i < ns ? seq[i] : corpus[i - ns];
        unsigned w[4];
        sscanf(hash[1 + i], "%x %x %x %x", &w[0], &w[1], &w[2], &w[3]);
        for (int f = 0; f < 4; f++) {
            char *out;
            size_t on;
            if (uni_normalize(forms[f], s, strlen(s), &out, &on)) continue;
            if (fnv(out, on, 0x811C9DC5u) == w[f]) ok[f]++;
            else if (ok[f] + 3 > i) fprintf(stderr, "%s differs on line %d: \"%s\" -> \"%s\"\n", names[f], i, s, out);
            free(out);
        }
    }
    for (int f = 0; f < 4; f++) {
        printf("%s: %d/%d sequences and corpus lines\n", names[f], ok[f], ns + nc);
        CHECK(ok[f] == ns + nc, "%s: %d of %d differ from unicodedata2", names[f], ns + nc - ok[f], ns + nc);
    }
    // bytes that are not UTF-8 pass through
    const char bad[] = "a\xff\xc3\x28\xe2\x82\x28" "e\xcc\x81";
    char *out;
    size_t on;
    CHECK(uni_normalize(UNI_NFC, bad, sizeof bad - 1, &out, &on) == INFER_OK, "NFC of bad bytes");
    CHECK(on == sizeof bad - 2 && !memcmp(out, "a\xff\xc3\x28\xe2\x82\x28\xc3\xa9", on), "bad bytes not kept");
    free(out);
    free(hash[0]), free(seq[0]), free(corpus[0]); // each list's first line starts its file's buffer
    free(hash), free(seq), free(corpus);
    return check_summary("test_normalize");
}
