// Chat templates: turn a conversation into the prompt text a model was
// trained on, by rendering the model's Jinja chat template
// (`tokenizer.chat_template` in GGUF metadata, `chat_template` in
// tokenizer_config.json) exactly as transformers' apply_chat_template does.
#ifndef INFER_INFERENCE_CHAT_H
#define INFER_INFERENCE_CHAT_H

#include <cjson/cJSON.h>

#include "infer.h"

typedef struct {
    const char *role;      // "system", "user", "assistant", "tool", ...
    const char *content;   // UTF-8 text; NULL renders as None
} chat_message;

// The template used when a model has none (NULL, empty or all-whitespace
// template): ChatML, as SmolLM2/Qwen use it, without a default system prompt:
//   <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
// A model trained without a chat format (GPT-2 style) gets this text too, so
// callers that want plain completion should not call chat_render at all.
extern const char *const chat_fallback_template;

// Renders `msgs` (n of them) with `tmpl` (NULL or blank: chat_fallback_template).
// bos_token/eos_token are the model's special token strings (NULL: "").
// On success *out is malloc'd text the caller frees. Errors name the template
// construct and its line:column (INFER_ERR_UNSUPPORTED for syntax we do not
// support, evaluation errors and exceeded limits), or carry the template's
// raise_exception text (INFER_ERR_ARG: the conversation does not suit the
// template, e.g. roles that do not alternate).
infer_status chat_render(const char *tmpl, const chat_message *msgs, int n, int add_generation_prompt,
                         const char *bos_token, const char *eos_token, char **out);

// The general form, room for tools and template options.
typedef struct {
    const cJSON *messages;      // array of message objects (role, content, tool_calls, ...)
    const cJSON *tools;         // array of tool schemas, or NULL (None)
    const cJSON *extra;         // object of extra variables (enable_thinking, ...), or NULL
    const char *bos_token, *eos_token;
    int add_generation_prompt;
    long long now;              // unix seconds strftime_now() sees (UTC); -1: the current local time
} chat_request;

infer_status chat_render_json(const char *tmpl, const chat_request *req, char **out);

// Reads a Hugging Face model directory's chat template: chat_template.jinja
// if present, else tokenizer_config.json's "chat_template" (a string, or a
// list of {name, template} from which "default" is taken). *tmpl is NULL when
// the model has none. bos/eos (optional, may be NULL) receive the special
// token strings from tokenizer_config.json (NULL when absent). All malloc'd.
infer_status chat_template_load_hf(const char *dir, char **tmpl, char **bos, char **eos);

#endif
