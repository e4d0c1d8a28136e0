// Jinja lexer: template source -> tokens (the text between tags, and each
// tag's names, literals and operators), with positions for the messages.
// Whitespace control follows jinja2's lexer with trim_blocks and
// lstrip_blocks on; {# comments #} are dropped and {% raw %} bodies become
// text here. jinja_parse.c reads the tokens (jlex, the types in
// jinja_impl.h).
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "inference/jinja_impl.h"

void pos_linecol(const jstate *J, int pos, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (int i = 0; i < pos && (size_t)i < J->src_n; i++) {
        if (J->src[i] == '\n') { (*line)++; *col = 1; }
        else (*col)++;
    }
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

void jlex(parser *P) {
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
