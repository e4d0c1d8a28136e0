// Jinja values: the render arena, constructors, truth and equality, str(),
// repr() and json.dumps() as Python writes them, and conversion from cJSON.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "inference/jinja_impl.h"

// ============================================================================
// arena and errors
// ============================================================================

struct jblock { jblock *next; size_t used, cap; _Alignas(16) char data[]; };

void *jalloc(jstate *J, size_t n) {
    n = (n + 15) & ~(size_t)15;
    jblock *b = J->arena.head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (n > J_MAX_ARENA || J->arena.total + cap > J_MAX_ARENA)
            jerr(J, -1, "template used more than %u MiB of memory", J_MAX_ARENA >> 20);
        b = malloc(sizeof *b + cap);
        if (!b) jerr(J, -1, "out of memory");
        b->next = J->arena.head;
        b->used = 0;
        b->cap = cap;
        J->arena.head = b;
        J->arena.total += cap;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

void jarena_free(jarena *a) {
    for (jblock *b = a->head; b;) {
        jblock *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}

char *jstrdup(jstate *J, const char *p, size_t n) {
    char *s = jalloc(J, n + 1);
    if (n) memcpy(s, p, n);
    s[n] = 0;
    return s;
}

void jerr(jstate *J, int pos, const char *fmt, ...) {
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (pos >= 0) {
        int line, col;
        pos_linecol(J, pos, &line, &col);
        snprintf(J->msg, sizeof J->msg, "%s (at line %d, column %d)", m, line, col);
    } else {
        snprintf(J->msg, sizeof J->msg, "%s", m);
    }
    if (!J->status) J->status = INFER_ERR_UNSUPPORTED;
    longjmp(J->fail, 1);
}

void jraise(jstate *J, int pos, const char *msg, size_t n) {
    J->status = INFER_ERR_ARG;
    jerr(J, -1, "raise_exception: %.*s", (int)(n > 400 ? 400 : n), msg);
}

// ============================================================================
// constructors and containers
// ============================================================================

value v_undef(const char *name) { value v = {.t = V_UNDEF}; v.name = name; return v; }
value v_none(void) { return (value){.t = V_NONE}; }
value v_bool(int b) { return (value){.t = V_BOOL, .b = !!b}; }
value v_int(int64_t i) { return (value){.t = V_INT, .i = i}; }
value v_float(double f) { return (value){.t = V_FLOAT, .f = f}; }
value v_str(const char *p, size_t n) { value v = {.t = V_STR}; v.s.p = p; v.s.n = n; return v; }
value v_cstr(const char *p) { return v_str(p, strlen(p)); }
value v_list(jstate *J) { value v = {.t = V_LIST}; v.l = jalloc(J, sizeof *v.l); return v; }
value v_dict(jstate *J) { value v = {.t = V_DICT}; v.d = jalloc(J, sizeof *v.d); return v; }

void list_push(jstate *J, jlist *l, value v) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        value *nv = jalloc(J, (size_t)cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

value *dict_get(const jdict *d, const char *k, size_t n) {
    for (int i = 0; i < d->n; i++)
        if (d->k[i].t == V_STR && d->k[i].s.n == n && memcmp(d->k[i].s.p, k, n) == 0)
            return &d->v[i];
    return NULL;
}

value *dict_getv(const jdict *d, value k) {
    if (k.t == V_STR) return dict_get(d, k.s.p, k.s.n);
    for (int i = 0; i < d->n; i++)
        if (v_equal(d->k[i], k)) return &d->v[i];
    return NULL;
}

void dict_set(jstate *J, jdict *d, value k, value v) {
    value *slot = dict_getv(d, k);
    if (slot) { *slot = v; return; }
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 4;
        value *nk = jalloc(J, (size_t)cap * sizeof *nk), *nv = jalloc(J, (size_t)cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, (size_t)d->n * sizeof *nk);
            memcpy(nv, d->v, (size_t)d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

void dict_setc(jstate *J, jdict *d, const char *k, value v) { dict_set(J, d, v_cstr(k), v); }

// ============================================================================
// truth, equality, ordering (Python semantics)
// ============================================================================

int v_truthy(value v) {
    switch (v.t) {
    case V_UNDEF: case V_NONE: return 0;
    case V_BOOL: return v.b;
    case V_INT: return v.i != 0;
    case V_FLOAT: return v.f != 0;
    case V_STR: return v.s.n != 0;
    case V_LIST: return v.l->n != 0;
    case V_DICT: return v.d->is_ns || v.d->n != 0;
    default: return 1;
    }
}

static int is_num(value v) { return v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL; }
static double num(value v) { return v.t == V_FLOAT ? v.f : v.t == V_INT ? (double)v.i : v.b; }

static int equal_at(value a, value b, int depth);

int v_equal(value a, value b) { return equal_at(a, b, 0); }

// Values nested deeper than J_MAX_DEPTH compare unequal rather than recurse on.
static int equal_at(value a, value b, int depth) {
    if (depth > J_MAX_DEPTH) return 0;
    if (is_num(a) && is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT)
            return (a.t == V_INT ? a.i : a.b) == (b.t == V_INT ? b.i : b.b);
        return num(a) == num(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR: return a.s.n == b.s.n && memcmp(a.s.p, b.s.p, a.s.n) == 0;
    case V_LIST:
        if (a.l->n != b.l->n) return 0;
        for (int i = 0; i < a.l->n; i++)
            if (!equal_at(a.l->v[i], b.l->v[i], depth + 1)) return 0;
        return 1;
    case V_DICT:
        if (a.d == b.d) return 1;
        if (a.d->n != b.d->n || a.d->is_ns || b.d->is_ns) return 0;
        for (int i = 0; i < a.d->n; i++) {
            value *o = dict_getv(b.d, a.d->k[i]);
            if (!o || !equal_at(a.d->v[i], *o, depth + 1)) return 0;
        }
        return 1;
    case V_MACRO: return a.m == b.m;
    case V_FUNC: return a.fn == b.fn;
    case V_LOOP: return a.lp == b.lp;
    default: return 0;
    }
}

static int compare_at(jstate *J, int pos, value a, value b, int depth);

int v_compare(jstate *J, int pos, value a, value b) { return compare_at(J, pos, a, b, 0); }

static int compare_at(jstate *J, int pos, value a, value b, int depth) {
    if (depth > J_MAX_DEPTH) jerr(J, pos, "values nested too deeply to compare");
    if (is_num(a) && is_num(b)) {
        if (a.t == V_INT && b.t == V_INT) return (a.i > b.i) - (a.i < b.i);
        double x = num(a), y = num(b);
        return (x > y) - (x < y);
    }
    if (a.t == V_STR && b.t == V_STR) {
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        int c = n ? memcmp(a.s.p, b.s.p, n) : 0;   // UTF-8 byte order is code point order
        if (c) return c;
        return (a.s.n > b.s.n) - (a.s.n < b.s.n);
    }
    if (a.t == V_LIST && b.t == V_LIST) {
        for (int i = 0; i < a.l->n && i < b.l->n; i++) {
            if (v_equal(a.l->v[i], b.l->v[i])) continue;
            return compare_at(J, pos, a.l->v[i], b.l->v[i], depth + 1);
        }
        return (a.l->n > b.l->n) - (a.l->n < b.l->n);
    }
    jerr(J, pos, "cannot compare %s with %s", v_typename(a), v_typename(b));
}

const char *v_typename(value v) {
    switch (v.t) {
    case V_UNDEF: return "undefined";
    case V_NONE: return "NoneType";
    case V_BOOL: return "bool";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_STR: return "str";
    case V_LIST: return "list";
    case V_DICT: return v.d->is_ns ? "Namespace" : "dict";
    case V_MACRO: return "macro";
    case V_FUNC: return "function";
    case V_LOOP: return "LoopContext";
    }
    return "?";
}

// ============================================================================
// text buffers and formatting
// ============================================================================

void buf_put(jstate *J, jbuf *b, const char *p, size_t n) {
    if (!n) return;
    if (b->n + n + 1 > b->cap) {
        if (b->n + n > J_MAX_OUTPUT)
            jerr(J, -1, "template output exceeds %u MiB", J_MAX_OUTPUT >> 20);
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = jalloc(J, cap);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

void buf_putc(jstate *J, jbuf *b, char c) { buf_put(J, b, &c, 1); }

static void buf_puts(jstate *J, jbuf *b, const char *s) { buf_put(J, b, s, strlen(s)); }

// Python's repr(float): the shortest string that reads back to the same
// double, fixed notation for 1e-4 <= |x| < 1e16, else d.ddde+XX.
static void fmt_float(double x, char *out, size_t cap) {
    if (isnan(x)) { snprintf(out, cap, "nan"); return; }
    if (isinf(x)) { snprintf(out, cap, x < 0 ? "-inf" : "inf"); return; }
    char e[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    // e = [-]d[.ddd]e[+-]XX
    const char *s = e;
    int neg = 0;
    if (*s == '-') { neg = 1; s++; }
    char digits[24];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    int exp = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    size_t left = cap;
#define EMIT(...) do { int k_ = snprintf(o, left, __VA_ARGS__); o += k_; left -= (size_t)k_; } while (0)
    if (neg) EMIT("-");
    if (exp >= -5 + 1 && exp < 16) {
        if (exp < 0) {
            EMIT("0.");
            for (int i = 0; i < -exp - 1; i++) EMIT("0");
            EMIT("%.*s", nd, digits);
        } else {
            for (int i = 0; i <= exp; i++) EMIT("%c", i < nd ? digits[i] : '0');
            EMIT(".");
            if (nd > exp + 1) EMIT("%.*s", nd - exp - 1, digits + exp + 1);
            else EMIT("0");
        }
    } else {
        EMIT("%c", digits[0]);
        if (nd > 1) EMIT(".%.*s", nd - 1, digits + 1);
        EMIT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
#undef EMIT
}

void v_write_str(jstate *J, jbuf *b, value v) {
    char t[64];
    switch (v.t) {
    case V_UNDEF: return;
    case V_NONE: buf_puts(J, b, "None"); return;
    case V_BOOL: buf_puts(J, b, v.b ? "True" : "False"); return;
    case V_INT: snprintf(t, sizeof t, "%lld", (long long)v.i); buf_puts(J, b, t); return;
    case V_FLOAT: fmt_float(v.f, t, sizeof t); buf_puts(J, b, t); return;
    case V_STR: buf_put(J, b, v.s.p, v.s.n); return;
    default: v_write_repr(J, b, v); return;
    }
}

static void write_str_repr(jstate *J, jbuf *b, const char *p, size_t n) {
    int has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    buf_putc(J, b, q);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        char t[8];
        if (c == '\\' || c == (unsigned char)q) { buf_putc(J, b, '\\'); buf_putc(J, b, (char)c); }
        else if (c == '\n') buf_puts(J, b, "\\n");
        else if (c == '\r') buf_puts(J, b, "\\r");
        else if (c == '\t') buf_puts(J, b, "\\t");
        else if (c < 0x20 || c == 0x7f) { snprintf(t, sizeof t, "\\x%02x", c); buf_puts(J, b, t); }
        else buf_putc(J, b, (char)c);
    }
    buf_putc(J, b, q);
}

static void repr_at(jstate *J, jbuf *b, value v, int depth);

void v_write_repr(jstate *J, jbuf *b, value v) { repr_at(J, b, v, 0); }

static void repr_at(jstate *J, jbuf *b, value v, int depth) {
    if (depth > J_MAX_DEPTH) jerr(J, -1, "value nested too deeply to print");
    switch (v.t) {
    case V_STR: write_str_repr(J, b, v.s.p, v.s.n); return;
    case V_LIST:
        buf_putc(J, b, v.l->is_tuple ? '(' : '[');
        for (int i = 0; i < v.l->n; i++) {
            if (i) buf_puts(J, b, ", ");
            repr_at(J, b, v.l->v[i], depth + 1);
        }
        if (v.l->is_tuple && v.l->n == 1) buf_putc(J, b, ',');
        buf_putc(J, b, v.l->is_tuple ? ')' : ']');
        return;
    case V_DICT:
        if (v.d->is_ns) buf_puts(J, b, "<Namespace ");
        buf_putc(J, b, '{');
        for (int i = 0; i < v.d->n; i++) {
            if (i) buf_puts(J, b, ", ");
            repr_at(J, b, v.d->k[i], depth + 1);
            buf_puts(J, b, ": ");
            repr_at(J, b, v.d->v[i], depth + 1);
        }
        buf_putc(J, b, '}');
        if (v.d->is_ns) buf_putc(J, b, '>');
        return;
    case V_UNDEF: buf_puts(J, b, "Undefined"); return;
    case V_MACRO: buf_puts(J, b, "<Macro>"); return;
    case V_FUNC: buf_puts(J, b, "<function>"); return;
    case V_LOOP: buf_puts(J, b, "<LoopContext>"); return;
    default: v_write_str(J, b, v); return;
    }
}

value v_tostr(jstate *J, value v) {
    if (v.t == V_STR) return v;
    jbuf b = {0};
    v_write_str(J, &b, v);
    return v_str(b.p ? b.p : "", b.n);
}

// json.dumps(v, ensure_ascii, indent, separators, sort_keys)
static void write_json_str(jstate *J, jbuf *b, const char *p, size_t n, int ensure_ascii) {
    buf_putc(J, b, '"');
    char t[16];
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        switch (c) {
        case '"': buf_puts(J, b, "\\\""); continue;
        case '\\': buf_puts(J, b, "\\\\"); continue;
        case '\n': buf_puts(J, b, "\\n"); continue;
        case '\r': buf_puts(J, b, "\\r"); continue;
        case '\t': buf_puts(J, b, "\\t"); continue;
        case '\b': buf_puts(J, b, "\\b"); continue;
        case '\f': buf_puts(J, b, "\\f"); continue;
        }
        if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            snprintf(t, sizeof t, "\\u%04x", c);
            buf_puts(J, b, t);
        } else if (c >= 0x80 && ensure_ascii) {
            // decode one UTF-8 sequence; write \uXXXX (surrogate pairs above U+FFFF)
            unsigned cp = c;
            int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
            cp &= extra == 3 ? 0x07 : extra == 2 ? 0x0f : 0x1f;
            for (int k = 0; k < extra && i + 1 < n; k++) cp = (cp << 6) | ((unsigned char)p[++i] & 0x3f);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(t, sizeof t, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else {
                snprintf(t, sizeof t, "\\u%04x", cp);
            }
            buf_puts(J, b, t);
        } else {
            buf_putc(J, b, (char)c);
        }
    }
    buf_putc(J, b, '"');
}

static void json_newline(jstate *J, jbuf *b, int indent, int level) {
    buf_putc(J, b, '\n');
    for (int i = 0; i < indent * level; i++) buf_putc(J, b, ' ');
}

void v_write_json(jstate *J, jbuf *b, value v, int pos, int indent, const char *isep,
                  const char *ksep, int sort_keys, int ensure_ascii, int level) {
    char t[64];
    if (level > J_MAX_DEPTH) jerr(J, pos, "tojson: value nested too deeply");
    switch (v.t) {
    case V_NONE: buf_puts(J, b, "null"); return;
    case V_BOOL: buf_puts(J, b, v.b ? "true" : "false"); return;
    case V_INT: snprintf(t, sizeof t, "%lld", (long long)v.i); buf_puts(J, b, t); return;
    case V_FLOAT:
        if (isnan(v.f)) buf_puts(J, b, "NaN");
        else if (isinf(v.f)) buf_puts(J, b, v.f < 0 ? "-Infinity" : "Infinity");
        else { fmt_float(v.f, t, sizeof t); buf_puts(J, b, t); }
        return;
    case V_STR: write_json_str(J, b, v.s.p, v.s.n, ensure_ascii); return;
    case V_LIST:
        if (!v.l->n) { buf_puts(J, b, "[]"); return; }
        buf_putc(J, b, '[');
        for (int i = 0; i < v.l->n; i++) {
            if (i) buf_puts(J, b, isep);
            if (indent >= 0) json_newline(J, b, indent, level + 1);
            v_write_json(J, b, v.l->v[i], pos, indent, isep, ksep, sort_keys, ensure_ascii, level + 1);
        }
        if (indent >= 0) json_newline(J, b, indent, level);
        buf_putc(J, b, ']');
        return;
    case V_DICT: {
        if (!v.d->n) { buf_puts(J, b, "{}"); return; }
        int n = v.d->n;
        int *ord = jalloc(J, (size_t)n * sizeof *ord);
        for (int i = 0; i < n; i++) ord[i] = i;
        if (sort_keys)   // insertion sort: dicts in templates are small
            for (int i = 1; i < n; i++)
                for (int k = i; k > 0 && v_compare(J, pos, v.d->k[ord[k - 1]], v.d->k[ord[k]]) > 0; k--) {
                    int x = ord[k]; ord[k] = ord[k - 1]; ord[k - 1] = x;
                }
        buf_putc(J, b, '{');
        for (int i = 0; i < n; i++) {
            value k = v.d->k[ord[i]];
            if (i) buf_puts(J, b, isep);
            if (indent >= 0) json_newline(J, b, indent, level + 1);
            if (k.t == V_STR) write_json_str(J, b, k.s.p, k.s.n, ensure_ascii);
            else if (k.t == V_INT || k.t == V_FLOAT || k.t == V_BOOL || k.t == V_NONE) {
                jbuf kb = {0};
                v_write_json(J, &kb, k, pos, -1, isep, ksep, 0, ensure_ascii, level);
                write_json_str(J, b, kb.p, kb.n, ensure_ascii);
            } else jerr(J, pos, "tojson: keys must be str, int, float, bool or None");
            buf_puts(J, b, ksep);
            v_write_json(J, b, v.d->v[ord[i]], pos, indent, isep, ksep, sort_keys, ensure_ascii, level + 1);
        }
        if (indent >= 0) json_newline(J, b, indent, level);
        buf_putc(J, b, '}');
        return;
    }
    default:
        jerr(J, pos, "tojson: object of type %s is not JSON serializable", v_typename(v));
    }
}

// JSON numbers become int when they are integral and fit (cJSON keeps no
// lexical form, so 1.0 in the input reads as the int 1).
value v_from_json(jstate *J, const cJSON *j) {
    if (!j || cJSON_IsNull(j)) return v_none();
    if (cJSON_IsBool(j)) return v_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return v_int((int64_t)d);
        return v_float(d);
    }
    if (cJSON_IsString(j)) return v_cstr(j->valuestring ? j->valuestring : "");
    if (cJSON_IsArray(j)) {
        value l = v_list(J);
        for (const cJSON *c = j->child; c; c = c->next) list_push(J, l.l, v_from_json(J, c));
        return l;
    }
    if (cJSON_IsObject(j)) {
        value d = v_dict(J);
        for (const cJSON *c = j->child; c; c = c->next)
            dict_set(J, d.d, v_cstr(c->string ? c->string : ""), v_from_json(J, c));
        return d;
    }
    return v_none();
}

// ============================================================================
// UTF-8
// ============================================================================

size_t u8_len(const char *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)p[i] & 0xc0) != 0x80;
    return c;
}

size_t u8_offset(const char *p, size_t n, size_t i) {
    size_t c = 0;
    for (size_t k = 0; k < n; k++) {
        if (((unsigned char)p[k] & 0xc0) != 0x80) {
            if (c == i) return k;
            c++;
        }
    }
    return n;
}

// Python's str.isspace() code points.
int u8_isspace_at(const char *p, size_t n, size_t *len) {
    unsigned char c = (unsigned char)p[0];
    *len = 1;
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c < 0x80) return 0;
    unsigned cp;
    int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
    if ((size_t)extra >= n) return 0;
    cp = c & (extra == 3 ? 0x07 : extra == 2 ? 0x0f : 0x1f);
    for (int k = 1; k <= extra; k++) cp = (cp << 6) | ((unsigned char)p[k] & 0x3f);
    *len = (size_t)extra + 1;
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}
