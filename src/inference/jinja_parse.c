// Jinja lexer and parser: template source -> statement tree. Whitespace
// control follows jinja2's lexer with trim_blocks and lstrip_blocks on.
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "inference/jinja_impl.h"

typedef enum {
    T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END,
    T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_EOF,
} ttype;

typedef struct {
    ttype t;
    int pos;
    const char *s;   // T_TEXT/T_NAME/T_STR/T_OP text (NUL-terminated copy)
    size_t n;
    int64_t i;
    double f;
} token;

typedef struct {
    jstate *J;
    token *tok;
    int n, cap, at;
} parser;

void pos_linecol(const jstate *J, int pos, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (int i = 0; i < pos && (size_t)i < J->src_n; i++) {
        if (J->src[i] == '\n') { (*line)++; *col = 1; }
        else (*col)++;
    }
}

void nlist_push(jstate *J, nlist *l, node *n) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        node **nv = jalloc(J, (size_t)cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = n;
}

static token *emit(parser *P, ttype t, int pos) {
    if (P->n == P->cap) {
        int cap = P->cap ? P->cap * 2 : 256;
        token *nt = jalloc(P->J, (size_t)cap * sizeof *nt);
        if (P->n) memcpy(nt, P->tok, (size_t)P->n * sizeof *nt);
        P->tok = nt;
        P->cap = cap;
    }
    token *k = &P->tok[P->n++];
    memset(k, 0, sizeof *k);
    k->t = t;
    k->pos = pos;
    return k;
}

// ============================================================================
// lexer
// ============================================================================

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static const char *OPS[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                            "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "=", "<", ">", ";", NULL};

// Decodes a string literal's escapes the way jinja2 does (Python's
// unicode-escape): \n \t \r \\ \' \" \xhh \uXXXX \UXXXXXXXX \ooo, others kept.
static void put_cp(jstate *J, jbuf *b, unsigned cp) {
    char t[4];
    int n;
    if (cp < 0x80) { t[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { t[0] = (char)(0xc0 | (cp >> 6)); t[1] = (char)(0x80 | (cp & 0x3f)); n = 2; }
    else if (cp < 0x10000) {
        t[0] = (char)(0xe0 | (cp >> 12)); t[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        t[2] = (char)(0x80 | (cp & 0x3f)); n = 3;
    } else {
        t[0] = (char)(0xf0 | (cp >> 18)); t[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); t[3] = (char)(0x80 | (cp & 0x3f)); n = 4;
    }
    buf_put(J, b, t, (size_t)n);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t lex_string(parser *P, size_t i, token *k) {
    jstate *J = P->J;
    const char *s = J->src;
    char q = s[i];
    jbuf b = {0};
    size_t start = i++;
    for (;;) {
        if (i >= J->src_n) jerr(J, (int)start, "unterminated string literal");
        char c = s[i];
        if (c == q) { i++; break; }
        if (c != '\\') { buf_putc(J, &b, c); i++; continue; }
        if (i + 1 >= J->src_n) jerr(J, (int)start, "unterminated string literal");
        char e = s[i + 1];
        i += 2;
        switch (e) {
        case 'n': buf_putc(J, &b, '\n'); break;
        case 't': buf_putc(J, &b, '\t'); break;
        case 'r': buf_putc(J, &b, '\r'); break;
        case 'b': buf_putc(J, &b, '\b'); break;
        case 'f': buf_putc(J, &b, '\f'); break;
        case 'v': buf_putc(J, &b, '\v'); break;
        case 'a': buf_putc(J, &b, '\a'); break;
        case '\\': case '\'': case '"': buf_putc(J, &b, e); break;
        case '\n': break;
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            unsigned cp = 0;
            for (int d = 0; d < nd; d++) {
                int h = i < J->src_n ? hexval(s[i]) : -1;
                if (h < 0) jerr(J, (int)start, "bad \\%c escape in string literal", e);
                cp = cp * 16 + (unsigned)h;
                i++;
            }
            if (cp > 0x10ffff) jerr(J, (int)start, "bad \\%c escape in string literal", e);
            put_cp(J, &b, cp);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                unsigned cp = (unsigned)(e - '0');
                for (int d = 0; d < 2 && i < J->src_n && s[i] >= '0' && s[i] <= '7'; d++) cp = cp * 8 + (unsigned)(s[i++] - '0');
                put_cp(J, &b, cp);
            } else {
                buf_putc(J, &b, '\\');
                buf_putc(J, &b, e);
            }
        }
    }
    k->s = b.p ? b.p : "";
    k->n = b.n;
    return i;
}

// Lexes the inside of a {{ }} or {% %} tag starting at i; returns the index
// after the closing delimiter (and after whitespace it strips).
static size_t lex_tag(parser *P, size_t i, int is_block, int open_pos, int *line_starting) {
    jstate *J = P->J;
    const char *s = J->src;
    size_t n = J->src_n;
    int depth = 0;
    for (;;) {
        while (i < n && is_ws(s[i])) i++;
        if (i >= n) jerr(J, open_pos, "unterminated %s tag", is_block ? "{% %}" : "{{ }}");
        const char *close = is_block ? "%}" : "}}";
        if (depth == 0) {
            int sign = (s[i] == '-' || (is_block && s[i] == '+')) && i + 2 < n + 0 && i + 1 < n &&
                       strncmp(s + i + 1, close, 2) == 0 ? s[i] : 0;
            if (sign || (i + 1 < n && strncmp(s + i, close, 2) == 0)) {
                emit(P, is_block ? T_BLOCK_END : T_VAR_END, (int)i);
                i += sign ? 3 : 2;
                if (sign == '-') {
                    while (i < n && is_ws(s[i])) i++;
                } else if (sign != '+' && is_block && i < n && s[i] == '\n') {
                    i++;   // trim_blocks
                }
                *line_starting = i > 0 && s[i - 1] == '\n';
                return i;
            }
        }
        char c = s[i];
        if (c == '\'' || c == '"') {
            token *k = emit(P, T_STR, (int)i);
            i = lex_string(P, i, k);
        } else if (isalpha((unsigned char)c) || c == '_') {
            size_t st = i;
            while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '_')) i++;
            token *k = emit(P, T_NAME, (int)st);
            k->s = jstrdup(J, s + st, i - st);
            k->n = i - st;
        } else if (isdigit((unsigned char)c)) {
            size_t st = i;
            int is_float = 0;
            while (i < n && (isdigit((unsigned char)s[i]) || s[i] == '_')) i++;
            if (i + 1 < n && s[i] == '.' && isdigit((unsigned char)s[i + 1])) {
                is_float = 1;
                i++;
                while (i < n && (isdigit((unsigned char)s[i]) || s[i] == '_')) i++;
            }
            if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                size_t j = i + 1;
                if (j < n && (s[j] == '+' || s[j] == '-')) j++;
                if (j < n && isdigit((unsigned char)s[j])) {
                    is_float = 1;
                    i = j;
                    while (i < n && isdigit((unsigned char)s[i])) i++;
                }
            }
            char num[64];
            size_t m = 0;
            for (size_t k = st; k < i && m + 1 < sizeof num; k++)
                if (s[k] != '_') num[m++] = s[k];
            num[m] = 0;
            token *k = emit(P, is_float ? T_FLOAT : T_INT, (int)st);
            if (is_float) k->f = strtod(num, NULL);
            else {
                char *end;
                unsigned long long v = strtoull(num, &end, 10);
                if (m > 18 || v > INT64_MAX) jerr(J, (int)st, "integer literal too large");
                k->i = (int64_t)v;
            }
        } else {
            int found = 0;
            for (int o = 0; OPS[o]; o++) {
                size_t L = strlen(OPS[o]);
                if (i + L <= n && strncmp(s + i, OPS[o], L) == 0) {
                    token *k = emit(P, T_OP, (int)i);
                    k->s = OPS[o];
                    k->n = L;
                    if (c == '(' || c == '[' || c == '{') depth++;
                    if (c == ')' || c == ']' || c == '}') {
                        if (depth == 0) jerr(J, (int)i, "unexpected '%c'", c);
                        depth--;
                    }
                    i += L;
                    found = 1;
                    break;
                }
            }
            if (!found) jerr(J, (int)i, "unexpected character '%c' in tag", c);
        }
    }
}

static void emit_text(parser *P, size_t from, size_t to) {
    if (to <= from) return;
    token *k = emit(P, T_TEXT, (int)from);
    k->s = P->J->src + from;
    k->n = to - from;
}

// Finds the next tag opener at or after i; returns n when none.
static size_t find_open(const char *s, size_t n, size_t i) {
    for (; i + 1 < n; i++)
        if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) return i;
    return n;
}

static int is_raw_tag(const char *s, size_t n, size_t i, const char *word, size_t *after_word) {
    // at s[i] just after "{%" (and sign): whitespace, word, then a tag end
    while (i < n && is_ws(s[i])) i++;
    size_t L = strlen(word);
    if (i + L > n || strncmp(s + i, word, L) != 0) return 0;
    if (i + L < n && (isalnum((unsigned char)s[i + L]) || s[i + L] == '_')) return 0;
    *after_word = i + L;
    return 1;
}

static void lex(parser *P) {
    jstate *J = P->J;
    const char *s = J->src;
    size_t n = J->src_n, i = 0;
    int line_starting = 1;
    while (i < n) {
        size_t o = find_open(s, n, i);
        size_t text_end = o;
        if (o < n) {
            char kind = s[o + 1];
            char sign = o + 2 < n ? s[o + 2] : 0;
            if (sign == '-') {
                while (text_end > i && is_ws(s[text_end - 1])) text_end--;
            } else if (sign != '+' && kind != '{') {
                size_t l = text_end;   // lstrip_blocks
                while (l > i && s[l - 1] != '\n') l--;
                int all_ws = 1;
                for (size_t k = l; k < text_end; k++)
                    if (!is_ws(s[k])) { all_ws = 0; break; }
                if (all_ws && (l > i || line_starting)) text_end = l;
            }
        }
        emit_text(P, i, text_end);
        if (o >= n) break;
        char kind = s[o + 1];
        size_t body = o + 2;
        if (body < n && (s[body] == '-' || s[body] == '+')) body++;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t k = body; k + 1 < n; k++)
                if (s[k] == '#' && s[k + 1] == '}') { e = s + k; break; }
            if (!e && body >= n) break;   // jinja2 ignores a bare "{#" at the very end
            if (!e) jerr(J, (int)o, "unterminated comment");
            size_t k = (size_t)(e - s);
            char esign = k > body && (s[k - 1] == '-' || s[k - 1] == '+') ? s[k - 1] : 0;
            i = k + 2;
            if (esign == '-') while (i < n && is_ws(s[i])) i++;
            else if (esign != '+' && i < n && s[i] == '\n') i++;
            line_starting = i > 0 && s[i - 1] == '\n';
            continue;
        }
        size_t after;
        if (kind == '%' && is_raw_tag(s, n, body, "raw", &after)) {
            // {% raw %} ... {% endraw %}: the content is text
            size_t k = after;
            while (k < n && is_ws(s[k])) k++;
            int rsign = k < n && (s[k] == '-' || s[k] == '+') ? s[k] : 0;
            if (rsign) k++;
            if (k + 1 >= n || s[k] != '%' || s[k + 1] != '}') jerr(J, (int)o, "bad raw tag");
            k += 2;
            if (rsign == '-') while (k < n && is_ws(s[k])) k++;
            else if (rsign != '+' && k < n && s[k] == '\n') k++;
            size_t c = k, end_open = n;
            for (; c + 1 < n; c++) {
                if (s[c] == '{' && s[c + 1] == '%') {
                    size_t b2 = c + 2;
                    if (b2 < n && (s[b2] == '-' || s[b2] == '+')) b2++;
                    if (is_raw_tag(s, n, b2, "endraw", &after)) { end_open = c; break; }
                }
            }
            if (end_open >= n) jerr(J, (int)o, "missing {%% endraw %%}");
            size_t te = end_open;
            if (s[end_open + 2] == '-') while (te > k && is_ws(s[te - 1])) te--;
            emit_text(P, k, te);
            size_t q = after;
            while (q < n && is_ws(s[q])) q++;
            int esign = q < n && (s[q] == '-' || s[q] == '+') ? s[q] : 0;
            if (esign) q++;
            if (q + 1 >= n || s[q] != '%' || s[q + 1] != '}') jerr(J, (int)end_open, "bad endraw tag");
            q += 2;
            if (esign == '-') while (q < n && is_ws(s[q])) q++;
            else if (esign != '+' && q < n && s[q] == '\n') q++;
            i = q;
            line_starting = i > 0 && s[i - 1] == '\n';
            continue;
        }
        emit(P, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, (int)o);
        i = lex_tag(P, body, kind == '%', (int)o, &line_starting);
    }
    emit(P, T_EOF, (int)n);
}

// ============================================================================
// parser
// ============================================================================

static token *peek(parser *P) { return &P->tok[P->at]; }
static token *next(parser *P) { token *k = &P->tok[P->at]; if (k->t != T_EOF) P->at++; return k; }

static token *peek2(parser *P) { return P->at + 1 < P->n ? &P->tok[P->at + 1] : &P->tok[P->n - 1]; }

static int is_op(token *k, const char *op) { return k->t == T_OP && strcmp(k->s, op) == 0; }
static int is_name(token *k, const char *nm) { return k->t == T_NAME && strcmp(k->s, nm) == 0; }

static const char *tok_desc(token *k) {
    switch (k->t) {
    case T_EOF: return "end of template";
    case T_BLOCK_END: return "end of tag '%}'";
    case T_VAR_END: return "end of tag '}}'";
    case T_NAME: case T_OP: return k->s;
    case T_STR: return "string";
    default: return "token";
    }
}

static void expect_op(parser *P, const char *op) {
    token *k = next(P);
    if (!is_op(k, op)) jerr(P->J, k->pos, "expected '%s', got '%s'", op, tok_desc(k));
}

static const char *expect_name(parser *P) {
    token *k = next(P);
    if (k->t != T_NAME) jerr(P->J, k->pos, "expected a name, got '%s'", tok_desc(k));
    return k->s;
}

static node *mk(parser *P, nkind kind, int pos) {
    node *e = jalloc(P->J, sizeof *e);
    e->kind = kind;
    e->pos = pos;
    return e;
}

static void enter(parser *P, int pos) {
    if (++P->J->depth > J_MAX_DEPTH) jerr(P->J, pos, "template nested deeper than %d", J_MAX_DEPTH);
}
static void leave(parser *P) { P->J->depth--; }

static node *parse_expr(parser *P);
static node *parse_or(parser *P);
static node *parse_unary(parser *P, int with_filter);

// Call arguments after '(' up to ')': positional into args, keyword into kwargs.
static void parse_args(parser *P, node *e) {
    int nk = 0, capk = 0;
    while (!is_op(peek(P), ")")) {
        token *k = peek(P);
        if (k->t == T_NAME && is_op(peek2(P), "=")) {
            next(P);
            next(P);
            if (nk == capk) {
                capk = capk ? capk * 2 : 4;
                const char **nn = jalloc(P->J, (size_t)capk * sizeof *nn);
                if (nk) memcpy(nn, e->kwnames, (size_t)nk * sizeof *nn);
                e->kwnames = nn;
            }
            e->kwnames[nk++] = k->s;
            nlist_push(P->J, &e->kwargs, parse_expr(P));
        } else {
            if (nk) jerr(P->J, k->pos, "positional argument after keyword argument");
            nlist_push(P->J, &e->args, parse_expr(P));
        }
        if (!is_op(peek(P), ",")) break;
        next(P);
    }
    expect_op(P, ")");
}

static node *parse_primary(parser *P) {
    token *k = next(P);
    node *e;
    switch (k->t) {
    case T_STR: {
        // adjacent string literals concatenate
        jbuf b = {0};
        buf_put(P->J, &b, k->s, k->n);
        while (peek(P)->t == T_STR) { token *k2 = next(P); buf_put(P->J, &b, k2->s, k2->n); }
        e = mk(P, E_LIT, k->pos);
        e->lit = v_str(b.p ? b.p : "", b.n);
        return e;
    }
    case T_INT: e = mk(P, E_LIT, k->pos); e->lit = v_int(k->i); return e;
    case T_FLOAT: e = mk(P, E_LIT, k->pos); e->lit = v_float(k->f); return e;
    case T_NAME:
        e = mk(P, E_LIT, k->pos);
        if (!strcmp(k->s, "true") || !strcmp(k->s, "True")) e->lit = v_bool(1);
        else if (!strcmp(k->s, "false") || !strcmp(k->s, "False")) e->lit = v_bool(0);
        else if (!strcmp(k->s, "none") || !strcmp(k->s, "None")) e->lit = v_none();
        else { e->kind = E_NAME; e->s = k->s; }
        return e;
    case T_OP:
        if (is_op(k, "(")) {
            if (is_op(peek(P), ")")) { next(P); return mk(P, E_TUPLE, k->pos); }
            node *x = parse_expr(P);
            if (is_op(peek(P), ",")) {
                node *t = mk(P, E_TUPLE, k->pos);
                nlist_push(P->J, &t->args, x);
                while (is_op(peek(P), ",")) {
                    next(P);
                    if (is_op(peek(P), ")")) break;
                    nlist_push(P->J, &t->args, parse_expr(P));
                }
                x = t;
            }
            expect_op(P, ")");
            return x;
        }
        if (is_op(k, "[")) {
            e = mk(P, E_LIST, k->pos);
            while (!is_op(peek(P), "]")) {
                nlist_push(P->J, &e->args, parse_expr(P));
                if (!is_op(peek(P), ",")) break;
                next(P);
            }
            expect_op(P, "]");
            return e;
        }
        if (is_op(k, "{")) {
            e = mk(P, E_DICT, k->pos);
            while (!is_op(peek(P), "}")) {
                nlist_push(P->J, &e->args, parse_expr(P));
                expect_op(P, ":");
                nlist_push(P->J, &e->args, parse_expr(P));
                if (!is_op(peek(P), ",")) break;
                next(P);
            }
            expect_op(P, "}");
            return e;
        }
        break;
    default: break;
    }
    jerr(P->J, k->pos, "unexpected '%s' in expression", tok_desc(k));
}

static node *parse_postfix(parser *P, node *e) {
    for (;;) {
        token *k = peek(P);
        if (is_op(k, ".")) {
            next(P);
            token *a = next(P);
            node *x = mk(P, E_ATTR, a->pos);
            x->a = e;
            if (a->t == T_NAME) x->s = a->s;
            else if (a->t == T_INT) {   // x.0 is x[0]
                x->kind = E_INDEX;
                x->b = mk(P, E_LIT, a->pos);
                x->b->lit = v_int(a->i);
            } else jerr(P->J, a->pos, "expected an attribute name after '.'");
            e = x;
        } else if (is_op(k, "[")) {
            next(P);
            node *x = mk(P, E_INDEX, k->pos);
            x->a = e;
            node *parts[3] = {0};
            int colons = 0;
            for (;;) {
                token *t = peek(P);
                if (is_op(t, "]")) break;
                if (is_op(t, ":")) {
                    if (++colons > 2) jerr(P->J, t->pos, "too many ':' in slice");
                    next(P);
                    continue;
                }
                if (parts[colons]) jerr(P->J, t->pos, "expected ']' or ':'");
                parts[colons] = parse_expr(P);
                if (!colons && is_op(peek(P), ",")) {   // x[a, b] indexes with the tuple (a, b)
                    node *tup = mk(P, E_TUPLE, parts[0]->pos);
                    nlist_push(P->J, &tup->args, parts[0]);
                    while (is_op(peek(P), ",")) {
                        next(P);
                        if (is_op(peek(P), "]")) break;
                        nlist_push(P->J, &tup->args, parse_expr(P));
                    }
                    parts[0] = tup;
                    break;
                }
            }
            expect_op(P, "]");
            if (colons) {
                x->kind = E_SLICE;
                x->b = parts[0];
                x->c = parts[1];
                x->d = parts[2];
            } else {
                if (!parts[0]) parts[0] = mk(P, E_TUPLE, k->pos);   // x[] is x[()]
                x->b = parts[0];
            }
            e = x;
        } else if (is_op(k, "(")) {
            next(P);
            node *x = mk(P, E_CALL, k->pos);
            x->a = e;
            parse_args(P, x);
            e = x;
        } else {
            return e;
        }
    }
}

// Filter and test names may be dotted (`a.b`); unknown ones fail only when
// evaluated, as in jinja2 3.x.
static const char *dotted_name(parser *P, token *nm) {
    if (!is_op(peek(P), ".") || peek2(P)->t != T_NAME) return nm->s;
    jbuf b = {0};
    buf_put(P->J, &b, nm->s, nm->n);
    while (is_op(peek(P), ".") && peek2(P)->t == T_NAME) {
        next(P);
        token *k = next(P);
        buf_putc(P->J, &b, '.');
        buf_put(P->J, &b, k->s, k->n);
    }
    return b.p;
}

// `x | f(args) | g`, `x is [not] test [arg]`
static node *parse_filters_tests(parser *P, node *e) {
    for (;;) {
        token *k = peek(P);
        if (is_op(k, "|")) {
            next(P);
            token *nm = next(P);
            if (nm->t != T_NAME) jerr(P->J, nm->pos, "expected a filter name after '|'");
            node *f = mk(P, E_FILTER, nm->pos);
            f->s = dotted_name(P, nm);
            f->a = e;
            // dotted filter names are not supported
            if (is_op(peek(P), "(")) { next(P); parse_args(P, f); }
            e = f;
        } else if (is_name(k, "is")) {
            next(P);
            node *t = mk(P, E_TEST, k->pos);
            if (is_name(peek(P), "not")) { next(P); t->op = 1; }
            token *nm = next(P);
            if (nm->t != T_NAME) jerr(P->J, nm->pos, "expected a test name after 'is'");
            t->s = dotted_name(P, nm);
            t->a = e;
            token *a = peek(P);
            if (is_op(a, "(")) { next(P); parse_args(P, t); }
            else if (a->t == T_STR || a->t == T_INT || a->t == T_FLOAT || is_op(a, "[") || is_op(a, "{") ||
                     (a->t == T_NAME && strcmp(a->s, "and") && strcmp(a->s, "or") && strcmp(a->s, "else"))) {
                // `is sameas false`, `is equalto 5`: one argument without parentheses
                if (is_name(a, "is")) jerr(P->J, a->pos, "cannot chain multiple tests with 'is'");
                node *arg = parse_primary(P);
                arg = parse_postfix(P, arg);
                nlist_push(P->J, &t->args, arg);
            }
            e = t;
        } else {
            return e;
        }
    }
}

static node *parse_unary(parser *P, int with_filter) {
    token *k = peek(P);
    node *e;
    enter(P, k->pos);
    if (is_op(k, "-") || is_op(k, "+")) {
        next(P);
        e = mk(P, is_op(k, "-") ? E_NEG : E_POS, k->pos);
        e->a = parse_unary(P, 0);
    } else {
        e = parse_postfix(P, parse_primary(P));
    }
    if (with_filter) e = parse_filters_tests(P, e);
    leave(P);
    return e;
}

static node *bin(parser *P, int op, int pos, node *a, node *b) {
    node *e = mk(P, E_BIN, pos);
    e->op = op;
    e->a = a;
    e->b = b;
    return e;
}

static node *parse_pow(parser *P) {
    node *e = parse_unary(P, 1);
    while (is_op(peek(P), "**")) {
        token *k = next(P);
        e = bin(P, OP_POW, k->pos, e, parse_unary(P, 1));
    }
    return e;
}

static node *parse_math2(parser *P) {
    node *e = parse_pow(P);
    for (;;) {
        token *k = peek(P);
        int op = is_op(k, "*") ? OP_MUL : is_op(k, "/") ? OP_DIV : is_op(k, "//") ? OP_FLOORDIV
               : is_op(k, "%") ? OP_MOD : 0;
        if (!op) return e;
        next(P);
        e = bin(P, op, k->pos, e, parse_pow(P));
    }
}

static node *parse_concat(parser *P) {
    node *e = parse_math2(P);
    while (is_op(peek(P), "~")) {
        token *k = next(P);
        e = bin(P, OP_CONCAT, k->pos, e, parse_math2(P));
    }
    return e;
}

static node *parse_math1(parser *P) {
    node *e = parse_concat(P);
    for (;;) {
        token *k = peek(P);
        int op = is_op(k, "+") ? OP_ADD : is_op(k, "-") ? OP_SUB : 0;
        if (!op) return e;
        next(P);
        e = bin(P, op, k->pos, e, parse_concat(P));
    }
}

// a < b == c chains like Python: (a < b) and (b == c), each operand evaluated once
static node *parse_compare(parser *P) {
    node *e = parse_math1(P);
    node *c = NULL;
    int cap = 0;
    for (;;) {
        token *k = peek(P);
        int op = is_op(k, "==") ? OP_EQ : is_op(k, "!=") ? OP_NE : is_op(k, "<") ? OP_LT
               : is_op(k, "<=") ? OP_LE : is_op(k, ">") ? OP_GT : is_op(k, ">=") ? OP_GE
               : is_name(k, "in") ? OP_IN : 0;
        if (!op && is_name(k, "not") && is_name(peek2(P), "in")) {
            next(P);
            op = OP_NOTIN;
        }
        if (!op) return c ? c : e;
        next(P);
        if (!c) {
            c = mk(P, E_CMP, k->pos);
            nlist_push(P->J, &c->args, e);
        }
        if (c->args.n - 1 == cap) {
            cap = cap ? cap * 2 : 2;
            int *no = jalloc(P->J, (size_t)cap * sizeof *no);
            if (c->args.n > 1) memcpy(no, c->ops, (size_t)(c->args.n - 1) * sizeof *no);
            c->ops = no;
        }
        c->ops[c->args.n - 1] = op;
        nlist_push(P->J, &c->args, parse_math1(P));
    }
}

static node *parse_not(parser *P) {
    token *k = peek(P);
    if (is_name(k, "not")) {
        next(P);
        enter(P, k->pos);
        node *e = mk(P, E_NOT, k->pos);
        e->a = parse_not(P);
        leave(P);
        return e;
    }
    return parse_compare(P);
}

static node *parse_and(parser *P) {
    node *e = parse_not(P);
    while (is_name(peek(P), "and")) {
        token *k = next(P);
        node *x = mk(P, E_AND, k->pos);
        x->a = e;
        x->b = parse_not(P);
        e = x;
    }
    return e;
}

static node *parse_or(parser *P) {
    node *e = parse_and(P);
    while (is_name(peek(P), "or")) {
        token *k = next(P);
        node *x = mk(P, E_OR, k->pos);
        x->a = e;
        x->b = parse_and(P);
        e = x;
    }
    return e;
}

static node *parse_expr(parser *P) {
    enter(P, peek(P)->pos);
    node *e = parse_or(P);
    while (is_name(peek(P), "if")) {
        token *k = next(P);
        node *c = mk(P, E_COND, k->pos);
        c->a = e;
        c->b = parse_or(P);
        if (is_name(peek(P), "else")) { next(P); c->c = parse_expr(P); }
        e = c;
    }
    leave(P);
    return e;
}

// An expression that may be an unparenthesised tuple: `a, b`.
static node *parse_tuple_expr_ex(parser *P, int condexpr) {
    node *e = condexpr ? parse_expr(P) : parse_or(P);
    if (!is_op(peek(P), ",")) return e;
    node *t = mk(P, E_TUPLE, e->pos);
    nlist_push(P->J, &t->args, e);
    while (is_op(peek(P), ",")) {
        next(P);
        token *k = peek(P);
        if (k->t == T_BLOCK_END || k->t == T_VAR_END) break;
        nlist_push(P->J, &t->args, condexpr ? parse_expr(P) : parse_or(P));
    }
    return t;
}

static node *parse_tuple_expr(parser *P) { return parse_tuple_expr_ex(P, 1); }

// ---- statements -------------------------------------------------------------

static void expect_block_end(parser *P) {
    token *k = next(P);
    if (k->t != T_BLOCK_END) jerr(P->J, k->pos, "expected '%%}', got '%s'", tok_desc(k));
}

// The end of a tag that opens a body: jinja2 accepts `{% if x: %}`.
static void expect_body_start(parser *P) {
    if (is_op(peek(P), ":")) next(P);
    expect_block_end(P);
}

// Parses statements until a block tag whose keyword is in `ends` (a
// NUL-separated list); returns that keyword (the tag's name token is consumed,
// the rest of the tag is not). At the top level ends is NULL.
static const char *parse_body(parser *P, nlist *out, const char *const *ends, int open_pos, const char *what);

static node *parse_stmt(parser *P, token *kw);

static const char *parse_body(parser *P, nlist *out, const char *const *ends, int open_pos, const char *what) {
    jstate *J = P->J;
    for (;;) {
        token *k = next(P);
        if (k->t == T_EOF) {
            if (ends) jerr(J, open_pos, "unclosed '%s' block (missing {%% %s %%})", what, ends[0]);
            return NULL;
        }
        if (k->t == T_TEXT) {
            node *t = mk(P, S_TEXT, k->pos);
            t->lit = v_str(k->s, k->n);
            nlist_push(J, out, t);
        } else if (k->t == T_VAR_BEGIN) {
            node *o = mk(P, S_OUT, k->pos);
            o->a = parse_tuple_expr(P);
            token *e = next(P);
            if (e->t != T_VAR_END) jerr(J, e->pos, "expected '}}', got '%s'", tok_desc(e));
            nlist_push(J, out, o);
        } else if (k->t == T_BLOCK_BEGIN) {
            token *kw = next(P);
            if (kw->t != T_NAME) jerr(J, kw->pos, "expected a statement name after '{%%'");
            if (ends)
                for (int i = 0; ends[i]; i++)
                    if (!strcmp(kw->s, ends[i])) return ends[i];
            enter(P, kw->pos);
            nlist_push(J, out, parse_stmt(P, kw));
            leave(P);
        } else {
            jerr(J, k->pos, "unexpected '%s'", tok_desc(k));
        }
    }
}

// Assignment / loop targets: name, name.attr (set only), or a tuple of names.
static void parse_targets(parser *P, node *s, int allow_attr) {
    for (;;) {
        token *k = next(P);
        if (k->t != T_NAME) jerr(P->J, k->pos, "expected a variable name, got '%s'", tok_desc(k));
        node *t = mk(P, E_NAME, k->pos);
        t->s = k->s;
        if (allow_attr && is_op(peek(P), ".")) {
            next(P);
            node *a = mk(P, E_ATTR, peek(P)->pos);
            a->a = t;
            a->s = expect_name(P);
            t = a;
        }
        nlist_push(P->J, &s->args, t);
        if (!is_op(peek(P), ",")) return;
        next(P);
    }
}

static node *parse_stmt(parser *P, token *kw) {
    jstate *J = P->J;
    const char *w = kw->s;
    if (!strcmp(w, "if")) {
        node *s = mk(P, S_IF, kw->pos);
        nlist_push(J, &s->args, parse_tuple_expr_ex(P, 0));
        expect_body_start(P);
        static const char *const ends[] = {"endif", "elif", "else", NULL};
        for (;;) {
            node *blk = mk(P, S_BLOCK, kw->pos);
            const char *e = parse_body(P, &blk->body, ends, kw->pos, "if");
            nlist_push(J, &s->body, blk);
            if (!strcmp(e, "elif")) {
                nlist_push(J, &s->args, parse_tuple_expr_ex(P, 0));
                expect_body_start(P);
            } else if (!strcmp(e, "else")) {
                expect_body_start(P);
                static const char *const end2[] = {"endif", NULL};
                parse_body(P, &s->orelse, end2, kw->pos, "if");
                expect_block_end(P);
                return s;
            } else {
                expect_block_end(P);
                return s;
            }
        }
    }
    if (!strcmp(w, "for")) {
        node *s = mk(P, S_FOR, kw->pos);
        parse_targets(P, s, 0);
        token *in = next(P);
        if (!is_name(in, "in")) jerr(J, in->pos, "expected 'in' in for loop");
        // the iterable: no conditional expression here (`if` filters the loop)
        node *it = parse_or(P);
        if (is_op(peek(P), ",")) {
            node *t = mk(P, E_TUPLE, it->pos);
            nlist_push(J, &t->args, it);
            while (is_op(peek(P), ",")) { next(P); nlist_push(J, &t->args, parse_or(P)); }
            it = t;
        }
        s->a = it;
        if (is_name(peek(P), "if")) { next(P); s->b = parse_expr(P); }
        // `recursive` is accepted; calling loop(...) is not supported (the loop is not callable)
        if (is_name(peek(P), "recursive")) next(P);
        expect_body_start(P);
        static const char *const ends[] = {"endfor", "else", NULL};
        const char *e = parse_body(P, &s->body, ends, kw->pos, "for");
        if (!strcmp(e, "else")) expect_body_start(P);
        else expect_block_end(P);
        if (!strcmp(e, "else")) {
            static const char *const end2[] = {"endfor", NULL};
            parse_body(P, &s->orelse, end2, kw->pos, "for");
            expect_block_end(P);
        }
        return s;
    }
    if (!strcmp(w, "set")) {
        node *s = mk(P, S_SET, kw->pos);
        parse_targets(P, s, 1);
        if (is_op(peek(P), "=")) {
            next(P);
            s->a = parse_tuple_expr(P);
            expect_block_end(P);
            return s;
        }
        // block set: {% set x %}...{% endset %} (optionally `| filter`)
        if (s->args.n != 1 || s->args.v[0]->kind != E_NAME) jerr(J, kw->pos, "block set needs one name");
        s->kind = S_SETBLOCK;
        if (is_op(peek(P), "|")) jerr(J, peek(P)->pos, "filters on block set are not supported");
        expect_body_start(P);
        static const char *const ends[] = {"endset", NULL};
        parse_body(P, &s->body, ends, kw->pos, "set");
        expect_block_end(P);
        return s;
    }
    if (!strcmp(w, "macro")) {
        node *s = mk(P, S_MACRO, kw->pos);
        s->s = expect_name(P);
        expect_op(P, "(");
        int nk = 0;
        while (!is_op(peek(P), ")")) {
            token *k = next(P);
            if (k->t != T_NAME) jerr(J, k->pos, "expected a parameter name");
            node *p = mk(P, E_NAME, k->pos);
            p->s = k->s;
            nlist_push(J, &s->args, p);
            node *def = NULL;
            if (is_op(peek(P), "=")) { next(P); def = parse_expr(P); nk++; }
            else if (nk) jerr(J, k->pos, "parameter without default after one with a default");
            nlist_push(J, &s->kwargs, def);
            if (!is_op(peek(P), ",")) break;
            next(P);
        }
        expect_op(P, ")");
        expect_body_start(P);
        static const char *const ends[] = {"endmacro", NULL};
        parse_body(P, &s->body, ends, kw->pos, "macro");
        expect_block_end(P);
        return s;
    }
    if (!strcmp(w, "break") || !strcmp(w, "continue")) {
        node *s = mk(P, w[0] == 'b' ? S_BREAK : S_CONTINUE, kw->pos);
        expect_block_end(P);
        return s;
    }
    if (!strcmp(w, "generation")) {   // transformers' assistant-mask tag: renders its body
        node *s = mk(P, S_BLOCK, kw->pos);
        expect_body_start(P);
        static const char *const ends[] = {"endgeneration", NULL};
        parse_body(P, &s->body, ends, kw->pos, "generation");
        expect_block_end(P);
        return s;
    }
    static const char *const closers[] = {"endif", "elif", "else", "endfor", "endset", "endmacro",
                                          "endgeneration", "endraw", NULL};
    for (int i = 0; closers[i]; i++)
        if (!strcmp(w, closers[i])) jerr(J, kw->pos, "unexpected '{%% %s %%}' with no open block", w);
    if (!strcmp(w, "do")) jerr(J, kw->pos, "'do' statements are not enabled in chat templates");
    jerr(J, kw->pos, "unsupported statement '%s'", w);
}

// jinja2 rejects unknown filters and tests when compiling, except inside an
// if statement or a conditional expression (a "soft frame"); a for-loop or
// macro body is a hard frame again, the loop's iterable is not.
static void check_names(jstate *J, const node *e, int soft);

static void check_list(jstate *J, const nlist *l, int soft) {
    for (int i = 0; i < l->n; i++)
        if (l->v[i]) check_names(J, l->v[i], soft);
}

static void check_names(jstate *J, const node *e, int soft) {
    if (!e) return;
    if (e->kind == E_FILTER && !soft && !jinja_builtin_known(e->s, 1)) jerr(J, e->pos, "unknown filter '%s'", e->s);
    if (e->kind == E_TEST && !soft && !jinja_builtin_known(e->s, 0)) jerr(J, e->pos, "unknown test '%s'", e->s);
    switch (e->kind) {
    case E_COND: soft = 1; break;
    case S_IF: check_list(J, &e->args, 1); check_list(J, &e->body, 1); check_list(J, &e->orelse, 1); return;
    case S_FOR:
        check_list(J, &e->args, soft);
        check_names(J, e->a, soft);
        check_names(J, e->b, 0);
        check_list(J, &e->body, 0);
        check_list(J, &e->orelse, 0);
        return;
    case S_MACRO: check_list(J, &e->kwargs, soft); check_list(J, &e->body, 0); return;
    default: break;
    }
    check_names(J, e->a, soft);
    check_names(J, e->b, soft);
    check_names(J, e->c, soft);
    check_names(J, e->d, soft);
    check_list(J, &e->args, soft);
    check_list(J, &e->kwargs, soft);
    check_list(J, &e->body, soft);
    check_list(J, &e->orelse, soft);
}

nlist jparse(jstate *J) {
    parser P = {.J = J};
    lex(&P);
    nlist top = {0};
    parse_body(&P, &top, NULL, 0, NULL);
    check_list(J, &top, 0);
    return top;
}
