// Which slot a prompt takes and what of its cache it reuses: the free slot
// sharing the longest prefix, and a longer prefix copied from another slot's
// cache (serve_engine_int.h). The engine thread's, under the engine's lock.
#include "serve_engine_int.h"

#include <stdlib.h>
#include <string.h>

// The free slot for a prompt: the one whose cache shares the longest prefix
// with it (*shared: its length), else the least recently used; -1 when none is free.
// On a GPU only whole chunks of a prompt made from position 0 are shared: a run's
// products there follow its length (the tensor cores from CUDA_GEMM_MIN_T rows), so
// the rest, run as the same chunks it would be alone, equals the prompt alone.
int pick_slot(serve_engine *e, const serve_task *t, int *shared) {
    int best = -1, best_len = 0;
    for (int i = 0; i < e->n_slots; i++) {
        slot *s = &e->s[i];
        if (s->t) continue;
        int len = 0, past = infer_ctx_n_past(s->ctx);
        while (s->cache && len < past && len < t->req.n_prompt && s->cache[len] == t->req.prompt[len]) len++;
        if (e->chunked_reuse) {
            len = len < s->whole ? len : s->whole;
            if (len >= t->req.n_prompt) len = t->req.n_prompt - 1; // (its last chunk runs again, for the logits)
            len -= len % PROMPT_CHUNK;
        }
        if (best < 0 || len > best_len || (len == best_len && s->used < e->s[best].used)) best = i, best_len = len;
    }
    *shared = best_len;
    return best;
}

// The tokens slot s's context holds, between steps: a free slot's cache, a
// busy one's history (its first n_past tokens are what its context holds).
static const int32_t *slot_tokens(const slot *s, int *n) {
    int past = infer_ctx_n_past(s->ctx);
    if (!s->t) return *n = s->cache ? past : 0, s->cache;
    return *n = past < s->n_hist ? past : s->n_hist, s->hist;
}

// Another slot (free or busy) whose cache shares a longer prefix with the
// prompt than `shared`, the one slot `to` takes: its index and *len (the
// positions `to` copies from it instead of evaluating them), else -1. Not for
// a split or --tp model (each side's, each rank's caches). In chunked reuse
// (a deterministic GPU server) whole chunks made from position 0 only, as
// pick_slot's.
int prefix_donor(serve_engine *e, const serve_task *t, int to, int shared, int *len) {
    int best = -1, best_len = shared;
    if (e->split || e->tp) return -1;
    for (int i = 0; i < e->n_slots; i++) {
        const slot *s = &e->s[i];
        int n, l = 0;
        const int32_t *tok = slot_tokens(s, &n);
        if (i == to || !tok) continue;
        while (l < n && l < t->req.n_prompt && tok[l] == t->req.prompt[l]) l++;
        if (e->chunked_reuse) {
            int w = s->whole < n ? s->whole : n;
            l = l < w ? l : w;
            if (l >= t->req.n_prompt) l = t->req.n_prompt - 1;
            l -= l % PROMPT_CHUNK;
        } else if (l >= t->req.n_prompt) {
            l = t->req.n_prompt - 1;
        }
        if (l > best_len) best = i, best_len = l;
    }
    *len = best_len;
    return best;
}

// Slot `to` takes the first n positions of slot `from`'s cache (a prompt's
// prefix another slot made): its cache's tokens become the prompt's first n.
// 0, or -1 when the copy failed (`to` then holds nothing).
int prefix_copy(const serve_engine *e, slot *to, const slot *from, const serve_task *t, int n) {
    if (!to->cache && !(to->cache = malloc(sizeof(int32_t) * (size_t)(e->n_ctx + 1)))) return -1;
    if (infer_ctx_copy(to->ctx, from->ctx, n)) {
        infer_ctx_truncate(to->ctx, 0);
        to->whole = 0;
        return -1;
    }
    memcpy(to->cache, t->req.prompt, sizeof(int32_t) * (size_t)n);
    to->whole = from->whole < n ? from->whole : n; // (the positions the donor made as whole chunks are so made)
    return 0;
}
