// infer bench-components [-m MODEL] [-t N] [-p T] [-r R] [--type q4_k_m|q8_0|bf16|...]
// Where the time of one layer goes, as the seeds' component breakdown: µs per
// layer for each phase of the forward pass and its share of the layer, on a
// real model and on a synthetic Gemma-3-4B-shaped layer (hidden 2560, 8 heads
// of 256, 4 KV heads, FFN 10240) with random weights of the chosen type.
#include "cli.h"
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int profile(const char *label, infer_model *m, int T, int reps) {
    infer_ctx *c;
    if (cli_ctx_new(m, T + 1, &c)) return cli_error("%s", infer_last_error());
    int32_t *ids = malloc(sizeof *ids * (size_t)T);
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((i * 7919 + 11) % infer_model_n_vocab(m));
    infer_eval(c, ids, T, NULL, 0); // warm-up
    infer_ctx_reset(c);
    infer_ctx_profile(c, 1);
    double t0 = cli_now();
    for (int r = 0; r < reps; r++) {
        infer_ctx_reset(c);
        if (infer_eval(c, ids, T, NULL, 0)) { free(ids); infer_ctx_free(c); return cli_error("%s", infer_last_error()); }
    }
    double wall = (cli_now() - t0) / reps;
    int L = infer_model_n_layer(m);
    double layer = 0; // seconds of one layer: every phase but the embedding and the logits
    for (int p = 0; p < INFER_PHASE_COUNT; p++)
        if (p != INFER_PHASE_EMBED && p != INFER_PHASE_LOGITS) layer += infer_ctx_profile_seconds(c, p) / reps / L;
    printf("\n%s: %d tokens, %d layers, %d threads, mean of %d runs\n\n", label, T, L, cli_threads(), reps);
    printf("| component | µs/layer | %% |\n| --- | ---: | ---: |\n");
    for (int p = 0; p < INFER_PHASE_COUNT; p++) {
        if (p == INFER_PHASE_EMBED || p == INFER_PHASE_LOGITS) continue;
        double us = infer_ctx_profile_seconds(c, p) / reps / L * 1e6;
        if (us < 0.05 && (p == INFER_PHASE_MOE || p == INFER_PHASE_PLE || p == INFER_PHASE_WALK)) continue;
        printf("| %s | %.1f | %.1f%% |\n", infer_phase_name(p), us, 100 * us / (layer * 1e6));
    }
    printf("| **layer total** | **%.1f** | |\n", layer * 1e6);
    printf("| %d-layer model | %.2f ms | |\n", L, layer * L * 1e3);
    double outer = infer_ctx_profile_seconds(c, INFER_PHASE_EMBED) + infer_ctx_profile_seconds(c, INFER_PHASE_LOGITS);
    printf("| embedding, final norm and logits | %.2f ms | |\n", outer / reps * 1e3);
    printf("| whole pass (wall) | %.2f ms | |\n", wall * 1e3);
    free(ids);
    infer_ctx_free(c);
    return 0;
}

static const char *g_usage =
    "usage: infer bench-components [-m MODEL] [-t N] [-p T] [-r R] [--type q4_k_m|q8_0|bf16|...]\n"
    "  where the time of one layer goes: µs per layer for each phase of the forward pass over T tokens, on the\n"
    "  model and on a synthetic Gemma-3-4B-shaped layer with random weights of the chosen type.\n"
    "  -m, --model MODEL      a Hugging Face directory, a .gguf file or a vindex (default: Gemma 3 270M)\n"
    "  -t, --threads N        threads (default 1)\n"
    "  -p N                   tokens per pass (default 6)\n"
    "  -r N                   passes measured (default 5)\n"
    "      --type TYPE        the synthetic layer's file type (default q4_k_m)\n";

enum { OPT_TYPE = OPT_LOCAL };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_MODEL, CLI_OPT_THREADS,
    {"type", required_argument, NULL, OPT_TYPE},
    {0},
};

int cmd_bench_components(int argc, char **argv) {
    const char *type = "q4_k_m";
    long T = 6, reps = 5;
    cli_opts o;
    cli_opts_init(&o, "bench-components", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "hm:t:p:r:", g_opts)) > 0) {
        switch (opt) {
        case OPT_TYPE: type = optarg; break;
        case 'p':
            if ((T = cli_parse_count("-p", optarg, 4096)) < 0) return 1;
            if (T == 0) return cli_error("bench-components: -p must be at least 1");
            break;
        case 'r':
            if ((reps = cli_parse_count("-r", optarg, 1000)) < 0) return 1;
            if (reps == 0) return cli_error("bench-components: -r must be at least 1");
            break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("bench-components: unexpected argument \"%s\"", argv[optind]);
    const char *model = o.model;
    if (!model && !(model = cli_default_model())) return 1;
    infer_model *m;
    if (cli_model_load(model, &m)) return cli_error("%s", infer_last_error());
    int rc = profile(model, m, (int)T, (int)reps);
    infer_model_free(m);
    if (rc) return rc;

    // the synthetic Gemma-3-4B-shaped layer, in a temporary directory
    char dir[] = "/tmp/infer-components-XXXXXX", gg[4200];
    if (!mkdtemp(dir)) return cli_error("bench-components: cannot make a temporary directory");
    snprintf(gg, sizeof gg, "%s/layer.gguf", dir);
    rc = 1;
    if (!synth_write(dir, synth_find("gemma3", "4b"), 1, 256)) cli_error("bench-components: cannot write the synthetic layer in %s", dir);
    else if (cli_model_load(dir, &m)) cli_error("%s", infer_last_error());
    else {
        infer_model *q = NULL;
        if (!strcmp(type, "bf16")) rc = profile("synthetic Gemma-3-4B-shaped layer (bf16)", m, (int)T, (int)reps);
        else if (infer_convert_gguf(m, gg, type) || cli_model_load(gg, &q)) cli_error("%s", infer_last_error());
        else {
            char label[128];
            snprintf(label, sizeof label, "synthetic Gemma-3-4B-shaped layer (%s)", type);
            rc = profile(label, q, (int)T, (int)reps);
        }
        infer_model_free(q);
        infer_model_free(m);
    }
    unlink(gg);
    synth_remove(dir);
    return rc;
}
