// Adaptive graphs (infer.h's infer_graph_auto): dense or walk@P% chosen per
// layer on a calibration text so that the whole model's mean KL against
// dense stays within a budget. Built on the public API only: each
// measurement is a teacher-forced pass of the calibration tokens through a
// context with a graph, compared position by position with the dense pass.
#include "base/error.h"
#include "infer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CHUNK = 32, TIME_TOKENS = 16 };
static const int g_pcts[] = {1, 2, 5, 10, 25, 50}; // (the candidates, percent of a layer's features)
#define N_PCTS ((int)(sizeof g_pcts / sizeof g_pcts[0]))
#define MAX_PCTS ((int)(sizeof ((infer_graph_auto_info *)0)->pct / sizeof(int)))

static void log_softmax(float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - m);
    float ls = (float)(m + log(s));
    for (int i = 0; i < n; i++) x[i] -= ls;
}

typedef struct {
    infer_model *m;
    const int32_t *ids;
    int n, V;
    float *ref;  // n x V: the dense pass's probabilities
    double *neg; // n: each position's sum of p log p (KL = neg - sum p log q)
    float *buf;  // CHUNK x V
    infer_ctx *c;
    int passes;
} calib;

// Mean KL(dense || spec) over the calibration positions (NAN on failure).
static double pass_kl(calib *k, const char *spec) {
    infer_ctx_reset(k->c);
    if (infer_ctx_set_graph(k->c, spec, 0)) return NAN;
    double s = 0;
    for (int p = 0; p < k->n; p += CHUNK) {
        int T = k->n - p < CHUNK ? k->n - p : CHUNK;
        if (infer_eval(k->c, k->ids + p, T, k->buf, 0)) return NAN;
        for (int t = 0; t < T; t++) {
            float *q = k->buf + (size_t)t * k->V;
            const float *r = k->ref + (size_t)(p + t) * k->V;
            log_softmax(q, k->V);
            double cross = 0;
            for (int i = 0; i < k->V; i++) cross += (double)r[i] * q[i];
            s += k->neg[p + t] - cross;
        }
    }
    k->passes++;
    return s > 0 ? s / k->n : 0; // (a sum of rounded terms can fall just below 0)
}

// The FFN's decode time per layer per token (µs) under spec, over one-token
// steps of the calibration's first tokens (< 0 on failure).
static double ffn_us(calib *k, const char *spec) {
    if (infer_ctx_set_graph(k->c, spec, 0)) return -1;
    int n = k->n < TIME_TOKENS ? k->n : TIME_TOKENS;
    double s = 0;
    for (int rep = 0; rep < 2; rep++) { // (the first warms the weights' pages and caches; the second is timed)
        infer_ctx_reset(k->c);
        infer_ctx_profile(k->c, 1);
        for (int i = 0; i < n; i++)
            if (infer_eval(k->c, k->ids + i, 1, NULL, 0)) { infer_ctx_profile(k->c, 0); return -1; }
        const infer_phase ffn[] = {INFER_PHASE_WALK, INFER_PHASE_GATE_UP, INFER_PHASE_ACT, INFER_PHASE_DOWN};
        s = 0;
        for (int p = 0; p < 4; p++) s += infer_ctx_profile_seconds(k->c, ffn[p]);
    }
    infer_ctx_profile(k->c, 0);
    return s / n / infer_model_n_layer(k->m) * 1e6;
}

// The spec of a choice: runs of layers at the same percentage (0: dense) as
// "walk:A-B@P%" items; "dense" when no layer walks.
static int spec_of(const int *choice, int L, const char *kind, char *out, size_t cap) {
    size_t len = 0;
    out[0] = 0;
    for (int a = 0; a < L;) {
        int b = a;
        while (b + 1 < L && choice[b + 1] == choice[a]) b++;
        if (choice[a]) {
            int w = a == b ? snprintf(out + len, cap - len, "%s%s:%d@%d%%", len ? "," : "", kind, a, choice[a])
                           : snprintf(out + len, cap - len, "%s%s:%d-%d@%d%%", len ? "," : "", kind, a, b, choice[a]);
            if (w < 0 || (size_t)w >= cap - len) return 0;
            len += (size_t)w;
        }
        a = b + 1;
    }
    if (!len) snprintf(out, cap, "dense");
    return 1;
}

infer_status infer_graph_auto(infer_model *m, const int32_t *ids, int n, double kl_budget, int by_contrib, infer_graph_auto_info *info,
                              double *layer_kl) {
    if (!m || !ids || !info) return fail(INFER_ERR_ARG, "graph auto: no model, tokens or result");
    if (!(kl_budget > 0) || kl_budget > 100) return fail(INFER_ERR_ARG, "graph auto: the KL budget must be above 0 (got %g)", kl_budget);
    if (!infer_model_walk_features(m)) return fail(INFER_ERR_ARG, "graph auto: the walk needs a vindex (-x)");
    const int L = infer_model_n_layer(m), V = infer_model_n_vocab(m);
    if (n < 2) return fail(INFER_ERR_ARG, "graph auto: the calibration text gives %d token%s; it needs at least 2", n, n == 1 ? "" : "s");
    if ((size_t)n * (size_t)V > ((size_t)256 << 20) / sizeof(float))
        return fail(INFER_ERR_ARG, "graph auto: %d calibration tokens x %d vocabulary entries is more than 256 MB of log-probabilities; "
                    "give at most %zu tokens", n, V, ((size_t)256 << 20) / sizeof(float) / (size_t)V);
    const char *kind = by_contrib ? "walkc" : "walk";
    memset(info, 0, sizeof *info);
    calib k = {m, ids, n, V, malloc(sizeof(float) * (size_t)n * V), malloc(sizeof(double) * (size_t)n), malloc(sizeof(float) * CHUNK * (size_t)V),
               NULL, 0};
    double *kl = malloc(sizeof(double) * (size_t)L * N_PCTS); // kl[l * N_PCTS + j]: layer l alone at g_pcts[j]
    int *choice = calloc((size_t)L, sizeof(int)), *order = malloc(sizeof(int) * (size_t)L);
    infer_status st = INFER_OK;
    char spec[sizeof info->spec];
    if (!k.ref || !k.neg || !k.buf || !kl || !choice || !order) { st = fail(INFER_ERR_NOMEM, "graph auto: out of memory"); goto done; }
    infer_ctx_params cp = infer_ctx_default_params();
    cp.n_ctx = n, cp.n_threads = infer_model_threads(m);
    if ((st = infer_ctx_create(m, &cp, &k.c))) goto done;
    // the dense pass, the reference
    for (int p = 0; p < n; p += CHUNK) {
        int T = n - p < CHUNK ? n - p : CHUNK;
        if ((st = infer_eval(k.c, ids + p, T, k.ref + (size_t)p * V, 0))) goto done;
    }
    for (int t = 0; t < n; t++) {
        float *r = k.ref + (size_t)t * V;
        log_softmax(r, V);
        double neg = 0;
        for (int i = 0; i < V; i++) {
            double lp = r[i];
            r[i] = (float)exp(lp);
            neg += (double)r[i] * lp;
        }
        k.neg[t] = neg;
    }
    // the candidates: the percentages whose FFN is faster than dense's
    double us[N_PCTS], dense_us = ffn_us(&k, "dense");
    int cand[N_PCTS], nc = 0;
    if (dense_us < 0) { st = fail_wrap(INFER_ERR_ARG, "graph auto: timing dense"); goto done; }
    for (int j = 0; j < N_PCTS; j++) {
        snprintf(spec, sizeof spec, "%s@%d%%", kind, g_pcts[j]);
        if ((us[j] = ffn_us(&k, spec)) < 0) { st = fail_wrap(INFER_ERR_ARG, "graph auto: timing %s", spec); goto done; }
        if (us[j] < dense_us) cand[nc++] = j;
    }
    info->dense_ffn_us = info->ffn_us = dense_us;
    for (int j = 0; j < N_PCTS && j < MAX_PCTS; j++) info->pct[j] = g_pcts[j], info->pct_ffn_us[j] = us[j];
    info->n_pct = N_PCTS < MAX_PCTS ? N_PCTS : MAX_PCTS;
    // each layer alone at each candidate
    for (int l = 0; l < L; l++)
        for (int ci = 0; ci < nc; ci++) {
            int j = cand[ci];
            snprintf(spec, sizeof spec, "%s:%d@%d%%", kind, l, g_pcts[j]);
            double v = pass_kl(&k, spec);
            if (isnan(v)) { st = fail_wrap(INFER_ERR_ARG, "graph auto: %s", spec); goto done; }
            kl[l * N_PCTS + j] = v;
        }
    if (layer_kl)
        for (int l = 0; l < L; l++)
            for (int j = 0; j < N_PCTS; j++) layer_kl[l * N_PCTS + j] = -1;
    for (int l = 0; layer_kl && l < L; l++)
        for (int ci = 0; ci < nc; ci++) layer_kl[l * N_PCTS + cand[ci]] = kl[l * N_PCTS + cand[ci]];
    // greedy: the move (a layer to a faster candidate) with the most time saved per KL added, while the sum fits
    int *cur = malloc(sizeof(int) * (size_t)L); // index into g_pcts, -1 dense
    if (!cur) { st = fail(INFER_ERR_NOMEM, "graph auto: out of memory"); goto done; }
    for (int l = 0; l < L; l++) cur[l] = -1;
    double sum = 0;
    int n_order = 0;
    for (;;) {
        int bl = -1, bj = -1;
        double best = -1;
        for (int l = 0; l < L; l++) {
            double c0 = cur[l] < 0 ? dense_us : us[cur[l]], k0 = cur[l] < 0 ? 0 : kl[l * N_PCTS + cur[l]];
            for (int ci = 0; ci < nc; ci++) {
                int j = cand[ci];
                double save = c0 - us[j], add = kl[l * N_PCTS + j] - k0;
                if (save <= 0 || sum + add > kl_budget) continue;
                double r = add <= 0 ? INFINITY : save / add;
                if (r > best) best = r, bl = l, bj = j;
            }
        }
        if (bl < 0) break;
        sum += kl[bl * N_PCTS + bj] - (cur[bl] < 0 ? 0 : kl[bl * N_PCTS + cur[bl]]);
        if (cur[bl] < 0) order[n_order++] = bl; // (the order layers first walked in)
        cur[bl] = bj;
    }
    // the whole choice measured; layers given back to dense, the last taken first, until it fits
    double measured = 0;
    for (;;) {
        for (int l = 0; l < L; l++) choice[l] = cur[l] < 0 ? 0 : g_pcts[cur[l]];
        if (!spec_of(choice, L, kind, spec, sizeof spec)) { st = fail(INFER_ERR_ARG, "graph auto: the spec is too long"); free(cur); goto done; }
        if (!n_order) { measured = 0; break; }
        if (isnan(measured = pass_kl(&k, spec))) { st = fail_wrap(INFER_ERR_ARG, "graph auto: %s", spec); free(cur); goto done; }
        if (measured <= kl_budget) break;
        int l = order[--n_order];
        sum -= kl[l * N_PCTS + cur[l]];
        cur[l] = -1;
    }
    snprintf(info->spec, sizeof info->spec, "%s", spec);
    info->kl = measured, info->kl_sum = sum, info->positions = n;
    double t = 0;
    for (int l = 0; l < L; l++) t += cur[l] < 0 ? dense_us : us[cur[l]], info->walked += cur[l] >= 0;
    info->ffn_us = t / L;
    free(cur);
done:
    info->passes = k.passes;
    if (k.c) infer_ctx_free(k.c);
    free(k.ref), free(k.neg), free(k.buf), free(kl), free(choice), free(order);
    return st;
}
