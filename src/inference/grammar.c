// Grammar matching and the public infer_grammar: llama.cpp's llama-grammar
// (a match in progress is a set of stacks; advancing by a code point keeps
// the stacks whose top character set accepts it, pops it and expands rule
// references at the top until each top is a character set), made fast for
// masking a whole vocabulary:
//
//  - stack sets are interned, and a match state (a set, plus the bits of a
//    UTF-8 character begun but not finished) steps byte by byte through a
//    memo of transitions, so a state met again costs a table lookup;
//  - the vocabulary's decoded token bytes are a prefix trie (once per model),
//    walked depth first from the current state: a shared prefix is stepped
//    once, and a rejected prefix prunes every token under it.
//
// A token that ends inside a UTF-8 character is allowed when some character
// the grammar accepts begins with its bytes (llama.cpp's partial UTF-8); the
// next token continues the character.
#include "inference/grammar.h"
#include "base/error.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint32_t *v; size_t n, cap; } u32buf;

static int u32_reserve(u32buf *b, size_t extra) {
    if (b->n + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) cap *= 2;
    uint32_t *v = realloc(b->v, sizeof *v * cap);
    if (!v) return -1;
    b->v = v, b->cap = cap;
    return 0;
}

static uint32_t hash_words(const uint32_t *v, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ v[i]) * 16777619u, h ^= h >> 15;
    return h;
}

// ---------------------------------------------------------------------------
// match states

// A state: an interned stack set, and a UTF-8 character begun in it.
typedef struct {
    uint32_t set;         // offset of its set in gcache.sets
    uint32_t cp;          // the character's bits so far
    uint8_t remain, len;  // its bytes still to come (0: none begun), and in all
    uint16_t hits;        // transitions asked of it (a table once it is hot)
    int32_t *next;        // (256) or NULL: the state after each byte, -2 not known, -1 none
} gstate;

enum {
    MAX_SET_WORDS = 1 << 24, // interned sets (64 MB); the memo restarts past half of it
    MAX_STATES = 1 << 18,
    MAX_TABLES = 4096,       // dense transition tables (1 KB each)
    HOT = 8,                 // transitions asked before a state gets a table
};

// The memo: interned sets ([words][n stacks] then each stack [len][positions,
// bottom first]) and states, and the transitions found so far.
typedef struct {
    const grules *g;
    u32buf sets;
    uint32_t *set_ix; size_t n_set_ix, n_sets;  // open addressing: set offset + 1, 0 empty
    gstate *st; int n_st, cap_st;
    int32_t *st_ix; size_t n_st_ix;             // state id, -1 empty
    uint64_t *tr_key; int32_t *tr_val; size_t n_tr, n_tr_ix; // transitions of states without a table
    int n_tables;
    u32buf build;                               // the set being made ([words][n] then stacks)
    struct { uint32_t gen, off; } *bix;         // (BIX) open addressing over build's stacks (gen: this build's, else empty)
    u32buf tmp;                                 // stacks being expanded
    u32buf wl;                                  // expand's work list: records [positions][len], last on top
    u32buf cur;                                 // the stack expand is replacing
    u32buf alts;                                // a rule's alternatives (expand)
    u32buf seen;                                // stacks expanded in this build: records [len][positions]
    struct { uint32_t gen, off; } *seen_ix;     // open addressing over seen (gen: this build's, else empty)
    size_t n_seen_ix, n_seen;
    uint32_t gen;
    long work, budget;                          // words of stacks handled since the budget was set, and the most allowed
    int over;                                   // the budget ran out: what was being computed is not known
    int overflow;                               // a stack or set grew past its bound (dropped)
    int full;                                   // the memo is full: no new states until a restart
} gcache;

static int is_end(uint32_t t) { return t == GE_END || t == GE_ALT; }

// Does the character set at el[pos] accept cp? *after: the element past the set.
static int match_char(const gelem *el, uint32_t pos, uint32_t cp, uint32_t *after) {
    int positive = el[pos].type != GE_CHAR_NOT, found = 0;
    do {
        if (el[pos + 1].type == GE_RNG_UPPER) {
            found |= el[pos].value <= cp && cp <= el[pos + 1].value;
            pos += 2;
        } else if (el[pos].type == GE_ANY) {
            found = 1, pos++;
        } else {
            found |= el[pos].value == cp;
            pos++;
        }
    } while (el[pos].type == GE_CHAR_ALT);
    *after = pos;
    return found == positive;
}

// Could a character beginning with these bits (remain bytes to come) be
// accepted by the set at el[pos]? (llama.cpp's match_partial_char)
static int match_partial(const gelem *el, uint32_t pos, uint32_t bits, int remain, int len) {
    uint32_t lo = bits << (6 * remain), hi = lo | ((1u << (6 * remain)) - 1);
    uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (hi < min) return 0; // overlong
    if (lo < min) lo = min;
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    int positive = el[pos].type != GE_CHAR_NOT;
    do {
        if (el[pos].type == GE_ANY) return 1;
        uint32_t a = el[pos].value, b = el[pos + 1].type == GE_RNG_UPPER ? el[pos + 1].value : a;
        if (positive && a <= hi && lo <= b) return 1;
        if (!positive && a <= lo && hi <= b) return 0; // every completion excluded
        pos += el[pos + 1].type == GE_RNG_UPPER ? 2 : 1;
    } while (el[pos].type == GE_CHAR_ALT);
    return !positive;
}

// Counts words of work; past the budget, whatever is being computed is
// abandoned (c->over) and nothing of it is memoized.
static int spend(gcache *c, long words) {
    c->work += words;
    if (c->work > c->budget) c->over = 1;
    return c->over;
}

enum { BIX = 2 * GRAMMAR_MAX_STACKS }; // (a power of two: build's index at most half full)

// stack v[0, len) into build, unless already there
static void build_add(gcache *c, const uint32_t *v, uint32_t len) {
    if (spend(c, 2 * (long)len + 1)) return;
    if (!c->bix && !(c->bix = calloc(BIX, sizeof *c->bix))) { c->overflow = 1; return; }
    size_t k = (hash_words(v, len) ^ len) & (BIX - 1);
    for (; c->bix[k].gen == c->gen; k = (k + 1) & (BIX - 1)) {
        uint32_t o = c->bix[k].off;
        if (c->build.v[o] == len && !memcmp(c->build.v + o + 1, v, sizeof(uint32_t) * len)) return;
    }
    if (c->build.v[1] >= GRAMMAR_MAX_STACKS || u32_reserve(&c->build, len + 1)) { c->overflow = 1; return; }
    c->bix[k].gen = c->gen, c->bix[k].off = (uint32_t)c->build.n;
    c->build.v[c->build.n++] = len;
    memcpy(c->build.v + c->build.n, v, sizeof(uint32_t) * len);
    c->build.n += len;
    c->build.v[1]++;
}

// 1 when the stack v[0, len) was expanded before in this build, else it is
// noted (a stack's expansion depends on nothing else: met again, it would
// only add the same stacks again). -1: out of memory.
static int seen_before(gcache *c, const uint32_t *v, uint32_t len) {
    if (2 * (c->n_seen + 1) >= c->n_seen_ix) { // grow the index (at most half full)
        size_t n = c->n_seen_ix ? 2 * c->n_seen_ix : 256;
        __typeof__(c->seen_ix) ix = calloc(n, sizeof *ix);
        if (!ix) return -1;
        for (size_t i = 0; i < c->n_seen_ix; i++) {
            if (c->seen_ix[i].gen != c->gen) continue;
            uint32_t o = c->seen_ix[i].off;
            size_t k = (hash_words(c->seen.v + o + 1, c->seen.v[o]) ^ c->seen.v[o]) & (n - 1);
            while (ix[k].gen == c->gen) k = (k + 1) & (n - 1);
            ix[k] = c->seen_ix[i];
        }
        free(c->seen_ix);
        c->seen_ix = ix, c->n_seen_ix = n;
    }
    size_t k = (hash_words(v, len) ^ len) & (c->n_seen_ix - 1);
    for (; c->seen_ix[k].gen == c->gen; k = (k + 1) & (c->n_seen_ix - 1)) {
        uint32_t o = c->seen_ix[k].off;
        if (c->seen.v[o] == len && !memcmp(c->seen.v + o + 1, v, sizeof(uint32_t) * len)) return 1;
    }
    if (u32_reserve(&c->seen, len + 1)) return -1;
    c->seen_ix[k].gen = c->gen, c->seen_ix[k].off = (uint32_t)c->seen.n;
    c->seen.v[c->seen.n++] = len;
    memcpy(c->seen.v + c->seen.n, v, sizeof(uint32_t) * len);
    c->seen.n += len;
    c->n_seen++;
    return 0;
}

// The stack tmp[off, off+len) with every rule reference at its top replaced
// by the rule's alternatives, again until each top is a character set, into
// build. A work list, not recursion (the depth is the grammar's to choose);
// a stack met again is not expanded again (an ambiguous grammar reaches the
// same stack along many paths: their number may grow exponentially with the
// nesting, the stacks' only polynomially); the work is counted (spend). No
// left recursion: the parser refused it, so this ends.
static void expand(gcache *c, size_t off, uint32_t len) {
    const gelem *el = c->g->el;
    size_t base = c->wl.n;
    if (u32_reserve(&c->wl, len + 1)) { c->overflow = 1; return; }
    memcpy(c->wl.v + c->wl.n, c->tmp.v + off, sizeof(uint32_t) * len);
    c->wl.n += len;
    c->wl.v[c->wl.n++] = len;
    while (c->wl.n > base && !c->over) {
        uint32_t L = c->wl.v[c->wl.n - 1];
        size_t at = c->wl.n - 1 - L;
        const uint32_t *v = c->wl.v + at;
        if (spend(c, (long)L + 1)) break;
        if (!L || el[v[L - 1]].type != GE_RULE) { build_add(c, v, L); c->wl.n = at; continue; }
        int seen = seen_before(c, v, L);
        if (seen) { c->overflow |= seen < 0; c->wl.n = at; continue; }
        c->cur.n = 0;
        if (u32_reserve(&c->cur, L)) { c->overflow = 1; break; }
        memcpy(c->cur.v, v, sizeof(uint32_t) * L);
        c->wl.n = at;
        uint32_t top = c->cur.v[L - 1], next = top + 1;
        int keep = !is_end(el[next].type);
        c->alts.n = 0;
        for (uint32_t a = c->g->start[el[top].value];;) {
            if (u32_reserve(&c->alts, 1)) { c->overflow = 1; break; }
            c->alts.v[c->alts.n++] = a;
            while (!is_end(el[a].type)) a++;
            if (el[a].type == GE_END) break;
            a++;
        }
        for (size_t i = c->alts.n; i-- > 0;) { // (pushed last first: taken in the rule's order)
            uint32_t a = c->alts.v[i], nl = L - 1 + (uint32_t)keep + !is_end(el[a].type);
            if (nl > GRAMMAR_MAX_DEPTH || u32_reserve(&c->wl, nl + 1)) { c->overflow = 1; continue; }
            uint32_t *w = c->wl.v + c->wl.n, k = L - 1;
            memcpy(w, c->cur.v, sizeof(uint32_t) * (L - 1));
            if (keep) w[k++] = next;
            if (!is_end(el[a].type)) w[k++] = a;
            w[nl] = nl;
            c->wl.n += nl + 1;
        }
    }
    c->wl.n = base;
}

static void build_reset(gcache *c) {
    c->build.n = 0;
    c->seen.n = 0, c->n_seen = 0;
    if (!++c->gen) { // (the stamps wrapped: the indexes are cleared)
        if (c->seen_ix) memset(c->seen_ix, 0, sizeof *c->seen_ix * c->n_seen_ix);
        if (c->bix) memset(c->bix, 0, sizeof *c->bix * BIX);
        c->gen = 1;
    }
    if (u32_reserve(&c->build, 2)) { c->overflow = 1; return; }
    c->build.v[0] = 0, c->build.v[1] = 0, c->build.n = 2;
}

// The set built, interned: its offset, or -1 when out of room.
static int64_t intern_set(gcache *c) {
    c->build.v[0] = (uint32_t)c->build.n;
    uint32_t h = hash_words(c->build.v, c->build.n);
    if (2 * (c->n_sets + 1) >= c->n_set_ix) { // grow the index (at most half full)
        size_t n = c->n_set_ix ? 2 * c->n_set_ix : 1024;
        uint32_t *ix = calloc(n, sizeof *ix);
        if (!ix) return -1;
        for (size_t i = 0; i < c->n_set_ix; i++) {
            uint32_t o = c->set_ix[i];
            if (!o) continue;
            size_t k = hash_words(c->sets.v + o - 1, c->sets.v[o - 1]) & (n - 1);
            while (ix[k]) k = (k + 1) & (n - 1);
            ix[k] = o;
        }
        free(c->set_ix);
        c->set_ix = ix, c->n_set_ix = n;
    }
    size_t k = h & (c->n_set_ix - 1);
    for (; c->set_ix[k]; k = (k + 1) & (c->n_set_ix - 1)) {
        uint32_t o = c->set_ix[k] - 1;
        if (c->sets.v[o] == c->build.n && !memcmp(c->sets.v + o, c->build.v, sizeof(uint32_t) * c->build.n)) return o;
    }
    if (c->sets.n + c->build.n > MAX_SET_WORDS || u32_reserve(&c->sets, c->build.n)) return -1;
    uint32_t o = (uint32_t)c->sets.n;
    memcpy(c->sets.v + o, c->build.v, sizeof(uint32_t) * c->build.n);
    c->sets.n += c->build.n;
    c->set_ix[k] = o + 1;
    c->n_sets++;
    return o;
}

static uint32_t state_hash(uint32_t set, uint32_t cp, int remain, int len) {
    uint32_t v[3] = {set, cp, (uint32_t)remain << 8 | (uint32_t)len};
    return hash_words(v, 3);
}

// The id of the state (set, character begun), made when new; -1 when out of room.
static int32_t intern_state(gcache *c, uint32_t set, uint32_t cp, int remain, int len) {
    if (2 * (size_t)(c->n_st + 1) >= c->n_st_ix) {
        size_t n = c->n_st_ix ? 2 * c->n_st_ix : 1024;
        int32_t *ix = malloc(sizeof *ix * n);
        if (!ix) return -1;
        for (size_t i = 0; i < n; i++) ix[i] = -1;
        for (int s = 0; s < c->n_st; s++) {
            const gstate *x = &c->st[s];
            size_t k = state_hash(x->set, x->cp, x->remain, x->len) & (n - 1);
            while (ix[k] >= 0) k = (k + 1) & (n - 1);
            ix[k] = s;
        }
        free(c->st_ix);
        c->st_ix = ix, c->n_st_ix = n;
    }
    size_t k = state_hash(set, cp, remain, len) & (c->n_st_ix - 1);
    for (; c->st_ix[k] >= 0; k = (k + 1) & (c->n_st_ix - 1)) {
        const gstate *x = &c->st[c->st_ix[k]];
        if (x->set == set && x->cp == cp && x->remain == remain && x->len == len) return c->st_ix[k];
    }
    if (c->n_st >= MAX_STATES) return -1;
    if (c->n_st == c->cap_st) {
        int cap = c->cap_st ? 2 * c->cap_st : 256;
        gstate *p = realloc(c->st, sizeof *p * (size_t)cap);
        if (!p) return -1;
        c->st = p, c->cap_st = cap;
    }
    c->st[c->n_st] = (gstate){set, cp, (uint8_t)remain, (uint8_t)len, 0, NULL};
    c->st_ix[k] = c->n_st;
    return c->n_st++;
}

// The state after code point cp from set `set` (complete character).
static int32_t after_char(gcache *c, uint32_t set, uint32_t cp) {
    const gelem *el = c->g->el;
    build_reset(c);
    uint32_t n = c->sets.v[set + 1];
    size_t p = set + 2;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = c->sets.v[p], after;
        if (len && match_char(el, c->sets.v[p + len], cp, &after)) {
            size_t off = c->tmp.n;
            uint32_t nl = len - 1 + !is_end(el[after].type);
            if (u32_reserve(&c->tmp, nl)) { c->overflow = 1; break; }
            memcpy(c->tmp.v + off, c->sets.v + p + 1, sizeof(uint32_t) * (len - 1));
            if (!is_end(el[after].type)) c->tmp.v[off + len - 1] = after;
            c->tmp.n = off + nl;
            expand(c, off, nl);
            c->tmp.n = off;
        }
        p += 1 + len;
    }
    if (!c->build.v[1]) return -1; // nothing accepts it
    int64_t o = intern_set(c);
    if (o < 0) { c->full = 1; return -1; }
    return intern_state(c, (uint32_t)o, 0, 0, 0);
}

// The state after byte b from state s, computed.
static int32_t transition(gcache *c, int32_t s, unsigned b) {
    gstate x = c->st[s];
    uint32_t cp;
    int remain, len;
    if (!x.remain) {
        if (b < 0x80) return after_char(c, x.set, b);
        if (b >= 0xC2 && b < 0xE0) cp = b & 0x1F, remain = 1, len = 2;
        else if ((b & 0xF0) == 0xE0) cp = b & 0x0F, remain = 2, len = 3;
        else if (b >= 0xF0 && b <= 0xF4) cp = b & 0x07, remain = 3, len = 4;
        else return -1; // a continuation byte, or never in UTF-8
    } else {
        if ((b & 0xC0) != 0x80) return -1;
        cp = x.cp << 6 | (b & 0x3F), remain = x.remain - 1, len = x.len;
        if (!remain) {
            uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
            if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
            return after_char(c, x.set, cp);
        }
    }
    // a character begun: some stack's top must accept a character beginning so
    uint32_t n = c->sets.v[x.set + 1];
    size_t p = x.set + 2;
    int ok = 0;
    for (uint32_t i = 0; i < n && !ok; i++) {
        uint32_t l = c->sets.v[p];
        if (l) ok = match_partial(c->g->el, c->sets.v[p + l], cp, remain, len);
        p += 1 + l;
    }
    if (ok && len == 3 && remain == 1 && (cp < 0x20 || (cp >= 0x360 && cp < 0x380))) ok = 0; // E0 80..9F overlong, ED A0..BF surrogates
    if (!ok) return -1;
    return intern_state(c, x.set, cp, remain, len);
}

static uint64_t tr_hash(uint64_t key) {
    key ^= key >> 33, key *= 0xff51afd7ed558ccdull, key ^= key >> 33;
    return key;
}

// The state after byte b from state s (memoized), -1 when none.
static int32_t step(gcache *c, int32_t s, unsigned b) {
    gstate *x = &c->st[s];
    if (x->next && x->next[b] != -2) return x->next[b];
    uint64_t key = (uint64_t)(uint32_t)s << 8 | b;
    if (!x->next) {
        if (x->hits < HOT || c->n_tables >= MAX_TABLES) { // look in the shared table
            if (x->hits < HOT) x->hits++;
            for (size_t k = c->n_tr_ix ? tr_hash(key) & (c->n_tr_ix - 1) : 0; c->n_tr_ix && c->tr_key[k] != UINT64_MAX;
                 k = (k + 1) & (c->n_tr_ix - 1))
                if (c->tr_key[k] == key) return c->tr_val[k];
        } else if ((x->next = malloc(sizeof *x->next * 256))) {
            c->n_tables++;
            for (int i = 0; i < 256; i++) x->next[i] = -2;
            // (what the shared table knows of s is recomputed on demand)
        }
    }
    if (c->full || c->over) return -1;
    int32_t r = transition(c, s, b);
    if (c->full || c->over) return -1; // not memoized: room may come back at a restart, the budget at the next call
    x = &c->st[s]; // (states may have moved)
    if (x->next) { x->next[b] = r; return r; }
    if (2 * (c->n_tr + 1) >= c->n_tr_ix) {
        size_t n = c->n_tr_ix ? 2 * c->n_tr_ix : 4096;
        uint64_t *kk = malloc(sizeof *kk * n);
        int32_t *vv = malloc(sizeof *vv * n);
        if (!kk || !vv) { free(kk), free(vv); return r; }
        for (size_t i = 0; i < n; i++) kk[i] = UINT64_MAX;
        for (size_t i = 0; i < c->n_tr_ix; i++) {
            if (c->tr_key[i] == UINT64_MAX) continue;
            size_t k = tr_hash(c->tr_key[i]) & (n - 1);
            while (kk[k] != UINT64_MAX) k = (k + 1) & (n - 1);
            kk[k] = c->tr_key[i], vv[k] = c->tr_val[i];
        }
        free(c->tr_key), free(c->tr_val);
        c->tr_key = kk, c->tr_val = vv, c->n_tr_ix = n;
    }
    size_t k = tr_hash(key) & (c->n_tr_ix - 1);
    while (c->tr_key[k] != UINT64_MAX && c->tr_key[k] != key) k = (k + 1) & (c->n_tr_ix - 1);
    if (c->tr_key[k] == UINT64_MAX) c->n_tr++;
    c->tr_key[k] = key, c->tr_val[k] = r;
    return r;
}

static void cache_clear(gcache *c) {
    for (int s = 0; s < c->n_st; s++) free(c->st[s].next);
    free(c->sets.v), free(c->set_ix), free(c->st), free(c->st_ix), free(c->tr_key), free(c->tr_val);
    free(c->build.v), free(c->bix), free(c->tmp.v);
    free(c->wl.v), free(c->cur.v), free(c->alts.v), free(c->seen.v), free(c->seen_ix);
    const grules *g = c->g;
    long work = c->work, budget = c->budget;
    int over = c->over;
    memset(c, 0, sizeof *c);
    c->g = g, c->work = work, c->budget = budget, c->over = over;
}

// The state where a match begins: root's alternatives, expanded.
static int32_t initial_state(gcache *c) {
    const gelem *el = c->g->el;
    build_reset(c);
    for (uint32_t a = c->g->start[c->g->root];;) {
        size_t off = c->tmp.n;
        if (u32_reserve(&c->tmp, 1)) return -1;
        uint32_t nl = !is_end(el[a].type);
        c->tmp.v[off] = a;
        c->tmp.n = off + nl;
        expand(c, off, nl);
        c->tmp.n = off;
        while (!is_end(el[a].type)) a++;
        if (el[a].type == GE_END) break;
        a++;
    }
    int64_t o = intern_set(c);
    return o < 0 ? -1 : intern_state(c, (uint32_t)o, 0, 0, 0);
}

// Re-makes state s of a cache about to restart, in the new one (the memo
// only grows; a long generation restarts it now and then).
static int32_t restart(gcache *c, int32_t s) {
    const gstate x = c->st[s];
    uint32_t words = c->sets.v[x.set];
    uint32_t *copy = malloc(sizeof *copy * words);
    if (!copy) return -1;
    memcpy(copy, c->sets.v + x.set, sizeof *copy * words);
    cache_clear(c);
    build_reset(c);
    int32_t r = -1;
    if (!u32_reserve(&c->build, words)) {
        memcpy(c->build.v, copy, sizeof *copy * words);
        c->build.n = words;
        int64_t o = intern_set(c);
        if (o >= 0) r = intern_state(c, (uint32_t)o, x.cp, x.remain, x.len);
    }
    free(copy);
    return r;
}

// A state that ends a sentence: no character begun, an empty stack.
static int can_end(const gcache *c, int32_t s) {
    const gstate *x = &c->st[s];
    if (x->remain) return 0;
    uint32_t n = c->sets.v[x->set + 1];
    size_t p = x->set + 2;
    for (uint32_t i = 0; i < n; i++) {
        if (!c->sets.v[p]) return 1;
        p += 1 + c->sets.v[p];
    }
    return 0;
}

// ... and nothing else may follow it.
static int only_end(const gcache *c, int32_t s) {
    const gstate *x = &c->st[s];
    return !x->remain && c->sets.v[x->set + 1] == 1 && c->sets.v[x->set + 2] == 0;
}

long grammar_max_work = GRAMMAR_MAX_WORK;

// A budget of work for what follows (grammar.h: grammar_max_work).
static void budget(gcache *c, long words) { c->work = 0, c->budget = words, c->over = 0; }

int grammar_match_text(const grules *g, const char *s, size_t n, int *complete) {
    gcache c = {.g = g};
    budget(&c, grammar_max_work);
    int32_t st = initial_state(&c);
    for (size_t i = 0; i < n && st >= 0; i++) {
        budget(&c, grammar_max_work);
        st = step(&c, st, (unsigned char)s[i]);
    }
    int over = c.over;
    if (complete) *complete = st >= 0 && can_end(&c, st);
    cache_clear(&c);
    return over ? -1 : st >= 0;
}

// ---------------------------------------------------------------------------
// the vocabulary: decoded token bytes in a prefix trie, in depth-first order

typedef struct {
    uint32_t end;    // the node after this one's subtree
    uint32_t tok0;   // its tokens: gvocab.tok[tok0, tok0 + ntok)
    uint32_t ntok;
    uint16_t depth;  // bytes from the root (1 for the root's children)
    uint8_t byte;
} tnode;

struct gvocab {
    int n_vocab;
    char *bytes;         // every token's decoded bytes, back to back
    uint32_t *off;       // (n_vocab + 1) token i: bytes[off[i], off[i+1])
    uint8_t *never;      // (n_vocab) 1: never picked under a grammar (control, empty, too long)
    tnode *node;
    uint32_t n_node;
    int32_t *tok;        // ids by their bytes (the nodes' ranges)
    int max_depth;
};

void grammar_vocab_free(gvocab *v) {
    if (!v) return;
    free(v->bytes), free(v->off), free(v->never), free(v->node), free(v->tok);
    free(v);
}

static const gvocab *g_sort_vocab; // (qsort has no context argument)

static int by_bytes(const void *a, const void *b) {
    const gvocab *v = g_sort_vocab;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->off[x + 1] - v->off[x], ly = v->off[y + 1] - v->off[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

infer_status grammar_vocab_build(const struct tokenizer *t, const int32_t *eog, int n_eog, gvocab **out) {
    static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;
    *out = NULL;
    int n = tokenizer_n_vocab(t);
    gvocab *v = calloc(1, sizeof *v);
    if (!v) return fail(INFER_ERR_NOMEM, "grammar: out of memory");
    v->n_vocab = n;
    v->off = malloc(sizeof *v->off * ((size_t)n + 1));
    v->never = calloc((size_t)n, 1);
    v->tok = malloc(sizeof *v->tok * (size_t)n);
    size_t cap = 1 << 20, used = 0;
    v->bytes = malloc(cap);
    infer_status st = v->off && v->never && v->tok && v->bytes ? INFER_OK : fail(INFER_ERR_NOMEM, "grammar: out of memory");
    int n_tok = 0;
    for (int i = 0; i < n && !st; i++) {
        char *p;
        size_t len;
        v->off[i] = (uint32_t)used;
        if ((st = tokenizer_piece(t, i, &p, &len))) break;
        int never = !len || len > 65535;
        for (int k = 0; k < n_eog; k++) never |= eog[k] == i;
        if (!never) {
            if (used + len > cap) {
                while (used + len > cap) cap *= 2;
                char *b = realloc(v->bytes, cap);
                if (!b) { free(p); st = fail(INFER_ERR_NOMEM, "grammar: out of memory"); break; }
                v->bytes = b;
            }
            memcpy(v->bytes + used, p, len);
            used += len;
            v->tok[n_tok++] = i;
        }
        v->never[i] = (uint8_t)never;
        free(p);
    }
    if (!st) v->off[n] = (uint32_t)used;
    if (!st) {
        pthread_mutex_lock(&sort_mu);
        g_sort_vocab = v;
        qsort(v->tok, (size_t)n_tok, sizeof *v->tok, by_bytes);
        pthread_mutex_unlock(&sort_mu);
        // nodes: each token adds those past its common prefix with the previous token
        size_t ncap = (size_t)n_tok + 1024;
        v->node = malloc(sizeof *v->node * ncap);
        uint32_t *path = malloc(sizeof *path * 65536); // the nodes on the current token's path
        if (!v->node || !path) st = fail(INFER_ERR_NOMEM, "grammar: out of memory");
        int depth = 0; // nodes on the path
        const char *prev = NULL;
        uint32_t prev_len = 0;
        for (int i = 0; i < n_tok && !st; i++) {
            int32_t id = v->tok[i];
            const char *b = v->bytes + v->off[id];
            uint32_t len = v->off[id + 1] - v->off[id], lcp = 0;
            while (prev && lcp < len && lcp < prev_len && b[lcp] == prev[lcp]) lcp++;
            for (int d = (int)lcp; d < depth; d++) v->node[path[d]].end = v->n_node; // subtrees left
            depth = (int)lcp;
            for (uint32_t d = lcp; d < len; d++) {
                if (v->n_node == ncap) {
                    ncap *= 2;
                    tnode *nn = realloc(v->node, sizeof *nn * ncap);
                    if (!nn) { st = fail(INFER_ERR_NOMEM, "grammar: out of memory"); break; }
                    v->node = nn;
                }
                v->node[v->n_node] = (tnode){0, (uint32_t)i, 0, (uint16_t)(d + 1), (uint8_t)b[d]};
                path[depth++] = v->n_node++;
            }
            if (st) break;
            tnode *leaf = &v->node[path[len - 1]];
            if (!leaf->ntok) leaf->tok0 = (uint32_t)i;
            leaf->ntok++;
            if ((int)len > v->max_depth) v->max_depth = (int)len;
            prev = b, prev_len = len;
        }
        for (int d = 0; d < depth && !st; d++) v->node[path[d]].end = v->n_node;
        free(path);
    }
    if (st) { grammar_vocab_free(v); return st; }
    *out = v;
    return INFER_OK;
}

// ---------------------------------------------------------------------------
// the public grammar

struct infer_grammar {
    grules *rules;
    gcache c;
    int32_t cur;        // the match state
    int ended;          // an end-of-generation token was accepted
    const gvocab *voc;  // the model's (infer_model owns it)
    int32_t eog[16];
    int n_eog;
    int32_t *walk;      // (max_depth + 1) states along the trie path
    uint8_t *allowed;   // (n_vocab) 1: the token may come next (prepare)
    int32_t prepared;   // the state `allowed` holds the tokens of (-1: none)
    int prepared_ended, n_allowed;
};

static infer_status over_budget(void) {
    return fail(INFER_ERR_ARG, "grammar: too costly to match: one token needs more than %ld units of work (the limit; "
                "repetitions of optional items nested in one another are the usual cause)", grammar_max_work);
}

static infer_status prepare(infer_grammar *g);

static infer_status grammar_new(infer_model *m, grules *r, infer_grammar **out) {
    *out = NULL;
    const gvocab *voc;
    infer_status st = model_grammar_vocab(m, &voc);
    if (st) { grammar_rules_free(r); return st; }
    infer_grammar *g = calloc(1, sizeof *g);
    if (!g) { grammar_rules_free(r); return fail(INFER_ERR_NOMEM, "grammar: out of memory"); }
    g->rules = r, g->voc = voc, g->c.g = r, g->prepared = -1;
    g->n_eog = infer_model_eog(m, g->eog, 16);
    g->walk = malloc(sizeof *g->walk * ((size_t)voc->max_depth + 1));
    g->allowed = malloc((size_t)voc->n_vocab);
    budget(&g->c, grammar_max_work);
    g->cur = initial_state(&g->c);
    if (g->c.over) st = over_budget();
    else if (!g->walk || !g->allowed || g->cur < 0) st = fail(INFER_ERR_NOMEM, "grammar: out of memory");
    else if (!g->c.build.v[1] || g->c.overflow)
        st = fail(INFER_ERR_ARG, "grammar: the match grows past its bounds (%d alternatives at once, rules nested %d deep)",
                  GRAMMAR_MAX_STACKS, GRAMMAR_MAX_DEPTH);
    // the first token's mask now: its cost is the compile's, and a grammar no text can match is refused here
    else if (!(st = prepare(g)) && !g->n_allowed)
        st = fail(INFER_ERR_ARG, "grammar: no token of the model can begin a text that matches it");
    if (st) { infer_grammar_free(g); return st; }
    *out = g;
    return INFER_OK;
}

infer_status infer_grammar_from_gbnf(infer_model *model, const char *gbnf, const char *root, infer_grammar **out) {
    *out = NULL;
    grules *r;
    infer_status st = grammar_parse(gbnf, root, &r);
    return st ? st : grammar_new(model, r, out);
}

infer_status infer_grammar_from_json_schema(infer_model *model, const char *schema, infer_grammar **out) {
    *out = NULL;
    char *gbnf;
    infer_status st = json_schema_to_gbnf(schema, &gbnf);
    if (st) return st;
    st = infer_grammar_from_gbnf(model, gbnf, "root", out);
    free(gbnf);
    return st;
}

void infer_grammar_free(infer_grammar *g) {
    if (!g) return;
    cache_clear(&g->c);
    grammar_rules_free(g->rules);
    free(g->walk), free(g->allowed);
    free(g);
}

static int is_eog(const infer_grammar *g, int32_t tok) {
    for (int i = 0; i < g->n_eog; i++)
        if (g->eog[i] == tok) return 1;
    return 0;
}

// The memo restarts between tokens once it holds more than half its bound
// (the prepared tokens stay those of the same state, renumbered).
static void maybe_restart(infer_grammar *g) {
    gcache *c = &g->c;
    if (!c->full && c->sets.n < MAX_SET_WORDS / 2 && c->n_st < MAX_STATES / 2) return;
    int was = g->prepared == g->cur;
    int32_t s = restart(c, g->cur);
    if (s >= 0) g->cur = s;
    g->prepared = was && s >= 0 ? s : -1;
}

// The tokens that may come next (g->allowed, g->n_allowed), unless known.
static infer_status prepare(infer_grammar *g) {
    if (g->prepared >= 0 && g->prepared == g->cur && g->prepared_ended == g->ended) return INFER_OK;
    const gvocab *v = g->voc;
    maybe_restart(g);
    budget(&g->c, grammar_max_work);
    g->prepared = -1;
    memset(g->allowed, 0, (size_t)v->n_vocab);
    if (!g->ended && g->cur >= 0) {
        g->walk[0] = g->cur;
        for (uint32_t i = 0; i < v->n_node;) {
            const tnode *nd = &v->node[i];
            int32_t s = step(&g->c, g->walk[nd->depth - 1], nd->byte);
            if (s < 0) { i = nd->end; continue; } // nothing under it
            g->walk[nd->depth] = s;
            for (uint32_t k = 0; k < nd->ntok; k++) g->allowed[v->tok[nd->tok0 + k]] = 1;
            i++;
        }
    }
    if (g->c.over) return over_budget();
    int end = !g->ended && g->cur >= 0 && can_end(&g->c, g->cur);
    for (int i = 0; i < g->n_eog; i++)
        if (g->eog[i] >= 0 && g->eog[i] < v->n_vocab) g->allowed[g->eog[i]] = (uint8_t)end;
    int n = 0;
    for (int i = 0; i < v->n_vocab; i++) n += g->allowed[i];
    g->n_allowed = n, g->prepared = g->cur, g->prepared_ended = g->ended;
    return INFER_OK;
}

infer_status infer_grammar_prepare(infer_grammar *g) { return prepare(g); }

int infer_grammar_ready(const infer_grammar *g) { return g->prepared >= 0 && g->prepared == g->cur && g->prepared_ended == g->ended; }

int infer_grammar_mask(infer_grammar *g, float *logits) {
    if (prepare(g)) return -1;
    for (int i = 0; i < g->voc->n_vocab; i++)
        if (!g->allowed[i]) logits[i] = -INFINITY;
    return g->n_allowed;
}

// The state after token tok's bytes (-1 when not allowed, or past the budget: g->c.over).
static int32_t after_token(infer_grammar *g, int32_t tok) {
    const gvocab *v = g->voc;
    if (tok < 0 || tok >= v->n_vocab || v->never[tok] || g->ended || g->cur < 0) return -1;
    int32_t s = g->cur;
    for (uint32_t i = v->off[tok]; i < v->off[tok + 1] && s >= 0; i++) s = step(&g->c, s, (unsigned char)v->bytes[i]);
    return s;
}

int infer_grammar_allows(infer_grammar *g, int32_t tok) {
    if (tok < 0 || tok >= g->voc->n_vocab) return 0;
    if (g->prepared >= 0 && g->prepared == g->cur && g->prepared_ended == g->ended) return g->allowed[tok];
    if (is_eog(g, tok)) return !g->ended && g->cur >= 0 && can_end(&g->c, g->cur);
    // (a small budget: this is the cheap test; past it the token is refused, and a mask decides)
    budget(&g->c, grammar_max_work / 16);
    return after_token(g, tok) >= 0;
}

infer_status infer_grammar_accept(infer_grammar *g, int32_t tok) {
    if (is_eog(g, tok)) {
        if (g->ended || g->cur < 0 || !can_end(&g->c, g->cur))
            return fail(INFER_ERR_ARG, "grammar: end of generation (token %d) before the text is complete", tok);
        g->ended = 1;
        return INFER_OK;
    }
    maybe_restart(g);
    budget(&g->c, grammar_max_work);
    int32_t s = after_token(g, tok);
    if (s < 0) {
        if (g->c.over) return over_budget();
        if (g->c.overflow) return fail(INFER_ERR_NOMEM, "grammar: token %d: the match grew past its bounds (%d stacks of %d rules)",
                                       tok, GRAMMAR_MAX_STACKS, GRAMMAR_MAX_DEPTH);
        return fail(INFER_ERR_ARG, "grammar: token %d cannot continue the text", tok);
    }
    g->cur = s;
    return INFER_OK;
}

int infer_grammar_complete(const infer_grammar *g) { return g->ended || (g->cur >= 0 && only_end(&g->c, g->cur)); }
