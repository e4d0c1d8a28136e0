// infer chat [-m MODEL] [--system TEXT] [-n N] [sampling flags]
// An interactive terminal chat: each line read is a user turn; the whole
// conversation is rendered with the model's chat template, and only the
// tokens that differ from what the KV cache already holds are evaluated.
// "/reset" starts over, "/exit" (or end of input) quits.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    infer_chat_message *v;
    int n, cap;
} convo;

static int convo_add(convo *c, const char *role, const char *text) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        infer_chat_message *v = realloc(c->v, sizeof *v * (size_t)cap);
        if (!v) return 0;
        c->v = v;
        c->cap = cap;
    }
    char *t = strdup(text);
    if (!t) return 0;
    c->v[c->n].role = role;
    c->v[c->n].content = t;
    c->n++;
    return 1;
}

static void convo_clear(convo *c, int keep) {
    for (int i = keep; i < c->n; i++) free((char *)c->v[i].content);
    c->n = keep;
}

int cmd_chat(int argc, char **argv) {
    const char *model = NULL, *system_prompt = NULL;
    long n_new = 512, n_ctx = 4096;
    infer_sampling sp = infer_sampling_default();
    sp.seed = (uint64_t)(cli_now() * 1000003.0);
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r = cli_sampling_flag(argc, argv, &i, &sp);
        if (!r) r = cli_threads_flag(argc, argv, &i);
        if (r < 0) return 1;
        if (r) continue;
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) { if (!(model = cli_value(argc, argv, &i))) return 1; }
        else if (!strcmp(argv[i], "--system") || !strcmp(argv[i], "-sys")) { if (!(system_prompt = cli_value(argc, argv, &i))) return 1; }
        else if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--n-predict")) {
            if (!(v = cli_value(argc, argv, &i)) || (n_new = cli_parse_count("-n", v, 1 << 24)) < 0) return 1;
        } else if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--ctx-size")) {
            if (!(v = cli_value(argc, argv, &i)) || (n_ctx = cli_parse_count("-c", v, 1 << 24)) < 1) return 1;
        } else return cli_error("chat: unknown option \"%s\"", argv[i]);
    }
    if (!model && !(model = cli_default_model())) return 1;
    infer_model *m = NULL;
    infer_ctx *c = NULL;
    infer_sampler *smp = NULL;
    if (infer_model_load(model, &m) || infer_ctx_new(m, (int)n_ctx, &c) ||
        infer_sampler_new(&sp, infer_model_n_vocab(m), &smp)) {
        int rc = cli_error("%s", infer_last_error());
        infer_sampler_free(smp), infer_ctx_free(c), infer_model_free(m);
        return rc;
    }
    int V = infer_model_n_vocab(m), tty = isatty(0);
    int32_t eog[8];
    int n_eog = infer_model_eog(m, eog, 8);
    float *logits = malloc(sizeof(float) * (size_t)V);
    int32_t *cached = malloc(sizeof(int32_t) * (size_t)n_ctx); // tokens the KV cache holds
    int n_cached = 0, rc = 0;
    convo cv = {0};
    if (system_prompt) convo_add(&cv, "system", system_prompt);
    int keep = cv.n;
    fprintf(stderr, "infer chat: %s (template: %s). /reset starts over, /exit quits.\n", model, infer_chat_template_source(m));
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        if (tty) fputs("> ", stderr);
        ssize_t len = getline(&line, &cap, stdin);
        if (len < 0) break;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) { convo_clear(&cv, keep); n_cached = 0; infer_ctx_reset(c); continue; }
        if (!convo_add(&cv, "user", line)) { rc = cli_error("out of memory"); break; }

        char *prompt = NULL;
        int32_t *ids = NULL;
        int n = 0;
        if (infer_chat_render(m, cv.v, cv.n, 1, &prompt) || infer_tokenize(m, prompt, strlen(prompt), 0, 1, &ids, &n)) {
            cli_error("%s", infer_last_error());
            free(prompt);
            convo_clear(&cv, cv.n - 1); // drop the turn the template refused
            continue;
        }
        free(prompt);
        if (n + n_new > n_ctx) {
            cli_error("chat: the conversation (%d tokens) no longer fits the context of %ld; /reset to start over", n, n_ctx);
            free(ids);
            convo_clear(&cv, cv.n - 1);
            continue;
        }
        // evaluate only what differs from the cache
        int same = 0;
        while (same < n && same < n_cached && ids[same] == cached[same]) same++;
        if (same == n) same = n - 1; // always evaluate the last token for its logits
        infer_ctx_truncate(c, same);
        if (infer_eval(c, ids + same, n - same, logits, 1)) { rc = cli_error("%s", infer_last_error()); free(ids); break; }
        memcpy(cached, ids, sizeof(int32_t) * (size_t)n);
        n_cached = n;
        free(ids);

        int gen = 0;
        size_t printed = 0;
        char *text = NULL;
        double t0 = cli_now();
        while (gen < n_new) {
            int32_t tok = infer_sample(smp, logits, cached, n_cached);
            int stop = 0;
            for (int k = 0; k < n_eog; k++) stop |= tok == eog[k];
            if (stop) break;
            cached[n_cached++] = tok;
            gen++;
            size_t tl;
            free(text);
            text = NULL;
            if (infer_detokenize(m, cached + n, gen, 1, &text, &tl)) break;
            if (tl > printed) { fwrite(text + printed, 1, tl - printed, stdout); printed = tl; fflush(stdout); }
            if (infer_eval(c, &tok, 1, logits, 1)) { cli_error("%s", infer_last_error()); break; }
        }
        printf("\n");
        fflush(stdout);
        fprintf(stderr, "[%d tokens, %.2f tok/s]\n", gen, gen / (cli_now() - t0 + 1e-9));
        convo_add(&cv, "assistant", text ? text : "");
        free(text);
    }
    free(line);
    convo_clear(&cv, 0);
    free(cv.v);
    free(cached);
    free(logits);
    infer_sampler_free(smp);
    infer_ctx_free(c);
    infer_model_free(m);
    return rc;
}
