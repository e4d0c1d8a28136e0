// The sampler: greedy is argmax, each filter keeps what llama.cpp keeps, the
// draw follows the distribution, and a seed makes it repeatable.
#include "check.h"
#include "infer.h"

#include <math.h>
#include <string.h>

static infer_sampling plain(void) {
    infer_sampling p = infer_sampling_default();
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.temp = 1.0f;
    return p;
}

// Frequencies of each of n tokens over `draws` samples.
static void freq(const infer_sampling *p, const float *logits, int n, int draws, double *f) {
    infer_sampler *s;
    infer_sampler_new(p, n, &s);
    memset(f, 0, sizeof(double) * (size_t)n);
    for (int i = 0; i < draws; i++) f[infer_sample(s, logits, NULL, 0)] += 1.0 / draws;
    infer_sampler_free(s);
}

int main(void) {
    float lg[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    double f[4];
    infer_sampling p = plain();

    freq(&p, lg, 4, 40000, f);
    CHECK(fabs(f[0] - 0.5) < 0.015 && fabs(f[1] - 0.3) < 0.015 && fabs(f[2] - 0.15) < 0.015 && fabs(f[3] - 0.05) < 0.01,
          "temp 1 draws: %.3f %.3f %.3f %.3f", f[0], f[1], f[2], f[3]);

    p = plain(); p.temp = 0;
    freq(&p, lg, 4, 100, f);
    CHECK(f[0] > 0.9999, "greedy picks the argmax");

    // NaN is an error (never an index out of the quickselect's bounds), +inf wins, all -inf is an error
    {
        enum { V = 1000 };
        static float x[V];
        for (int setting = 0; setting < 4; setting++) {
            infer_sampling q = infer_sampling_default();
            q.temp = setting == 0 ? 0 : 0.8f, q.top_k = setting == 2 ? 0 : 40, q.repeat_penalty = setting == 3 ? 1.1f : 1.0f;
            infer_sampler *s = NULL;
            CHECK(!infer_sampler_new(&q, V, &s), "sampler: %s", infer_last_error());
            for (int i = 0; i < V; i++) x[i] = (float)(i % 37) * 0.1f;
            x[123] = NAN, x[777] = NAN;
            int32_t hist[2] = {5, 6};
            CHECK(infer_sample(s, x, hist, 2) == -1 && strstr(infer_last_error(), "NaN"), "setting %d: NaN logits: -1 (%s)", setting, infer_last_error());
            x[123] = x[777] = INFINITY;
            for (int k = 0; k < 20; k++) {
                int32_t t = infer_sample(s, x, hist, 2);
                CHECK(t == 123 || t == 777, "setting %d: +inf logits win (got %d)", setting, t);
            }
            for (int i = 0; i < V; i++) x[i] = -INFINITY;
            int32_t t = infer_sample(s, x, hist, 2);
            CHECK(setting == 0 ? t >= 0 && t < V : t == -1, "setting %d: every logit -inf: %d", setting, t);
            infer_sampler_free(s);
        }
    }

    // greedy: the first index of the largest logit, for every length and with the
    // largest value planted twice (the earlier must win) anywhere, the tail included
    {
        enum { N = 203 };
        static float x[N];
        int bad = 0;
        unsigned r = 7;
        for (int n = 1; n <= N && !bad; n++)
            for (int a = 0; a < n && !bad; a += 1 + n / 17)
                for (int b = a; b < n && !bad; b += 1 + n / 13) {
                    for (int i = 0; i < n; i++) x[i] = (float)((r = r * 1103515245u + 12345u) >> 16 & 1023) / 1024.0f;
                    x[a] = x[b] = 2.0f;
                    infer_sampler *g = NULL;
                    if (infer_sampler_new(&p, n, &g)) { bad = 1; break; }
                    bad |= infer_sample(g, x, NULL, 0) != a;
                    infer_sampler_free(g);
                }
        CHECK(!bad, "greedy: not the first index of the largest logit");
    }

    p = plain(); p.top_k = 2;
    freq(&p, lg, 4, 20000, f);
    CHECK(f[2] == 0 && f[3] == 0 && fabs(f[0] - 0.625) < 0.02, "top-k 2: %.3f %.3f %.3f", f[0], f[1], f[2]);

    p = plain(); p.top_p = 0.7f;
    freq(&p, lg, 4, 20000, f);
    CHECK(f[2] == 0 && f[3] == 0 && f[1] > 0.3, "top-p 0.7 keeps two: %.3f %.3f %.3f", f[0], f[1], f[2]);

    p = plain(); p.min_p = 0.2f; // cut at 0.1: drops only the 0.05 token
    freq(&p, lg, 4, 20000, f);
    CHECK(f[3] == 0 && f[2] > 0.1, "min-p 0.2: %.3f %.3f", f[2], f[3]);

    p = plain(); p.temp = 0.25f; // sharper: the top token dominates
    freq(&p, lg, 4, 20000, f);
    CHECK(f[0] > 0.85, "temp 0.25: %.3f", f[0]);

    // penalties: token 0 repeated is pushed below token 1
    infer_sampler *s;
    p = plain(); p.temp = 0; p.repeat_penalty = 4.0f;
    float lp[3] = {2.0f, 1.0f, -1.0f};
    int32_t hist[2] = {0, 0};
    infer_sampler_new(&p, 3, &s);
    CHECK(infer_sample(s, lp, hist, 2) == 1, "repeat penalty");
    CHECK(infer_sample(s, lp, NULL, 0) == 0, "no history, no penalty");
    infer_sampler_free(s);
    p = plain(); p.temp = 0; p.presence_penalty = 1.5f;
    infer_sampler_new(&p, 3, &s);
    CHECK(infer_sample(s, lp, hist, 2) == 1, "presence penalty");
    infer_sampler_free(s);
    p = plain(); p.temp = 0; p.frequency_penalty = 0.6f;
    int32_t hist1[1] = {0};
    infer_sampler_new(&p, 3, &s);
    CHECK(infer_sample(s, lp, hist1, 1) == 0, "frequency penalty once: 2 - 0.6 > 1");
    CHECK(infer_sample(s, lp, hist, 2) == 1, "frequency penalty twice: 2 - 1.2 < 1");
    infer_sampler_free(s);

    // the same seed gives the same stream; another seed another
    int a[64], b[64], c[64];
    float flat[16];
    for (int i = 0; i < 16; i++) flat[i] = 0;
    for (int run = 0; run < 3; run++) {
        p = plain(); p.seed = run == 2 ? 7 : 42;
        infer_sampler_new(&p, 16, &s);
        for (int i = 0; i < 64; i++) (run == 0 ? a : run == 1 ? b : c)[i] = infer_sample(s, flat, NULL, 0);
        infer_sampler_free(s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed, same tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "another seed, other tokens");

    p = plain(); p.repeat_penalty = -1;
    CHECK(infer_sampler_new(&p, 4, &s) == INFER_ERR_ARG, "negative repeat penalty rejected");
    return check_summary("sample");
}
