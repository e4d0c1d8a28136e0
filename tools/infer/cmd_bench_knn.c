// infer bench-knn [-t N] [-r R] [--features F] [--hidden H] [-k K] [--device cpu|cuda]
// Gate KNN at a Gemma-3-4B layer's shape (10,240 features x 2,560 by
// default): scores = gate vectors . x, then the top K by |score|, for f32,
// f16 and q4_0 gate vectors (random), in µs per layer.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

static const char *g_usage =
    "usage: infer bench-knn [-t N] [-r R] [--features F] [--hidden H] [-k K]\n"
    "  gate KNN at a layer's shape: scores = gate vectors . x, then the top K by |score|, for f32, f16 and q4_0\n"
    "  gate vectors (random), in µs per layer, the best of R runs.\n"
    "  -t, --threads N        threads (default 1)\n"
    "  -r N                   runs (default 20)\n"
    "      --features F       gate vectors (default 10240, Gemma 3 4B's)\n"
    "      --hidden H         their width, a multiple of 32 (default 2560)\n"
    "  -k K                   features kept (default F / 10)\n"
    "      --device cpu|cuda  where the vectors are scored (cuda: scores and top-K on the first GPU, the\n"
    "                         K indices read back; the total is the whole step a layer would take)\n";

enum { OPT_FEATURES = OPT_LOCAL, OPT_HIDDEN };
static const struct option g_opts[] = {
    CLI_OPT_HELP, CLI_OPT_THREADS,
    {"features", required_argument, NULL, OPT_FEATURES},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    CLI_OPT_DEVICE,
    {0},
};

int cmd_bench_knn(int argc, char **argv) {
    long F = 10240, H = 2560, reps = 20, K = 0;
    const char *device = NULL;
    cli_opts o;
    cli_opts_init(&o, "bench-knn", g_usage);
    int opt;
    while ((opt = cli_next(&o, argc, argv, "ht:r:k:", g_opts)) > 0) {
        switch (opt) {
        case 'r':
            if ((reps = cli_parse_count("-r", optarg, 100000)) < 0) return 1;
            if (reps == 0) return cli_error("bench-knn: -r must be at least 1");
            break;
        case OPT_FEATURES:
            if ((F = cli_parse_count("--features", optarg, 1 << 20)) < 0) return 1;
            if (F == 0) return cli_error("bench-knn: --features must be at least 1");
            break;
        case OPT_HIDDEN:
            if ((H = cli_parse_count("--hidden", optarg, 1 << 16)) < 0) return 1;
            if (H == 0 || H % 32) return cli_error("bench-knn: --hidden must be a positive multiple of 32, not %ld", H);
            break;
        case 'k':
            if ((K = cli_parse_count("-k", optarg, 1 << 20)) < 0) return 1;
            break;
        case OPT_DEVICE: device = optarg; break;
        }
    }
    if (opt == CLI_STOP) return o.status;
    if (optind < argc) return cli_error("bench-knn: unexpected argument \"%s\"", argv[optind]);
    if (K == 0) K = F / 10 > 0 ? F / 10 : 1;
    if (K > F) return cli_error("bench-knn: -k %ld is more than the %ld features", K, F);
    float *rows = malloc(sizeof(float) * (size_t)F * H), *x = malloc(sizeof(float) * H), *s = malloc(sizeof(float) * F);
    int32_t *idx = malloc(sizeof(int32_t) * F);
    if (!rows || !x || !s || !idx) {
        free(rows), free(x), free(s), free(idx);
        return cli_error("out of memory for %ld x %ld gate vectors", F, H);
    }
    for (size_t i = 0; i < (size_t)F * H; i++) rows[i] = frand() * 0.05f;
    for (int i = 0; i < H; i++) x[i] = frand();
    int gpu = device && strcmp(device, "cpu");
    if (gpu) printf("gate KNN, %ld features x %ld, top %ld by |score|, on %s (%s), best of %ld runs\n\n", F, H, K, device, infer_gpu_status(), reps);
    else printf("gate KNN, %ld features x %ld, top %ld by |score|, %d threads, best of %ld runs\n\n", F, H, K, cli_threads(), reps);
    if (gpu) printf("| gate type | MB | scores µs (read back) | scores + top-K, K ids read back: µs/layer |\n| --- | ---: | ---: | ---: |\n");
    else printf("| gate type | MB | scores µs | top-K µs | total µs/layer |\n| --- | ---: | ---: | ---: | ---: |\n");
    const int types[] = {INFER_TYPE_F32, INFER_TYPE_F16, INFER_TYPE_Q4_0};
    int rc = 0;
    for (int ti = 0; ti < 3 && !rc; ti++) {
        infer_knn *g;
        if (infer_knn_new(types[ti], rows, (int)F, (int)H, &g) || infer_knn_set_threads(g, cli_threads())) {
            infer_knn_free(g);
            rc = cli_error("%s", infer_last_error());
            break;
        }
        if (gpu) {
            if (infer_knn_set_device(g, device)) { rc = cli_error("%s", infer_last_error()); infer_knn_free(g); break; }
            double best_s = 1e9, best_t = 1e9;
            for (long r = 0; r < reps + 1 && !rc; r++) { // (the first: warm-up)
                double a = cli_now();
                infer_knn_scores(g, x, s);
                double b = cli_now();
                if (infer_knn_topk(g, x, (int)K, idx)) rc = cli_error("%s", infer_last_error());
                double e = cli_now();
                if (r && b - a < best_s) best_s = b - a;
                if (r && e - b < best_t) best_t = e - b;
            }
            if (!rc)
                printf("| %s | %.1f | %.0f | %.0f |\n", infer_type_name(types[ti]), infer_knn_bytes(g) / 1e6, best_s * 1e6, best_t * 1e6);
            infer_knn_free(g);
            continue;
        }
        double best_s = 1e9, best_k = 1e9;
        for (long r = 0; r < reps; r++) {
            double a = cli_now();
            infer_knn_scores(g, x, s);
            double b = cli_now();
            infer_topk_abs(s, (int)F, (int)K, idx);
            double e = cli_now();
            if (b - a < best_s) best_s = b - a;
            if (e - b < best_k) best_k = e - b;
        }
        printf("| %s | %.1f | %.0f | %.0f | %.0f |\n", infer_type_name(types[ti]), infer_knn_bytes(g) / 1e6, best_s * 1e6,
               best_k * 1e6, (best_s + best_k) * 1e6);
        infer_knn_free(g);
    }
    free(rows), free(x), free(s), free(idx);
    return rc;
}
