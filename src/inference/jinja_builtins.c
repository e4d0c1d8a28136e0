// Jinja builtins: filters, tests, methods of str/dict/list, and the global
// functions chat templates call (range, namespace, dict, raise_exception,
// strftime_now).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inference/jinja_impl.h"

// Every filter and test jinja2 3.1 defines (its sandbox, plus transformers'
// tojson). Names outside these are compile-time errors where jinja2 makes
// them so; names inside that we lack fail when evaluated.
int jinja_builtin_known(const char *name, int is_filter) {
    static const char *const filters[] = {
        "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
        "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
        "last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
        "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags",
        "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount",
        "wordwrap", "xmlattr", NULL};
    static const char *const tests[] = {
        "!=", "<", "<=", "==", ">", ">=", "boolean", "callable", "defined", "divisibleby", "eq", "equalto",
        "escaped", "even", "false", "filter", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable",
        "le", "lessthan", "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence",
        "string", "test", "true", "undefined", "upper", NULL};
    for (const char *const *p = is_filter ? filters : tests; *p; p++)
        if (!strcmp(*p, name)) return 1;
    return 0;
}

value html_escape(jstate *J, value s) {
    if (s.safe) return s;
    jbuf b = {0};
    for (size_t i = 0; i < s.s.n; i++) {
        char c = s.s.p[i];
        const char *r = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;"
                      : c == '\'' ? "&#39;" : NULL;
        if (r) buf_put(J, &b, r, strlen(r));
        else buf_putc(J, &b, c);
    }
    value r = v_str(b.p ? b.p : "", b.n);
    r.safe = 1;
    return r;
}

// str.format: {} {0} {name} fields and {{ }} escapes; format specs are not supported.
static value str_format(jstate *J, int pos, value fmt, value *args, int nargs, const char **kwn, value *kwv, int nkw) {
    jbuf b = {0};
    int auto_i = 0;
    for (size_t i = 0; i < fmt.s.n; i++) {
        char c = fmt.s.p[i];
        if ((c == '{' || c == '}') && i + 1 < fmt.s.n && fmt.s.p[i + 1] == c) { buf_putc(J, &b, c); i++; continue; }
        if (c == '}') jerr(J, pos, "str.format(): single '}' in format string");
        if (c != '{') { buf_putc(J, &b, c); continue; }
        const char *end = memchr(fmt.s.p + i, '}', fmt.s.n - i);
        if (!end) jerr(J, pos, "str.format(): single '{' in format string");
        const char *f = fmt.s.p + i + 1;
        size_t L = (size_t)(end - f);
        if (memchr(f, ':', L) || memchr(f, '!', L) || memchr(f, '[', L) || memchr(f, '.', L))
            jerr(J, pos, "str.format(): format specs and field lookups are not supported");
        value v;
        if (L == 0) {
            if (auto_i >= nargs) jerr(J, pos, "str.format(): not enough arguments");
            v = args[auto_i++];
        } else if (f[0] >= '0' && f[0] <= '9') {
            int k = atoi(jstrdup(J, f, L));
            if (k >= nargs) jerr(J, pos, "str.format(): argument index %d out of range", k);
            v = args[k];
        } else {
            int k;
            for (k = 0; k < nkw; k++)
                if (strlen(kwn[k]) == L && !memcmp(kwn[k], f, L)) break;
            if (k == nkw) jerr(J, pos, "str.format(): no argument named '%.*s'", (int)L, f);
            v = kwv[k];
        }
        v_write_str(J, &b, v);
        i = (size_t)(end - fmt.s.p);
    }
    return v_str(b.p ? b.p : "", b.n);
}

// ============================================================================
// argument helpers
// ============================================================================

typedef struct {
    jstate *J;
    int pos;
    const char *what;       // "filter 'join'" for messages
    value *args;
    int nargs;
    const char **kwn;
    value *kwv;
    int nkw;
} argv_t;

// Argument `i` by position or by keyword `name`; `def` when absent.
static value arg(const argv_t *a, int i, const char *name, value def) {
    if (i >= 0 && i < a->nargs) return a->args[i];
    for (int k = 0; k < a->nkw; k++)
        if (name && !strcmp(a->kwn[k], name)) return a->kwv[k];
    return def;
}

static int has_arg(const argv_t *a, int i, const char *name) {
    if (i >= 0 && i < a->nargs) return 1;
    for (int k = 0; k < a->nkw; k++)
        if (name && !strcmp(a->kwn[k], name)) return 1;
    return 0;
}

static value want_str(const argv_t *a, value v, const char *name) {
    if (v.t != V_STR) jerr(a->J, a->pos, "%s: %s must be a string, not %s", a->what, name, v_typename(v));
    return v;
}

static int64_t want_int(const argv_t *a, value v, const char *name) {
    if (v.t == V_INT) return v.i;
    if (v.t == V_BOOL) return v.b;
    jerr(a->J, a->pos, "%s: %s must be an integer, not %s", a->what, name, v_typename(v));
}

static value str_of(jstate *J, const char *p, size_t n) { return v_str(jstrdup(J, p, n), n); }

// ============================================================================
// string helpers (Python str semantics on UTF-8)
// ============================================================================

static int in_chars(const char *p, size_t len, value chars) {
    // is the code point at p (len bytes) one of `chars`?
    for (size_t i = 0; i < chars.s.n;) {
        size_t k = i + 1;
        while (k < chars.s.n && ((unsigned char)chars.s.p[k] & 0xc0) == 0x80) k++;
        if (k - i == len && memcmp(chars.s.p + i, p, len) == 0) return 1;
        i = k;
    }
    return 0;
}

static size_t cp_len_at(const char *p, size_t n) {
    size_t k = 1;
    while (k < n && ((unsigned char)p[k] & 0xc0) == 0x80) k++;
    return k;
}

// start of the code point that ends at p[end-1]
static size_t cp_start_before(const char *p, size_t end) {
    size_t k = end - 1;
    while (k > 0 && ((unsigned char)p[k] & 0xc0) == 0x80) k--;
    return k;
}

// strip(chars): left/right; chars NONE means whitespace
static value do_strip(value s, value chars, int left, int right) {
    const char *p = s.s.p;
    size_t a = 0, b = s.s.n, L;
    if (left)
        while (a < b) {
            if (chars.t == V_STR) { L = cp_len_at(p + a, b - a); if (!in_chars(p + a, L, chars)) break; }
            else if (!u8_isspace_at(p + a, b - a, &L)) break;
            a += L;
        }
    if (right)
        while (b > a) {
            size_t st = cp_start_before(p, b);
            if (st < a) st = a;
            if (chars.t == V_STR) { if (!in_chars(p + st, b - st, chars)) break; }
            else if (!u8_isspace_at(p + st, b - st, &L) || L != b - st) break;
            b = st;
        }
    return v_str(p + a, b - a);
}

static char up(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 32) : c; }
static char lo(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// ASCII case mapping; other code points are left as they are.
static value map_case(jstate *J, value s, int mode) {
    char *o = jalloc(J, s.s.n + 1);
    int prev_alpha = 0;
    for (size_t i = 0; i < s.s.n; i++) {
        char c = s.s.p[i];
        switch (mode) {
        case 0: o[i] = up(c); break;
        case 1: o[i] = lo(c); break;
        case 2: o[i] = i == 0 ? up(c) : lo(c); break;                 // capitalize
        case 3: o[i] = prev_alpha ? lo(c) : up(c); break;              // str.title
        }
        prev_alpha = is_alpha(c) || (unsigned char)c >= 0x80;
    }
    return v_str(o, s.s.n);
}

// jinja's |title: words start after whitespace, '-', '(', '{', '[', '<'
static value jinja_title(jstate *J, value s) {
    char *o = jalloc(J, s.s.n + 1);
    int start = 1;
    for (size_t i = 0; i < s.s.n; i++) {
        char c = s.s.p[i];
        int sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
                  c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        o[i] = sep ? c : start ? up(c) : lo(c);
        start = sep;
    }
    return v_str(o, s.s.n);
}

static value do_replace(jstate *J, value s, value old, value new, int64_t count) {
    jbuf b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old.s.n == 0) {
        // Python inserts `new` between every code point and at both ends
        for (;;) {
            if (count >= 0 && done >= count) break;
            buf_put(J, &b, new.s.p, new.s.n);
            done++;
            if (i >= s.s.n) break;
            size_t L = cp_len_at(s.s.p + i, s.s.n - i);
            buf_put(J, &b, s.s.p + i, L);
            i += L;
        }
        buf_put(J, &b, s.s.p + i, s.s.n - i);
        return v_str(b.p ? b.p : "", b.n);
    }
    while (i < s.s.n) {
        const char *f = (count < 0 || done < count) && s.s.n - i >= old.s.n
                            ? memmem(s.s.p + i, s.s.n - i, old.s.p, old.s.n) : NULL;
        if (!f) break;
        size_t at = (size_t)(f - s.s.p);
        buf_put(J, &b, s.s.p + i, at - i);
        buf_put(J, &b, new.s.p, new.s.n);
        i = at + old.s.n;
        done++;
    }
    buf_put(J, &b, s.s.p + i, s.s.n - i);
    return v_str(b.p ? b.p : "", b.n);
}

static value do_split(jstate *J, value s, value sep, int64_t maxsplit) {
    value r = v_list(J);
    const char *p = s.s.p;
    size_t n = s.s.n, i = 0, L;
    if (sep.t != V_STR) {   // split on runs of whitespace
        int64_t splits = 0;
        for (;;) {
            while (i < n && u8_isspace_at(p + i, n - i, &L)) i += L;
            if (i >= n) break;
            if (maxsplit >= 0 && splits >= maxsplit) {
                size_t e = n;   // rest of the string, right-stripped
                value rest = do_strip(v_str(p + i, e - i), v_none(), 0, 1);
                list_push(J, r.l, rest);
                break;
            }
            size_t st = i;
            while (i < n && !u8_isspace_at(p + i, n - i, &L)) i += L;
            list_push(J, r.l, v_str(p + st, i - st));
            splits++;
        }
        return r;
    }
    if (!sep.s.n) jerr(J, -1, "split: empty separator");
    int64_t splits = 0;
    for (;;) {
        const char *f = (maxsplit < 0 || splits < maxsplit) && n - i >= sep.s.n
                            ? memmem(p + i, n - i, sep.s.p, sep.s.n) : NULL;
        if (!f) { list_push(J, r.l, v_str(p + i, n - i)); break; }
        size_t at = (size_t)(f - p);
        list_push(J, r.l, v_str(p + i, at - i));
        i = at + sep.s.n;
        splits++;
    }
    return r;
}

static int starts_or_ends(value s, value x, int ends) {
    if (x.s.n > s.s.n) return 0;
    return memcmp(ends ? s.s.p + s.s.n - x.s.n : s.s.p, x.s.p, x.s.n) == 0;
}

// ============================================================================
// methods: "abc".strip(), d.items(), ...
// ============================================================================

value call_method(jstate *J, int pos, value obj, const char *name, value *args, int nargs,
                  const char **kwn, value *kwv, int nkw) {
    char what[96];
    snprintf(what, sizeof what, "%s.%s()", v_typename(obj), name);
    argv_t a = {J, pos, what, args, nargs, kwn, kwv, nkw};
    if (obj.t == V_STR) {
        if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
            value chars = arg(&a, 0, "chars", v_none());
            if (chars.t != V_NONE) want_str(&a, chars, "chars");
            return do_strip(obj, chars, name[0] != 'r', name[0] != 'l');
        }
        if (!strcmp(name, "format")) return str_format(J, pos, obj, args, nargs, kwn, kwv, nkw);
        if (!strcmp(name, "upper")) return map_case(J, obj, 0);
        if (!strcmp(name, "lower")) return map_case(J, obj, 1);
        if (!strcmp(name, "capitalize")) return map_case(J, obj, 2);
        if (!strcmp(name, "title")) return map_case(J, obj, 3);
        if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
            value x = arg(&a, 0, "prefix", v_undef(NULL));
            int ends = name[0] == 'e';
            if (x.t == V_LIST) {
                for (int i = 0; i < x.l->n; i++)
                    if (starts_or_ends(obj, want_str(&a, x.l->v[i], "prefix"), ends)) return v_bool(1);
                return v_bool(0);
            }
            return v_bool(starts_or_ends(obj, want_str(&a, x, "prefix"), ends));
        }
        if (!strcmp(name, "replace")) {
            value o = want_str(&a, arg(&a, 0, "old", v_undef(NULL)), "old");
            value nw = want_str(&a, arg(&a, 1, "new", v_undef(NULL)), "new");
            int64_t count = has_arg(&a, 2, "count") ? want_int(&a, arg(&a, 2, "count", v_none()), "count") : -1;
            return do_replace(J, obj, o, nw, count);
        }
        if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
            value sep = arg(&a, 0, "sep", v_none());
            if (sep.t != V_NONE) want_str(&a, sep, "sep");
            int64_t maxsplit = has_arg(&a, 1, "maxsplit") ? want_int(&a, arg(&a, 1, "maxsplit", v_none()), "maxsplit") : -1;
            if (name[0] == 'r' && maxsplit >= 0) jerr(J, pos, "rsplit with maxsplit is not supported");
            return do_split(J, obj, sep, maxsplit);
        }
        if (!strcmp(name, "splitlines")) {
            value r = v_list(J);
            size_t i = 0;
            while (i < obj.s.n) {
                const char *nl = memchr(obj.s.p + i, '\n', obj.s.n - i);
                size_t e = nl ? (size_t)(nl - obj.s.p) : obj.s.n;
                size_t e2 = e > i && obj.s.p[e - 1] == '\r' ? e - 1 : e;
                list_push(J, r.l, v_str(obj.s.p + i, e2 - i));
                i = nl ? e + 1 : obj.s.n;
            }
            return r;
        }
        if (!strcmp(name, "join")) {
            value items = v_iterate(J, pos, arg(&a, 0, "iterable", v_undef(NULL)));
            jbuf b = {0};
            for (int i = 0; i < items.l->n; i++) {
                if (i) buf_put(J, &b, obj.s.p, obj.s.n);
                buf_put(J, &b, want_str(&a, items.l->v[i], "item").s.p, items.l->v[i].s.n);
            }
            return v_str(b.p ? b.p : "", b.n);
        }
        if (!strcmp(name, "find") || !strcmp(name, "count") || !strcmp(name, "rfind") || !strcmp(name, "index")) {
            value x = want_str(&a, arg(&a, 0, "sub", v_undef(NULL)), "sub");
            if (!strcmp(name, "count")) {
                if (!x.s.n) return v_int((int64_t)u8_len(obj.s.p, obj.s.n) + 1);
                int64_t c = 0;
                for (size_t i = 0; i + x.s.n <= obj.s.n;) {
                    const char *f = memmem(obj.s.p + i, obj.s.n - i, x.s.p, x.s.n);
                    if (!f) break;
                    c++;
                    i = (size_t)(f - obj.s.p) + x.s.n;
                }
                return v_int(c);
            }
            const char *f = NULL;
            if (name[0] == 'r') {
                for (size_t i = obj.s.n + 1; i-- > 0;)
                    if (i + x.s.n <= obj.s.n && memcmp(obj.s.p + i, x.s.p, x.s.n) == 0) { f = obj.s.p + i; break; }
            } else {
                f = x.s.n ? memmem(obj.s.p, obj.s.n, x.s.p, x.s.n) : obj.s.p;
            }
            if (!f && name[0] == 'i') jerr(J, pos, "str.index(): substring not found");
            return v_int(f ? (int64_t)u8_len(obj.s.p, (size_t)(f - obj.s.p)) : -1);
        }
        if (!strcmp(name, "isdigit") || !strcmp(name, "isalpha") || !strcmp(name, "isspace") ||
            !strcmp(name, "isupper") || !strcmp(name, "islower") || !strcmp(name, "isalnum")) {
            if (!obj.s.n) return v_bool(0);
            int cased = 0;
            for (size_t i = 0; i < obj.s.n; i++) {
                char c = obj.s.p[i];
                int ok;
                switch (name[2]) {
                case 'd': ok = c >= '0' && c <= '9'; break;
                case 'a': ok = name[3] == 'l' && name[4] == 'p' ? is_alpha(c) : is_alpha(c) || (c >= '0' && c <= '9'); break;
                case 's': ok = c == ' ' || (c >= 9 && c <= 13); break;
                case 'u': ok = !(c >= 'a' && c <= 'z'); cased |= c >= 'A' && c <= 'Z'; break;
                default: ok = !(c >= 'A' && c <= 'Z'); cased |= c >= 'a' && c <= 'z'; break;
                }
                if (!ok) return v_bool(0);
            }
            return v_bool(name[2] == 'u' || name[2] == 'l' ? cased : 1);
        }
    }
    if (obj.t == V_DICT && !obj.d->is_ns) {
        if (!strcmp(name, "items") || !strcmp(name, "keys") || !strcmp(name, "values")) {
            value r = v_list(J);
            for (int i = 0; i < obj.d->n; i++) {
                if (name[0] == 'k') list_push(J, r.l, obj.d->k[i]);
                else if (name[0] == 'v') list_push(J, r.l, obj.d->v[i]);
                else {
                    value p = v_list(J);
                    p.l->is_tuple = 1;
                    list_push(J, p.l, obj.d->k[i]);
                    list_push(J, p.l, obj.d->v[i]);
                    list_push(J, r.l, p);
                }
            }
            return r;
        }
        if (!strcmp(name, "get")) {
            if (nargs < 1 || nargs + nkw > 2) jerr(J, pos, "dict.get() takes 1 or 2 arguments");
            value *v = dict_getv(obj.d, arg(&a, 0, "key", v_none()));
            return v ? *v : arg(&a, 1, "default", v_none());
        }
    }
    if (obj.t == V_LOOP && !strcmp(name, "cycle")) {
        if (!nargs) jerr(J, pos, "loop.cycle() needs at least one argument");
        return args[obj.lp->index0 % nargs];
    }
    if (obj.t == V_LIST) {
        if (!strcmp(name, "index")) {
            value x = arg(&a, 0, "value", v_undef(NULL));
            for (int i = 0; i < obj.l->n; i++)
                if (v_equal(obj.l->v[i], x)) return v_int(i);
            jerr(J, pos, "list.index(x): x not in list");
        }
        if (!strcmp(name, "count")) {
            value x = arg(&a, 0, "value", v_undef(NULL));
            int64_t c = 0;
            for (int i = 0; i < obj.l->n; i++) c += v_equal(obj.l->v[i], x);
            return v_int(c);
        }
    }
    static const char *const mutating[] = {"append", "extend", "insert", "pop", "remove", "clear",
                                           "update", "setdefault", "popitem", "sort", "reverse", NULL};
    for (int i = 0; mutating[i]; i++)
        if (!strcmp(name, mutating[i]))
            jerr(J, pos, "%s: modifying a %s is not allowed in a sandboxed template", what, v_typename(obj));
    jerr(J, pos, "unsupported method %s", what);
}

// ============================================================================
// tests: x is defined, x is string, ...
// ============================================================================

int apply_test(jstate *J, const node *t, value x, value *args, int nargs) {
    const char *n = t->s;
    value y = nargs ? args[0] : v_undef(NULL);
    static const char *const one_arg[] = {"sameas", "equalto", "eq", "==", "ne", "!=", "lt", "lessthan", "le", "gt",
                                          "greaterthan", "ge", "in", "divisibleby", NULL};
    int want = 0;
    for (int i = 0; one_arg[i]; i++)
        if (!strcmp(n, one_arg[i])) want = 1;
    if (nargs != want) jerr(J, t->pos, "test '%s' takes %d argument%s, got %d", n, want, want == 1 ? "" : "s", nargs);
    if (!strcmp(n, "defined")) return x.t != V_UNDEF;
    if (!strcmp(n, "undefined")) return x.t == V_UNDEF;
    if (!strcmp(n, "none")) return x.t == V_NONE;
    if (!strcmp(n, "boolean")) return x.t == V_BOOL;
    if (!strcmp(n, "true")) return x.t == V_BOOL && x.b;
    if (!strcmp(n, "false")) return x.t == V_BOOL && !x.b;
    if (!strcmp(n, "integer")) return x.t == V_INT;
    if (!strcmp(n, "float")) return x.t == V_FLOAT;
    if (!strcmp(n, "number")) return x.t == V_INT || x.t == V_FLOAT || x.t == V_BOOL;
    if (!strcmp(n, "string")) return x.t == V_STR;
    if (!strcmp(n, "mapping")) return x.t == V_DICT;
    if (!strcmp(n, "iterable")) return x.t == V_STR || x.t == V_LIST || x.t == V_DICT || x.t == V_UNDEF;
    if (!strcmp(n, "sequence")) return x.t == V_STR || x.t == V_LIST || x.t == V_DICT;
    if (!strcmp(n, "callable")) return x.t == V_MACRO || x.t == V_FUNC;
    if (!strcmp(n, "sameas")) {
        if (x.t != y.t) return 0;
        if (x.t == V_NONE || x.t == V_UNDEF) return 1;
        if (x.t == V_BOOL) return x.b == y.b;
        if (x.t == V_LIST) return x.l == y.l;
        if (x.t == V_DICT) return x.d == y.d;
        return v_equal(x, y);
    }
    if (!strcmp(n, "equalto") || !strcmp(n, "eq") || !strcmp(n, "==")) return v_equal(x, y);
    if (!strcmp(n, "ne") || !strcmp(n, "!=")) return !v_equal(x, y);
    if (!strcmp(n, "lt") || !strcmp(n, "lessthan")) return v_compare(J, t->pos, x, y) < 0;
    if (!strcmp(n, "le")) return v_compare(J, t->pos, x, y) <= 0;
    if (!strcmp(n, "gt") || !strcmp(n, "greaterthan")) return v_compare(J, t->pos, x, y) > 0;
    if (!strcmp(n, "ge")) return v_compare(J, t->pos, x, y) >= 0;
    if (!strcmp(n, "in")) {
        if (y.t == V_STR && x.t == V_STR) return x.s.n <= y.s.n && (x.s.n == 0 || memmem(y.s.p, y.s.n, x.s.p, x.s.n));
        if (y.t == V_LIST) { for (int i = 0; i < y.l->n; i++) if (v_equal(y.l->v[i], x)) return 1; return 0; }
        if (y.t == V_DICT) return dict_getv(y.d, x) != NULL;
        if (y.t == V_UNDEF) return 0;
        jerr(J, t->pos, "test 'in': bad container %s", v_typename(y));
    }
    if (!strcmp(n, "odd") || !strcmp(n, "even") || !strcmp(n, "divisibleby")) {
        if (x.t != V_INT) jerr(J, t->pos, "test '%s' needs an integer, got %s", n, v_typename(x));
        if (n[0] == 'o') return (x.i & 1) != 0;
        if (n[0] == 'e') return (x.i & 1) == 0;
        if (y.t != V_INT || y.i == 0) jerr(J, t->pos, "test 'divisibleby' needs a non-zero integer");
        return x.i % y.i == 0;
    }
    if (!strcmp(n, "lower") || !strcmp(n, "upper")) {
        if (x.t != V_STR) return 0;
        int cased = 0;
        for (size_t i = 0; i < x.s.n; i++) {
            char c = x.s.p[i];
            if (n[0] == 'l' && c >= 'A' && c <= 'Z') return 0;
            if (n[0] == 'u' && c >= 'a' && c <= 'z') return 0;
            cased |= is_alpha(c);
        }
        return cased;
    }
    if (jinja_builtin_known(n, 0)) jerr(J, t->pos, "test '%s' is not supported", n);
    jerr(J, t->pos, "unknown test '%s'", n);
}

// ============================================================================
// filters
// ============================================================================

static value attr_path(jstate *J, int pos, value x, value attr) {
    // attribute='a.b' or an integer index
    if (attr.t == V_INT) return v_getitem(J, pos, x, attr);
    const char *p = attr.s.p, *end = p + attr.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t L = dot ? (size_t)(dot - p) : (size_t)(end - p);
        int isnum = L > 0;
        for (size_t i = 0; i < L; i++) if (p[i] < '0' || p[i] > '9') isnum = 0;
        if (isnum) x = v_getitem(J, pos, x, v_int(atoll(jstrdup(J, p, L))));
        else x = v_getitem(J, pos, x, v_str(p, L));
        if (!dot) break;
        p = dot + 1;
    }
    return x;
}

static int run_test_by_name(jstate *J, int pos, value x, value name, value *args, int nargs) {
    node t = {.kind = E_TEST, .pos = pos};
    t.s = jstrdup(J, name.s.p, name.s.n);
    return apply_test(J, &t, x, args, nargs);
}

static int cmp_for_sort(jstate *J, int pos, value a, value b, int case_sensitive) {
    if (!case_sensitive && a.t == V_STR && b.t == V_STR) {
        a = map_case(J, a, 1);
        b = map_case(J, b, 1);
    }
    return v_compare(J, pos, a, b);
}

static void sort_values(jstate *J, int pos, value *v, value *keys, int n, int reverse, int cs) {
    // stable insertion sort on keys (lists in templates are short)
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0; k--) {
            int c = cmp_for_sort(J, pos, keys[k - 1], keys[k], cs);
            if (reverse ? c >= 0 : c <= 0) break;
            value t = v[k]; v[k] = v[k - 1]; v[k - 1] = t;
            t = keys[k]; keys[k] = keys[k - 1]; keys[k - 1] = t;
        }
}

value apply_filter(jstate *J, const node *f, value x, value *args, int nargs,
                   const char **kwn, value *kwv, int nkw) {
    const char *n = f->s;
    char what[80];
    snprintf(what, sizeof what, "filter '%s'", n);
    argv_t a = {J, f->pos, what, args, nargs, kwn, kwv, nkw};
    int pos = f->pos;

    if (!strcmp(n, "default") || !strcmp(n, "d")) {
        value def = arg(&a, 0, "default_value", v_str("", 0));
        int boolean = v_truthy(arg(&a, 1, "boolean", v_bool(0)));
        if (x.t == V_UNDEF || (boolean && !v_truthy(x))) return def;
        return x;
    }
    if (!strcmp(n, "length") || !strcmp(n, "count")) {
        switch (x.t) {
        case V_STR: return v_int((int64_t)u8_len(x.s.p, x.s.n));
        case V_LIST: return v_int(x.l->n);
        case V_DICT: return v_int(x.d->n);
        case V_UNDEF: return v_int(0);
        default: jerr(J, pos, "object of type '%s' has no len()", v_typename(x));
        }
    }
    if (!strcmp(n, "string")) return v_tostr(J, x);
    if (!strcmp(n, "safe")) {
        value s = v_tostr(J, x);
        s.safe = 1;
        return s;
    }
    if (!strcmp(n, "list")) {
        value items = v_iterate(J, pos, x), r = v_list(J);
        for (int i = 0; i < items.l->n; i++) list_push(J, r.l, items.l->v[i]);
        return r;
    }
    if (!strcmp(n, "e") || !strcmp(n, "escape") || !strcmp(n, "forceescape")) {
        value s = v_tostr(J, x);
        if (s.safe && n[0] != 'f') return s;
        s.safe = 0;
        return html_escape(J, s);
    }
    if (!strcmp(n, "trim")) {
        value chars = arg(&a, 0, "chars", v_none());
        return do_strip(v_tostr(J, x), chars.t == V_STR ? chars : v_none(), 1, 1);
    }
    if (!strcmp(n, "upper")) return map_case(J, v_tostr(J, x), 0);
    if (!strcmp(n, "lower")) return map_case(J, v_tostr(J, x), 1);
    if (!strcmp(n, "capitalize")) return map_case(J, v_tostr(J, x), 2);
    if (!strcmp(n, "title")) return jinja_title(J, v_tostr(J, x));
    if (!strcmp(n, "replace")) {
        value s = v_tostr(J, x);
        value o = v_tostr(J, arg(&a, 0, "old", v_undef(NULL)));
        value nw = v_tostr(J, arg(&a, 1, "new", v_undef(NULL)));
        int64_t count = has_arg(&a, 2, "count") ? want_int(&a, arg(&a, 2, "count", v_none()), "count") : -1;
        return do_replace(J, s, o, nw, count);
    }
    if (!strcmp(n, "tojson")) {
        value ind = arg(&a, 0, "indent", v_none());
        int indent = ind.t == V_NONE ? -1 : (int)want_int(&a, ind, "indent");
        if (indent > 64) jerr(J, pos, "tojson: indent too large");
        const char *isep = indent >= 0 ? "," : ", ", *ksep = ": ";
        value seps = arg(&a, -1, "separators", v_none());
        if (seps.t == V_LIST && seps.l->n == 2) {
            isep = jstrdup(J, want_str(&a, seps.l->v[0], "separators").s.p, seps.l->v[0].s.n);
            ksep = jstrdup(J, want_str(&a, seps.l->v[1], "separators").s.p, seps.l->v[1].s.n);
        } else if (seps.t != V_NONE) jerr(J, pos, "tojson: separators must be a pair of strings");
        int sort_keys = v_truthy(arg(&a, -1, "sort_keys", v_bool(0)));
        int ensure_ascii = v_truthy(arg(&a, -1, "ensure_ascii", v_bool(0)));
        jbuf b = {0};
        v_write_json(J, &b, x, pos, indent, isep, ksep, sort_keys, ensure_ascii, 0);
        return v_str(b.p ? b.p : "", b.n);
    }
    if (!strcmp(n, "items")) {
        if (x.t == V_UNDEF) return v_list(J);
        if (x.t != V_DICT) jerr(J, pos, "filter 'items': expected a mapping, got %s", v_typename(x));
        return call_method(J, pos, x, "items", NULL, 0, NULL, NULL, 0);
    }
    if (!strcmp(n, "dictsort")) {
        if (x.t != V_DICT) jerr(J, pos, "filter 'dictsort': expected a mapping, got %s", v_typename(x));
        value items = call_method(J, pos, x, "items", NULL, 0, NULL, NULL, 0);
        int by_value = 0;
        value byv = arg(&a, 1, "by", v_cstr("key"));
        if (byv.t == V_STR && byv.s.n == 5 && !memcmp(byv.s.p, "value", 5)) by_value = 1;
        int cs = v_truthy(arg(&a, 0, "case_sensitive", v_bool(0)));
        int rev = v_truthy(arg(&a, 2, "reverse", v_bool(0)));
        value *keys = jalloc(J, (size_t)(items.l->n + 1) * sizeof *keys);
        for (int i = 0; i < items.l->n; i++) keys[i] = items.l->v[i].l->v[by_value];
        sort_values(J, pos, items.l->v, keys, items.l->n, rev, cs);
        return items;
    }
    if (!strcmp(n, "join")) {
        value sep = v_tostr(J, arg(&a, 0, "d", v_str("", 0)));
        value attr = arg(&a, 1, "attribute", v_none());
        value items = v_iterate(J, pos, x);
        jbuf b = {0};
        for (int i = 0; i < items.l->n; i++) {
            if (i) buf_put(J, &b, sep.s.p, sep.s.n);
            value it = attr.t == V_NONE ? items.l->v[i] : attr_path(J, pos, items.l->v[i], attr);
            v_write_str(J, &b, it);
        }
        return v_str(b.p ? b.p : "", b.n);
    }
    if (!strcmp(n, "first") || !strcmp(n, "last")) {
        value items = v_iterate(J, pos, x);
        if (!items.l->n) return v_undef(NULL);
        return items.l->v[n[0] == 'f' ? 0 : items.l->n - 1];
    }
    if (!strcmp(n, "reverse")) {
        if (x.t == V_STR) {
            value items = v_iterate(J, pos, x);
            jbuf b = {0};
            for (int i = items.l->n - 1; i >= 0; i--) buf_put(J, &b, items.l->v[i].s.p, items.l->v[i].s.n);
            return v_str(b.p ? b.p : "", b.n);
        }
        value items = v_iterate(J, pos, x), r = v_list(J);
        for (int i = items.l->n - 1; i >= 0; i--) list_push(J, r.l, items.l->v[i]);
        return r;
    }
    if (!strcmp(n, "selectattr") || !strcmp(n, "rejectattr") || !strcmp(n, "select") || !strcmp(n, "reject")) {
        int is_attr = strstr(n, "attr") != NULL, keep_if = n[0] == 's';
        // jinja2 iterates only a truthy value: none|selectattr(...) is empty
        value items = v_truthy(x) ? v_iterate(J, pos, x) : v_list(J), r = v_list(J);
        int first_test = is_attr ? 1 : 0;
        value attr = is_attr ? arg(&a, 0, "attribute", v_undef(NULL)) : v_none();
        if (is_attr && attr.t != V_STR && attr.t != V_INT) jerr(J, pos, "filter '%s' needs an attribute name", n);
        for (int i = 0; i < items.l->n; i++) {
            value it = items.l->v[i];
            value probe = is_attr ? attr_path(J, pos, it, attr) : it;
            int ok;
            if (nargs > first_test) {
                value tn = want_str(&a, args[first_test], "test name");
                ok = run_test_by_name(J, pos, probe, tn, args + first_test + 1, nargs - first_test - 1);
            } else {
                ok = v_truthy(probe);
            }
            if (ok == keep_if) list_push(J, r.l, it);
        }
        return r;
    }
    if (!strcmp(n, "map")) {
        value items = v_truthy(x) ? v_iterate(J, pos, x) : v_list(J), r = v_list(J);
        value attr = arg(&a, -1, "attribute", v_undef(NULL));
        if (attr.t != V_UNDEF) {
            value def = arg(&a, -1, "default", v_undef(NULL));
            for (int i = 0; i < items.l->n; i++) {
                value v = attr_path(J, pos, items.l->v[i], attr);
                list_push(J, r.l, v.t == V_UNDEF && def.t != V_UNDEF ? def : v);
            }
            return r;
        }
        if (!nargs) jerr(J, pos, "filter 'map' needs a filter name or attribute=");
        value fname = want_str(&a, args[0], "filter name");
        node sub = {.kind = E_FILTER, .pos = pos};
        sub.s = jstrdup(J, fname.s.p, fname.s.n);
        for (int i = 0; i < items.l->n; i++)
            list_push(J, r.l, apply_filter(J, &sub, items.l->v[i], args + 1, nargs - 1, kwn, kwv, nkw));
        return r;
    }
    if (!strcmp(n, "unique")) {
        value items = v_iterate(J, pos, x), r = v_list(J);
        for (int i = 0; i < items.l->n; i++) {
            int seen = 0;
            for (int k = 0; k < r.l->n && !seen; k++) seen = v_equal(r.l->v[k], items.l->v[i]);
            if (!seen) list_push(J, r.l, items.l->v[i]);
        }
        return r;
    }
    if (!strcmp(n, "sort")) {
        value items = v_iterate(J, pos, x), r = v_list(J);
        for (int i = 0; i < items.l->n; i++) list_push(J, r.l, items.l->v[i]);
        int rev = v_truthy(arg(&a, 0, "reverse", v_bool(0)));
        int cs = v_truthy(arg(&a, 1, "case_sensitive", v_bool(0)));
        value attr = arg(&a, 2, "attribute", v_none());
        value *keys = jalloc(J, (size_t)(r.l->n + 1) * sizeof *keys);
        for (int i = 0; i < r.l->n; i++) keys[i] = attr.t == V_NONE ? r.l->v[i] : attr_path(J, pos, r.l->v[i], attr);
        sort_values(J, pos, r.l->v, keys, r.l->n, rev, cs);
        return r;
    }
    if (!strcmp(n, "min") || !strcmp(n, "max")) {
        value items = v_iterate(J, pos, x);
        if (!items.l->n) return v_undef(NULL);
        value best = items.l->v[0];
        for (int i = 1; i < items.l->n; i++) {
            int c = cmp_for_sort(J, pos, items.l->v[i], best, 0);
            if (n[1] == 'i' ? c < 0 : c > 0) best = items.l->v[i];
        }
        return best;
    }
    if (!strcmp(n, "sum")) {
        value items = v_iterate(J, pos, x);
        value acc = arg(&a, 1, "start", v_int(0));
        value attr = arg(&a, 0, "attribute", v_none());
        node add = {.kind = E_BIN, .op = OP_ADD, .pos = pos};
        for (int i = 0; i < items.l->n; i++) {
            value v = attr.t == V_NONE ? items.l->v[i] : attr_path(J, pos, items.l->v[i], attr);
            node la = {.kind = E_LIT, .lit = acc}, lb = {.kind = E_LIT, .lit = v};
            add.a = &la;
            add.b = &lb;
            acc = eval(J, &add);
        }
        return acc;
    }
    if (!strcmp(n, "int")) {
        value def = arg(&a, 0, "default", v_int(0));
        if (x.t == V_INT) return x;
        if (x.t == V_BOOL) return v_int(x.b);
        if (x.t == V_FLOAT) return isfinite(x.f) && fabs(x.f) < 9.2e18 ? v_int((int64_t)x.f) : def;
        if (x.t == V_STR) {
            char *s = jstrdup(J, x.s.p, x.s.n), *end;
            long long v = strtoll(s, &end, 10);
            while (*end == ' ' || *end == '\n' || *end == '\t') end++;
            if (end != s && !*end) return v_int(v);
            double d = strtod(s, &end);
            if (end != s && !*end && isfinite(d) && fabs(d) < 9.2e18) return v_int((int64_t)d);
        }
        return def;
    }
    if (!strcmp(n, "float")) {
        value def = arg(&a, 0, "default", v_float(0));
        if (x.t == V_FLOAT) return x;
        if (x.t == V_INT || x.t == V_BOOL) return v_float(x.t == V_INT ? (double)x.i : x.b);
        if (x.t == V_STR) {
            char *s = jstrdup(J, x.s.p, x.s.n), *end;
            double d = strtod(s, &end);
            if (end != s && !*end) return v_float(d);
        }
        return def;
    }
    if (!strcmp(n, "abs")) {
        if (x.t == V_INT) { if (x.i == INT64_MIN) jerr(J, pos, "integer overflow"); return v_int(x.i < 0 ? -x.i : x.i); }
        if (x.t == V_FLOAT) return v_float(fabs(x.f));
        if (x.t == V_BOOL) return v_int(x.b);
        jerr(J, pos, "bad operand type for abs(): '%s'", v_typename(x));
    }
    if (!strcmp(n, "round")) {
        int64_t prec = want_int(&a, arg(&a, 0, "precision", v_int(0)), "precision");
        value method = arg(&a, 1, "method", v_cstr("common"));
        double v = x.t == V_FLOAT ? x.f : x.t == V_INT ? (double)x.i : x.t == V_BOOL ? x.b : NAN;
        if (isnan(v) && x.t != V_FLOAT) jerr(J, pos, "filter 'round' needs a number");
        if (prec < 0 || prec > 15) jerr(J, pos, "filter 'round': unsupported precision");
        double m = pow(10, (double)prec), s = v * m;
        double r = method.t == V_STR && method.s.n && method.s.p[0] == 'c' ? (s < 0 ? -floor(-s + 0.5) : floor(s + 0.5))
                 : method.t == V_STR && method.s.n && method.s.p[0] == 'f' ? floor(s) : ceil(s);
        return v_float(r / m);
    }
    if (!strcmp(n, "indent")) {
        value s = v_tostr(J, x);
        value w = arg(&a, 0, "width", v_int(4));
        int first = v_truthy(arg(&a, 1, "first", v_bool(0)));
        int blank = v_truthy(arg(&a, 2, "blank", v_bool(0)));
        jbuf pad = {0};
        if (w.t == V_STR) buf_put(J, &pad, w.s.p, w.s.n);
        else { int64_t k = want_int(&a, w, "width"); if (k > 256) k = 256; for (int64_t i = 0; i < k; i++) buf_putc(J, &pad, ' '); }
        jbuf b = {0};
        int line_start = 1, lineno = 0;
        for (size_t i = 0; i < s.s.n; i++) {
            if (line_start) {
                // indent this line unless first (and !first) or blank (and !blank)
                int is_blank = s.s.p[i] == '\n';
                if ((lineno > 0 || first) && (blank || !is_blank)) buf_put(J, &b, pad.p, pad.n);
                line_start = 0;
            }
            buf_putc(J, &b, s.s.p[i]);
            if (s.s.p[i] == '\n') { line_start = 1; lineno++; }
        }
        if (s.s.n == 0 && first && blank) buf_put(J, &b, pad.p, pad.n);
        return v_str(b.p ? b.p : "", b.n);
    }
    if (!strcmp(n, "wordcount")) {
        value parts = do_split(J, v_tostr(J, x), v_none(), -1);
        return v_int(parts.l->n);
    }
    if (jinja_builtin_known(n, 1)) jerr(J, pos, "filter '%s' is not supported", n);
    jerr(J, pos, "unknown filter '%s'", n);
}

// ============================================================================
// global functions
// ============================================================================

int global_lookup(const char *name) {
    if (!strcmp(name, "range")) return FN_RANGE;
    if (!strcmp(name, "namespace")) return FN_NAMESPACE;
    if (!strcmp(name, "dict")) return FN_DICT;
    if (!strcmp(name, "raise_exception")) return FN_RAISE;
    if (!strcmp(name, "strftime_now")) return FN_STRFTIME;
    return 0;
}

value call_global(jstate *J, int pos, int fn, value *args, int nargs,
                  const char **kwn, value *kwv, int nkw) {
    argv_t a = {J, pos, "range()", args, nargs, kwn, kwv, nkw};
    switch (fn) {
    case FN_RANGE: {
        int64_t start = 0, stop, step = 1;
        if (nargs == 1) stop = want_int(&a, args[0], "stop");
        else if (nargs == 2 || nargs == 3) {
            start = want_int(&a, args[0], "start");
            stop = want_int(&a, args[1], "stop");
            if (nargs == 3) step = want_int(&a, args[2], "step");
        } else jerr(J, pos, "range() takes 1 to 3 arguments");
        if (step == 0) jerr(J, pos, "range() step must not be zero");
        value r = v_list(J);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (r.l->n >= J_MAX_ITERS) jerr(J, pos, "range() longer than %d", J_MAX_ITERS);
            list_push(J, r.l, v_int(i));
        }
        return r;
    }
    case FN_NAMESPACE:
    case FN_DICT: {
        value d = v_dict(J);
        d.d->is_ns = fn == FN_NAMESPACE;
        for (int i = 0; i < nargs; i++) {   // namespace(existing_dict) copies it
            if (args[i].t != V_DICT) jerr(J, pos, "%s() positional arguments must be mappings", fn == FN_DICT ? "dict" : "namespace");
            for (int k = 0; k < args[i].d->n; k++) dict_set(J, d.d, args[i].d->k[k], args[i].d->v[k]);
        }
        for (int i = 0; i < nkw; i++) dict_setc(J, d.d, kwn[i], kwv[i]);
        return d;
    }
    case FN_RAISE: {
        value m = nargs ? v_tostr(J, args[0]) : v_str("", 0);
        jraise(J, pos, m.s.p, m.s.n);
    }
    case FN_STRFTIME: {
        if (nargs < 1 || args[0].t != V_STR) jerr(J, pos, "strftime_now() needs a format string");
        time_t t = J->now >= 0 ? (time_t)J->now : time(NULL);
        struct tm tm;
        if (J->now >= 0) gmtime_r(&t, &tm);
        else localtime_r(&t, &tm);
        char *fmt = jstrdup(J, args[0].s.p, args[0].s.n);
        char out[512];
        size_t k = strftime(out, sizeof out, fmt, &tm);
        if (!k && fmt[0]) jerr(J, pos, "strftime_now(): result too long");
        return str_of(J, out, k);
    }
    }
    jerr(J, pos, "internal: unknown function");
}
