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

static const char *g_usage =
    "usage: infer chat [-m MODEL] [--system TEXT] [-n N] [-c N] [-t N] [sampling]\n"
    "  an interactive chat: each line read is a user turn, rendered with the model's chat template;\n"
    "  /reset starts over, /exit (or the end of the input) quits.\n"
    "  -m, --model MODEL      a Hugging Face directory, a .gguf file or a vindex (default: SmolLM2-135M-Instruct)\n"
    "      --system, -sys TEXT  a system prompt\n"
    "  -n, --n-predict N      the most tokens of a reply (default 512)\n"
    "  -c, --ctx-size N       context positions (default 4096)\n"
    "  -t, --threads N        threads (default 1)\n"
    CLI_USAGE_NUMA
    "sampling (llama.cpp's flags and defaults; --temp 0 is greedy):\n"
    "  -s, --seed N  --temp T (0.8)  --top-k K (40)  --top-p P (0.95)  --min-p P (0.05)  --repeat-penalty R (1.0)\n"
    "  --repeat-last-n N (64)  --presence-penalty P (0)  --frequency-penalty P (0)\n";

enum { OPT_SYSTEM = OPT_LOCAL };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS, CLI_OPT_NUMA, CLI_OPT_CTX, CLI_OPTS_SAMPLING,
    {"system", required_argument, NULL, OPT_SYSTEM},
    {"n-predict", required_argument, NULL, 'n'},
    {0},
};

int cmd_chat(int argc, char **argv) {
    const char *system_prompt = NULL;
    long n_new = 512;
    int opt;
    cli_opts o;
    cli_opts_init(&o, "chat", g_usage);
    o.n_ctx = 4096;
    for (int i = 1; i < argc; i++) // llama.cpp's spelling, which getopt would read as -s ys
        if (!strcmp(argv[i], "-sys")) argv[i] = "--system";
    while ((opt = cli_next(&o, argc, argv, "hm:t:c:s:n:", g_opts)) > 0) {
        switch (opt) {
        case OPT_SYSTEM: system_prompt = optarg; break;
        case 'n':
            if ((n_new = cli_parse_count("-n", optarg, 1 << 24)) < 0) return 1;
            break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("chat: unexpected argument \"%s\"", argv[optind]);
    if (o.n_ctx < 1) return cli_error("chat: -c must be at least 1");
    const char *model = o.model;
    long n_ctx = o.n_ctx;
    infer_sampling sp = o.sampling;
    if (!model && !(model = cli_chat_model())) return 1;
    infer_model *m = NULL;
    infer_ctx *c = NULL;
    infer_sampler *smp = NULL;
    if (cli_model_load(model, &m) || cli_ctx_new(m, (int)n_ctx, &c) ||
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
            if (tok < 0) { rc = cli_error("%s", infer_last_error()); break; }
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
