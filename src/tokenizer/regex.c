// The pre-tokenizers' regular expressions: a recursive-descent parser to a
// syntax tree, code for a backtracking machine (the tree's alternatives in
// order, so the first MATCH reached is ECMAScript's match), and the machine.
#include "tokenizer/regex.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tokenizer/unicode.h"

// ---------------------------------------------------------------------------
// classes: sorted, disjoint ranges of units, possibly negated

typedef struct {
    uint32_t (*r)[2];
    int n, cap;
    int negate;
} cset;

static int cset_add(cset *c, uint32_t a, uint32_t b) {
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        void *r = realloc(c->r, sizeof *c->r * (size_t)cap);
        if (!r) return -1;
        c->r = r;
        c->cap = cap;
    }
    c->r[c->n][0] = a;
    c->r[c->n][1] = b;
    c->n++;
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static void cset_normalize(cset *c) {
    if (!c->n) return;
    qsort(c->r, (size_t)c->n, sizeof *c->r, cmp_range);
    int k = 0;
    for (int i = 1; i < c->n; i++) {
        if (c->r[i][0] <= c->r[k][1] + 1) {
            if (c->r[i][1] > c->r[k][1]) c->r[k][1] = c->r[i][1];
        } else c->r[++k][0] = c->r[i][0], c->r[k][1] = c->r[i][1];
    }
    c->n = k + 1;
}

static int cset_has(const cset *c, uint32_t u) {
    int lo = 0, hi = c->n - 1, in = 0;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (u < c->r[mid][0]) hi = mid - 1;
        else if (u > c->r[mid][1]) lo = mid + 1;
        else {
            in = 1;
            break;
        }
    }
    return in != c->negate;
}

// ---------------------------------------------------------------------------
// syntax tree

typedef enum { N_EMPTY, N_CHAR, N_SET, N_CAT, N_ALT, N_REPEAT, N_LOOK, N_BOL, N_EOL, N_WORDB, N_NWORDB } ntype;

typedef struct node node;
struct node {
    ntype type;
    uint32_t c;      // N_CHAR unit; N_SET class index
    node **kids;     // N_CAT, N_ALT
    int n_kids;
    node *x;         // N_REPEAT, N_LOOK body
    int min, max;    // N_REPEAT, max -1 = unbounded
    int greedy, neg; // N_REPEAT greedy; N_LOOK negative
};

typedef struct {
    const char *p, *end;
    const char *pattern;
    cset *sets;
    int n_sets, cap_sets;
    infer_status st;
} parser;

static node *mk(parser *P, ntype t) {
    node *n = calloc(1, sizeof *n);
    if (!n && !P->st) P->st = fail(INFER_ERR_NOMEM, "regex");
    if (n) n->type = t;
    return n;
}

static void node_free(node *n) {
    if (!n) return;
    for (int i = 0; i < n->n_kids; i++) node_free(n->kids[i]);
    free(n->kids);
    node_free(n->x);
    free(n);
}

static int push_kid(parser *P, node *n, node *k) {
    void *v = realloc(n->kids, sizeof *n->kids * (size_t)(n->n_kids + 1));
    if (!v) {
        node_free(k);
        if (!P->st) P->st = fail(INFER_ERR_NOMEM, "regex");
        return -1;
    }
    n->kids = v;
    n->kids[n->n_kids++] = k;
    return 0;
}

static void perr(parser *P, const char *what) {
    if (!P->st)
        P->st = fail(INFER_ERR_UNSUPPORTED, "regex '%.200s': %s at offset %d", P->pattern, what,
                     (int)(P->p - P->pattern));
}

static uint32_t next_cp(parser *P) {
    uint32_t cp;
    int l = utf8_decode((const unsigned char *)P->p, (size_t)(P->end - P->p), &cp);
    if (cp == UNI_INVALID) perr(P, "invalid UTF-8");
    P->p += l;
    return cp;
}

// The ASCII members and the collapsed byte of each \p{X} class (llama.cpp's
// k_ucat_map and k_ucat_cpt).
static int add_category(cset *c, char k) {
    static const uint32_t num[][2] = {{0x30, 0x39}, {0xD1, 0xD1}};
    static const uint32_t let[][2] = {{0x41, 0x5A}, {0x61, 0x7A}, {0xD2, 0xD2}};
    static const uint32_t pun[][2] = {{0x21, 0x23}, {0x25, 0x2A}, {0x2C, 0x2F}, {0x3A, 0x3B}, {0x3F, 0x40},
                                      {0x5B, 0x5D}, {0x5F, 0x5F}, {0x7B, 0x7B}, {0x7D, 0x7D}, {0xD3, 0xD3}};
    static const uint32_t mrk[][2] = {{0xD4, 0xD4}};
    static const uint32_t sym[][2] = {{0x24, 0x24}, {0x2B, 0x2B}, {0x3C, 0x3E}, {0x5E, 0x5E},
                                      {0x60, 0x60}, {0x7C, 0x7C}, {0x7E, 0x7E}, {0xD5, 0xD5}};
    const uint32_t(*r)[2];
    int n;
    switch (k) {
    case 'N': r = num, n = 2; break;
    case 'L': r = let, n = 3; break;
    case 'P': r = pun, n = 10; break;
    case 'M': r = mrk, n = 1; break;
    case 'S': r = sym, n = 8; break;
    default: return -2;
    }
    for (int i = 0; i < n; i++)
        if (cset_add(c, r[i][0], r[i][1])) return -1;
    return 0;
}

// \p{...} at P->p (after the backslash and 'p'): adds its members to c.
static void parse_category(parser *P, cset *c) {
    const char *close = memchr(P->p, '}', (size_t)(P->end - P->p));
    if (*P->p != '{' || !close) {
        perr(P, "malformed \\p{...}");
        return;
    }
    size_t n = (size_t)(close - P->p - 1);
    const char *name = P->p + 1;
    char k = 0;
    if (n == 1 && strchr("NLPMS", name[0])) k = name[0];
    else if (n == 2 && name[0] == 'L' && strchr("ultmo", name[1])) k = 'L';
    if (!k) {
        perr(P, "unknown class \\p{...}");
        return;
    }
    if (add_category(c, k) == -1) perr(P, "out of memory");
    P->p = close + 1;
}

static int add_escape_class(cset *c, char e) {
    switch (e) {
    case 'd': return cset_add(c, '0', '9');
    case 's': return cset_add(c, 9, 13) || cset_add(c, ' ', ' ');
    case 'w': return cset_add(c, '0', '9') || cset_add(c, 'A', 'Z') || cset_add(c, 'a', 'z') || cset_add(c, '_', '_');
    }
    return -2;
}

// Complement of a class, for \S \D \W inside [...].
static int add_complement(cset *c, char e) {
    cset t = {0};
    int r = add_escape_class(&t, e);
    if (!r) {
        cset_normalize(&t);
        uint32_t at = 0;
        for (int i = 0; i < t.n && !r; i++) {
            if (t.r[i][0] > at) r = cset_add(c, at, t.r[i][0] - 1);
            at = t.r[i][1] + 1;
        }
        if (!r) r = cset_add(c, at, 0xFFFFFFFFu);
    }
    free(t.r);
    return r;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

// A single-character escape after the backslash: its unit, or -1 if it is a class.
static int64_t escape_char(parser *P) {
    char e = *P->p;
    if (strchr("dDsSwWp", e)) return -1;
    P->p++;
    switch (e) {
    case 'r': return '\r';
    case 'n': return '\n';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'x':
    case 'u': {
        int nd = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int i = 0; i < nd; i++) {
            int h = P->p < P->end ? hexval(*P->p) : -1;
            if (h < 0) {
                perr(P, "bad \\x or \\u escape");
                return 0;
            }
            v = v * 16 + (uint32_t)h;
            P->p++;
        }
        return v;
    }
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
        P->p--;
        perr(P, "unsupported escape");
        return 0;
    }
    P->p--;
    return next_cp(P); // an escaped punctuation character (or any other) is itself
}

static int new_set(parser *P) {
    if (P->n_sets == P->cap_sets) {
        int cap = P->cap_sets ? P->cap_sets * 2 : 8;
        void *v = realloc(P->sets, sizeof *P->sets * (size_t)cap);
        if (!v) {
            perr(P, "out of memory");
            return -1;
        }
        P->sets = v;
        P->cap_sets = cap;
    }
    memset(&P->sets[P->n_sets], 0, sizeof *P->sets);
    return P->n_sets++;
}

static node *set_node(parser *P, int k) {
    node *n = mk(P, N_SET);
    if (n) n->c = (uint32_t)k;
    return n;
}

// [...] after the '['.
static node *parse_class(parser *P) {
    int k = new_set(P);
    if (k < 0) return NULL;
    cset *c = &P->sets[k];
    if (P->p < P->end && *P->p == '^') c->negate = 1, P->p++;
    while (!P->st) {
        if (P->p >= P->end) {
            perr(P, "unterminated [");
            break;
        }
        if (*P->p == ']') {
            P->p++;
            break;
        }
        int64_t lo;
        if (*P->p == '\\') {
            P->p++;
            if (P->p >= P->end) {
                perr(P, "trailing backslash");
                break;
            }
            char e = *P->p;
            if (e == 'p') {
                P->p++;
                parse_category(P, &P->sets[k]);
                c = &P->sets[k];
                continue;
            }
            if (strchr("dsw", e)) {
                P->p++;
                if (add_escape_class(c, e)) perr(P, "out of memory");
                continue;
            }
            if (strchr("DSW", e)) {
                P->p++;
                if (add_complement(c, (char)(e + 32))) perr(P, "out of memory");
                continue;
            }
            if (e == 'b') {
                P->p++;
                lo = '\b';
            } else lo = escape_char(P);
        } else lo = next_cp(P);
        int64_t hi = lo;
        if (P->p + 1 < P->end && *P->p == '-' && P->p[1] != ']') {
            P->p++;
            if (*P->p == '\\') {
                P->p++;
                if (P->p >= P->end || strchr("dDsSwWp", *P->p)) {
                    perr(P, "class escape as a range end");
                    break;
                }
                hi = escape_char(P);
            } else hi = next_cp(P);
            if (hi < lo) {
                perr(P, "range out of order");
                break;
            }
        }
        if (cset_add(c, (uint32_t)lo, (uint32_t)hi)) perr(P, "out of memory");
    }
    cset_normalize(&P->sets[k]);
    return set_node(P, k);
}

static node *parse_alt(parser *P, int depth);

static node *parse_atom(parser *P, int depth) {
    char ch = *P->p;
    if (ch == '(') {
        P->p++;
        node *n = NULL;
        if (P->p + 1 < P->end && P->p[0] == '?') {
            if (P->p[1] == ':') {
                P->p += 2;
                n = parse_alt(P, depth + 1);
            } else if (P->p[1] == '=' || P->p[1] == '!') {
                int neg = P->p[1] == '!';
                P->p += 2;
                node *body = parse_alt(P, depth + 1);
                n = mk(P, N_LOOK);
                if (n) n->x = body, n->neg = neg;
                else node_free(body);
            } else {
                perr(P, "unsupported group");
                return NULL;
            }
        } else n = parse_alt(P, depth + 1);
        if (P->st) {
            node_free(n);
            return NULL;
        }
        if (P->p >= P->end || *P->p != ')') {
            perr(P, "missing )");
            node_free(n);
            return NULL;
        }
        P->p++;
        return n;
    }
    if (ch == '[') {
        P->p++;
        return parse_class(P);
    }
    if (ch == '^' || ch == '$') {
        P->p++;
        return mk(P, ch == '^' ? N_BOL : N_EOL);
    }
    if (ch == '.') { // anything but line terminators
        P->p++;
        int k = new_set(P);
        if (k < 0) return NULL;
        cset *c = &P->sets[k];
        c->negate = 1;
        if (cset_add(c, '\n', '\n') || cset_add(c, '\r', '\r') || cset_add(c, 0x2028, 0x2029)) perr(P, "out of memory");
        cset_normalize(c);
        return set_node(P, k);
    }
    if (ch == '\\') {
        P->p++;
        if (P->p >= P->end) {
            perr(P, "trailing backslash");
            return NULL;
        }
        char e = *P->p;
        if (e == 'b' || e == 'B') {
            P->p++;
            return mk(P, e == 'b' ? N_WORDB : N_NWORDB);
        }
        if (strchr("dDsSwWp", e)) {
            P->p++;
            int k = new_set(P);
            if (k < 0) return NULL;
            if (e == 'p') parse_category(P, &P->sets[k]);
            else if ((e >= 'a' ? add_escape_class(&P->sets[k], e) : add_complement(&P->sets[k], (char)(e + 32))))
                perr(P, "out of memory");
            cset_normalize(&P->sets[k]);
            return set_node(P, k);
        }
        int64_t v = escape_char(P);
        node *n = mk(P, N_CHAR);
        if (n) n->c = (uint32_t)v;
        return n;
    }
    if (ch == ')' || ch == '|' || ch == '*' || ch == '+' || ch == '?' || ch == '{' || ch == ']' || ch == '}') {
        perr(P, "unexpected character");
        return NULL;
    }
    node *n = mk(P, N_CHAR);
    if (n) n->c = next_cp(P);
    return n;
}

static int parse_int(parser *P, int *v) {
    if (P->p >= P->end || *P->p < '0' || *P->p > '9') return -1;
    long x = 0;
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9') {
        x = x * 10 + (*P->p++ - '0');
        if (x > 1000) return -1; // counts are unrolled: keep programs small
    }
    *v = (int)x;
    return 0;
}

static node *parse_cat(parser *P, int depth) {
    node *cat = mk(P, N_CAT);
    while (cat && !P->st && P->p < P->end && *P->p != '|' && *P->p != ')') {
        node *a = parse_atom(P, depth);
        if (!a) break;
        while (P->p < P->end && strchr("*+?{", *P->p) && !P->st) {
            int min, max;
            char q = *P->p++;
            if (q == '*') min = 0, max = -1;
            else if (q == '+') min = 1, max = -1;
            else if (q == '?') min = 0, max = 1;
            else {
                if (parse_int(P, &min)) {
                    perr(P, "bad {n,m}");
                    break;
                }
                max = min;
                if (P->p < P->end && *P->p == ',') {
                    P->p++;
                    if (P->p < P->end && *P->p == '}') max = -1;
                    else if (parse_int(P, &max) || max < min) {
                        perr(P, "bad {n,m}");
                        break;
                    }
                }
                if (P->p >= P->end || *P->p != '}') {
                    perr(P, "bad {n,m}");
                    break;
                }
                P->p++;
            }
            if (a->type == N_BOL || a->type == N_EOL || a->type == N_WORDB || a->type == N_NWORDB || a->type == N_LOOK) {
                perr(P, "quantified assertion");
                break;
            }
            node *r = mk(P, N_REPEAT);
            if (!r) break;
            r->x = a, r->min = min, r->max = max, r->greedy = 1;
            if (P->p < P->end && *P->p == '?') r->greedy = 0, P->p++;
            a = r;
        }
        if (P->st) {
            node_free(a);
            break;
        }
        if (push_kid(P, cat, a)) break;
    }
    return cat;
}

static node *parse_alt(parser *P, int depth) {
    if (depth > 32) {
        perr(P, "groups nested too deep");
        return NULL;
    }
    node *first = parse_cat(P, depth);
    if (!first || P->st || P->p >= P->end || *P->p != '|') return first;
    node *alt = mk(P, N_ALT);
    if (!alt || push_kid(P, alt, first)) {
        node_free(alt);
        return NULL;
    }
    while (!P->st && P->p < P->end && *P->p == '|') {
        P->p++;
        node *k = parse_cat(P, depth);
        if (!k || push_kid(P, alt, k)) break;
    }
    return alt;
}

// Whether n can match without consuming a unit.
static int nullable(const node *n) {
    switch (n->type) {
    case N_CHAR:
    case N_SET: return 0;
    case N_CAT:
        for (int i = 0; i < n->n_kids; i++)
            if (!nullable(n->kids[i])) return 0;
        return 1;
    case N_ALT:
        for (int i = 0; i < n->n_kids; i++)
            if (nullable(n->kids[i])) return 1;
        return 0;
    case N_REPEAT: return n->min == 0 || nullable(n->x);
    default: return 1;
    }
}

// ---------------------------------------------------------------------------
// program

typedef enum { I_CHAR, I_SET, I_SPLIT, I_JMP, I_LOOK, I_BOL, I_EOL, I_WORDB, I_NWORDB, I_MATCH } op;

typedef struct {
    uint8_t op;
    uint8_t neg;     // I_LOOK
    uint32_t c;      // I_CHAR unit, I_SET class, I_LOOK sub-program
    int32_t x, y;    // I_SPLIT: try x, then y; I_JMP: x
} instr;

typedef struct {
    instr *code;
    int n, cap;
} prog;

struct tok_regex {
    prog *progs; // [0] the pattern; the others lookahead bodies
    int n_progs;
    cset *sets;
    int n_sets;
};

typedef struct {
    tok_regex *re;
    infer_status st;
} gen;

static int emit(gen *G, prog *p, instr in) {
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 64;
        if (cap > (1 << 20)) {
            if (!G->st) G->st = fail(INFER_ERR_UNSUPPORTED, "regex: program too long");
            return -1;
        }
        void *v = realloc(p->code, sizeof *p->code * (size_t)cap);
        if (!v) {
            if (!G->st) G->st = fail(INFER_ERR_NOMEM, "regex");
            return -1;
        }
        p->code = v;
        p->cap = cap;
    }
    p->code[p->n] = in;
    return p->n++;
}

static int new_prog(gen *G) {
    void *v = realloc(G->re->progs, sizeof *G->re->progs * (size_t)(G->re->n_progs + 1));
    if (!v) {
        if (!G->st) G->st = fail(INFER_ERR_NOMEM, "regex");
        return -1;
    }
    G->re->progs = v;
    memset(&G->re->progs[G->re->n_progs], 0, sizeof(prog));
    return G->re->n_progs++;
}

static void codegen(gen *G, int pi, const node *n);

// (the programs array may move while a lookahead body is generated: index it anew)
#define P_(G, pi) (&(G)->re->progs[pi])

static void codegen_look(gen *G, int pi, const node *n) {
    int sub = new_prog(G);
    if (sub < 0) return;
    codegen(G, sub, n->x);
    emit(G, P_(G, sub), (instr){.op = I_MATCH});
    emit(G, P_(G, pi), (instr){.op = I_LOOK, .neg = (uint8_t)n->neg, .c = (uint32_t)sub});
}

static void codegen(gen *G, int pi, const node *n) {
    if (G->st) return;
    switch (n->type) {
    case N_EMPTY: break;
    case N_CHAR: emit(G, P_(G, pi), (instr){.op = I_CHAR, .c = n->c}); break;
    case N_SET: emit(G, P_(G, pi), (instr){.op = I_SET, .c = n->c}); break;
    case N_BOL: emit(G, P_(G, pi), (instr){.op = I_BOL}); break;
    case N_EOL: emit(G, P_(G, pi), (instr){.op = I_EOL}); break;
    case N_WORDB: emit(G, P_(G, pi), (instr){.op = I_WORDB}); break;
    case N_NWORDB: emit(G, P_(G, pi), (instr){.op = I_NWORDB}); break;
    case N_LOOK: codegen_look(G, pi, n); break;
    case N_CAT:
        for (int i = 0; i < n->n_kids; i++) codegen(G, pi, n->kids[i]);
        break;
    case N_ALT: {
        // SPLIT a, next; a; JMP end; next: SPLIT b, next2; ... last
        int *jumps = malloc(sizeof(int) * (size_t)n->n_kids);
        if (!jumps) {
            if (!G->st) G->st = fail(INFER_ERR_NOMEM, "regex");
            return;
        }
        for (int i = 0; i < n->n_kids; i++) {
            int split = -1;
            if (i + 1 < n->n_kids) split = emit(G, P_(G, pi), (instr){.op = I_SPLIT});
            if (split >= 0) P_(G, pi)->code[split].x = P_(G, pi)->n;
            codegen(G, pi, n->kids[i]);
            jumps[i] = i + 1 < n->n_kids ? emit(G, P_(G, pi), (instr){.op = I_JMP}) : -1;
            if (split >= 0 && !G->st) P_(G, pi)->code[split].y = P_(G, pi)->n;
        }
        for (int i = 0; i < n->n_kids && !G->st; i++)
            if (jumps[i] >= 0) P_(G, pi)->code[jumps[i]].x = P_(G, pi)->n;
        free(jumps);
        break;
    }
    case N_REPEAT: {
        for (int i = 0; i < n->min; i++) codegen(G, pi, n->x);
        if (n->max < 0) {
            // L: SPLIT body, end (greedy) / end, body (lazy); body; JMP L
            int loop = emit(G, P_(G, pi), (instr){.op = I_SPLIT});
            if (loop < 0) return;
            int body = P_(G, pi)->n;
            codegen(G, pi, n->x);
            emit(G, P_(G, pi), (instr){.op = I_JMP, .x = loop});
            if (G->st) return;
            int end = P_(G, pi)->n;
            P_(G, pi)->code[loop].x = n->greedy ? body : end;
            P_(G, pi)->code[loop].y = n->greedy ? end : body;
        } else {
            int k = n->max - n->min;
            int *splits = malloc(sizeof(int) * (size_t)(k ? k : 1));
            if (!splits) {
                if (!G->st) G->st = fail(INFER_ERR_NOMEM, "regex");
                return;
            }
            for (int i = 0; i < k; i++) {
                splits[i] = emit(G, P_(G, pi), (instr){.op = I_SPLIT});
                if (splits[i] < 0) break;
                P_(G, pi)->code[splits[i]].x = P_(G, pi)->n; // provisional: body first
                codegen(G, pi, n->x);
            }
            if (!G->st) {
                int end = P_(G, pi)->n;
                for (int i = 0; i < k; i++) {
                    instr *s = &P_(G, pi)->code[splits[i]];
                    int body = s->x;
                    s->x = n->greedy ? body : end;
                    s->y = n->greedy ? end : body;
                }
            }
            free(splits);
        }
        break;
    }
    }
}

static int check_loops(const node *n) {
    if (!n) return 0;
    if (n->type == N_REPEAT && n->max < 0 && nullable(n->x)) return -1;
    for (int i = 0; i < n->n_kids; i++)
        if (check_loops(n->kids[i])) return -1;
    return check_loops(n->x);
}

int regex_uses_classes(const char *pattern) {
    static const char *const names[] = {"\\p{N}", "\\p{L}", "\\p{P}", "\\p{M}", "\\p{S}",
                                        "\\p{Lu}", "\\p{Ll}", "\\p{Lt}", "\\p{Lm}", "\\p{Lo}"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strstr(pattern, names[i])) return 1;
    return 0;
}

infer_status regex_compile(const char *pattern, tok_regex **out) {
    *out = NULL;
    parser P = {.p = pattern, .end = pattern + strlen(pattern), .pattern = pattern};
    node *root = parse_alt(&P, 0);
    if (!P.st && P.p != P.end) perr(&P, "unbalanced )");
    if (!P.st && check_loops(root)) perr(&P, "a loop whose body can match empty");
    tok_regex *re = NULL;
    if (!P.st && !(re = calloc(1, sizeof *re))) P.st = fail(INFER_ERR_NOMEM, "regex");
    if (!P.st) {
        gen G = {re, INFER_OK};
        int pi = new_prog(&G);
        if (pi >= 0) {
            codegen(&G, pi, root);
            emit(&G, P_(&G, pi), (instr){.op = I_MATCH});
        }
        P.st = G.st;
    }
    node_free(root);
    if (re) re->sets = P.sets, re->n_sets = P.n_sets;
    else {
        for (int i = 0; i < P.n_sets; i++) free(P.sets[i].r);
        free(P.sets);
    }
    if (P.st) {
        regex_free(re);
        return P.st;
    }
    *out = re;
    return INFER_OK;
}

void regex_free(tok_regex *re) {
    if (!re) return;
    for (int i = 0; i < re->n_progs; i++) free(re->progs[i].code);
    free(re->progs);
    for (int i = 0; i < re->n_sets; i++) free(re->sets[i].r);
    free(re->sets);
    free(re);
}

uint32_t regex_unit(uint32_t cp, int collapsed) {
    if (cp < 0x80) return cp;
    uint16_t f = uni_flags(cp);
    if (f & UNI_WS) return 0x0B;
    if (!collapsed) return cp;
    switch (f & UNI_CATEGORY) {
    case UNI_N: return 0xD1;
    case UNI_L: return 0xD2;
    case UNI_P: return 0xD3;
    case UNI_M: return 0xD4;
    case UNI_S: return 0xD5;
    }
    return RX_COLLAPSED_OTHER;
}

// ---------------------------------------------------------------------------
// the machine

typedef struct {
    int32_t pc;
    uint32_t sp;
} thread;

typedef struct {
    const tok_regex *re;
    const uint32_t *u;
    size_t begin, end; // the text; lookahead sees up to end
    size_t budget;     // steps left
} vm;

static int is_word(uint32_t u) { return (u >= '0' && u <= '9') || (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || u == '_'; }

// Runs program pi from sp; returns 1 with *me at the first match in
// priority order, 0 if none, -1 when out of steps or memory.
static int run(vm *M, int pi, size_t sp0, size_t reject_at, size_t *me) {
    const instr *code = M->re->progs[pi].code;
    thread local[64], *stack = local; // most matches never need more
    size_t cap = 64, top = 0;
    int32_t pc = 0;
    size_t sp = sp0;
    int result = 0;
    for (;;) {
        if (!M->budget--) {
            result = -1;
            break;
        }
        const instr *in = &code[pc];
        int ok = 1;
        switch ((op)in->op) {
        case I_CHAR: ok = sp < M->end && M->u[sp] == in->c; if (ok) sp++, pc++; break;
        case I_SET: ok = sp < M->end && cset_has(&M->re->sets[in->c], M->u[sp]); if (ok) sp++, pc++; break;
        case I_JMP: pc = in->x; break;
        case I_SPLIT:
            if (top == cap) {
                size_t nc = cap * 2;
                thread *v = stack == local ? malloc(sizeof *v * nc) : realloc(stack, sizeof *v * nc);
                if (!v) {
                    result = -1;
                    goto out;
                }
                if (stack == local) memcpy(v, local, sizeof local);
                stack = v;
                cap = nc;
            }
            stack[top++] = (thread){in->y, (uint32_t)sp};
            pc = in->x;
            break;
        case I_LOOK: {
            size_t e;
            int r = run(M, (int)in->c, sp, (size_t)-1, &e);
            if (r < 0) {
                result = -1;
                goto out;
            }
            ok = r != in->neg;
            if (ok) pc++;
            break;
        }
        case I_BOL: ok = sp == M->begin; if (ok) pc++; break;
        case I_EOL: ok = sp == M->end; if (ok) pc++; break;
        case I_WORDB:
        case I_NWORDB: {
            int a = sp > M->begin && is_word(M->u[sp - 1]), b = sp < M->end && is_word(M->u[sp]);
            ok = (a != b) == (in->op == I_WORDB);
            if (ok) pc++;
            break;
        }
        case I_MATCH:
            if (sp == reject_at) {
                ok = 0;
                break;
            }
            *me = sp;
            result = 1;
            goto out;
        }
        if (!ok) {
            if (!top) break;
            top--;
            pc = stack[top].pc;
            sp = stack[top].sp;
        }
    }
out:
    if (stack != local) free(stack);
    return result;
}

int regex_search(const tok_regex *re, const uint32_t *u, size_t begin, size_t end, size_t from, int not_empty_here,
                 size_t *ms, size_t *me) {
    // Enough for any sane pattern on any text; a pattern that needs more is
    // backtracking without bound, and the caller reports it.
    vm M = {re, u, begin, end, 100000 + 20000 * (end - from)};
    if (not_empty_here) {
        int r = run(&M, 0, from, from, me);
        if (r) *ms = from;
        return r;
    }
    for (size_t s = from; s <= end; s++) {
        int r = run(&M, 0, s, (size_t)-1, me);
        if (r) {
            *ms = s;
            return r;
        }
    }
    return 0;
}
