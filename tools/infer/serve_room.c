// The slots' KV cache memory (serve_engine_int.h): a request admitted where
// its cache fits, and, where the caches grow as used (the CPU's; a GPU's under
// INFER_CUDA_KV_VM), given more step by step, the oldest request first, an
// older one taking the newest's memory when the budget is taken. The engine
// thread's.
#include "serve_engine_int.h"

#include <pthread.h>
#include <stdio.h>

// The idle slots' caches (kept for a later prompt's prefix) given back, but slot `keep`'s: memory for a
// request that runs matters more. How many requests run.
static int idle_give_back(serve_engine *e, int keep) {
    int busy = 0;
    for (int j = 0; j < e->n_slots; j++) {
        slot *o = &e->s[j];
        if (o->t) {
            busy++;
            continue;
        }
        if (j == keep || !infer_ctx_kv_backed(o->ctx)) continue;
        infer_ctx_reset(o->ctx);
        infer_ctx_kv_trim(o->ctx);
    }
    return busy;
}

// Whether slot i's cache can hold task t's positions: where the caches grow, its prompt's and its first
// token's (it takes more as it goes: step_room), else its prompt and max_tokens (or the whole context):
// 1, backed now (infer_ctx_kv_reserve; always where the cache does not grow); 0, not while other requests
// run (the task waits for their memory); -1, not even with every other slot idle.
int slot_room(serve_engine *e, int i, const serve_task *t) {
    int need = e->grows && !e->tp ? t->req.n_prompt + 1 : t->req.max_tokens > 0 ? t->req.n_prompt + t->req.max_tokens : e->n_ctx;
    need = need < e->n_ctx ? need : e->n_ctx;
    if (!infer_ctx_kv_reserve(e->s[i].ctx, need)) return 1;
    int busy = idle_give_back(e, i);
    if (!infer_ctx_kv_reserve(e->s[i].ctx, need)) return 1;
    e->counts.kv_waits++;
    return busy ? 0 : -1;
}

// Slot s's cache given back for an older request's (the newest request goes first, as vLLM preempts):
// what it holds -- its prompt and the tokens drawn so far -- is evaluated again as a prompt once memory
// frees, and it draws on from there (its sampler, grammar and text as they were).
static void slot_preempt(serve_engine *e, slot *s) {
    infer_ctx_reset(s->ctx);
    infer_ctx_kv_trim(s->ctx);
    s->n_feed = s->generating ? s->n_hist : s->n_feed; // (generating: its last token, drawn, is not in the cache yet)
    s->generating = 0, s->n_fed = 0, s->whole = 0, s->preempted = 1;
    pthread_mutex_lock(&e->mu);
    e->counts.kv_preempted++;
    pthread_mutex_unlock(&e->mu);
}

// Memory for the step's rows where the caches grow (not under --tp: the ranks' caches are one), the
// oldest request first: one whose positions do not fit takes the newest running request's (slot_preempt)
// until they do; else it sits out the step (an older request's memory comes back as it ends), or, with
// no older request running, could never fit: its slot is returned, to end with why.
int step_room(serve_engine *e, const unsigned char *take, unsigned char *off, char *why, size_t whylen) {
    if (!e->grows || e->tp) return -1;
    int ord[MAX_SLOTS], n = 0;
    for (int i = 0; i < e->n_slots; i++)
        if (e->s[i].t) ord[n++] = i;
    for (int a = 1; a < n; a++) // (oldest first: the least `used`)
        for (int b = a; b > 0 && e->s[ord[b]].used < e->s[ord[b - 1]].used; b--) {
            int x = ord[b];
            ord[b] = ord[b - 1], ord[b - 1] = x;
        }
    int gave = 0;
    for (int k = 0; k < n; k++) {
        slot *s = &e->s[ord[k]];
        if (!s->t || s->mask_wait || off[ord[k]] || (!s->generating && !take[ord[k]])) continue;
        int rest = s->n_feed - s->n_fed, rows = s->generating ? 1 + e->spec_k : rest < PROMPT_CHUNK ? rest : PROMPT_CHUNK;
        int need = infer_ctx_n_past(s->ctx) + rows;
        need = need < e->n_ctx ? need : e->n_ctx;
        int last = n - 1;
        while (infer_ctx_kv_reserve(s->ctx, need)) {
            if (!gave) {
                gave = 1;
                idle_give_back(e, -1);
                continue;
            }
            while (last > k && (!e->s[ord[last]].t || e->s[ord[last]].mask_wait || !infer_ctx_kv_backed(e->s[ord[last]].ctx))) last--;
            if (last > k) { // (the newest running request's memory)
                slot_preempt(e, &e->s[ord[last]]);
                off[ord[last]] = 1;
                continue;
            }
            off[ord[k]] = 1;
            if (!k) { // (no older request will give memory back: this one cannot go on)
                snprintf(why, whylen, "this request alone: %s", infer_last_error());
                return ord[k];
            }
            break;
        }
    }
    return -1;
}
