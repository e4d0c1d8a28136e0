// infer serve's tool calls in a model's own format (tools/infer/serve_tools_native.c):
// each family's template found and given the tools and a tool-call
// conversation, the prompt checked for the tool and the call in the family's
// syntax; answers in each syntax read back into calls (or left as text); the
// grammar of a required call, after its prefill, accepts the call and refuses
// another tool's.
#include "base/mapfile.h"
#include "check.h"
#include "inference/chat.h"
#include "inference/grammar.h"
#include "../tools/infer/serve.h"

#include <cjson/cJSON.h>

static const char *const g_tools =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather in a city\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}},"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\", \"properties\": "
    "{\"zone\": {\"type\": \"string\"}}, \"required\": [\"zone\"]}}}]";

static const char *const g_conv =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_abc123\", \"type\": \"function\", "
    "\"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call_abc123\", \"content\": \"sunny, 21C\"}]";

static char *load(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/chat/templates/%s.jinja", TEST_DATA_DIR, name);
    char *text = NULL;
    if (read_text_file(path, 16u << 20, &text, NULL) != INFER_OK) return NULL;
    return text;
}

static void test_render(const char *name, int fmt, const char *call) {
    char *tmpl = load(name);
    CHECK(tmpl, "%s: no template", name);
    if (!tmpl) return;
    CHECK(serve_tools_format(tmpl) == fmt, "%s: format %d, want %d", name, serve_tools_format(tmpl), fmt);
    serve_check k = {0};
    cJSON *conv = cJSON_Parse(g_conv), *given = cJSON_Parse(g_tools), *tools = serve_tools_native_tools(given), *msgs = serve_tools_native_messages(&k, fmt, conv);
    CHECK(msgs && !k.status, "%s: messages: %s", name, k.msg);
    chat_request req = {.messages = msgs, .tools = tools, .bos_token = "<s>", .eos_token = "</s>", .add_generation_prompt = 1, .now = 0};
    char *out = NULL;
    infer_status st = msgs ? chat_render_json(tmpl, &req, &out) : INFER_ERR_ARG;
    CHECK(st == INFER_OK, "%s: render: %s", name, infer_last_error());
    if (out) {
        CHECK(strstr(out, "get_weather") && strstr(out, "get_time"), "%s: the tools' names are not in the prompt:\n%s", name, out);
        CHECK(strstr(out, "\"zone\""), "%s: the tools' parameters are not in the prompt:\n%s", name, out);
        CHECK(strstr(out, call), "%s: the call (%s) is not in the prompt:\n%s", name, call, out);
        CHECK(strstr(out, "sunny, 21C"), "%s: the tool's result is not in the prompt:\n%s", name, out);
    }
    free(out), free(tmpl);
    cJSON_Delete(conv), cJSON_Delete(given), cJSON_Delete(tools), cJSON_Delete(msgs);
}

// text read in fmt: want the calls "name args;name args" (NULL: text), and the content (NULL: none)
static void test_parse(int fmt, const char *text, const char *want, const char *content) {
    cJSON *tools = cJSON_Parse(g_tools), *c = NULL, *calls = NULL;
    int r = serve_tools_native_parse(fmt, tools, text, strlen(text), &c, &calls);
    CHECK(r == (want != NULL), "format %d: %s: read %d", fmt, text, r);
    char got[512] = "";
    for (const cJSON *x = calls ? calls->child : NULL; x; x = x->next) {
        const cJSON *f = cJSON_GetObjectItem(x, "function");
        const char *id = cJSON_GetObjectItem(x, "id")->valuestring, *args = cJSON_GetObjectItem(f, "arguments")->valuestring;
        CHECK(!strncmp(id, "call_", 5) && !strcmp(cJSON_GetObjectItem(x, "type")->valuestring, "function"), "a call's id and type");
        cJSON *a = cJSON_Parse(args);
        CHECK(cJSON_IsObject(a), "arguments not a JSON object: %s", args);
        cJSON_Delete(a);
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s %s", *got ? ";" : "", cJSON_GetObjectItem(f, "name")->valuestring, args);
    }
    if (want) CHECK(!strcmp(got, want), "format %d: %s: calls %s, want %s", fmt, text, got, want);
    if (r) CHECK(content ? cJSON_IsString(c) && !strcmp(c->valuestring, content) : !c, "format %d: %s: content %s, want %s", fmt, text,
                 cJSON_IsString(c) ? c->valuestring : "(none)", content ? content : "(none)");
    cJSON_Delete(c), cJSON_Delete(calls), cJSON_Delete(tools);
}

// the grammar of a required call (of only, when named): prefill + yes accepted, prefill + no refused
static void test_grammar(int fmt, const char *only, const char *prefill_want, const char *yes, const char *no) {
    cJSON *tools = cJSON_Parse(g_tools);
    char *prefill = NULL, *schema = serve_tools_native_schema(fmt, tools, only, 0, &prefill), *gbnf = NULL;
    grules *g = NULL;
    CHECK(schema && prefill && !strcmp(prefill, prefill_want), "format %d: prefill %s, want %s", fmt, prefill ? prefill : "(none)", prefill_want);
    CHECK(schema && !json_schema_to_gbnf(schema, &gbnf) && !grammar_parse(gbnf, NULL, &g), "format %d: grammar: %s", fmt, infer_last_error());
    if (g) {
        int complete = 0, ok = grammar_match_text(g, yes, strlen(yes), &complete);
        CHECK(ok && complete, "format %d: the grammar refuses %s", fmt, yes);
        ok = grammar_match_text(g, no, strlen(no), &complete);
        CHECK(!(ok && complete), "format %d: the grammar accepts %s", fmt, no);
        // what the grammar gives, after the prefill, is read back as the call
        size_t n = strlen(prefill) + strlen(yes) + 1;
        char *all = malloc(n);
        snprintf(all, n, "%s%s", prefill, yes);
        cJSON *c = NULL, *calls = NULL;
        CHECK(serve_tools_native_parse(fmt, tools, all, strlen(all), &c, &calls) == 1, "format %d: %s not read as a call", fmt, all);
        cJSON_Delete(c), cJSON_Delete(calls), free(all);
    }
    grammar_rules_free(g);
    free(gbnf), free(schema), free(prefill);
    cJSON_Delete(tools);
}

int main(void) {
    test_render("Qwen-Qwen2.5-7B-Instruct", TOOLS_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
    test_render("Qwen-Qwen3-0.6B", TOOLS_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
    test_render("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", TOOLS_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}");
    test_render("meta-llama-Llama-3.1-8B-Instruct", TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
    test_render("meta-llama-Llama-3.2-3B-Instruct", TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
    test_render("meta-llama-Llama-3.3-70B-Instruct", TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
    test_render("Mistral-Small-3.2-24B-Instruct-2506", TOOLS_MISTRAL_ARGS, "[TOOL_CALLS]get_weather[CALL_ID]");
    test_render("mistralai-Mistral-Nemo-Instruct-2407", TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}");
    // templates without tools, or with a format of their own, keep the generic form
    const char *generic[] = {"HuggingFaceTB-SmolLM2-135M-Instruct", "Qwen3-Coder", "GLM-4.6", "google-gemma-3-it"};
    for (int i = 0; i < 4; i++) {
        char *t = load(generic[i]);
        CHECK(t && serve_tools_format(t) == TOOLS_GENERIC, "%s: not the generic form", generic[i]);
        free(t);
    }
    CHECK(serve_tools_format(NULL) == TOOLS_GENERIC, "no template: generic");

    const char *w = "get_weather {\"city\":\"Paris\"}", *two = "get_weather {\"city\":\"Paris\"};get_time {\"zone\":\"UTC\"}";
    test_parse(TOOLS_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", w, NULL);
    test_parse(TOOLS_HERMES, "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
               "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>", two, "Let me look.");
    test_parse(TOOLS_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", w, NULL); // (cut by the grammar's end)
    test_parse(TOOLS_HERMES, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", w, NULL);             // (markers left out)
    test_parse(TOOLS_HERMES, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", NULL, NULL);         // unknown tool
    test_parse(TOOLS_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \n</tool_call>", NULL, NULL); // bad JSON
    test_parse(TOOLS_HERMES, "It is sunny in Paris.", NULL, NULL);
    test_parse(TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", w, NULL);
    test_parse(TOOLS_LLAMA3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", w, NULL);
    test_parse(TOOLS_LLAMA3, "Sure: {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", NULL, NULL);
    test_parse(TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}", NULL, NULL);
    test_parse(TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
               "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]", two, NULL);
    test_parse(TOOLS_MISTRAL, "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", w, NULL);
    test_parse(TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}]", w, NULL);
    test_parse(TOOLS_MISTRAL_ARGS, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", w, NULL);
    test_parse(TOOLS_MISTRAL_ARGS, "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"zone\": \"UTC\"}", two,
               "Checking.");
    test_parse(TOOLS_MISTRAL_ARGS, "get_weather{\"city\": \"Paris\"}", w, NULL);
    test_parse(TOOLS_MISTRAL_ARGS, "[TOOL_CALLS]get_wether[ARGS]{\"city\": \"Paris\"}", NULL, NULL);
    test_parse(TOOLS_MISTRAL_ARGS, "[TOOL_CALLS]get_weather[ARGS]{\"city\": ", NULL, NULL);

    test_grammar(TOOLS_HERMES, NULL, "<tool_call>\n", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
                 "{\"name\": \"rm_rf\", \"arguments\": {\"city\": \"Paris\"}}");
    test_grammar(TOOLS_HERMES, "get_time", "<tool_call>\n", "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}",
                 "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}");
    test_grammar(TOOLS_LLAMA3, "get_weather", "", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                 "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}");
    test_grammar(TOOLS_MISTRAL, "get_weather", "[TOOL_CALLS]", "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
                 "[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]");
    test_grammar(TOOLS_MISTRAL_ARGS, "get_weather", "[TOOL_CALLS]get_weather[ARGS]", "{\"city\": \"Paris\"}", "{\"zone\": \"UTC\"}");
    test_grammar(TOOLS_MISTRAL_ARGS, NULL, "[TOOL_CALLS]", "[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]",
                 "[{\"name\": \"get_date\", \"arguments\": {\"zone\": \"UTC\"}}]");
    return check_summary("serve_tools");
}
