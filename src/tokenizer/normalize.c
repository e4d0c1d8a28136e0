// The Unicode normalization forms (UAX #15), for Hugging Face's NFD, NFKD,
// NFC and NFKC normalizers: full decomposition (tables, and the Hangul
// algorithm), canonical ordering of combining marks, then for NFC/NFKC the
// canonical composition of each starter with the marks that are not blocked.
// A byte that is not UTF-8 passes through as it is, a starter that never composes.
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/unicode.h"

extern const uint32_t uni_decomp[][3]; // {cp, pool offset, NFD length | NFKD length << 8}
extern const int uni_decomp_n;
extern const uint32_t uni_decomp_pool[];
extern const uint32_t uni_ccc[][3];    // {first, last, class}
extern const int uni_ccc_n;
extern const uint32_t uni_compose[][3]; // {first, second, composite}
extern const int uni_compose_n;

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, L_N = 19, V_N = 21, T_N = 28,
       N_N = V_N * T_N, S_N = L_N * N_N };
#define RAW_BYTE 0x200000u // a byte that is not UTF-8: RAW_BYTE | byte

static int ccc_of(uint32_t cp) {
    if (cp < 0x300 || cp >= RAW_BYTE) return 0;
    int lo = 0, hi = uni_ccc_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (uni_ccc[mid][1] < cp) lo = mid + 1;
        else if (uni_ccc[mid][0] > cp) hi = mid - 1;
        else return (int)uni_ccc[mid][2];
    }
    return 0;
}

// The decomposition of cp (compat: NFKD), or NULL when cp is its own.
static const uint32_t *decomp_of(uint32_t cp, int compat, size_t *n) {
    if (cp < 0xA0 || cp >= RAW_BYTE) return NULL;
    int lo = 0, hi = uni_decomp_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (uni_decomp[mid][0] < cp) lo = mid + 1;
        else if (uni_decomp[mid][0] > cp) hi = mid - 1;
        else {
            uint32_t nd = uni_decomp[mid][2] & 0xFF, nk = uni_decomp[mid][2] >> 8;
            const uint32_t *p = uni_decomp_pool + uni_decomp[mid][1];
            if (compat && nk) {
                *n = nk;
                return p + nd;
            }
            if (!nd) return NULL;
            *n = nd;
            return p;
        }
    }
    return NULL;
}

static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_N && b >= V_BASE && b < V_BASE + V_N)
        return S_BASE + ((a - L_BASE) * V_N + (b - V_BASE)) * T_N;
    if (a >= S_BASE && a < S_BASE + S_N && (a - S_BASE) % T_N == 0 && b > T_BASE && b < T_BASE + T_N)
        return a + (b - T_BASE);
    int lo = 0, hi = uni_compose_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (uni_compose[mid][0] < a || (uni_compose[mid][0] == a && uni_compose[mid][1] < b)) lo = mid + 1;
        else if (uni_compose[mid][0] > a || uni_compose[mid][1] > b) hi = mid - 1;
        else return uni_compose[mid][2];
    }
    return 0;
}

typedef struct {
    uint32_t *v;
    size_t n, cap;
} cps;

static int push(cps *c, uint32_t x) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        uint32_t *v = realloc(c->v, sizeof *v * cap);
        if (!v) return -1;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = x;
    return 0;
}

// UNI_NFD, UNI_NFKD, UNI_NFC, UNI_NFKC: s[0..n) -> *out (malloc'd, NUL-terminated).
infer_status uni_normalize(int form, const char *s, size_t n, char **out, size_t *out_n) {
    int compat = form == UNI_NFKD || form == UNI_NFKC, compose = form == UNI_NFC || form == UNI_NFKC;
    cps c = {0};
    int oom = 0;
    for (size_t i = 0; i < n && !oom;) {
        uint32_t cp;
        int l = utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (cp == UNI_INVALID) cp = RAW_BYTE | (unsigned char)s[i];
        i += (size_t)l;
        if (cp >= S_BASE && cp < S_BASE + S_N) { // Hangul syllable
            uint32_t k = cp - S_BASE;
            oom |= push(&c, L_BASE + k / N_N) || push(&c, V_BASE + (k % N_N) / T_N);
            if (k % T_N) oom |= push(&c, T_BASE + k % T_N);
            continue;
        }
        size_t dn;
        const uint32_t *d = decomp_of(cp, compat, &dn);
        if (!d) oom |= push(&c, cp);
        else
            for (size_t k = 0; k < dn && !oom; k++) oom |= push(&c, d[k]);
    }
    // canonical ordering: a stable sort of each run of non-starters by class
    for (size_t i = 1; i < c.n && !oom; i++) {
        int k = ccc_of(c.v[i]);
        if (!k) continue;
        uint32_t x = c.v[i];
        size_t j = i;
        while (j > 0 && ccc_of(c.v[j - 1]) > k) {
            c.v[j] = c.v[j - 1];
            j--;
        }
        c.v[j] = x;
    }
    if (compose && !oom && c.n) { // UAX #15's composition: the starter takes each mark not blocked from it
        size_t starter = 0, w = 1;
        int last = ccc_of(c.v[0]) ? 256 : 0; // a leading mark composes with nothing
        for (size_t i = 1; i < c.n; i++) {
            uint32_t x = c.v[i], comp;
            int k = ccc_of(x);
            if ((last < k || last == 0) && (comp = compose_pair(c.v[starter], x))) {
                c.v[starter] = comp;
                continue;
            }
            if (!k) starter = w;
            last = k;
            c.v[w++] = x;
        }
        c.n = w;
    }
    char *o = oom ? NULL : malloc(4 * c.n + 1);
    if (!o) {
        free(c.v);
        return fail(INFER_ERR_NOMEM, "normalizer: text of %zu bytes", n);
    }
    size_t m = 0;
    for (size_t i = 0; i < c.n; i++) {
        if (c.v[i] >= RAW_BYTE) o[m++] = (char)(c.v[i] & 0xFF);
        else m += (size_t)utf8_encode(c.v[i], o + m);
    }
    o[m] = 0;
    free(c.v);
    *out = o;
    *out_n = m;
    return INFER_OK;
}
