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
