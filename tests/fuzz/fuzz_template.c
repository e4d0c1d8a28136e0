// A chat template (Jinja): rendered with a short conversation (system, user,
// assistant with a tool call, tool, user), tools and an extra variable, the
// way infer chat and infer serve render a model's template.
#include <cjson/cJSON.h>

#include "fuzz.h"
#include "inference/chat.h"

static const char g_conv[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
    "\"arguments\":{\"a\":1}}}]},{\"role\":\"tool\",\"content\":\"42\"},{\"role\":\"user\",\"content\":[{\"type\":"
    "\"text\",\"text\":\"and?\"}]}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}],\"extra\":{\"enable_thinking\":true}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    static cJSON *conv;
    if (!conv && !(conv = cJSON_Parse(g_conv))) abort();
    char *tmpl = malloc(n + 1);
    if (!tmpl) return 0;
    memcpy(tmpl, data, n);
    tmpl[n] = 0;
    char *out = NULL;
    chat_request rq = {
        .messages = cJSON_GetObjectItem(conv, "messages"), .tools = cJSON_GetObjectItem(conv, "tools"),
        .extra = cJSON_GetObjectItem(conv, "extra"), .bos_token = "<s>", .eos_token = "</s>", .add_generation_prompt = 1,
        .now = 1764547200,
    };
    if (!chat_render_json(tmpl, &rq, &out)) free(out);
    // the plain form, without tools, as infer chat calls it
    chat_message msgs[2] = {{"user", "Hello"}, {"assistant", NULL}};
    out = NULL;
    if (!chat_render(tmpl, msgs, 2, 0, NULL, "</s>", &out)) free(out);
    free(tmpl);
    return 0;
}
