// Token sampling, as llama.cpp's default chain: repetition/presence/frequency
// penalties over the last n tokens, then top-k, top-p, min-p, temperature and
// a draw from the remaining distribution. Greedy when temp <= 0.
#include "inference/sample.h"
#include "base/error.h"
#include "base/nan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { float logit; int32_t id; } cand;

struct infer_sampler {
    infer_sampling p;
    int n_vocab;
    cand *c;          // (n_vocab) candidates
    float *probs;     // (n_vocab)
    int *counts;      // (n_vocab) occurrences in the penalty window
    uint64_t rng;
};

infer_sampling infer_sampling_default(void) {
    infer_sampling p = {0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0.0f, 0.0f, 0x5eed};
    return p;
}

infer_status infer_sampler_new(const infer_sampling *p, int n_vocab, infer_sampler **out) {
    *out = NULL;
    if (n_vocab <= 0) return fail(INFER_ERR_ARG, "sampler: vocabulary size %d", n_vocab);
    if (!(p->temp == p->temp) || !(p->top_p == p->top_p) || !(p->min_p == p->min_p) || p->repeat_penalty <= 0 ||
        p->repeat_last_n < 0)
        return fail(INFER_ERR_ARG, "sampler: temperature, top-p, min-p must be numbers and the repeat penalty positive");
    infer_sampler *s = calloc(1, sizeof *s);
    if (!s) return fail(INFER_ERR_NOMEM, "out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->c = malloc(sizeof *s->c * (size_t)n_vocab);
    s->probs = malloc(sizeof *s->probs * (size_t)n_vocab);
    // occurrence counts only when a penalty needs them (1 MB for a 262k vocabulary)
    int use_pen = p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
    s->counts = use_pen ? calloc((size_t)n_vocab, sizeof *s->counts) : NULL;
    s->rng = p->seed * 0x9E3779B97F4A7C15ull + 1;
    if (!s->c || !s->probs || (use_pen && !s->counts)) { infer_sampler_free(s); return fail(INFER_ERR_NOMEM, "out of memory"); }
    *out = s;
    return INFER_OK;
}

void infer_sampler_free(infer_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->probs);
    free(s->counts);
    free(s);
}

// xorshift64*: uniform in [0, 1)
static double uniform(infer_sampler *s) {
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double)((s->rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

// larger first, then the lower id: a total order (a NaN after every number;
// infer_sample refuses NaN before sorting, but the quickselect must never
// run past its bounds, whatever it is given)
static int by_logit_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    int xn = x->logit != x->logit, yn = y->logit != y->logit;
    if (xn != yn) return xn ? 1 : -1;
    if (!xn && x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

// Partial selection: moves the k largest to the front, sorted.
static void top_k(cand *c, int n, int k) {
    if (k >= n) { qsort(c, (size_t)n, sizeof *c, by_logit_desc); return; }
    // nth-element by quickselect, then sort the head
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (by_logit_desc(&c[i], &pivot) < 0) i++;
            while (by_logit_desc(&c[j], &pivot) > 0) j--;
            if (i <= j) { cand t = c[i]; c[i] = c[j]; c[j] = t; i++; j--; }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
    qsort(c, (size_t)k, sizeof *c, by_logit_desc);
}

// The first index of the largest value: eight lanes, each the first of its
// largest (so the compares do not wait on one another), then the lanes' best,
// the lower index among equals.
static int argmax_first(const float *x, int n) {
    enum { L = 8 };
    int b = 0;
    if (n < 2 * L) {
        for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
        return b;
    }
    float mv[L];
    int mi[L];
    for (int l = 0; l < L; l++) mv[l] = x[l], mi[l] = l;
    int i = L;
    for (; i + L <= n; i += L)
        for (int l = 0; l < L; l++)
            if (x[i + l] > mv[l]) mv[l] = x[i + l], mi[l] = i + l;
    for (; i < n; i++) // (past every lane's indices: a tie there never wins)
        if (x[i] > mv[0]) mv[0] = x[i], mi[0] = i;
    for (int l = 1; l < L; l++)
        if (mv[l] > mv[b] || (mv[l] == mv[b] && mi[l] < mi[b])) b = l;
    return mi[b];
}

int infer_sampling_greedy(const infer_sampling *p) {
    return p->temp <= 0 && !(p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
}

// the first NaN's index, or -1
static int find_nan(const float *x, int n) {
    if (!has_nan(x, (size_t)n)) return -1;
    for (int i = 0; i < n; i++)
        if (x[i] != x[i]) return i;
    return -1;
}

int32_t infer_sample(infer_sampler *s, const float *logits, const int32_t *hist, int n_hist) {
    const infer_sampling *p = &s->p;
    int V = s->n_vocab;
    int use_pen = p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
    int nan = find_nan(logits, V);
    if (nan >= 0)
        return fail(INFER_ERR_FORMAT, "sampling: the logits hold NaN (token %d): the model's numbers are not finite (its weights? "
                    "infer run --check-tensors)", nan), -1;
    if (p->temp <= 0 && !use_pen) return argmax_first(logits, V); // greedy, read in place (infer_sampling_greedy)
    for (int i = 0; i < V; i++) { s->c[i].logit = logits[i]; s->c[i].id = i; }

    // penalties over the last repeat_last_n tokens (llama.cpp's penalties sampler)
    if (use_pen && s->counts && p->repeat_last_n > 0 && n_hist > 0) {
        int from = n_hist > p->repeat_last_n ? n_hist - p->repeat_last_n : 0;
        for (int i = from; i < n_hist; i++)
            if (hist[i] >= 0 && hist[i] < V) s->counts[hist[i]]++;
        for (int i = from; i < n_hist; i++) {
            int id = hist[i];
            if (id < 0 || id >= V || s->counts[id] == 0) continue;
            float *l = &s->c[id].logit;
            *l = *l <= 0 ? *l * p->repeat_penalty : *l / p->repeat_penalty;
            *l -= (float)s->counts[id] * p->frequency_penalty + p->presence_penalty;
            s->counts[id] = 0; // penalize each distinct token once
        }
    }

    if (p->temp <= 0) {
        int b = 0;
        for (int i = 1; i < V; i++) if (s->c[i].logit > s->c[b].logit) b = i;
        return s->c[b].id;
    }

    int n = V;
    if (p->top_k > 0 && p->top_k < n) { top_k(s->c, n, p->top_k); n = p->top_k; }
    else top_k(s->c, n, n);
    if (s->c[0].logit == -INFINITY) return fail(INFER_ERR_ARG, "sampling: every token's logit is -inf: none can be drawn"), -1;
    if (s->c[0].logit == INFINITY) { // (+inf - +inf is no number: the +inf ones share the draw, the others have none)
        int k = 1;
        while (k < n && s->c[k].logit == INFINITY) k++;
        return s->c[(int)(uniform(s) * k) % k].id;
    }

    // softmax over the survivors (sorted, so c[0] is the max)
    double sum = 0;
    for (int i = 0; i < n; i++) { s->probs[i] = expf(s->c[i].logit - s->c[0].logit); sum += s->probs[i]; }
    for (int i = 0; i < n; i++) s->probs[i] = (float)(s->probs[i] / sum);

    // top-p: the smallest prefix with mass >= top_p
    if (p->top_p < 1.0f) {
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += s->probs[i];
            if (cum >= p->top_p) { keep = i + 1; break; }
        }
        n = keep;
    }
    // min-p: drop tokens below min_p * the top probability
    if (p->min_p > 0.0f) {
        float cut = p->min_p * s->probs[0];
        int keep = 1;
        while (keep < n && s->probs[keep] >= cut) keep++;
        n = keep;
    }
    // temperature, then draw
    sum = 0;
    for (int i = 0; i < n; i++) {
        s->probs[i] = expf((s->c[i].logit - s->c[0].logit) / p->temp);
        sum += s->probs[i];
    }
    double r = uniform(s) * sum, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += s->probs[i];
        if (r < acc) return s->c[i].id;
    }
    return s->c[n - 1].id;
}
