// Speculative decoding: the n-gram drafter's proposals on hand-made token
// sequences (answers derived by hand), the acceptance rule (greedy by
// construction; sampled: the acceptance rate and the rejected tokens'
// distribution measured against p, and the same draws as decoding alone),
// then on every fixture family and on the default model: a pass of K+1 rows
// gives each row the logits of that token decoded alone, bit for bit, and
// generation with speculation writes the same tokens as without, greedy and
// sampled with one seed.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "infer.h"

static int same_ids(const int32_t *a, const int32_t *b, int n) { return !memcmp(a, b, sizeof(int32_t) * (size_t)n); }

static void check_drafter(void) {
    int32_t d[16];
    // the suffix 1 2 3 occurred at 0; what followed (4 1 2 3) runs into the
    // draft itself: 4 1 2 3 4 1
    int32_t h1[] = {1, 2, 3, 4, 1, 2, 3};
    CHECK(infer_spec_draft_ngram(h1, 7, 1, 3, 6, d) == 6, "h1 drafts");
    CHECK(same_ids(d, (int32_t[]){4, 1, 2, 3, 4, 1}, 6), "h1: %d %d %d %d %d %d", d[0], d[1], d[2], d[3], d[4], d[5]);
    // the longest suffix wins over a more recent shorter one: 7 5 at 2 (then
    // 8 7 5), not 5 at 3 alone; with n_max 1 the most recent 5 (at 3) gives 8 7 5 too
    int32_t h2[] = {5, 9, 7, 5, 8, 7, 5};
    CHECK(infer_spec_draft_ngram(h2, 7, 1, 3, 3, d) == 3 && same_ids(d, (int32_t[]){8, 7, 5}, 3), "h2: %d %d %d", d[0], d[1], d[2]);
    int32_t h3[] = {5, 1, 7, 5, 2, 3, 7, 5};
    // 7 5 at 2 (then 2 3 7), not 5 at 3 (then 2 3 7 as well) nor 5 at 0 (then 1 7 5)
    CHECK(infer_spec_draft_ngram(h3, 8, 1, 3, 3, d) == 3 && same_ids(d, (int32_t[]){2, 3, 7}, 3), "h3: %d %d %d", d[0], d[1], d[2]);
    // with only unigrams: the most recent 5 (at 3): 2 3 7 5 2
    CHECK(infer_spec_draft_ngram(h3, 8, 1, 1, 5, d) == 5 && same_ids(d, (int32_t[]){2, 3, 7, 5, 2}, 5), "h3 unigram");
    // the longest suffix is most recent: 1 2 at 3 (then 9), not at 0 (then 3)
    int32_t h4[] = {1, 2, 3, 1, 2, 9, 1, 2};
    CHECK(infer_spec_draft_ngram(h4, 8, 1, 3, 2, d) == 2 && same_ids(d, (int32_t[]){9, 1}, 2), "h4: %d %d", d[0], d[1]);
    // a period of one token
    int32_t h5[] = {7, 7};
    CHECK(infer_spec_draft_ngram(h5, 2, 1, 3, 4, d) == 4 && same_ids(d, (int32_t[]){7, 7, 7, 7}, 4), "h5");
    // nothing repeats; n_min 2 refuses the unigram match
    int32_t h6[] = {1, 2, 3, 1};
    CHECK(infer_spec_draft_ngram(h6, 3, 1, 3, 4, d) == 0, "h6[0..3) has no repeat");
    CHECK(infer_spec_draft_ngram(h6, 4, 2, 3, 4, d) == 0, "h6: only a unigram repeats");
    CHECK(infer_spec_draft_ngram(h6, 4, 1, 3, 4, d) == 4 && same_ids(d, (int32_t[]){2, 3, 1, 2}, 4), "h6 unigram");
    // arguments that make no sense
    CHECK(infer_spec_draft_ngram(h6, 4, 0, 3, 4, d) == 0, "n_min 0");
    CHECK(infer_spec_draft_ngram(h6, 4, 3, 2, 4, d) == 0, "n_max < n_min");
    CHECK(infer_spec_draft_ngram(h6, 4, 1, 3, 0, d) == 0, "k 0");
    CHECK(infer_spec_draft_ngram(h6, 1, 1, 3, 4, d) == 0, "one token");
    CHECK(infer_spec_draft_ngram(NULL, 4, 1, 3, 4, d) == 0, "no history");
}

static void check_accept(void) {
    enum { V = 5 };
    infer_sampling sp = infer_sampling_default();
    sp.temp = 0;
    infer_sampler *s;
    CHECK(infer_sampler_new(&sp, V, &s) == INFER_OK, "sampler");
    // greedy: rows whose argmax are 2, 4, 1, 0
    float lg[4 * V] = {0, 0, 3, 1, 0, /**/ 0, 1, 0, 0, 2, /**/ 0, 5, 0, 0, 0, /**/ 9, 0, 0, 0, 0};
    int32_t hist[16] = {3, 3}, out[4];
    int n = infer_spec_accept(s, lg, V, (int32_t[]){2, 4, 3}, 3, hist, 2, out);
    CHECK(n == 3 && same_ids(out, (int32_t[]){2, 4, 1}, 3) && same_ids(hist, (int32_t[]){3, 3, 2, 4, 1}, 5),
          "greedy: the third draft token is the model's 1, not 3 (n %d)", n);
    n = infer_spec_accept(s, lg, V, (int32_t[]){2, 4, 1}, 3, hist, 2, out);
    CHECK(n == 4 && same_ids(out, (int32_t[]){2, 4, 1, 0}, 4), "greedy: all accepted and the token after (n %d)", n);
    n = infer_spec_accept(s, lg, V, (int32_t[]){1}, 1, hist, 2, out);
    CHECK(n == 1 && out[0] == 2, "greedy: the first rejected");
    n = infer_spec_accept(s, lg, V, NULL, 0, hist, 2, out);
    CHECK(n == 1 && out[0] == 2, "greedy: no draft is one row");
    float bad[2 * V] = {0, NAN, 0, 0, 0};
    CHECK(infer_spec_accept(s, bad, V, (int32_t[]){2}, 1, hist, 2, out) == -1, "NaN refused");
    CHECK(infer_spec_accept(s, lg, V, NULL, 2, hist, 2, out) == -1, "a draft of 2 without tokens");
    infer_sampler_free(s);

    // sampled: p = .5 .3 .15 .05 0; draft d = 1 accepted with probability
    // p(d) = .3, else x from p without d: .5/.7, .15/.7, .05/.7
    sp = infer_sampling_default();
    sp.temp = 1, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0, sp.seed = 1234;
    float pl[2 * V] = {logf(.5f), logf(.3f), logf(.15f), logf(.05f), -INFINITY, 0, 0, 0, 0, 0};
    infer_sampler *a, *b;
    CHECK(infer_sampler_new(&sp, V, &a) == INFER_OK && infer_sampler_new(&sp, V, &b) == INFER_OK, "samplers");
    enum { N = 200000 };
    long acc = 0, rej[V] = {0};
    int draws_same = 1;
    for (int i = 0; i < N; i++) {
        int n1 = infer_spec_accept(a, pl, V, (int32_t[]){1}, 1, hist, 2, out);
        // b decodes alone: one draw for row 0, and for row 1 only after an acceptance
        int32_t t0 = infer_sample(b, pl, hist, 2);
        draws_same &= out[0] == t0;
        if (n1 == 2) acc++, draws_same &= out[1] == infer_sample(b, pl + V, hist, 3);
        else rej[out[0]]++;
    }
    double pa = (double)acc / N, sd = sqrt(.3 * .7 / N);
    CHECK(fabs(pa - .3) < 5 * sd, "acceptance rate %.4f, p(d) .3", pa);
    CHECK(rej[1] == 0 && rej[4] == 0, "a rejection drew d or an impossible token");
    double want[V] = {.5 / .7, 0, .15 / .7, .05 / .7, 0};
    for (int x = 0; x < V; x++) {
        double f = (N - acc) ? (double)rej[x] / (N - acc) : 0, s2 = sqrt(want[x] * (1 - want[x]) / (N * .7));
        CHECK(fabs(f - want[x]) <= 5 * s2 + 1e-12, "residual p(%d): %.4f, want %.4f", x, f, want[x]);
    }
    CHECK(draws_same, "the sampled tokens are not decoding alone's with the same seed");
    infer_sampler_free(a), infer_sampler_free(b);
}

enum { K = 8, GEN = 48 };

// Generates GEN tokens after ids[0..n) with sampling sp: one token a pass,
// or (spec) the n-gram drafter's K tokens checked in one pass of K + 1 rows.
// *passes: the passes after the prompt. 0 on success.
static int generate_d(infer_model *m, const int32_t *ids, int n, const infer_sampling *sp, int spec, int threads, int32_t *gen,
                      int *passes, infer_drafter *d, float p_min) {
    int V = infer_model_n_vocab(m), rc = 1, g = 0;
    infer_ctx *c = NULL;
    infer_sampler *s = NULL;
    float *lg = malloc(sizeof(float) * (size_t)V * (K + 1));
    int32_t *hist = malloc(sizeof(int32_t) * (size_t)(n + GEN + K + 2)), row[K + 1], draft[K];
    *passes = 0;
    if (!lg || !hist || ctx_threads(m, n + GEN + K + 2, threads, &c) || infer_sampler_new(sp, V, &s)) goto done;
    memcpy(hist, ids, sizeof(int32_t) * (size_t)n);
    if (infer_eval(c, ids, n, lg, 1)) goto done;
    int32_t t = infer_sample(s, lg, hist, n);
    if (t < 0) goto done;
    hist[n] = gen[g++] = t;
    while (g < GEN) {
        int nh = n + g, k = d ? infer_drafter_draft(d, hist, nh, K, p_min, draft) : spec ? infer_spec_draft_ngram(hist, nh, 1, 3, K, draft) : 0;
        if (k < 0) goto done;
        row[0] = hist[nh - 1];
        memcpy(row + 1, draft, sizeof(int32_t) * (size_t)k);
        int past = infer_ctx_n_past(c);
        if (infer_eval(c, row, k + 1, lg, 0)) goto done;
        (*passes)++;
        int got = infer_spec_accept(s, lg, V, draft, k, hist, nh, gen + g);
        if (got < 0) goto done;
        infer_ctx_truncate(c, past + got); // (the last token is fed next pass)
        g += got;
    }
    rc = 0;
done:
    free(lg), free(hist);
    infer_sampler_free(s);
    infer_ctx_free(c);
    return rc;
}

static int generate(infer_model *m, const int32_t *ids, int n, const infer_sampling *sp, int spec, int threads, int32_t *gen,
                    int *passes) {
    return generate_d(m, ids, n, sp, spec, threads, gen, passes, NULL, 0);
}

// A draft model: the model itself (every guess kept: a pass gives K + 1
// tokens) and the model re-encoded in q4_0 (another model of the same
// vocabulary: some guesses rejected); greedy and sampled text the same as
// decoding alone; a model of another vocabulary refused.
static void check_draft_model(const char *name, const char *dir, infer_model *other) {
    infer_model *m = NULL, *q = NULL;
    infer_ctx *dc = NULL;
    infer_drafter *d = NULL;
    char path[] = "/tmp/test_spec_draft_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    if (infer_model_load(dir, &m) || fd < 0 || infer_convert_gguf(m, path, "q4_0") || infer_model_load(path, &q)) {
        CHECK(0, "%s: draft model: %s", name, infer_last_error());
        goto done;
    }
    int32_t ids[20], g0[GEN + K + 1], g1[GEN + K + 1];
    int V = infer_model_n_vocab(m), p0, p1;
    for (int i = 0; i < 20; i++) ids[i] = (int32_t)((3 + i * 53) % V);
    for (int self = 1; self >= 0; self--) {
        infer_model *dm = self ? m : q;
        for (int greedy = 1; greedy >= 0; greedy--) {
            infer_sampling sp = infer_sampling_default();
            if (greedy) sp.temp = 0;
            else sp.seed = 7;
            infer_ctx_free(dc), infer_drafter_free(d), dc = NULL, d = NULL;
            if (infer_ctx_new(dm, 20 + GEN + K + 2, &dc) || infer_drafter_new(dm, dc, m, &d) ||
                generate(m, ids, 20, &sp, 0, 1, g0, &p0) || generate_d(m, ids, 20, &sp, 1, 1, g1, &p1, d, 0)) {
                CHECK(0, "%s: draft model: %s", name, infer_last_error());
                goto done;
            }
            CHECK(same_ids(g0, g1, GEN), "%s: %s tokens differ with a draft model (%s)", name, greedy ? "greedy" : "sampled",
                  self ? "itself" : "q4_0");
            // (the first token comes from the prompt's pass; each pass after gives K + 1 when every guess is kept)
            if (self && greedy) CHECK(p1 == (GEN - 1 + K) / (K + 1), "%s: drafting itself, %d passes for %d tokens", name, p1, GEN - 1);
            printf("%-24s draft model (%s), %s: %d tokens the same in %d passes (%d without)\n", name, self ? "itself" : "q4_0",
                   greedy ? "greedy" : "sampled", GEN, p1, p0);
        }
    }
    infer_ctx_free(dc), dc = NULL;
    if (other) {
        infer_ctx *oc = NULL;
        infer_drafter *od = NULL;
        CHECK(!infer_ctx_new(other, 64, &oc), "%s", infer_last_error());
        CHECK(oc && infer_drafter_new(other, oc, m, &od) == INFER_ERR_ARG && strstr(infer_last_error(), "vocabulary"),
              "%s: a draft model of another vocabulary is refused (%s)", name, infer_last_error());
        infer_drafter_free(od), infer_ctx_free(oc);
    }
done:
    infer_drafter_free(d), infer_ctx_free(dc);
    infer_model_free(q), infer_model_free(m);
    unlink(path);
}

static void check_model(const char *name, const char *dir, int threads) {
    infer_model *m;
    if (infer_model_load(dir, &m)) { CHECK(0, "%s: %s", name, infer_last_error()); return; }
    int V = infer_model_n_vocab(m);
    // a prompt that repeats, so the drafter finds n-grams
    int32_t ids[16 + K + 1]; // (16 of a prompt, then the K + 1 rows of one pass)
    for (int i = 0; i < 16 + K + 1; i++) ids[i] = (int32_t)((1 + (i % 9) * 37) % V);
    // K + 1 rows in one pass against K + 1 passes of one row
    infer_ctx *a = NULL, *b = NULL;
    float *la = malloc(sizeof(float) * (size_t)V * (K + 1)), *lb = malloc(sizeof(float) * (size_t)V);
    int rows_same = 0;
    if (la && lb && !ctx_threads(m, 64, threads, &a) && !ctx_threads(m, 64, threads, &b) && !infer_eval(a, ids, 16, NULL, 0) &&
        !infer_eval(b, ids, 16, NULL, 0) && !infer_eval(a, ids + 16, K + 1, la, 0)) {
        for (int j = 0; j <= K; j++) {
            if (infer_eval(b, ids + 16 + j, 1, lb, 1)) break;
            rows_same += !memcmp(la + (size_t)j * V, lb, sizeof(float) * (size_t)V);
        }
    }
    CHECK(rows_same == K + 1, "%s, %d threads: %d of %d rows of one pass are the logits of their tokens alone", name, threads,
          rows_same, K + 1);
    infer_ctx_free(a), infer_ctx_free(b), free(la), free(lb);

    int32_t g0[GEN + K + 1], g1[GEN + K + 1];
    int p0 = 0, p1 = 0;
    infer_sampling sp = infer_sampling_default();
    sp.temp = 0;
    CHECK(!generate(m, ids, 20, &sp, 0, threads, g0, &p0) && !generate(m, ids, 20, &sp, 1, threads, g1, &p1), "%s: %s", name,
          infer_last_error());
    CHECK(same_ids(g0, g1, GEN), "%s, %d threads: greedy tokens differ with speculation", name, threads);
    printf("%-24s %d threads: %d rows of a pass as alone; greedy %d tokens the same in %d passes (%d without)\n", name, threads,
           rows_same, GEN, p1, p0);
    sp = infer_sampling_default();
    sp.seed = 42;
    CHECK(!generate(m, ids, 20, &sp, 0, threads, g0, &p0) && !generate(m, ids, 20, &sp, 1, threads, g1, &p1), "%s: %s", name,
          infer_last_error());
    CHECK(same_ids(g0, g1, GEN), "%s, %d threads: sampled tokens (seed 42) differ with speculation", name, threads);
    infer_model_free(m);
}

int main(int argc, char **argv) {
    check_drafter();
    check_accept();
    char **dirs;
    int all = argc < 2 || !strcmp(argv[1], "fixtures");
    int n = test_fixture_dirs(&dirs, all ? NULL : argv[1]);
    for (int i = 0; i < n; i++) {
        const char *name = strrchr(dirs[i], '/') + 1;
        check_model(name, dirs[i], 1);
        check_model(name, dirs[i], 2);
        free(dirs[i]);
    }
    free(dirs);
    if (argc < 2 || !strcmp(argv[1], "default")) {
        char model[1024];
        int have = test_default_model(model, sizeof model);
        CHECK(have, "could not fetch the default model");
        if (have) check_model("default (gemma3 270M)", model, 2);
        // the draft model on the llama fixture, and the default model's vocabulary refused as its draft
        infer_model *other = NULL;
        if (have && infer_model_load(model, &other)) CHECK(0, "%s", infer_last_error());
        n = test_fixture_dirs(&dirs, "llama");
        if (n > 0) check_draft_model("llama", dirs[0], other);
        for (int i = 0; i < n; i++) free(dirs[i]);
        free(dirs);
        infer_model_free(other);
    }
    return check_summary("test_spec");
}
