// GBNF text -> grammar rules, as llama.cpp's llama_grammar_parser reads it:
//
//   rule      ::= name "::=" alternates        (one line; newlines only inside ( ))
//   alternates ::= sequence ("|" sequence)*
//   item      ::= "literal" | [a-z0-9_] | [^"\\] | . | name | "(" alternates ")"
//   postfix   ::= * | + | ? | {m} | {m,} | {m,n} | {,n}
//   comments  # to the end of the line
//
// Groups and repetitions become rules of their own (x* is r ::= x r | ""), as
// llama.cpp makes them; x{m,n} is m copies then n-m nested optional ones, so
// m and n are bounded (GRAMMAR_MAX_REPEAT). Left recursion is refused: the
// matcher expands the rule at a stack's top until a character is there.
#include "inference/grammar.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct { gelem *v; int n, cap; } evec;

typedef struct {
    const char *src;   // the text, for line numbers
    evec *rules;       // (n_rules) each rule's elements
    char **names;      // (n_rules) NULL for the rules made for groups and repetitions
    uint8_t *defined;  // (n_rules)
    int n_rules, cap_rules;
    int *hash;         // (n_hash) rule ids by name, -1 empty (open addressing)
    int n_hash;
    long n_el;         // elements in all, for the bound
    int depth;         // groups open at this point (the parser recurses into each)
    infer_status failed; // the first failure
} parser;

static int line_of(const parser *ps, const char *p) {
    int line = 1;
    for (const char *q = ps->src; q < p && *q; q++) line += *q == '\n';
    return line;
}

// the first failure is kept; later ones are the consequences
static const char *perr(parser *ps, const char *p, const char *msg, const char *what) {
    if (!ps->failed)
        ps->failed = fail(INFER_ERR_ARG, "grammar: line %d: %s%s%.40s%s", line_of(ps, p), msg, what ? " '" : "", what ? what : "",
                          what ? "'" : "");
    return NULL;
}

static int push(parser *ps, evec *e, uint32_t type, uint32_t value) {
    if (ps->n_el >= GRAMMAR_MAX_ELEMS) {
        if (!ps->failed) ps->failed = fail(INFER_ERR_NOMEM, "grammar: more than %d elements", GRAMMAR_MAX_ELEMS);
        return -1;
    }
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 16;
        gelem *v = realloc(e->v, sizeof *v * (size_t)cap);
        if (!v) { ps->failed = fail(INFER_ERR_NOMEM, "grammar: out of memory"); return -1; }
        e->v = v, e->cap = cap;
    }
    e->v[e->n++] = (gelem){type, value};
    ps->n_el++;
    return 0;
}

static uint32_t hash_name(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

// A new rule (name NULL: made by the parser); -1 when too many.
static int new_rule(parser *ps, const char *name, size_t len) {
    if (ps->n_rules >= GRAMMAR_MAX_RULES) {
        if (!ps->failed) ps->failed = fail(INFER_ERR_NOMEM, "grammar: more than %d rules", GRAMMAR_MAX_RULES);
        return -1;
    }
    if (ps->n_rules == ps->cap_rules) {
        int cap = ps->cap_rules ? 2 * ps->cap_rules : 64;
        evec *r = realloc(ps->rules, sizeof *r * (size_t)cap);
        if (r) ps->rules = r;
        char **nm = realloc(ps->names, sizeof *nm * (size_t)cap);
        if (nm) ps->names = nm;
        uint8_t *d = realloc(ps->defined, (size_t)cap);
        if (d) ps->defined = d;
        if (!r || !nm || !d) { ps->failed = fail(INFER_ERR_NOMEM, "grammar: out of memory"); return -1; }
        ps->cap_rules = cap;
    }
    int id = ps->n_rules++;
    ps->rules[id] = (evec){0};
    ps->defined[id] = 0;
    ps->names[id] = NULL;
    if (name) {
        ps->names[id] = malloc(len + 1);
        if (!ps->names[id]) { ps->failed = fail(INFER_ERR_NOMEM, "grammar: out of memory"); return -1; }
        memcpy(ps->names[id], name, len);
        ps->names[id][len] = 0;
    }
    return id;
}

// The id of the rule named s[0, n), made on first sight (a reference may come
// before the definition).
static int symbol(parser *ps, const char *s, size_t n) {
    if (2 * (ps->n_rules + 1) >= ps->n_hash) { // grow and rehash
        int nh = ps->n_hash ? 2 * ps->n_hash : 256;
        int *h = malloc(sizeof *h * (size_t)nh);
        if (!h) { ps->failed = fail(INFER_ERR_NOMEM, "grammar: out of memory"); return -1; }
        for (int i = 0; i < nh; i++) h[i] = -1;
        for (int i = 0; i < ps->n_hash; i++) {
            int id = ps->hash[i];
            if (id < 0) continue;
            uint32_t k = hash_name(ps->names[id], strlen(ps->names[id])) & (uint32_t)(nh - 1);
            while (h[k] >= 0) k = (k + 1) & (uint32_t)(nh - 1);
            h[k] = id;
        }
        free(ps->hash);
        ps->hash = h, ps->n_hash = nh;
    }
    uint32_t k = hash_name(s, n) & (uint32_t)(ps->n_hash - 1);
    for (; ps->hash[k] >= 0; k = (k + 1) & (uint32_t)(ps->n_hash - 1)) {
        const char *nm = ps->names[ps->hash[k]];
        if (strlen(nm) == n && !memcmp(nm, s, n)) return ps->hash[k];
    }
    int id = new_rule(ps, s, n);
    if (id >= 0) ps->hash[k] = id;
    return id;
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static const char *skip_space(const char *p, int newlines) {
    for (;;) {
        if (*p == '#')
            while (*p && *p != '\n' && *p != '\r') p++;
        else if (*p == ' ' || *p == '\t' || (newlines && (*p == '\n' || *p == '\r'))) p++;
        else return p;
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// One character of a literal or a class: an escape or a UTF-8 sequence.
static const char *parse_char(parser *ps, const char *p, uint32_t *cp) {
    if (*p == '\\') {
        char c = p[1];
        int nhex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (nhex) {
            uint32_t v = 0;
            for (int i = 0; i < nhex; i++) {
                int h = hexval(p[2 + i]);
                if (h < 0) return perr(ps, p, "bad escape", NULL);
                v = v << 4 | (uint32_t)h;
            }
            if (v > 0x10FFFF) return perr(ps, p, "code point beyond U+10FFFF", NULL);
            *cp = v;
            return p + 2 + nhex;
        }
        switch (c) {
        case 'n': *cp = '\n'; break;
        case 'r': *cp = '\r'; break;
        case 't': *cp = '\t'; break;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': *cp = (uint32_t)c; break;
        default: return perr(ps, p, "unknown escape", NULL);
        }
        return p + 2;
    }
    unsigned char c = (unsigned char)*p;
    if (!c) return perr(ps, p, "unexpected end of text", NULL);
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!n) return perr(ps, p, "invalid UTF-8", NULL);
    uint32_t v = n == 1 ? c : n == 2 ? c & 0x1Fu : n == 3 ? c & 0x0Fu : c & 0x07u;
    for (int i = 1; i < n; i++) {
        if (((unsigned char)p[i] & 0xC0) != 0x80) return perr(ps, p, "invalid UTF-8", NULL);
        v = v << 6 | ((unsigned char)p[i] & 0x3Fu);
    }
    *cp = v;
    return p + n;
}

static const char *parse_int(parser *ps, const char *p, int *v) {
    if (*p < '0' || *p > '9') return perr(ps, p, "expecting a number", NULL);
    long x = 0;
    while (*p >= '0' && *p <= '9') {
        x = x * 10 + (*p++ - '0');
        if (x > GRAMMAR_MAX_REPEAT) return perr(ps, p, "repetition count too large (at most 1024)", NULL);
    }
    *v = (int)x;
    return p;
}

// The last item, out->v[sym, out->n), repeated min to max times (max < 0: no bound).
static int repeat(parser *ps, evec *out, int sym, int min, int max) {
    if (max >= 0 && max < min) return perr(ps, ps->src, "repetition {m,n} with n < m", NULL), -1;
    int n = out->n - sym;
    gelem *item = malloc(sizeof *item * (size_t)(n ? n : 1));
    if (!item) return ps->failed = fail(INFER_ERR_NOMEM, "grammar: out of memory"), -1;
    memcpy(item, out->v + sym, sizeof *item * (size_t)n);
    out->n = sym;
    ps->n_el -= n;
    int ok = 0;
    for (int k = 0; k < min && !ok; k++)
        for (int i = 0; i < n && !ok; i++) ok = push(ps, out, item[i].type, item[i].value);
    // the optional rest: r_i ::= item r_{i-1} | "" (max < 0: r ::= item r | "")
    int n_opt = max < 0 ? 1 : max - min, last = -1;
    for (int k = 0; k < n_opt && !ok; k++) {
        int id = new_rule(ps, NULL, 0);
        if (id < 0) { ok = -1; break; }
        evec *r = &ps->rules[id];
        for (int i = 0; i < n && !ok; i++) ok = push(ps, r, item[i].type, item[i].value);
        if (!ok && (k > 0 || max < 0)) ok = push(ps, r, GE_RULE, (uint32_t)(max < 0 ? id : last));
        if (!ok) ok = push(ps, r, GE_ALT, 0);
        if (!ok) ok = push(ps, r, GE_END, 0);
        ps->defined[id] = 1;
        last = id;
    }
    if (!ok && n_opt > 0) ok = push(ps, out, GE_RULE, (uint32_t)last);
    free(item);
    return ok;
}

static const char *parse_alternates(parser *ps, const char *p, int id, int nested);

static const char *parse_sequence(parser *ps, const char *p, evec *out, int nested) {
    int sym = out->n; // where the last item begins
    while (p && *p && !ps->failed) {
        if (*p == '"') { // literal
            p++;
            sym = out->n;
            while (p && *p != '"') {
                uint32_t cp;
                if (!*p) return perr(ps, p, "unterminated literal", NULL);
                if ((p = parse_char(ps, p, &cp)) && push(ps, out, GE_CHAR, cp)) return NULL;
            }
            if (p) p++;
        } else if (*p == '[') { // character class
            p++;
            uint32_t type = GE_CHAR;
            if (*p == '^') p++, type = GE_CHAR_NOT;
            sym = out->n;
            while (p && *p != ']') {
                uint32_t cp, up;
                if (!*p) return perr(ps, p, "unterminated character class", NULL);
                if (!(p = parse_char(ps, p, &cp)) || push(ps, out, out->n > sym ? GE_CHAR_ALT : type, cp)) return NULL;
                if (p[0] == '-' && p[1] && p[1] != ']') {
                    if (!(p = parse_char(ps, p + 1, &up)) || push(ps, out, GE_RNG_UPPER, up)) return NULL;
                    if (up < cp) return perr(ps, p, "character range backwards", NULL);
                }
            }
            if (!p) return NULL;
            if (out->n == sym) return perr(ps, p, "empty character class", NULL);
            p++;
        } else if (*p == '.') {
            sym = out->n;
            if (push(ps, out, GE_ANY, 0)) return NULL;
            p++;
        } else if (is_name_char(*p)) {
            const char *q = p;
            while (is_name_char(*q)) q++;
            int id = symbol(ps, p, (size_t)(q - p));
            sym = out->n;
            if (id < 0 || push(ps, out, GE_RULE, (uint32_t)id)) return NULL;
            p = q;
        } else if (*p == '(') {
            if (ps->depth >= GRAMMAR_MAX_NEST) return perr(ps, p, "groups nested too deeply (at most 128)", NULL);
            int id = new_rule(ps, NULL, 0);
            if (id < 0) return NULL;
            ps->depth++;
            p = parse_alternates(ps, skip_space(p + 1, 1), id, 1);
            ps->depth--;
            if (!p) return NULL;
            if (*p != ')') return perr(ps, p, "expecting ')'", NULL);
            p++;
            sym = out->n;
            if (push(ps, out, GE_RULE, (uint32_t)id)) return NULL;
        } else if (*p == '*' || *p == '+' || *p == '?' || *p == '{') {
            if (sym == out->n) return perr(ps, p, "nothing to repeat before", (char[]){*p, 0});
            int min = 0, max = -1;
            if (*p == '+') min = 1;
            else if (*p == '?') max = 1;
            if (*p == '{') {
                p = skip_space(p + 1, nested);
                if (*p != ',' && !(p = parse_int(ps, p, &min))) return NULL;
                p = skip_space(p, nested);
                if (*p == ',') {
                    p = skip_space(p + 1, nested);
                    if (*p != '}' && !(p = parse_int(ps, p, &max))) return NULL;
                    p = skip_space(p, nested);
                } else max = min;
                if (*p != '}') return perr(ps, p, "expecting '}'", NULL);
            }
            p++;
            if (repeat(ps, out, sym, min, max)) return NULL;
            sym = out->n; // (a repetition is not repeated again)
        } else break;
        if (p) p = skip_space(p, nested);
    }
    return ps->failed ? NULL : p;
}

static const char *parse_alternates(parser *ps, const char *p, int id, int nested) {
    evec r = {0};
    p = parse_sequence(ps, p, &r, nested);
    while (p && *p == '|') {
        if (push(ps, &r, GE_ALT, 0)) { p = NULL; break; }
        p = parse_sequence(ps, skip_space(p + 1, 1), &r, nested);
    }
    if (p && push(ps, &r, GE_END, 0)) p = NULL;
    if (!p) { free(r.v); return NULL; }
    ps->rules[id] = r;
    ps->defined[id] = 1;
    return p;
}

// ---------------------------------------------------------------------------
// checks: every rule defined, no left recursion

// Rules that may match the empty text: a worklist over the alternatives made
// only of rule references (each counts its references not yet known to be
// nullable), so a chain of rules costs its length, not its square.
static infer_status find_nullable(const parser *ps, uint8_t *nullable) {
    int n_alt = 0, n_ref = 0;
    for (int r = 0; r < ps->n_rules; r++)
        for (int i = 0; i < ps->rules[r].n; i++) {
            uint32_t t = ps->rules[r].v[i].type;
            n_alt += t == GE_ALT || t == GE_END, n_ref += t == GE_RULE;
        }
    int *owner = malloc(sizeof(int) * ((size_t)n_alt + 1)), *left = malloc(sizeof(int) * ((size_t)n_alt + 1));
    int *first = calloc((size_t)ps->n_rules + 1, sizeof(int)), *occ = malloc(sizeof(int) * ((size_t)n_ref + 1));
    int *queue = malloc(sizeof(int) * ((size_t)ps->n_rules + 1));
    if (!owner || !left || !first || !occ || !queue) {
        free(owner), free(left), free(first), free(occ), free(queue);
        return fail(INFER_ERR_NOMEM, "grammar: out of memory");
    }
    // alternatives: their rule and references left (-1: holds a character, never nullable)
    int a = 0;
    for (int r = 0; r < ps->n_rules; r++) {
        int refs = 0, chars = 0;
        for (int i = 0; i < ps->rules[r].n; i++) {
            uint32_t t = ps->rules[r].v[i].type;
            if (t == GE_ALT || t == GE_END) {
                owner[a] = r, left[a] = chars ? -1 : refs, a++;
                refs = chars = 0;
            } else if (t == GE_RULE) refs++;
            else chars = 1;
        }
    }
    // occ[first[q], first[q + 1]): the alternatives (all references) that refer to rule q, once per reference
    for (int r = 0, k = 0; r < ps->n_rules; r++)
        for (int i = 0; i < ps->rules[r].n; i++) {
            uint32_t t = ps->rules[r].v[i].type;
            if (t == GE_ALT || t == GE_END) k++;
            else if (t == GE_RULE && left[k] >= 0) first[ps->rules[r].v[i].value + 1]++;
        }
    for (int q = 0; q < ps->n_rules; q++) first[q + 1] += first[q];
    int *fill = queue; // (as the cursor of each rule's list first; the queue after)
    for (int q = 0; q < ps->n_rules; q++) fill[q] = first[q];
    for (int r = 0, k = 0; r < ps->n_rules; r++)
        for (int i = 0; i < ps->rules[r].n; i++) {
            uint32_t t = ps->rules[r].v[i].type;
            if (t == GE_ALT || t == GE_END) k++;
            else if (t == GE_RULE && left[k] >= 0) occ[fill[ps->rules[r].v[i].value]++] = k;
        }
    int head = 0, tail = 0;
    for (int k = 0; k < n_alt; k++)
        if (left[k] == 0 && !nullable[owner[k]]) nullable[owner[k]] = 1, queue[tail++] = owner[k];
    while (head < tail) {
        int q = queue[head++];
        for (int k = first[q]; k < first[q + 1]; k++)
            if (--left[occ[k]] == 0 && !nullable[owner[occ[k]]]) nullable[owner[occ[k]]] = 1, queue[tail++] = owner[occ[k]];
    }
    free(owner), free(left), free(first), free(occ), free(queue);
    return INFER_OK;
}

// A rule reached again through left corners (the rules that may begin it)
// before its own are done: left recursion. Depth first, on a stack of its
// own (a chain of rules is as long as the grammar makes it); -1: none.
static int left_cycle(const parser *ps, const uint8_t *nullable, uint8_t *mark, int *stack) {
    typedef struct { int r, i, at_start; } frame;
    frame *st = (frame *)stack;
    for (int r0 = 0; r0 < ps->n_rules; r0++) {
        if (mark[r0]) continue;
        int sp = 0;
        st[sp++] = (frame){r0, 0, 1}, mark[r0] = 1;
        while (sp) {
            frame *f = &st[sp - 1];
            const evec *e = &ps->rules[f->r];
            if (f->i >= e->n) { // done: the caller goes on past it when it may be empty
                int r = f->r;
                mark[r] = 2, sp--;
                if (sp) st[sp - 1].at_start = nullable[r];
                continue;
            }
            gelem x = e->v[f->i++];
            if (x.type == GE_ALT || x.type == GE_END) { f->at_start = 1; continue; }
            if (!f->at_start) continue;
            if (x.type == GE_RULE) {
                int q = (int)x.value;
                if (mark[q] == 1) return q;
                if (mark[q] == 2) { f->at_start = nullable[q]; continue; }
                mark[q] = 1, st[sp++] = (frame){q, 0, 1};
            } else if (x.type != GE_RNG_UPPER && x.type != GE_CHAR_ALT) f->at_start = 0;
        }
    }
    return -1;
}

static infer_status check_rules(parser *ps) {
    for (int r = 0; r < ps->n_rules; r++)
        if (!ps->defined[r]) return fail(INFER_ERR_ARG, "grammar: undefined rule '%.40s'", ps->names[r] ? ps->names[r] : "?");
    size_t n = ps->n_rules > 0 ? (size_t)ps->n_rules : 0;
    uint8_t *nullable = calloc(n + 1, 2);
    int *stack = malloc(sizeof(int) * 3 * (n + 1));
    if (!nullable || !stack) return free(nullable), free(stack), fail(INFER_ERR_NOMEM, "grammar: out of memory");
    uint8_t *mark = nullable + n;
    infer_status st = find_nullable(ps, nullable);
    int where = st ? -1 : left_cycle(ps, nullable, mark, stack);
    free(nullable), free(stack);
    if (where >= 0) {
        // name the nearest named rule (a group's rule has none)
        return fail(INFER_ERR_ARG, "grammar: left recursion through rule '%.40s'", ps->names[where] ? ps->names[where] : "(a group)");
    }
    return st;
}

static void parser_free(parser *ps) {
    for (int r = 0; r < ps->n_rules; r++) free(ps->rules[r].v), free(ps->names[r]);
    free(ps->rules), free(ps->names), free(ps->defined), free(ps->hash);
}

infer_status grammar_parse(const char *gbnf, const char *root, grules **out) {
    *out = NULL;
    if (!gbnf) return fail(INFER_ERR_ARG, "grammar: no text");
    parser ps = {.src = gbnf};
    const char *p = skip_space(gbnf, 1);
    while (p && *p) {
        const char *q = p;
        while (is_name_char(*q)) q++;
        if (q == p) { perr(&ps, p, "expecting a rule name at", p); break; }
        int id = symbol(&ps, p, (size_t)(q - p));
        if (id < 0) break;
        if (ps.defined[id]) { perr(&ps, p, "rule defined twice:", ps.names[id]); break; }
        p = skip_space(q, 0);
        if (strncmp(p, "::=", 3)) { perr(&ps, p, "expecting '::=' at", p); break; }
        p = parse_alternates(&ps, skip_space(p + 3, 1), id, 0);
        if (!p) break;
        if (*p && *p != '\n' && *p != '\r') { perr(&ps, p, "unexpected text", p); break; }
        p = skip_space(p, 1);
    }
    infer_status st = ps.failed;
    int root_id = -1;
    if (!st) {
        const char *rn = root ? root : "root";
        for (int r = 0; r < ps.n_rules && root_id < 0; r++)
            if (ps.names[r] && !strcmp(ps.names[r], rn)) root_id = r;
        if (root_id < 0 || !ps.defined[root_id]) st = fail(INFER_ERR_ARG, "grammar: no rule '%.40s'", rn);
    }
    if (!st) st = check_rules(&ps);
    grules *g = NULL;
    if (!st) { // one array of elements, the rules back to back
        g = calloc(1, sizeof *g);
        if (g) {
            g->el = malloc(sizeof *g->el * (size_t)(ps.n_el ? ps.n_el : 1));
            g->start = malloc(sizeof *g->start * (size_t)ps.n_rules);
        }
        if (!g || !g->el || !g->start) st = fail(INFER_ERR_NOMEM, "grammar: out of memory");
        for (int r = 0; !st && r < ps.n_rules; r++) {
            g->start[r] = (uint32_t)g->n_el;
            memcpy(g->el + g->n_el, ps.rules[r].v, sizeof *g->el * (size_t)ps.rules[r].n);
            g->n_el += ps.rules[r].n;
        }
        if (!st) g->n_rule = ps.n_rules, g->root = (uint32_t)root_id;
    }
    parser_free(&ps);
    if (st) { grammar_rules_free(g); return st; }
    *out = g;
    return INFER_OK;
}

void grammar_rules_free(grules *g) {
    if (!g) return;
    free(g->el);
    free(g->start);
    free(g);
}
