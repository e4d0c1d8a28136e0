#include "tokenizer/unicode.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, min = 0x10000;
    else goto bad;
    if ((size_t)len > n) goto bad;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) goto bad;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto bad;
    *cp = v;
    return len;
bad:
    *cp = UNI_INVALID;
    return 1;
}

int utf8_decode_lenient(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : c < 0xC0 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 0;
    if (len == 1) {
        *cp = c;
        return 1;
    }
    // the bytes of the sequence must exist; a short one is bad
    if (len == 0 || (size_t)len > n) goto bad;
    uint32_t v = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) goto bad;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v > 0x10FFFF) goto bad;
    *cp = v;
    return len;
bad:
    *cp = 0xFFFD;
    return 1;
}

int utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

// ---------------------------------------------------------------------------
// Flags: a two-level table made once from the generated runs. Blocks of 256
// code points; a block with one flag value throughout shares a row.

enum { N_CP = 0x110000, BLOCK = 256, N_BLOCKS = N_CP / BLOCK };

static uint16_t *g_block_of;   // (N_BLOCKS) row of each block
static uint16_t (*g_rows)[BLOCK];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static uint16_t flags_by_search(uint32_t cp) {
    int lo = 0, hi = uni_flag_runs_n - 1;
    while (lo < hi) { // last run whose first <= cp
        int mid = (lo + hi + 1) / 2;
        if (uni_flag_runs[mid][0] <= cp) lo = mid;
        else hi = mid - 1;
    }
    return (uint16_t)uni_flag_runs[lo][1];
}

static void build_flags(void) {
    uint16_t *block_of = malloc(sizeof *block_of * N_BLOCKS);
    uint16_t (*rows)[BLOCK] = malloc(sizeof *rows * N_BLOCKS);
    if (!block_of || !rows) {
        free(block_of);
        free(rows);
        return; // uni_flags falls back to binary search
    }
    int n_rows = 0, *uniform_row = malloc(sizeof(int) << 16);
    if (!uniform_row) {
        free(block_of);
        free(rows);
        return;
    }
    for (int k = 0; k < 1 << 16; k++) uniform_row[k] = -1;
    uint16_t row[BLOCK];
    int run = 0;
    for (int b = 0; b < N_BLOCKS; b++) {
        int uniform = 1;
        for (int i = 0; i < BLOCK; i++) {
            uint32_t cp = (uint32_t)(b * BLOCK + i);
            while (run + 1 < uni_flag_runs_n && uni_flag_runs[run + 1][0] <= cp) run++;
            row[i] = (uint16_t)uni_flag_runs[run][1];
            uniform &= row[i] == row[0];
        }
        if (uniform && 1 && uniform_row[row[0]] >= 0) {
            block_of[b] = (uint16_t)uniform_row[row[0]];
            continue;
        }
        memcpy(rows[n_rows], row, sizeof row);
        if (uniform && 1) uniform_row[row[0]] = n_rows;
        block_of[b] = (uint16_t)n_rows++;
    }
    free(uniform_row);
    g_rows = rows;
    g_block_of = block_of;
}

uint16_t uni_flags(uint32_t cp) {
    if (cp < 0x80) return uni_ascii_flags[cp];
    if (cp >= N_CP) return 0;
    pthread_once(&g_once, build_flags);
    if (!g_block_of) return flags_by_search(cp);
    return g_rows[g_block_of[cp / BLOCK]][cp % BLOCK];
}

uint32_t uni_tolower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    int lo = 0, hi = uni_lower_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (uni_lower[mid][0] < cp) lo = mid + 1;
        else if (uni_lower[mid][0] > cp) hi = mid - 1;
        else return uni_lower[mid][1];
    }
    return cp;
}

uint32_t uni_nfd_first(uint32_t cp) {
    if (cp < 0xC0) return cp;
    int lo = 0, hi = uni_nfd_ranges_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (uni_nfd_ranges[mid][1] < cp) lo = mid + 1;
        else if (uni_nfd_ranges[mid][0] > cp) hi = mid - 1;
        else return uni_nfd_ranges[mid][2];
    }
    return cp;
}

int uni_is_han(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0x2CEB0 && cp <= 0x2EBEF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// ---------------------------------------------------------------------------
// GPT-2's bytes_to_unicode: printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
// map to themselves, the other 68 to U+0100 onwards, in byte order.

static int printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

uint32_t gpt2_byte_to_cp(unsigned char b) {
    if (printable(b)) return b;
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++) k += !printable(x);
    return 0x100 + k;
}

int gpt2_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return printable(cp) ? (int)cp : -1;
    uint32_t k = 0;
    for (unsigned x = 0; x < 256; x++)
        if (!printable(x) && 0x100 + k++ == cp) return (int)x;
    return -1;
}
