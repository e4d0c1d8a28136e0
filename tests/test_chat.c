// Chat templates: our renderer against transformers' apply_chat_template
// (tests/data/chat/expected.json, made by scripts/gen-chat-expected.py), plus
// error cases and hostile templates.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mapfile.h"
#include "check.h"
#include "inference/chat.h"
#include "inference/jinja.h"

static char *load(const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/chat/%s", TEST_DATA_DIR, rel);
    char *text = NULL;
    if (read_text_file(path, 16u << 20, &text, NULL) != INFER_OK) return NULL;
    return text;
}

static void show_diff(const char *want, const char *got) {
    size_t i = 0;
    while (want[i] && want[i] == got[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "    first difference at byte %zu\n    want: \"%.*s\"\n    got:  \"%.*s\"\n", i,
            (int)(strlen(want) - from < 100 ? strlen(want) - from : 100), want + from,
            (int)(strlen(got) - from < 100 ? strlen(got) - from : 100), got + from);
}

static void test_expected(void) {
    char *text = load("expected.json");
    CHECK(text != NULL, "cannot read expected.json");
    if (!text) return;
    cJSON *doc = cJSON_Parse(text);
    free(text);
    CHECK(doc != NULL, "expected.json does not parse");
    if (!doc) return;
    long long now = (long long)cJSON_GetObjectItem(doc, "now")->valuedouble;
    const cJSON *convs = cJSON_GetObjectItem(doc, "conversations");
    const cJSON *tools = cJSON_GetObjectItem(doc, "tools");
    int n_tmpl = 0, n_ok_tmpl = 0, n_cases = 0, n_ok = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "templates")) {
        const char *name = cJSON_GetObjectItem(t, "template")->valuestring;
        char rel[512];
        snprintf(rel, sizeof rel, "templates/%s", name);
        char *tmpl = load(rel);
        CHECK(tmpl != NULL, "cannot read %s", rel);
        if (!tmpl) continue;
        n_tmpl++;
        int bad = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(t, "cases")) {
            const char *conv = cJSON_GetObjectItem(c, "conversation")->valuestring;
            chat_request req = {
                .messages = cJSON_GetObjectItem(convs, conv),
                .tools = cJSON_IsTrue(cJSON_GetObjectItem(c, "tools")) ? tools : NULL,
                .extra = cJSON_GetObjectItem(c, "extra"),
                .bos_token = cJSON_GetObjectItem(t, "bos_token")->valuestring,
                .eos_token = cJSON_GetObjectItem(t, "eos_token")->valuestring,
                .add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt")),
                .now = now,
            };
            char *out = NULL;
            infer_status st = chat_render_json(tmpl, &req, &out);
            const cJSON *want = cJSON_GetObjectItem(c, "expected");
            const cJSON *err = cJSON_GetObjectItem(c, "error");
            int ok;
            n_cases++;
            if (want) {
                ok = st == INFER_OK && out && strcmp(out, want->valuestring) == 0;
                if (!ok) {
                    fprintf(stderr, "%s / %s (agp=%d): %s\n", name, conv, req.add_generation_prompt,
                            st ? infer_last_error() : "output differs");
                    if (!st) show_diff(want->valuestring, out);
                }
            } else {
                ok = st != INFER_OK;
                // a raise_exception() message must come through
                const char *msg = infer_last_error();
                if (ok && strstr(msg, "raise_exception: ") && !strstr(msg, err->valuestring)) ok = 0;
                if (!ok) fprintf(stderr, "%s / %s: want error \"%s\", got %s\n", name, conv, err->valuestring,
                                 st ? msg : "success");
            }
            n_ok += ok;
            bad += !ok;
            free(out);
        }
        CHECK(bad == 0, "%s: %d cases differ from transformers", name, bad);
        n_ok_tmpl += bad == 0;
        free(tmpl);
    }
    printf("chat templates: %d/%d templates byte-identical on all cases; %d/%d cases\n", n_ok_tmpl, n_tmpl, n_ok,
           n_cases);
    cJSON_Delete(doc);
}

// ---- small API and fallback ----------------------------------------------------

static void test_simple_api(void) {
    chat_message msgs[] = {{"system", "Be nice."}, {"user", "Hi"}};
    char *out = NULL;
    infer_status st = chat_render(NULL, msgs, 2, 1, "<s>", "</s>", &out);
    CHECK(st == INFER_OK, "fallback render: %s", infer_last_error());
    CHECK(out && strcmp(out, "<|im_start|>system\nBe nice.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                              "<|im_start|>assistant\n") == 0, "fallback output: %s", out ? out : "(null)");
    free(out);
    st = chat_render("  \n", msgs, 1, 0, NULL, NULL, &out);
    CHECK(st == INFER_OK && out && strcmp(out, "<|im_start|>system\nBe nice.<|im_end|>\n") == 0,
          "blank template uses the fallback");
    free(out);
    st = chat_render("{{ bos_token }}{% for m in messages %}[{{ m.role|upper }}]{{ m.content }}{% endfor %}{{ eos_token }}",
                     msgs, 2, 0, "<s>", "</s>", &out);
    CHECK(st == INFER_OK && out && strcmp(out, "<s>[SYSTEM]Be nice.[USER]Hi</s>") == 0, "simple template: %s",
          out ? out : infer_last_error());
    free(out);
}

// ---- loading a Hugging Face directory ---------------------------------------------

static void write_file(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) { fputs(text, f); fclose(f); }
}

static void test_load_hf(void) {
    char dir[] = "/tmp/infer-chat-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char *tmpl, *bos, *eos;
    // no tokenizer_config.json: no template, no error
    CHECK(chat_template_load_hf(dir, &tmpl, &bos, &eos) == INFER_OK && !tmpl && !bos && !eos, "empty dir");
    write_file(dir, "tokenizer_config.json",
               "{\"bos_token\": {\"content\": \"<s>\", \"lstrip\": false}, \"eos_token\": \"</s>\","
               " \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"},"
               " {\"name\": \"default\", \"template\": \"D{{ bos_token }}\"}]}");
    CHECK(chat_template_load_hf(dir, &tmpl, &bos, &eos) == INFER_OK, "load: %s", infer_last_error());
    CHECK(tmpl && !strcmp(tmpl, "D{{ bos_token }}"), "default template picked");
    CHECK(bos && !strcmp(bos, "<s>") && eos && !strcmp(eos, "</s>"), "special tokens");
    free(tmpl); free(bos); free(eos);
    // chat_template.jinja wins over tokenizer_config.json
    write_file(dir, "chat_template.jinja", "J{{ eos_token }}\n");
    CHECK(chat_template_load_hf(dir, &tmpl, NULL, NULL) == INFER_OK && tmpl && !strcmp(tmpl, "J{{ eos_token }}\n"),
          "chat_template.jinja");
    free(tmpl);
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": 5}");
    remove(strcat(strcpy((char[600]){0}, dir), "/chat_template.jinja"));
    CHECK(chat_template_load_hf(dir, &tmpl, NULL, NULL) != INFER_OK, "bad chat_template type is an error");
    remove(strcat(strcpy((char[600]){0}, dir), "/tokenizer_config.json"));
    rmdir(dir);
}

// ---- language features not covered by the real templates ----------------------

static void expect_render(const char *tmpl, const char *want) {
    cJSON *vars = cJSON_Parse("{\"xs\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1}, \"s\": \"Hello World\", \"n\": null}");
    char *out = NULL;
    infer_status st = jinja_render(tmpl, vars, 0, &out);
    CHECK(st == INFER_OK && out && strcmp(out, want) == 0, "%s -> want \"%s\", got \"%s\"", tmpl, want,
          st ? infer_last_error() : out);
    free(out);
    cJSON_Delete(vars);
}

static void test_features(void) {
    expect_render("{{ xs|length }} {{ xs|sort|join(',') }} {{ xs|max }} {{ xs|sum }}", "3 1,2,3 3 6");
    expect_render("{{ xs[::-1] }} {{ xs[1:] }} {{ s[:5] }} {{ s[-5:] }}", "[2, 1, 3] [1, 2] Hello World");
    expect_render("{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}", "b=2;a=1;");
    expect_render("{% for k, v in d|dictsort %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;");
    expect_render("{{ d|tojson }} {{ d|tojson(indent=2) }}", "{\"b\": 2, \"a\": 1} {\n  \"b\": 2,\n  \"a\": 1\n}");
    expect_render("{{ 7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1e-5 }} {{ 0.1 + 0.2 }}",
                  "3 2 3.5 1024 1e-05 0.30000000000000004");
    expect_render("{{ 'a' ~ 1 ~ none ~ true }} {{ n is none }} {{ undefined_thing is defined }}", "a1NoneTrue True False");
    expect_render("{% set ns = namespace(c=0) %}{% for x in xs %}{% set ns.c = ns.c + x %}{% endfor %}{{ ns.c }}", "6");
    expect_render("{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if loop.index > 2 %}{% break %}{% endif %}"
                  "{{ x }}{% endfor %}", "3");
    expect_render("{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}",
                  "1/2,2/2");
    expect_render("{% macro greet(name, p='Hi') %}{{ p }} {{ name }}{% endmacro %}{{ greet('A') }}|{{ greet('B', p='Yo') }}",
                  "Hi A|Yo B");
    expect_render("{{ s.split(' ')|first }} {{ s.lower() }} {{ s.replace('l', 'L', 2) }} {{ s.startswith(('x', 'He')) }}",
                  "Hello hello world HeLLo World True");
    expect_render("{{ '  x  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a b'.title() }}|{{ 'héllo'|length }}",
                  "x|hi|A B|5");
    expect_render("{{ [{'a': 1}, {'a': 2}, {'b': 3}]|selectattr('a', 'defined')|map(attribute='a')|list }}", "[1, 2]");
    expect_render("{{ [{'a': 1}, {'a': 2}]|selectattr('a', 'equalto', 2)|list|length }}", "1");
    expect_render("{% set x %}inner{{ 1 + 1 }}{% endset %}[{{ x }}]", "[inner2]");
    expect_render("  {% if true %}\n  yes\n  {% endif %}\nend", "  yes\nend");
    expect_render("a {#- comment -#} b\n", "ab");
    expect_render("{% raw %}{{ not rendered }}{% endraw %}", "{{ not rendered }}");
    expect_render("{{ strftime_now('%Y-%m-%d') }}", "1970-01-01");
    expect_render("{{ {'k': [1, 'two', none, true, 1.5]} }}", "{'k': [1, 'two', None, True, 1.5]}");
    expect_render("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' in 'cat' == true }}", "True False False");
    expect_render("{{ (1, 'a') }} {{ (1,) }} {{ d.items()|list }}", "(1, 'a') (1,) [('b', 2), ('a', 1)]");
    expect_render("{% if false %}{{ x|no_such_filter }}{% endif %}ok", "ok");   // unknown filters under if fail lazily
    expect_render("{{ xs[0, 1] }}|{{ d['a'] }}{% if d.a: %}:{% endif %}", "|1:");
    expect_render("{{ 'a<{}>{x}'.format('b', x='&') }} {{ '<'|safe + '<' }} {{ '<b>'|e }}", "a<b>& <&lt; &lt;b&gt;");
    expect_render("{{ none|selectattr('a')|list }} {{ none|map(attribute='a')|list }}", "[] []");
    expect_render("{{ \"it's\" }} {{ [\"it's\"] }} {{ 'tab\\there' }}", "it's [\"it's\"] tab\there");
}

// ---- errors and hostile templates ------------------------------------------------

static void expect_error(const char *tmpl, const char *needle) {
    cJSON *vars = cJSON_Parse("{\"messages\": []}");
    char *out = NULL;
    infer_status st = jinja_render(tmpl, vars, 0, &out);
    const char *msg = infer_last_error();
    CHECK(st != INFER_OK && out == NULL, "%.60s: should fail", tmpl);
    CHECK(strstr(msg, needle) != NULL, "%.60s: message \"%s\" should mention \"%s\"", tmpl, msg, needle);
    free(out);
    cJSON_Delete(vars);
}

static void test_errors(void) {
    expect_error("hello {{ name ", "unterminated {{ }} tag (at line 1, column 7)");
    expect_error("{% if x %}abc", "unclosed 'if' block");
    expect_error("{% endif %}", "unexpected '{% endif %}'");
    expect_error("{{ x|frobnicate }}", "unknown filter 'frobnicate' (at line 1");
    expect_error("{% for m in messages %}{{ m|frobnicate }}{% endfor %}", "unknown filter 'frobnicate'");
    expect_error("{{ x|groupby('a') }}", "filter 'groupby' is not supported");
    expect_error("{{ 'a\\0b' }}", "NUL character");
    expect_error("{{ x is frobnicated }}", "unknown test 'frobnicated'");
    expect_error("\n\n  {{ raise_exception('Roles must alternate') }}", "raise_exception: Roles must alternate");
    expect_error("{% include 'x.html' %}", "unsupported statement 'include' (at line 1, column 4)");
    expect_error("{{ 'abc }}", "unterminated string literal");
    expect_error("{{ a.b }}", "'a' is undefined");
    expect_error("{{ 1 + 'a' }}", "unsupported operand types for +");
    expect_error("{{ [].append(1) }}", "not allowed in a sandboxed template");
    expect_error("{{ 1 / 0 }}", "division by zero");
    expect_error("{{ x @ y }}", "unexpected character '@'");
    expect_error("{# never closed", "unterminated comment");
    expect_error("{% for x in 5 %}{% endfor %}", "'int' object is not iterable");
    // hostile: deep nesting, runaway loops, recursion, output bombs
    char *deep = malloc(200000);
    size_t k = 0;
    k += (size_t)sprintf(deep, "{{ ");
    for (int i = 0; i < 50000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 50000; i++) deep[k++] = ')';
    k += (size_t)sprintf(deep + k, " }}");
    expect_error(deep, "nested deeper than");
    k = 0;
    for (int i = 0; i < 5000; i++) k += (size_t)sprintf(deep + k, "{%% if 1 %%}");
    expect_error(deep, "nested deeper than");
    free(deep);
    expect_error("{% for i in range(100000000) %}{% endfor %}", "range() longer than");
    expect_error("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                 "loop iterations");
    expect_error("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "macro calls nested deeper than");
    // a macro whose body is nested deeply, recursing: bounded by the eval depth
    char *mac = malloc(100000);
    size_t m = (size_t)sprintf(mac, "{%% macro f(n) %%}");
    for (int i = 0; i < 150; i++) m += (size_t)sprintf(mac + m, "{%% if 1 %%}");
    m += (size_t)sprintf(mac + m, "{{ f(n) }}");
    for (int i = 0; i < 150; i++) m += (size_t)sprintf(mac + m, "{%% endif %%}");
    sprintf(mac + m, "{%% endmacro %%}{{ f(1) }}");
    expect_error(mac, "nested deeper than");
    free(mac);
    // a value nested 100000 deep must not overflow the stack when printed or compared
    expect_error("{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
                 "nested too deeply");
    expect_error("{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                 "{{ ns.x|tojson }}", "nested too deeply");
    expect_error("{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                 "{{ ns.x < ns.x }}", "nested too deeply");
    expect_error("{{ 'x' * 100000000000 }}", "string repetition too large");
    expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
                 "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}", "MiB");
    expect_error("{% for i in range(100000) %}{{ 'y' * 200 }}{% endfor %}",
                 "output exceeds");
}

int main(void) {
    test_expected();
    test_simple_api();
    test_load_hf();
    test_features();
    test_errors();
    return check_summary("test_chat");
}
