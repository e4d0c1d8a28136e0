// Speculative decoding: a drafter guesses the next tokens cheaply, the model
// checks them all in one pass of several rows, and the tokens it would have
// picked anyway are kept. The drafter here is prompt lookup (an n-gram of
// the text's own past): a text that repeats itself -- code being edited, a
// summary quoting its source -- is drafted well for free.
//
// The check (infer_spec_accept) draws each row's token with the caller's
// sampler, exactly as decoding one token at a time would: greedy, the row's
// argmax; sampled, one draw from the sampler's distribution p. A draft token
// d is accepted when the draw is d: probability p(d); otherwise the draw is
// some x != d with probability p(x), i.e. from p with d removed and
// renormalized, given the rejection -- the standard acceptance rule for a
// deterministic drafter (Leviathan et al. 2023, with the draft distribution a
// point mass at d), here realized with the one uniform that decoding alone
// would have drawn. So with the same seed the sampled text is the same with
// and without speculation, as long as each row's logits are those of the
// token decoded alone (forward.c computes every row as alone).
#include "base/error.h"
#include "infer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// The most recent earlier start of hist[n - len .. n) in hist (its
// occurrences that end before n), or -1.
static int last_match(const int32_t *hist, int n, int len) {
    const int32_t *suf = hist + n - len;
    for (int i = n - len - 1; i >= 0; i--)
        if (hist[i] == suf[0] && !memcmp(hist + i, suf, sizeof(int32_t) * (size_t)len)) return i;
    return -1;
}

int infer_spec_draft_ngram(const int32_t *hist, int n, int n_min, int n_max, int k, int32_t *draft) {
    if (!hist || !draft || n <= 0 || k <= 0 || n_min < 1 || n_max < n_min) return 0;
    if (n_max > n - 1) n_max = n - 1; // (an earlier occurrence needs room before the suffix)
    for (int len = n_max; len >= n_min; len--) {
        int i = last_match(hist, n, len);
        if (i < 0) continue;
        // what followed it, copied on past the end of hist into the draft
        // itself where the match is close behind (a period shorter than k
        // repeats: "a b a b" -> "a b a b ...")
        int from = i + len;
        for (int j = 0; j < k; j++) draft[j] = from + j < n ? hist[from + j] : draft[from + j - n];
        return k;
    }
    return 0;
}

int infer_spec_accept(infer_sampler *s, const float *logits, int n_vocab, const int32_t *draft, int k, int32_t *hist,
                      int n_hist, int32_t *out) {
    if (!s || !logits || n_vocab <= 0 || k < 0 || (k && !draft) || !hist || n_hist < 0 || !out)
        return fail(INFER_ERR_ARG, "infer_spec_accept: bad arguments"), -1;
    for (int j = 0; j <= k; j++) {
        int32_t t = infer_sample(s, logits + (size_t)j * n_vocab, hist, n_hist + j);
        if (t < 0) return -1;
        out[j] = hist[n_hist + j] = t;
        if (j == k || t != draft[j]) return j + 1;
    }
    return k + 1; // (not reached)
}

// ---------------------------------------------------------------------------
// A draft model: a small model of the same vocabulary guesses greedily, one
// token a pass of its own context, which keeps the tokens it has seen so the
// next draft starts where the verified text and its cache part.

struct infer_drafter {
    infer_ctx *ctx;    // the draft model's context (the caller's)
    int n_vocab;       // the draft model's; the target's is at least as large where drafts are kept
    int n_target;      // the target's vocabulary: a draft token past it ends the draft
    int32_t *seen;     // the tokens in ctx's cache, position by position
    int cap;
    float *logits;
};

infer_status infer_drafter_new(infer_model *draft, infer_ctx *dctx, infer_model *target, infer_drafter **out) {
    if (!out) return fail(INFER_ERR_ARG, "infer_drafter_new: no out");
    *out = NULL;
    if (!draft || !dctx || !target) return fail(INFER_ERR_ARG, "infer_drafter_new: bad arguments");
    int vd = infer_model_n_vocab(draft), vt = infer_model_n_vocab(target), n = vd < vt ? vd : vt;
    // the same vocabulary: a few added tokens at the end may differ (llama.cpp allows 128), every
    // shared id must be the same text (the special tokens' too)
    if (abs(vd - vt) > 128)
        return fail(INFER_ERR_ARG, "the draft model's vocabulary (%d tokens) is not the model's (%d tokens)", vd, vt);
    for (int32_t id = 0; id < n; id++) {
        size_t la, lb;
        const char *a = infer_token_text(draft, id, &la), *b = infer_token_text(target, id, &lb);
        if (!a && !b) continue; // (models without a tokenizer: the ids alone)
        if (!a || !b || la != lb || memcmp(a, b, la))
            return fail(INFER_ERR_ARG, "the draft model's vocabulary differs from the model's at token %d (\"%.*s\" against \"%.*s\")",
                        id, a ? (int)(la < 40 ? la : 40) : 0, a ? a : "", b ? (int)(lb < 40 ? lb : 40) : 0, b ? b : "");
    }
    infer_drafter *d = calloc(1, sizeof *d);
    if (!d) return fail(INFER_ERR_NOMEM, "out of memory");
    d->ctx = dctx, d->n_vocab = vd, d->n_target = vt, d->cap = infer_ctx_n_ctx(dctx);
    d->seen = malloc(sizeof(int32_t) * (size_t)d->cap);
    d->logits = infer_host_alloc(sizeof(float) * (size_t)vd);
    if (!d->seen || !d->logits) return infer_drafter_free(d), fail(INFER_ERR_NOMEM, "out of memory");
    infer_ctx_reset(dctx);
    *out = d;
    return INFER_OK;
}

void infer_drafter_free(infer_drafter *d) {
    if (!d) return;
    free(d->seen);
    infer_host_free(d->logits);
    free(d);
}

// the largest logit's token, and its probability under the softmax
static int32_t top1(const float *x, int n, float *p) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - x[best]);
    *p = (float)(1.0 / s);
    return best;
}

int infer_drafter_draft(infer_drafter *d, const int32_t *hist, int n, int k, float p_min, int32_t *draft) {
    if (!d || !hist || n <= 0 || k <= 0 || !draft) return fail(INFER_ERR_ARG, "infer_drafter_draft: bad arguments"), -1;
    if (k > d->cap - n) k = d->cap - n; // (the draft context's room: hist and k - 1 drafted tokens, and one to spare)
    if (k <= 0) return 0;
    // the cache keeps the longest prefix it shares with hist, less one: the last token is evaluated again for its logits
    int keep = 0, past = infer_ctx_n_past(d->ctx);
    while (keep < past && keep < n - 1 && d->seen[keep] == hist[keep]) keep++;
    infer_ctx_truncate(d->ctx, keep);
    if (infer_eval(d->ctx, hist + keep, n - keep, d->logits, 1)) return -1;
    memcpy(d->seen + keep, hist + keep, sizeof(int32_t) * (size_t)(n - keep));
    int j = 0;
    for (;;) {
        float p;
        int32_t t = top1(d->logits, d->n_vocab, &p);
        if (t >= d->n_target || (j > 0 && p < p_min)) break; // (the first guess is always made: a pass checks it anyway)
        draft[j++] = t;
        if (j == k) break;
        if (infer_eval(d->ctx, &t, 1, d->logits, 1)) return -1;
        d->seen[n + j - 1] = t;
    }
    return j;
}
