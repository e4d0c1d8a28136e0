// JSON Schema -> GBNF, as llama.cpp's json-schema-to-grammar does it: a rule
// per (sub)schema, over shared rules for JSON's tokens.
//
// Supported: type (object, array, string, number, integer, boolean, null, and
// arrays of them), properties (in the schema's order: required ones always,
// optional ones may be left out), required, additionalProperties, items,
// prefixItems, minItems/maxItems, minLength/maxLength, enum, const, anyOf,
// oneOf (as anyOf: one match is not checked to be the only one), allOf of
// object schemas (merged), $ref to "#", "#/$defs/..", "#/definitions/.." (any
// JSON pointer into the document; recursion becomes recursive rules), format
// date, time, date-time and uuid (other formats are plain strings).
//
// Choices:
//  - additionalProperties: absent with "properties" given means none (as
//    OpenAI's strict mode requires it false); absent without "properties",
//    or true, means any (extra pairs come after the listed ones); a schema
//    means pairs of that value. Extra keys are not checked against listed ones.
//  - minimum/maximum (and exclusive*) are not enforced, except that a lower
//    bound >= 0 leaves out the minus sign.
//  - prefixItems: exactly those items, in order, then more of "items" when
//    it is a schema.
//  - keywords that narrow what matches and that we cannot express (pattern,
//    not, if, uniqueItems, ...) fail the compilation, naming the keyword;
//    annotations (title, description, examples, default, ...) are ignored.
//  - bounds: nesting 64 deep, maxItems/maxLength/minItems/minLength 256 and
//    1000, 5000 rules.
//
// JSON's tokens: at most one space, or a newline and up to 20 spaces or tabs
// of indent, between tokens (so a model cannot emit whitespace forever);
// numbers of at most 16 integer and 16 fraction digits; strings of JSON's
// characters and escapes, no raw control characters.
#include "inference/grammar.h"
#include "base/error.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_NEST = 64, MAX_RULES = 5000, MAX_ITEMS = 256, MAX_LENGTH = 1000 };

static const char g_prelude[] =
    "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
    "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "int ::= \"0\" | [1-9] [0-9]{0,15}\n"
    "frac ::= \".\" [0-9]{1,16}\n"
    "exp ::= [eE] [-+]? [0-9]{1,3}\n"
    "number ::= \"-\"? int frac? exp?\n"
    "number-pos ::= int frac? exp?\n"
    "integer ::= \"-\"? int\n"
    "integer-pos ::= int\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n"
    "date ::= [0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )\n"
    "time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? "
    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n"
    "date-string ::= \"\\\"\" date \"\\\"\"\n"
    "time-string ::= \"\\\"\" time \"\\\"\"\n"
    "date-time-string ::= \"\\\"\" date \"T\" time \"\\\"\"\n"
    "uuid-string ::= \"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\"\n";

typedef struct { char *v; size_t n, cap; int oom; } sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) { b->oom = 1; return; }
        b->v = v, b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = 0;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void putf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(b, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

// bytes as a GBNF literal: "..." with \" \\ and control characters escaped
static void put_literal(sbuf *b, const char *s) {
    puts_(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') putf(b, "\\%c", c);
        else if (c < 0x20) putf(b, "\\x%02X", c);
        else put(b, s, 1);
    }
    puts_(b, "\"");
}

typedef struct {
    sbuf out;               // the rules made so far
    int n_rules;            // rN names
    const cJSON *doc;       // the whole schema ($ref targets)
    struct { char *ref; int rule; } refs[256]; // $refs met: the rule each became
    int n_refs;
    infer_status st;        // the first failure
} jsc;

static int err(jsc *c, infer_status st, const char *path, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int err(jsc *c, infer_status st, const char *path, const char *fmt, ...) {
    if (c->st) return -1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->st = fail(st, "json_schema: %s: %s", *path ? path : "/", msg);
    return -1;
}

// a new rule's number; -1 past the bound
static int new_rule(jsc *c, const char *path) {
    if (c->n_rules >= MAX_RULES) return err(c, INFER_ERR_UNSUPPORTED, path, "the schema needs more than %d rules", MAX_RULES);
    return c->n_rules++;
}

// "rN ::= body\n"
static void emit(jsc *c, int r, const sbuf *body) {
    putf(&c->out, "r%d ::= ", r);
    if (body->n) put(&c->out, body->v, body->n);
    else puts_(&c->out, "\"\""); // (an empty rule is written "", as in llama.cpp's GBNF)
    puts_(&c->out, "\n");
    if (body->oom) c->out.oom = 1;
}

static void gen(jsc *c, const cJSON *s, const char *path, int depth, sbuf *ref);

static const char *const g_unsupported[] = {
    "pattern", "patternProperties", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
    "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains", "multipleOf",
    "minProperties", "maxProperties", "$dynamicRef", "$recursiveRef", "contentSchema",
};

static const cJSON *field(const cJSON *s, const char *name) { return cJSON_GetObjectItemCaseSensitive(s, name); }

// a non-negative integer keyword (absent: def); -2 when malformed
static long count_field(jsc *c, const cJSON *s, const char *name, long def, const char *path) {
    const cJSON *f = field(s, name);
    if (!f) return def;
    // (bounded before the conversion: a double beyond long's range has no defined conversion; the
    // keywords' own bounds, far below 2^52, are checked by the callers)
    double v = cJSON_IsNumber(f) ? f->valuedouble : -1;
    if (!(v >= 0 && v <= 4503599627370496.0) || v != floor(v))
        return err(c, INFER_ERR_ARG, path, "'%s' must be a non-negative integer (at most 2^52)", name), -2;
    return (long)v;
}

// The target of a $ref: a JSON pointer into the document ("#", "#/$defs/a").
static const cJSON *resolve(jsc *c, const char *ref, const char *path) {
    if (ref[0] != '#') return err(c, INFER_ERR_UNSUPPORTED, path, "$ref '%.80s': only references into this schema (#/...)", ref), NULL;
    const cJSON *x = c->doc;
    const char *p = ref + 1;
    while (*p == '/' && x) {
        char key[256];
        size_t n = 0;
        for (p++; *p && *p != '/' && n + 1 < sizeof key; p++) {
            if (p[0] == '~' && p[1] == '0') key[n++] = '~', p++;
            else if (p[0] == '~' && p[1] == '1') key[n++] = '/', p++;
            else key[n++] = *p;
        }
        key[n] = 0;
        x = cJSON_IsArray(x) ? cJSON_GetArrayItem(x, atoi(key)) : cJSON_IsObject(x) ? field(x, key) : NULL;
    }
    if (*p || !x) return err(c, INFER_ERR_ARG, path, "$ref '%.80s' names nothing in the schema", ref), NULL;
    return x;
}

static void gen_ref(jsc *c, const char *ref, const char *path, int depth, sbuf *out) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) { putf(out, "r%d", c->refs[i].rule); return; }
    if (c->n_refs == (int)(sizeof c->refs / sizeof *c->refs)) { err(c, INFER_ERR_UNSUPPORTED, path, "more than 256 distinct $refs"); return; }
    const cJSON *t = resolve(c, ref, path);
    int r = t ? new_rule(c, path) : -1;
    if (r < 0) return;
    c->refs[c->n_refs].ref = strdup(ref);
    if (!c->refs[c->n_refs].ref) { c->st = fail(INFER_ERR_NOMEM, "json_schema: out of memory"); return; }
    c->refs[c->n_refs++].rule = r;
    sbuf body = {0};
    char p[256];
    snprintf(p, sizeof p, "%s", ref + 1);
    gen(c, t, p, depth + 1, &body);
    emit(c, r, &body);
    free(body.v);
    putf(out, "r%d", r);
}

// gen, as a rule name: what is used twice is a rule, not text written twice
// (nested schemas would grow exponentially)
static void gen_named(jsc *c, const cJSON *s, const char *path, int depth, sbuf *ref) {
    sbuf body = {0};
    gen(c, s, path, depth, &body);
    if (!c->st && body.v && strpbrk(body.v, " ()|\"")) {
        int r = new_rule(c, path);
        if (r >= 0) emit(c, r, &body), putf(ref, "r%d", r);
    } else if (!c->st) put(ref, body.v ? body.v : "", body.n);
    if (body.oom) ref->oom = 1;
    free(body.v);
}

static void gen_string(jsc *c, const cJSON *s, const char *path, sbuf *out) {
    const cJSON *fmt = field(s, "format");
    if (cJSON_IsString(fmt)) {
        static const char *const known[] = {"date", "time", "date-time", "uuid"};
        for (int i = 0; i < 4; i++)
            if (!strcmp(fmt->valuestring, known[i])) { putf(out, "%s-string", known[i]); return; }
    }
    long lo = count_field(c, s, "minLength", 0, path), hi = count_field(c, s, "maxLength", -1, path);
    if (lo == -2 || hi == -2) return;
    if (lo > MAX_LENGTH || hi > MAX_LENGTH) {
        err(c, INFER_ERR_UNSUPPORTED, path, "minLength/maxLength above %d are unsupported", MAX_LENGTH);
        return;
    }
    if (hi >= 0 && hi < lo) { err(c, INFER_ERR_ARG, path, "maxLength %ld < minLength %ld", hi, lo); return; }
    if (!lo && hi < 0) { puts_(out, "string"); return; }
    if (hi < 0) putf(out, "( \"\\\"\" char{%ld,} \"\\\"\" )", lo);
    else putf(out, "( \"\\\"\" char{%ld,%ld} \"\\\"\" )", lo, hi);
}

// a lower bound >= 0 (minimum, exclusiveMinimum) leaves the minus out
static int non_negative(const cJSON *s) {
    const cJSON *a = field(s, "minimum"), *b = field(s, "exclusiveMinimum");
    return (cJSON_IsNumber(a) && a->valuedouble >= 0) || (cJSON_IsNumber(b) && b->valuedouble >= 0);
}

static void gen_array(jsc *c, const cJSON *s, const char *path, int depth, sbuf *out) {
    const cJSON *items = field(s, "items"), *prefix = field(s, "prefixItems");
    char p[256];
    if (items && !cJSON_IsObject(items) && !cJSON_IsBool(items)) { err(c, INFER_ERR_ARG, path, "'items' must be a schema"); return; }
    sbuf item = {0};
    if (prefix) {
        if (!cJSON_IsArray(prefix)) { err(c, INFER_ERR_ARG, path, "'prefixItems' must be an array"); return; }
        if (field(s, "minItems") || field(s, "maxItems")) {
            err(c, INFER_ERR_UNSUPPORTED, path, "minItems/maxItems with prefixItems are unsupported");
            return;
        }
        puts_(out, "( \"[\" ws");
        int i = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, prefix) {
            snprintf(p, sizeof p, "%s/prefixItems/%d", path, i);
            if (i++) puts_(out, " \",\" ws");
            puts_(out, " ");
            gen(c, x, p, depth + 1, out);
            puts_(out, " ws");
        }
        if (items && !cJSON_IsFalse(items)) {
            snprintf(p, sizeof p, "%s/items", path);
            gen_named(c, items, p, depth + 1, &item);
            const char *it = item.v ? item.v : "";
            if (!i) puts_(out, " ( "), puts_(out, it), puts_(out, " ws");
            puts_(out, " ( \",\" ws "), puts_(out, it), puts_(out, " ws )*");
            if (!i) puts_(out, " )?");
        }
        puts_(out, " \"]\" )");
        free(item.v);
        return;
    }
    long lo = count_field(c, s, "minItems", 0, path), hi = count_field(c, s, "maxItems", -1, path);
    if (lo == -2 || hi == -2) return;
    if (lo > MAX_ITEMS || hi > MAX_ITEMS) { err(c, INFER_ERR_UNSUPPORTED, path, "minItems/maxItems above %d are unsupported", MAX_ITEMS); return; }
    if (hi >= 0 && hi < lo) { err(c, INFER_ERR_ARG, path, "maxItems %ld < minItems %ld", hi, lo); return; }
    if (cJSON_IsFalse(items)) hi = 0;
    if (hi == 0) {
        if (lo) err(c, INFER_ERR_ARG, path, "minItems %ld but no item may be", lo);
        puts_(out, "( \"[\" ws \"]\" )");
        return;
    }
    if (items) {
        snprintf(p, sizeof p, "%s/items", path);
        gen_named(c, items, p, depth + 1, &item);
    } else puts_(&item, "value");
    const char *it = item.v ? item.v : "";
    char rest[64];
    if (hi < 0) snprintf(rest, sizeof rest, "{%ld,}", lo > 1 ? lo - 1 : 0);
    else snprintf(rest, sizeof rest, "{%ld,%ld}", lo > 1 ? lo - 1 : 0, hi - 1);
    // [ item ( , item ){lo-1,hi-1} ], all of it optional when lo is 0
    puts_(out, lo ? "( \"[\" ws " : "( \"[\" ws ( ");
    puts_(out, it);
    puts_(out, " ws ( \",\" ws ");
    puts_(out, it);
    puts_(out, " ws )");
    puts_(out, rest);
    puts_(out, lo ? " \"]\" )" : " )? \"]\" )");
    free(item.v);
}

// An object of the listed properties (in order; optional ones may be left
// out), then extra pairs of `extra` (NULL: none). With the rules
//   T_i: the properties from i on after one was written (each after a comma)
//   F_i: the properties from i on before any was written
// it is "{" ws F_0 "}".
typedef struct { const char *key; const cJSON *schema; int req; } prop;

static void gen_props(jsc *c, const prop *pr, int n, const char *extra, const char *path, int depth, sbuf *out) {
    int base = c->n_rules;
    for (int i = 0; i <= n; i++)
        if (new_rule(c, path) < 0) return; // T_i = r(base+i)
    int fbase = c->n_rules;
    for (int i = 0; i <= n; i++)
        if (new_rule(c, path) < 0) return; // F_i = r(fbase+i)
    sbuf t = {0}, f = {0}, kv = {0};
    if (extra) {
        puts_(&t, "( \",\" ws string ws \":\" ws "), puts_(&t, extra), puts_(&t, " ws )*");
        puts_(&f, "( string ws \":\" ws "), puts_(&f, extra), putf(&f, " ws r%d )?", base + n);
    }
    emit(c, base + n, &t);
    emit(c, fbase + n, &f);
    for (int i = n - 1; i >= 0 && !c->st; i--) {
        char p[256];
        snprintf(p, sizeof p, "%s/properties/%.80s", path, pr[i].key);
        t.n = f.n = kv.n = 0;
        char *key = cJSON_PrintUnformatted(&(cJSON){.type = cJSON_String, .valuestring = (char *)pr[i].key});
        if (!key) { c->st = fail(INFER_ERR_NOMEM, "json_schema: out of memory"); break; }
        put_literal(&kv, key);
        free(key);
        puts_(&kv, " ws \":\" ws ");
        if (pr[i].schema) gen_named(c, pr[i].schema, p, depth + 1, &kv);
        else puts_(&kv, "value");
        const char *k = kv.v ? kv.v : "";
        if (pr[i].req) {
            putf(&t, "\",\" ws ");
            puts_(&t, k);
            putf(&t, " ws r%d", base + i + 1);
            puts_(&f, k);
            putf(&f, " ws r%d", base + i + 1);
        } else {
            puts_(&t, "( \",\" ws ");
            puts_(&t, k);
            putf(&t, " ws )? r%d", base + i + 1);
            puts_(&f, k);
            putf(&f, " ws r%d | r%d", base + i + 1, fbase + i + 1);
        }
        emit(c, base + i, &t);
        emit(c, fbase + i, &f);
    }
    free(t.v), free(f.v), free(kv.v);
    putf(out, "( \"{\" ws r%d \"}\" )", fbase);
}

static int is_required(const cJSON *req, const char *key) {
    const cJSON *x;
    cJSON_ArrayForEach(x, req) if (cJSON_IsString(x) && !strcmp(x->valuestring, key)) return 1;
    return 0;
}

// Collects the properties of s (and of allOf's objects, merged) into pr.
static int collect(jsc *c, const cJSON *s, const char *path, int depth, prop *pr, int n, int cap, const cJSON **extra, int *any_props) {
    if (depth > MAX_NEST) return err(c, INFER_ERR_UNSUPPORTED, path, "the schema nests deeper than %d", MAX_NEST);
    const cJSON *props = field(s, "properties"), *req = field(s, "required"), *all = field(s, "allOf"), *ref = field(s, "$ref");
    if (cJSON_IsString(ref)) {
        const cJSON *t = resolve(c, ref->valuestring, path);
        return t ? collect(c, t, path, depth + 1, pr, n, cap, extra, any_props) : -1;
    }
    if (props && !cJSON_IsObject(props)) return err(c, INFER_ERR_ARG, path, "'properties' must be an object");
    if (req && !cJSON_IsArray(req)) return err(c, INFER_ERR_ARG, path, "'required' must be an array of names");
    if (props) *any_props = 1;
    const cJSON *x;
    cJSON_ArrayForEach(x, props) {
        int at = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(pr[i].key, x->string)) at = i;
        if (at >= 0) { pr[at].schema = x, pr[at].req |= is_required(req, x->string); continue; } // (allOf: the later schema wins)
        if (n == cap) return err(c, INFER_ERR_UNSUPPORTED, path, "more than %d properties", cap);
        pr[n++] = (prop){x->string, x, is_required(req, x->string)};
    }
    cJSON_ArrayForEach(x, req) { // required but not listed: any value
        if (!cJSON_IsString(x)) return err(c, INFER_ERR_ARG, path, "'required' must be an array of names");
        int at = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(pr[i].key, x->valuestring)) at = i;
        if (at >= 0) { pr[at].req = 1; continue; }
        if (n == cap) return err(c, INFER_ERR_UNSUPPORTED, path, "more than %d properties", cap);
        pr[n++] = (prop){x->valuestring, NULL, 1};
    }
    const cJSON *ap = field(s, "additionalProperties");
    if (ap) *extra = ap;
    if (all) {
        if (!cJSON_IsArray(all)) return err(c, INFER_ERR_ARG, path, "'allOf' must be an array");
        int i = 0;
        cJSON_ArrayForEach(x, all) {
            char p[256];
            snprintf(p, sizeof p, "%s/allOf/%d", path, i++);
            const cJSON *ty = field(x, "type");
            if (!cJSON_IsObject(x) || (ty && !(cJSON_IsString(ty) && !strcmp(ty->valuestring, "object"))) || field(x, "anyOf") ||
                field(x, "oneOf") || field(x, "enum") || field(x, "const"))
                return err(c, INFER_ERR_UNSUPPORTED, p, "allOf of other than object schemas is unsupported");
            if ((n = collect(c, x, p, depth + 1, pr, n, cap, extra, any_props)) < 0) return -1;
        }
    }
    return n;
}

static void gen_object(jsc *c, const cJSON *s, const char *path, int depth, sbuf *out) {
    enum { CAP = 512 };
    prop *pr = malloc(sizeof *pr * CAP);
    if (!pr) { c->st = fail(INFER_ERR_NOMEM, "json_schema: out of memory"); return; }
    const cJSON *extra = NULL;
    int any_props = 0, n = collect(c, s, path, depth, pr, 0, CAP, &extra, &any_props);
    if (n >= 0) {
        if (!any_props && !n && (!extra || cJSON_IsTrue(extra))) puts_(out, "object"); // any object
        else if (extra && !cJSON_IsBool(extra) && !cJSON_IsObject(extra))
            err(c, INFER_ERR_ARG, path, "'additionalProperties' must be a boolean or a schema");
        else {
            sbuf ex = {0};
            if (cJSON_IsTrue(extra) || (!extra && !any_props)) puts_(&ex, "value");
            else if (cJSON_IsObject(extra)) {
                char p[256];
                snprintf(p, sizeof p, "%s/additionalProperties", path);
                gen_named(c, extra, p, depth + 1, &ex);
            }
            gen_props(c, pr, n, ex.n ? ex.v : NULL, path, depth, out);
            free(ex.v);
        }
    }
    free(pr);
}

// The value of schema s for one type name.
static void gen_type(jsc *c, const cJSON *s, const char *type, const char *path, int depth, sbuf *out) {
    if (!strcmp(type, "object")) gen_object(c, s, path, depth, out);
    else if (!strcmp(type, "array")) gen_array(c, s, path, depth, out);
    else if (!strcmp(type, "string")) gen_string(c, s, path, out);
    else if (!strcmp(type, "number")) puts_(out, non_negative(s) ? "number-pos" : "number");
    else if (!strcmp(type, "integer")) puts_(out, non_negative(s) ? "integer-pos" : "integer");
    else if (!strcmp(type, "boolean")) puts_(out, "boolean");
    else if (!strcmp(type, "null")) puts_(out, "null");
    else err(c, INFER_ERR_ARG, path, "unknown type '%.40s'", type);
}

static void put_json_literal(jsc *c, const cJSON *v, sbuf *out) {
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt) { c->st = fail(INFER_ERR_NOMEM, "json_schema: out of memory"); return; }
    put_literal(out, txt);
    free(txt);
}

// Appends to ref what matches schema s: a rule name or a parenthesized group.
static void gen(jsc *c, const cJSON *s, const char *path, int depth, sbuf *ref) {
    if (c->st) return;
    if (depth > MAX_NEST) { err(c, INFER_ERR_UNSUPPORTED, path, "the schema nests deeper than %d", MAX_NEST); return; }
    if (cJSON_IsTrue(s)) { puts_(ref, "value"); return; }
    if (!cJSON_IsObject(s)) {
        err(c, cJSON_IsFalse(s) ? INFER_ERR_UNSUPPORTED : INFER_ERR_ARG, path, cJSON_IsFalse(s) ? "schema false accepts nothing" : "a schema must be an object");
        return;
    }
    for (size_t i = 0; i < sizeof g_unsupported / sizeof *g_unsupported; i++)
        if (field(s, g_unsupported[i])) { err(c, INFER_ERR_UNSUPPORTED, path, "'%s' is unsupported", g_unsupported[i]); return; }
    const cJSON *u = field(s, "uniqueItems");
    if (cJSON_IsTrue(u)) { err(c, INFER_ERR_UNSUPPORTED, path, "'uniqueItems' is unsupported"); return; }
    const cJSON *ref_ = field(s, "$ref"), *cst = field(s, "const"), *en = field(s, "enum"), *any = field(s, "anyOf"),
                *one = field(s, "oneOf"), *all = field(s, "allOf"), *type = field(s, "type");
    if (ref_) {
        if (!cJSON_IsString(ref_)) { err(c, INFER_ERR_ARG, path, "'$ref' must be a string"); return; }
        gen_ref(c, ref_->valuestring, path, depth, ref);
        return;
    }
    if (cst) { put_json_literal(c, cst, ref); return; }
    if (en) {
        if (!cJSON_IsArray(en) || !cJSON_GetArraySize(en)) { err(c, INFER_ERR_ARG, path, "'enum' must be a non-empty array"); return; }
        puts_(ref, "(");
        const cJSON *x;
        int i = 0;
        cJSON_ArrayForEach(x, en) {
            puts_(ref, i++ ? " | " : " ");
            put_json_literal(c, x, ref);
        }
        puts_(ref, " )");
        return;
    }
    if (any || one) {
        const cJSON *alts = any ? any : one;
        const char *kw = any ? "anyOf" : "oneOf";
        if (!cJSON_IsArray(alts) || !cJSON_GetArraySize(alts)) { err(c, INFER_ERR_ARG, path, "'%s' must be a non-empty array", kw); return; }
        puts_(ref, "(");
        const cJSON *x;
        int i = 0;
        cJSON_ArrayForEach(x, alts) {
            char p[256];
            snprintf(p, sizeof p, "%s/%s/%d", path, kw, i);
            puts_(ref, i++ ? " | " : " ");
            gen(c, x, p, depth + 1, ref);
        }
        puts_(ref, " )");
        return;
    }
    if (all) { gen_object(c, s, path, depth, ref); return; }
    if (cJSON_IsArray(type)) {
        if (!cJSON_GetArraySize(type)) { err(c, INFER_ERR_ARG, path, "'type' is an empty array"); return; }
        puts_(ref, "(");
        const cJSON *x;
        int i = 0;
        cJSON_ArrayForEach(x, type) {
            if (!cJSON_IsString(x)) { err(c, INFER_ERR_ARG, path, "'type' must be a name or an array of names"); return; }
            puts_(ref, i++ ? " | " : " ");
            gen_type(c, s, x->valuestring, path, depth, ref);
        }
        puts_(ref, " )");
        return;
    }
    if (type && !cJSON_IsString(type)) { err(c, INFER_ERR_ARG, path, "'type' must be a name or an array of names"); return; }
    if (type) { gen_type(c, s, type->valuestring, path, depth, ref); return; }
    // no type: what the keywords imply, else any value
    if (field(s, "properties") || field(s, "additionalProperties") || field(s, "required")) gen_object(c, s, path, depth, ref);
    else if (field(s, "items") || field(s, "prefixItems") || field(s, "minItems") || field(s, "maxItems")) gen_array(c, s, path, depth, ref);
    else if (field(s, "minLength") || field(s, "maxLength") || field(s, "format")) gen_string(c, s, path, ref);
    else puts_(ref, "value");
}

infer_status json_schema_to_gbnf(const char *schema, char **gbnf) {
    *gbnf = NULL;
    jsc c = {0};
    cJSON *doc = NULL;
    if (schema) {
        doc = cJSON_Parse(schema);
        if (!doc) return fail(INFER_ERR_ARG, "json_schema: not valid JSON (near byte %td)", cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - schema : (ptrdiff_t)0);
    }
    c.doc = doc;
    sbuf root = {0};
    if (doc) gen(&c, doc, "", 0, &root);
    else puts_(&root, "object");
    if (!c.st) {
        puts_(&c.out, "root ::= ");
        put(&c.out, root.v ? root.v : "", root.n);
        puts_(&c.out, "\n");
        puts_(&c.out, g_prelude);
        if (c.out.oom || root.oom) c.st = fail(INFER_ERR_NOMEM, "json_schema: out of memory");
    }
    free(root.v);
    for (int i = 0; i < c.n_refs; i++) free(c.refs[i].ref);
    cJSON_Delete(doc);
    if (c.st) { free(c.out.v); return c.st; }
    *gbnf = c.out.v;
    return INFER_OK;
}
