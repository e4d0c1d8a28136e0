// infer bench-components [-m MODEL] [-t N] [-p T] [-r R] [--type q4_k_m|q8_0|bf16|...]
// Where the time of one layer goes, as the seeds' component breakdown: µs per
// layer for each phase of the forward pass and its share of the layer, on a
// real model and on a synthetic Gemma-3-4B-shaped layer (hidden 2560, 8 heads
// of 256, 4 KV heads, FFN 10240) with random weights of the chosen type.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int profile(const char *label, infer_model *m, int T, int reps) {
    infer_ctx *c;
    if (infer_ctx_new(m, T + 1, &c)) return cli_error("%s", infer_last_error());
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
    printf("\n%s: %d tokens, %d layers, %d threads, mean of %d runs\n\n", label, T, L, infer_get_threads(), reps);
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

// bf16 of f, rounded to nearest even (the weights are random: no NaN).
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

// One tensor of random bf16 values (scale s, or 1 + s * noise for norms).
static int put_tensor(FILE *f, long long rows, long long cols, float s, int norm) {
    long long n = rows * cols;
    for (long long i = 0; i < n; i++) {
        uint16_t h = to_bf16(norm ? 1.0f + s * frand() : s * frand());
        if (fwrite(&h, 2, 1, f) != 1) return 0;
    }
    return 1;
}

// Writes a one-layer Gemma-3-4B-shaped checkpoint (bf16 safetensors) in dir.
static int write_synthetic(const char *dir) {
    enum { H = 2560, NH = 8, NKV = 4, HD = 256, FF = 10240, V = 256 };
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"model_type\": \"gemma3_text\", \"architectures\": [\"Gemma3ForCausalLM\"], \"hidden_size\": %d,"
               " \"num_hidden_layers\": 1, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d,"
               " \"intermediate_size\": %d, \"vocab_size\": %d, \"rms_norm_eps\": 1e-6, \"query_pre_attn_scalar\": 256,"
               " \"sliding_window\": 1024, \"layer_types\": [\"full_attention\"], \"max_position_embeddings\": 8192,"
               " \"hidden_activation\": \"gelu_pytorch_tanh\", \"rope_parameters\": {\"full_attention\": {\"rope_type\":"
               " \"default\", \"rope_theta\": 1000000.0}, \"sliding_attention\": {\"rope_type\": \"default\","
               " \"rope_theta\": 10000.0}}}\n", H, NH, NKV, HD, FF, V);
    fclose(f);
    struct { const char *name; long long r, c; int norm; } t[] = {
        {"model.embed_tokens.weight", V, H, 0},
        {"model.norm.weight", 1, H, 1},
        {"model.layers.0.input_layernorm.weight", 1, H, 1},
        {"model.layers.0.post_attention_layernorm.weight", 1, H, 1},
        {"model.layers.0.pre_feedforward_layernorm.weight", 1, H, 1},
        {"model.layers.0.post_feedforward_layernorm.weight", 1, H, 1},
        {"model.layers.0.self_attn.q_norm.weight", 1, HD, 1},
        {"model.layers.0.self_attn.k_norm.weight", 1, HD, 1},
        {"model.layers.0.self_attn.q_proj.weight", NH * HD, H, 0},
        {"model.layers.0.self_attn.k_proj.weight", NKV * HD, H, 0},
        {"model.layers.0.self_attn.v_proj.weight", NKV * HD, H, 0},
        {"model.layers.0.self_attn.o_proj.weight", H, NH * HD, 0},
        {"model.layers.0.mlp.gate_proj.weight", FF, H, 0},
        {"model.layers.0.mlp.up_proj.weight", FF, H, 0},
        {"model.layers.0.mlp.down_proj.weight", H, FF, 0},
    };
    int n = sizeof t / sizeof t[0];
    char hdr[8192];
    size_t o = 0, off = 0;
    o += (size_t)snprintf(hdr + o, sizeof hdr - o, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)(t[i].r * t[i].c * 2);
        if (t[i].r == 1)
            o += (size_t)snprintf(hdr + o, sizeof hdr - o, "%s\"%s\": {\"dtype\": \"BF16\", \"shape\": [%lld], \"data_offsets\": [%zu, %zu]}",
                                  i ? ", " : "", t[i].name, t[i].c, off, off + bytes);
        else
            o += (size_t)snprintf(hdr + o, sizeof hdr - o, "%s\"%s\": {\"dtype\": \"BF16\", \"shape\": [%lld, %lld], \"data_offsets\": [%zu, %zu]}",
                                  i ? ", " : "", t[i].name, t[i].r, t[i].c, off, off + bytes);
        off += bytes;
    }
    o += (size_t)snprintf(hdr + o, sizeof hdr - o, "}");
    while (o % 8) hdr[o++] = ' ';
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!(f = fopen(path, "wb"))) return 0;
    uint64_t hl = o;
    int ok = fwrite(&hl, 8, 1, f) == 1 && fwrite(hdr, 1, o, f) == o;
    for (int i = 0; ok && i < n; i++) ok = put_tensor(f, t[i].r, t[i].c, t[i].norm ? 0.1f : 1.0f / 50.0f, t[i].norm);
    return fclose(f) == 0 && ok;
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
    if (infer_model_load(model, &m)) return cli_error("%s", infer_last_error());
    int rc = profile(model, m, (int)T, (int)reps);
    infer_model_free(m);
    if (rc) return rc;

    // the synthetic Gemma-3-4B-shaped layer, in a temporary directory
    char dir[] = "/tmp/infer-components-XXXXXX", gg[4200], path[4200];
    if (!mkdtemp(dir)) return cli_error("bench-components: cannot make a temporary directory");
    snprintf(gg, sizeof gg, "%s/layer.gguf", dir);
    rc = 1;
    if (!write_synthetic(dir)) cli_error("bench-components: cannot write the synthetic layer in %s", dir);
    else if (infer_model_load(dir, &m)) cli_error("%s", infer_last_error());
    else {
        infer_model *q = NULL;
        if (!strcmp(type, "bf16")) rc = profile("synthetic Gemma-3-4B-shaped layer (bf16)", m, (int)T, (int)reps);
        else if (infer_convert_gguf(m, gg, type) || infer_model_load(gg, &q)) cli_error("%s", infer_last_error());
        else {
            char label[128];
            snprintf(label, sizeof label, "synthetic Gemma-3-4B-shaped layer (%s)", type);
            rc = profile(label, q, (int)T, (int)reps);
        }
        infer_model_free(q);
        infer_model_free(m);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    unlink(gg);
    rmdir(dir);
    return rc;
}
