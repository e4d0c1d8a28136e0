// Grammars: GBNF parsing, JSON Schema compilation (text accepted and refused
// character by character), errors and limits; then token by token over a real
// vocabulary: walks through the mask give JSON that cJSON parses and the
// schema accepts, and the trie's mask equals a token-by-token oracle.
#include "check.h"
#include "infer.h"
#include "inference/grammar.h"

#include <cjson/cJSON.h>
#include <time.h>

static grules *gbnf(const char *text) {
    grules *g = NULL;
    infer_status st = grammar_parse(text, NULL, &g);
    CHECK(st == INFER_OK, "parse: %s: %s", text, infer_last_error());
    return g;
}

static grules *schema(const char *s) {
    char *text = NULL;
    grules *g = NULL;
    infer_status st = json_schema_to_gbnf(s, &text);
    CHECK(st == INFER_OK, "compile %s: %s", s ? s : "(object)", infer_last_error());
    if (!st) {
        st = grammar_parse(text, NULL, &g);
        CHECK(st == INFER_OK, "parse the compiled %s: %s\n%s", s ? s : "(object)", infer_last_error(), text);
    }
    free(text);
    return g;
}

// every string of yes is a whole sentence, none of no is
static void sentences(const char *what, const grules *g, const char *const *yes, const char *const *no) {
    if (!g) return;
    for (; yes && *yes; yes++) {
        int complete = 0, ok = grammar_match_text(g, *yes, strlen(*yes), &complete);
        CHECK(ok && complete, "%s: should accept %s (prefix %d, complete %d)", what, *yes, ok, complete);
    }
    for (; no && *no; no++) {
        int complete = 0, ok = grammar_match_text(g, *no, strlen(*no), &complete);
        CHECK(!(ok && complete), "%s: should refuse %s", what, *no);
    }
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_gbnf(void) {
    grules *g = gbnf("root ::= \"a\" b* [x-z]+ (\"!\" | \"?\")? c{2,3}\n"
                     "b ::= [^a-c\\n]  # a comment\n"
                     "c ::= \"\\u00e9\" | \".\"\n");
    sentences("gbnf", g, L("ax..", "addz\xc3\xa9\xc3\xa9", "a-yz!...", "ax?.\xc3\xa9."), L("a", "ax.", "aax..", "ax....", "acx..", "ax!!.."));
    // a prefix that ends inside a character the grammar accepts is a prefix
    int complete;
    grammar_rules_free(g);
    g = gbnf("root ::= \"x\" ( \"\xc3\xa9\" | [\u4e00-\u9fff] )\n");
    CHECK(grammar_match_text(g, "x\xc3", 2, &complete) && !complete, "a partial UTF-8 character of a set is a prefix");
    CHECK(grammar_match_text(g, "x\xe4\xb8", 3, &complete) && !complete, "a partial UTF-8 character of a range is a prefix");
    CHECK(!grammar_match_text(g, "x\xc4", 2, &complete), "a partial character no set accepts is not");
    CHECK(!grammar_match_text(g, "x\xe3", 2, &complete), "a partial character below a range is not");
    CHECK(!grammar_match_text(g, "x\x80", 2, &complete), "a stray continuation byte is not");
    grammar_rules_free(g);
    g = gbnf("root ::= (\"x\" root \"y\")?\n");
    sentences("recursion", g, L("", "xy", "xxxyyy"), L("x", "xyy", "yx"));
    grammar_rules_free(g);
    g = gbnf("root ::= [0-9]{3}\n");
    sentences("{3}", g, L("123"), L("12", "1234"));
    grammar_rules_free(g);
    g = gbnf("root ::= .+ \"\\x21\"\n");
    sentences("any", g, L("ab!", "\xe6\x97\xa5!", "!!"), L("!", "ab"));
    grammar_rules_free(g);
    // errors name what is wrong
    static const struct { const char *text, *want; } bad[] = {
        {"root ::= foo\n", "undefined rule 'foo'"},
        {"root ::= root \"a\" | \"b\"\n", "left recursion"},
        {"root ::= a\na ::= b? a \"x\"\nb ::= \"y\"\n", "left recursion"},
        {"root ::= \"a\n", "unterminated"},
        {"root ::= [a\n", "unterminated"},
        {"root ::= [z-a]\n", "backwards"},
        {"root ::= \"a\"{2000}\n", "too large"},
        {"root ::= \"a\" )\n", "unexpected"},
        {"root = \"a\"\n", "::="},
        {"root ::= *\n", "nothing to repeat"},
        {"other ::= \"a\"\n", "no rule 'root'"},
        {"root ::= \"\\q\"\n", "escape"},
        {"root ::= \"a\"\nroot ::= \"b\"\n", "twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        grules *x = NULL;
        infer_status st = grammar_parse(bad[i].text, NULL, &x);
        CHECK(st != INFER_OK && strstr(infer_last_error(), bad[i].want), "%s: should fail with '%s', got %s", bad[i].text, bad[i].want,
              st ? infer_last_error() : "ok");
        grammar_rules_free(x);
    }
    // groups nested 128 deep parse; deeper ones are refused before the parser's recursion can exhaust the stack
    char deep[4096];
    for (int depth = 128; depth <= 129; depth++) {
        int n = snprintf(deep, sizeof deep, "root ::= ");
        for (int i = 0; i < depth; i++) deep[n++] = '(';
        deep[n++] = '"', deep[n++] = 'a', deep[n++] = '"';
        for (int i = 0; i < depth; i++) deep[n++] = ')';
        deep[n++] = '\n', deep[n] = 0;
        grules *x = NULL;
        infer_status st = grammar_parse(deep, NULL, &x);
        if (depth == 128) CHECK(st == INFER_OK, "groups 128 deep: %s", infer_last_error());
        else CHECK(st != INFER_OK && strstr(infer_last_error(), "nested too deeply"), "groups 129 deep: %s", st ? infer_last_error() : "ok");
        grammar_rules_free(x);
    }
}

static void test_json_object(void) {
    grules *g = schema(NULL);
    sentences("json_object", g,
              L("{}", "{ }", "{\"a\":1}", "{\"a\": [1, -2.5e3, \"x\\\"y\", true, false, null, {}, []]}",
                "{\n  \"k\": {\"n\": {\"m\": [[]]}},\n  \"s\": \"\\u00e9\\n\\\\\"\n}", "{\"\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\":0.5}",
                "{\"a\":0,\"b\":-0.0,\"c\":1E+2}"),
              L("", "[]", "1", "\"x\"", "{\"a\":}", "{'a':1}", "{\"a\":1,}", "{\"a\":01}", "{\"a\":1} ", "{  \"a\":1}",
                "{\"a\":\"line\nbreak\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12\"}", "{\"a\":tru}", "{\"a\":1.}", "{a:1}",
                "{\"a\":\"\xc3\x28\"}", "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xc0\xaf\"}", "{\"a\":1}}"));
    grammar_rules_free(g);
}

static void test_schemas(void) {
    grules *g = schema("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
                       "\"email\":{\"type\":\"string\"}},\"required\":[\"name\",\"age\"]}");
    sentences("required and optional", g,
              L("{\"name\":\"a\",\"age\":3}", "{\"name\":\"a\",\"age\":-3,\"email\":\"x@y\"}", "{ \"name\": \"\", \"age\": 0 }"),
              L("{\"age\":3,\"name\":\"a\"}", "{\"name\":\"a\"}", "{\"name\":\"a\",\"age\":3.5}", "{\"name\":\"a\",\"age\":3,\"x\":1}",
                "{\"name\":\"a\",\"age\":3,}", "{}", "{\"name\":1,\"age\":3}"));
    grammar_rules_free(g);
    g = schema("{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"},\"c\":{\"type\":\"null\"}}}");
    sentences("all optional", g, L("{}", "{\"a\":1}", "{\"b\":true}", "{\"c\":null}", "{\"a\":1,\"c\":null}", "{\"a\":1,\"b\":false,\"c\":null}"),
              L("{,\"b\":true}", "{\"b\":true,\"a\":1}", "{\"a\":1,}", "{\"a\":1\"b\":true}", "{\"d\":1}"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0},\"minItems\":2,\"maxItems\":3}");
    sentences("minItems/maxItems", g, L("[1,2]", "[1, 2, 3]", "[ 0 ,1 ]"), L("[]", "[1]", "[1,2,3,4]", "[1,-2]", "[1,2,]"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"array\",\"maxItems\":0}");
    sentences("maxItems 0", g, L("[]", "[ ]"), L("[1]"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"array\"}");
    sentences("any array", g, L("[]", "[1,\"a\",{\"b\":[null]}]"), L("{}", "[1,]"));
    grammar_rules_free(g);
    g = schema("{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1]}]}");
    sentences("enum", g, L("\"red\"", "\"green\"", "1", "null", "{\"a\":[1]}"), L("\"blue\"", "\"re\"", "2", "\"red\" "));
    grammar_rules_free(g);
    g = schema("{\"const\":\"x\\\"y\\u00e9\"}");
    sentences("const", g, L("\"x\\\"y\xc3\xa9\""), L("\"xy\""));
    grammar_rules_free(g);
    g = schema("{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"integer\"}]}");
    sentences("anyOf", g, L("\"ab\"", "-5", "0"), L("true", "\"abc\"", "1.5"));
    grammar_rules_free(g);
    g = schema("{\"oneOf\":[{\"type\":\"boolean\"},{\"type\":\"array\",\"items\":{\"type\":\"number\"}}]}");
    sentences("oneOf", g, L("true", "[1.5,2e-3]"), L("[true]", "null"));
    grammar_rules_free(g);
    g = schema("{\"type\":[\"string\",\"null\"]}");
    sentences("type array", g, L("\"x\"", "null"), L("1", "\"x"));
    grammar_rules_free(g);
    g = schema("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
               "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}");
    sentences("$ref recursion", g, L("{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4,\"kids\":[]}]}]}"),
              L("{\"v\":1,\"kids\":[{\"w\":2}]}", "{\"kids\":[]}", "{\"v\":1,\"kids\":[1]}"));
    grammar_rules_free(g);
    g = schema("{\"definitions\":{\"t\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/t\"}}},\"$ref\":\"#/definitions/t\"}");
    sentences("definitions", g, L("[]", "[[],[[]]]"), L("[1]", "[[]"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#\"}}}");
    sentences("$ref #", g, L("{}", "{\"next\":{\"next\":{}}}"), L("{\"next\":1}"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}");
    sentences("string lengths", g, L("\"ab\"", "\"a\\u00e9\"", "\"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\"", "\"\\n\\t\\\\\\\"\"", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\""),
              L("\"a\"", "\"abcde\"", "\"\\q\"", "\"a\tb\"", "\"ab"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}");
    sentences("additionalProperties schema", g, L("{}", "{\"a\":1,\"b\":2}"), L("{\"a\":\"x\"}"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}");
    sentences("additionalProperties true", g, L("{}", "{\"a\":1}", "{\"a\":1,\"z\":[true]}", "{\"z\":\"x\"}"), L("{\"a\":1,}", "{\"a\":1 \"z\":2}"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":false,\"required\":[\"a\"]}");
    sentences("additionalProperties false", g, L("{\"a\":1}"), L("{\"a\":1,\"b\":2}", "{}"));
    grammar_rules_free(g);
    g = schema("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
               "{\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}]}");
    sentences("allOf", g, L("{\"a\":1,\"b\":\"x\"}"), L("{\"a\":1}", "{\"b\":\"x\"}"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}");
    sentences("prefixItems", g, L("[1,\"a\"]"), L("[1]", "[\"a\",1]", "[1,\"a\",2]"));
    grammar_rules_free(g);
    g = schema("{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"},\"t\":{\"type\":\"string\",\"format\":\"date-time\"},"
               "\"u\":{\"type\":\"string\",\"format\":\"uuid\"}},\"required\":[\"d\",\"t\",\"u\"]}");
    sentences("formats", g, L("{\"d\":\"2024-02-29\",\"t\":\"2024-02-29T23:59:00Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}"),
              L("{\"d\":\"2024-13-01\",\"t\":\"2024-02-29T23:59:00Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}",
                "{\"d\":\"2024-02-29\",\"t\":\"2024-02-29 23:59:00Z\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}",
                "{\"d\":\"2024-02-29\",\"t\":\"2024-02-29T23:59:00Z\",\"u\":\"123e4567e89b12d3a456426614174000\"}"));
    grammar_rules_free(g);
    g = schema("{\"title\":\"t\",\"description\":\"d\",\"$schema\":\"x\",\"examples\":[1],\"default\":2,\"type\":\"integer\",\"maximum\":9}");
    sentences("annotations ignored", g, L("5", "-5", "12"), L("\"5\""));
    grammar_rules_free(g);

    // refused, naming the keyword; malformed, naming the problem
    static const struct { const char *s, *want; infer_status st; } bad[] = {
        {"{\"type\":\"string\",\"pattern\":\"^a\"}", "'pattern'", INFER_ERR_UNSUPPORTED},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{}}}}", "/properties/a: 'not' is unsupported", INFER_ERR_UNSUPPORTED},
        {"{\"if\":{},\"then\":{}}", "'if'", INFER_ERR_UNSUPPORTED},
        {"{\"patternProperties\":{}}", "'patternProperties'", INFER_ERR_UNSUPPORTED},
        {"{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems'", INFER_ERR_UNSUPPORTED},
        {"{\"type\":\"array\",\"maxItems\":100000}", "maxItems", INFER_ERR_UNSUPPORTED},
        {"{\"type\":\"string\",\"maxLength\":100000}", "maxLength", INFER_ERR_UNSUPPORTED},
        {"{\"type\":\"strin\"}", "unknown type 'strin'", INFER_ERR_ARG},
        {"{\"type\":\"object\"", "not valid JSON", INFER_ERR_ARG},
        {"{\"$ref\":\"#/$defs/missing\"}", "names nothing", INFER_ERR_ARG},
        {"{\"$ref\":\"http://x/y.json\"}", "$ref", INFER_ERR_UNSUPPORTED},
        {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "maxItems 2 < minItems 3", INFER_ERR_ARG},
        {"{\"enum\":[]}", "'enum'", INFER_ERR_ARG},
        {"{\"type\":\"object\",\"properties\":[]}", "'properties'", INFER_ERR_ARG},
        {"3", "a schema must be an object", INFER_ERR_ARG},
        {"{\"allOf\":[{\"type\":\"string\"}]}", "allOf", INFER_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *text = NULL;
        infer_status st = json_schema_to_gbnf(bad[i].s, &text);
        CHECK(st == bad[i].st && strstr(infer_last_error(), bad[i].want), "%s: should fail (%d) with '%s', got %d %s", bad[i].s, bad[i].st,
              bad[i].want, st, st ? infer_last_error() : "ok");
        free(text);
    }
    // a schema whose $ref is itself compiles to a left-recursive grammar: refused, not looped on
    char *text = NULL;
    grules *x = NULL;
    infer_status st = json_schema_to_gbnf("{\"$ref\":\"#\"}", &text);
    if (!st) st = grammar_parse(text, NULL, &x);
    CHECK(st != INFER_OK && strstr(infer_last_error(), "left recursion"), "$ref to itself: %s", st ? infer_last_error() : "accepted");
    free(text);
    grammar_rules_free(x);
    // deep nesting: refused past 64
    char deep[4096] = "", *p = deep;
    for (int i = 0; i < 100; i++) p += sprintf(p, "{\"type\":\"array\",\"items\":");
    p += sprintf(p, "{\"type\":\"integer\"}");
    for (int i = 0; i < 100; i++) *p++ = '}';
    *p = 0;
    st = json_schema_to_gbnf(deep, &text);
    CHECK(st == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), "deeper than 64"), "deep schema: %s", st ? infer_last_error() : "accepted");
    free(st ? NULL : text);
    // nesting 30 deep is fine
    p = deep;
    for (int i = 0; i < 30; i++) p += sprintf(p, "{\"type\":\"array\",\"items\":");
    p += sprintf(p, "{\"type\":\"integer\"}");
    for (int i = 0; i < 30; i++) *p++ = '}';
    *p = 0;
    g = schema(deep);
    char doc[128] = "";
    for (int i = 0; i < 30; i++) strcat(doc, "[");
    strcat(doc, "7");
    for (int i = 0; i < 30; i++) strcat(doc, "]");
    sentences("30 deep", g, L(doc), L("[[7]]"));
    grammar_rules_free(g);
    // a text nested past the matcher's stack bound is refused, not grown without end
    g = schema(NULL);
    size_t n = 5000;
    char *big = malloc(n + 8);
    strcpy(big, "{\"a\":");
    for (size_t i = 5; i < n; i++) big[i] = '[';
    int complete;
    CHECK(!grammar_match_text(g, big, n, &complete), "5000 nested arrays should pass the stack bound");
    free(big);
    grammar_rules_free(g);
}

// ---------------------------------------------------------------------------
// token level, over SmolLM2's vocabulary

static uint64_t g_rng = 0x1234567;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}

typedef struct {
    int n;
    char **piece;
    size_t *len;
} pieces;

static pieces get_pieces(infer_model *m) {
    pieces p = {infer_model_n_vocab(m), NULL, NULL};
    p.piece = calloc((size_t)p.n, sizeof *p.piece);
    p.len = calloc((size_t)p.n, sizeof *p.len);
    for (int i = 0; i < p.n; i++) {
        int32_t id = i;
        if (infer_detokenize(m, &id, 1, 1, &p.piece[i], &p.len[i])) p.piece[i] = NULL, p.len[i] = 0;
    }
    return p;
}

static void free_pieces(pieces *p) {
    for (int i = 0; i < p->n; i++) free(p->piece[i]);
    free(p->piece), free(p->len);
}

// UTF-8 characters of s
static size_t chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

// schema B's own check (the subset it uses)
static int valid_b(const cJSON *j) {
    if (!cJSON_IsObject(j)) return 0;
    const cJSON *x;
    int seen = 0;
    cJSON_ArrayForEach(x, j) {
        if (!strcmp(x->string, "name")) { if (!cJSON_IsString(x) || chars(x->valuestring) > 12) return 0; seen |= 1; }
        else if (!strcmp(x->string, "age")) { if (!cJSON_IsNumber(x) || x->valuedouble != (double)(long long)x->valuedouble) return 0; seen |= 2; }
        else if (!strcmp(x->string, "color")) {
            if (!cJSON_IsString(x) || (strcmp(x->valuestring, "red") && strcmp(x->valuestring, "green"))) return 0;
        } else if (!strcmp(x->string, "tags")) {
            if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) > 3) return 0;
            const cJSON *t;
            cJSON_ArrayForEach(t, x) if (!cJSON_IsString(t) || chars(t->valuestring) > 8) return 0;
        } else if (!strcmp(x->string, "ok")) { if (!cJSON_IsBool(x)) return 0; }
        else return 0;
    }
    return seen == 3;
}

static int valid_tree(const cJSON *j) {
    if (!cJSON_IsObject(j) || !cJSON_IsNumber(cJSON_GetObjectItem(j, "v"))) return 0;
    const cJSON *k = cJSON_GetObjectItem(j, "kids"), *x;
    if (k && !cJSON_IsArray(k)) return 0;
    cJSON_ArrayForEach(x, k) if (!valid_tree(x)) return 0;
    cJSON_ArrayForEach(x, j) if (strcmp(x->string, "v") && strcmp(x->string, "kids")) return 0;
    return 1;
}

static int valid_object(const cJSON *j) { return cJSON_IsObject(j); }

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// Does the mask (the trie walk) equal, token by token, the text oracle on
// prefix + the token's bytes (and infer_grammar_allows)?
static void check_mask_oracle(infer_model *m, const pieces *pc, const char *sch, const char *prefix, size_t n_prefix, infer_grammar *g,
                              const float *masked) {
    char *text;
    grules *r = NULL;
    if (json_schema_to_gbnf(sch, &text) || grammar_parse(text, NULL, &r)) { CHECK(0, "oracle: %s", infer_last_error()); return; }
    free(text);
    char *buf = malloc(n_prefix + 65536);
    memcpy(buf, prefix, n_prefix);
    int32_t eog[16];
    int n_eog = infer_model_eog(m, eog, 16), bad = 0, n_yes = 0;
    for (int i = 0; i < pc->n; i++) {
        int special = pc->len[i] == 0;
        for (int k = 0; k < n_eog; k++) special |= eog[k] == i;
        // (control tokens: their text is left out by detokenize's skip_special, so the length is 0)
        int want;
        if (special) {
            int is_eog = 0, complete = 0;
            for (int k = 0; k < n_eog; k++) is_eog |= eog[k] == i;
            grammar_match_text(r, buf, n_prefix, &complete);
            want = is_eog && complete;
        } else {
            memcpy(buf + n_prefix, pc->piece[i], pc->len[i]);
            want = grammar_match_text(r, buf, n_prefix + pc->len[i], NULL);
        }
        int got = masked[i] != -INFINITY, allows = infer_grammar_allows(g, i);
        n_yes += want;
        if ((want != got || want != allows) && bad++ < 5)
            CHECK(0, "token %d '%.*s' after '%.*s': oracle %d, mask %d, allows %d", i, (int)pc->len[i], pc->piece[i] ? pc->piece[i] : "",
                  (int)n_prefix, prefix, want, got, allows);
    }
    CHECK(!bad, "%d tokens differ from the oracle (%d allowed)", bad, n_yes);
    free(buf);
    grammar_rules_free(r);
}

// Random walks through the mask: each token is picked among the allowed
// ones (favouring one-byte tokens and closing characters, so walks end);
// a finished text must parse and pass `valid`.
static void walks(infer_model *m, const pieces *pc, const char *sch, int (*valid)(const cJSON *), int n_walks, int oracle_at) {
    int V = infer_model_n_vocab(m), done = 0;
    float *lg = malloc(sizeof *lg * (size_t)V);
    int32_t *ok = malloc(sizeof *ok * (size_t)V), *one = malloc(sizeof *one * (size_t)V);
    double t_mask = 0;
    int n_mask = 0;
    for (int w = 0; w < n_walks; w++) {
        infer_grammar *g = NULL;
        infer_status st = infer_grammar_from_json_schema(m, sch, &g);
        CHECK(st == INFER_OK, "%s: %s", sch ? sch : "(object)", infer_last_error());
        if (st) break;
        char text[16384];
        size_t n = 0;
        int step;
        for (step = 0; step < 600 && !infer_grammar_complete(g); step++) {
            for (int i = 0; i < V; i++) lg[i] = 0;
            double t0 = now_ms();
            int n_ok = infer_grammar_mask(g, lg);
            t_mask += now_ms() - t0, n_mask++;
            CHECK(n_ok > 0, "walk %d step %d: no token allowed after '%.*s'", w, step, (int)n, text);
            if (n_ok <= 0) break;
            if (w == 0 && step == oracle_at) check_mask_oracle(m, pc, sch, text, n, g, lg);
            int k = 0, k1 = 0;
            for (int i = 0; i < V; i++)
                if (lg[i] != -INFINITY) {
                    ok[k++] = i;
                    if (pc->len[i] == 1 || pc->len[i] == 0) one[k1++] = i;
                }
            int32_t tok = -1;
            uint32_t r = rnd() % 100;
            if (r < (step < 20 ? 3u : 30u) && k1) { // a closing character when one is allowed (seldom at first)
                for (int i = 0; i < k1 && tok < 0; i++) {
                    int32_t t = one[((uint32_t)i + rnd()) % (uint32_t)k1];
                    if (pc->len[t] == 0 || strchr("\"}],", pc->piece[t][0])) tok = t;
                }
            }
            if (tok < 0) tok = r < 85 && k1 ? one[rnd() % (uint32_t)k1] : ok[rnd() % (uint32_t)k];
            CHECK(infer_grammar_allows(g, tok), "allows() refuses a masked-in token %d", tok);
            st = infer_grammar_accept(g, tok);
            CHECK(st == INFER_OK, "accept %d: %s", tok, infer_last_error());
            if (st) break;
            if (pc->len[tok] && n + pc->len[tok] < sizeof text) memcpy(text + n, pc->piece[tok], pc->len[tok]), n += pc->len[tok];
        }
        text[n] = 0;
        if (infer_grammar_complete(g)) {
            done++;
            if (getenv("GRAMMAR_SHOW")) printf("    %s\n", text);
            const char *end = NULL;
            cJSON *j = cJSON_ParseWithOpts(text, &end, 1);
            CHECK(j && valid(j), "walk %d: '%s' should parse and be valid", w, text);
            cJSON_Delete(j);
            // once complete, only end-of-generation may follow
            for (int i = 0; i < V; i++) lg[i] = 0;
            int n_ok = infer_grammar_mask(g, lg);
            int32_t eog[16];
            int n_eog = infer_model_eog(m, eog, 16);
            CHECK(n_ok == n_eog && lg[eog[0]] == 0, "complete: %d tokens allowed, %d end-of-generation", n_ok, n_eog);
            CHECK(infer_grammar_accept(g, eog[0]) == INFER_OK, "end of generation: %s", infer_last_error());
        }
        infer_grammar_free(g);
    }
    CHECK(done >= n_walks / 2, "%s: only %d of %d walks finished", sch ? sch : "(object)", done, n_walks);
    printf("  %-40.40s %d/%d walks finished, mask %.2f ms/token (vocab %d)\n", sch ? sch : "(any object)", done, n_walks,
           n_mask ? t_mask / n_mask : 0, V);
    free(lg), free(ok), free(one);
}

// A text tokenized as the model would: every token must be allowed, and the
// end complete (the mask lets through what the model would write).
static void tokenized(infer_model *m, const char *sch, const char *doc) {
    int32_t *ids = NULL;
    int n = 0;
    infer_grammar *g = NULL;
    if (infer_tokenize(m, doc, strlen(doc), 0, 0, &ids, &n) || infer_grammar_from_json_schema(m, sch, &g)) {
        CHECK(0, "%s", infer_last_error());
        free(ids);
        return;
    }
    int V = infer_model_n_vocab(m);
    float *lg = malloc(sizeof *lg * (size_t)V);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < V; k++) lg[k] = 0;
        infer_grammar_mask(g, lg);
        CHECK(lg[ids[i]] == 0 && infer_grammar_allows(g, ids[i]), "%s: token %d of '%s' masked out", sch ? sch : "(object)", i, doc);
        if (infer_grammar_accept(g, ids[i])) { CHECK(0, "accept: %s", infer_last_error()); break; }
    }
    CHECK(infer_grammar_complete(g), "'%s' should be complete", doc);
    free(lg);
    free(ids);
    infer_grammar_free(g);
}

static const char *const g_schema_b =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\"},"
    "\"color\":{\"enum\":[\"red\",\"green\"]},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":8},\"maxItems\":3},"
    "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"]}";
static const char *const g_schema_tree =
    "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\","
    "\"items\":{\"$ref\":\"#/$defs/n\"},\"maxItems\":2}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/n\"}";

// Grammars made to cost: each is refused with a message naming the limit, or
// runs within it (the work is counted; nothing here may take long).
static char *chain(int n, const char *last, int left) {
    size_t cap = (size_t)n * 40 + 64, at = 0;
    char *s = malloc(cap);
    at += (size_t)snprintf(s + at, cap - at, "root ::= a0\n");
    for (int i = 0; i < n - 1; i++) at += (size_t)snprintf(s + at, cap - at, "a%d ::= a%d%s\n", i, i + 1, left ? " \"x\"" : "");
    snprintf(s + at, cap - at, "a%d ::= %s\n", n - 1, last);
    return s;
}

static void test_hostile(infer_model *m) {
    infer_grammar *g = NULL;
    char text[256];
    for (int n = 5; n <= 1024; n = n < 8 ? n + 1 : n * 4) { // nested optional repetitions: refused once too many
        snprintf(text, sizeof text, "root ::= (((\"a\"{0,%d}){0,%d}){0,%d})", n, n, n);
        infer_status st = infer_grammar_from_gbnf(m, text, NULL, &g);
        if (n <= 8) {
            CHECK(st == INFER_OK, "%s: %s", text, infer_last_error());
            int32_t *ids = NULL, n_ids = 0;
            if (g && !infer_tokenize(m, "aaaaaaa", 7, 0, 0, &ids, &n_ids))
                for (int i = 0; i < n_ids; i++) CHECK(infer_grammar_accept(g, ids[i]) == INFER_OK, "%s: 'aaaaaaa': %s", text, infer_last_error());
            free(ids);
        } else {
            CHECK(st == INFER_ERR_ARG && !g && (strstr(infer_last_error(), "too costly") || strstr(infer_last_error(), "bounds")),
                  "%s: refused, naming the limit (got %d: %s)", text, st, infer_last_error());
        }
        infer_grammar_free(g), g = NULL;
    }
    CHECK(infer_grammar_from_gbnf(m, "root ::= (\"a\"{0,300}){0,300}", NULL, &g) == INFER_OK, "{0,300}{0,300}: %s", infer_last_error());
    infer_grammar_free(g), g = NULL;
    // rules in a chain as long as the bound allows: no recursion in the compiler or the matcher
    char *c = chain(GRAMMAR_MAX_RULES - 10, "\"x\" | \"\"", 0);
    CHECK(infer_grammar_from_gbnf(m, c, NULL, &g) == INFER_OK && infer_grammar_allows(g, infer_model_n_vocab(m) - 1) >= 0,
          "a chain of %d rules: %s", GRAMMAR_MAX_RULES - 10, infer_last_error());
    infer_grammar_free(g), g = NULL, free(c);
    c = chain(GRAMMAR_MAX_RULES - 10, "a0", 1);
    CHECK(infer_grammar_from_gbnf(m, c, NULL, &g) == INFER_ERR_ARG && strstr(infer_last_error(), "left recursion"),
          "a cycle of %d rules: %s", GRAMMAR_MAX_RULES - 10, infer_last_error());
    free(c);
    // a grammar no token can begin: refused when made, not at the first token
    CHECK(infer_grammar_from_gbnf(m, "root ::= [^\\x00-\\U0010FFFF]", NULL, &g) == INFER_ERR_ARG && !g &&
              strstr(infer_last_error(), "no token"), "unmatchable: %s", infer_last_error());
}

static void test_tokens(const char *path, int full) {
    infer_model *m = NULL;
    if (infer_model_load(path, &m)) { CHECK(0, "%s: %s", path, infer_last_error()); return; }
    double t0 = now_ms();
    infer_grammar *g = NULL;
    CHECK(infer_grammar_from_json_schema(m, NULL, &g) == INFER_OK, "%s", infer_last_error());
    printf("  %s: the vocabulary's trie in %.0f ms\n", path, now_ms() - t0);
    infer_grammar_free(g);
    // bad schemas fail at the API too, naming the keyword
    CHECK(infer_grammar_from_json_schema(m, "{\"type\":\"string\",\"pattern\":\"a\"}", &g) == INFER_ERR_UNSUPPORTED &&
              strstr(infer_last_error(), "pattern") && !g, "pattern: %s", infer_last_error());
    CHECK(infer_grammar_from_gbnf(m, "root ::= x\n", NULL, &g) == INFER_ERR_ARG && !g, "undefined rule: %s", infer_last_error());
    // the mask's worst case: inside a string, where most tokens may come (the first mask fills the memo)
    if (!infer_grammar_from_json_schema(m, "{\"type\":\"string\"}", &g)) {
        int32_t *ids = NULL;
        int n = 0, V = infer_model_n_vocab(m), n_ok = 0;
        float *lg = malloc(sizeof *lg * (size_t)V);
        if (!infer_tokenize(m, "\"a", 2, 0, 0, &ids, &n))
            for (int i = 0; i < n; i++) infer_grammar_accept(g, ids[i]);
        double first = 0, t = 0;
        for (int r = 0; r < 11; r++) {
            for (int i = 0; i < V; i++) lg[i] = 0;
            double t0 = now_ms();
            n_ok = infer_grammar_mask(g, lg);
            if (r) t += now_ms() - t0;
            else first = now_ms() - t0;
        }
        printf("  inside a string: %d of %d tokens allowed, mask %.2f ms (the first %.2f ms)\n", n_ok, V, t / 10, first);
        CHECK(n_ok > V / 2, "inside a string most tokens may come (%d of %d)", n_ok, V);
        free(lg), free(ids);
        infer_grammar_free(g);
    }
    test_hostile(m);
    pieces pc = get_pieces(m);
    walks(m, &pc, NULL, valid_object, full ? 8 : 3, 3);
    walks(m, &pc, g_schema_b, valid_b, full ? 8 : 3, 12);
    walks(m, &pc, g_schema_tree, valid_tree, full ? 8 : 3, 9);
    tokenized(m, NULL, "{\"a\": [1, 2.5, \"x\\\"y \xc3\xa9\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\"], \"b\": {\"c\": null}}");
    tokenized(m, g_schema_b, "{\"name\": \"Ann\", \"age\": 41, \"color\": \"green\", \"tags\": [\"a\", \"bc\"]}");
    tokenized(m, g_schema_tree, "{\"v\": 1, \"kids\": [{\"v\": 2}, {\"v\": 3, \"kids\": []}]}");
    // GBNF, and a token that ends inside a character: allowed, and the next completes it
    CHECK(infer_grammar_from_gbnf(m, "root ::= \"\xc3\xa9\" [a-z]\n", NULL, &g) == INFER_OK, "%s", infer_last_error());
    if (g) {
        int32_t *ids = NULL;
        int n = 0;
        if (!infer_tokenize(m, "\xc3\xa9x", 3, 0, 0, &ids, &n)) {
            for (int i = 0; i < n; i++) CHECK(infer_grammar_accept(g, ids[i]) == INFER_OK, "é x: %s", infer_last_error());
            CHECK(infer_grammar_complete(g), "éx should be complete");
        }
        free(ids);
        infer_grammar_free(g);
    }
    free_pieces(&pc);
    infer_model_free(m);
}

int main(void) {
    test_gbnf();
    test_json_object();
    test_schemas();
    char path[1024];
    snprintf(path, sizeof path, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", test_cache_dir());
    if (access(path, R_OK)) printf("skipping the token-level tests: %s is absent (scripts/fetch-model.sh)\n", path);
    else test_tokens(path, !getenv("INFER_TEST_LIGHT"));
    snprintf(path, sizeof path, "%s/gemma3/gemma-3-270m-q4_k_m.gguf", test_cache_dir());
    if (!access(path, R_OK) && !getenv("INFER_TEST_LIGHT")) test_tokens(path, 0);
    return check_summary("test_grammar");
}
