// The server's engine thread (serve.h): slots, the queue, one step at a time.
#include "serve_engine_int.h"

#include <math.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void task_free(serve_task *t) {
    infer_grammar_free(t->req.grammar);
    free(t->req.prompt);
    for (int i = 0; i < t->req.n_stop; i++) free(t->req.stop[i]);
    free(t->req.stop);
    free(t->text);
    free(t->lp);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

static void task_unref(serve_task *t) {
    pthread_mutex_lock(&t->mu);
    int left = --t->refs;
    pthread_mutex_unlock(&t->mu);
    if (!left) task_free(t);
}

// The task's visible text becomes text[0, len) (a longer prefix of what it was).
static void task_publish(serve_task *t, const char *text, size_t len) {
    pthread_mutex_lock(&t->mu);
    if (len > t->len) {
        char *p = realloc(t->text, len + 1);
        if (p) {
            memcpy(p + t->len, text + t->len, len - t->len);
            p[len] = 0;
            t->text = p, t->len = len;
        }
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static const char g_stopping[] = "the server is stopping";

// The task ends (finish NULL: failed or cancelled, error saying why).
static void task_end(serve_task *t, const char *finish, const char *error) {
    pthread_mutex_lock(&t->mu);
    t->done = 1, t->finish = finish, t->stopping = error == g_stopping;
    if (error) t->failed = 1, snprintf(t->error, sizeof t->error, "%s", error);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    task_unref(t);
}

// The task leaves the slot; what the context holds stays for the next prompt
// that shares a prefix with it.
static void slot_free(slot *s) {
    infer_sampler_free(s->smp);
    free(s->cache);
    s->cache = s->hist; // (its first n_past tokens are the context's)
    s->smp = NULL, s->hist = NULL, s->t = NULL;
    atomic_store(&s->busy, 0);
}

static void slot_end(slot *s, const char *finish, const char *error) {
    serve_task *t = s->t;
    slot_free(s);
    task_end(t, finish, error);
}

// The token's log-probability and the top n alternatives' from the logits.
static void logprob_of(const float *lg, int V, int32_t tok, int n, serve_logprob *out) {
    float mx = lg[0];
    for (int i = 1; i < V; i++) mx = lg[i] > mx ? lg[i] : mx;
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)lg[i] - mx);
    double lse = mx + log(sum);
    out->id = tok, out->logprob = (float)(lg[tok] - lse), out->n_top = 0;
    for (int i = 0; i < V; i++) { // insertion into the top n (ties: the lower id first; none masked out)
        if (lg[i] == -INFINITY) continue;
        int k = out->n_top;
        if (k == n && (n == 0 || lg[i] <= lg[out->top_id[n - 1]])) continue;
        if (k < n) out->n_top++;
        else k = n - 1;
        while (k > 0 && lg[out->top_id[k - 1]] < lg[i]) out->top_id[k] = out->top_id[k - 1], k--;
        out->top_id[k] = i;
    }
    for (int k = 0; k < out->n_top; k++) out->top_logprob[k] = (float)(lg[out->top_id[k]] - lse);
}

// The grammar thread: makes the masks queued (oldest first), one at a time;
// a mask's work is bounded (the grammar's limit), so it ends soon after stop.
static slot *next_job(serve_engine *e) {
    slot *best = NULL;
    for (int i = 0; i < e->n_slots; i++)
        if (e->s[i].mask_job == 1 && (!best || e->s[i].mask_seq < best->mask_seq)) best = &e->s[i];
    return best;
}

static void *grammar_main(void *arg) {
    serve_engine *e = arg;
    // (below the engine's threads: where cores are few a costly grammar's masks take what the steps leave)
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10)) {}
    pthread_mutex_lock(&e->mu);
    for (;;) {
        slot *s = NULL;
        while (!e->gstop && !(s = next_job(e))) pthread_cond_wait(&e->gcv, &e->mu);
        if (!s) break;
        s->mask_job = 2;
        infer_grammar *g = s->t->req.grammar;
        pthread_mutex_unlock(&e->mu);
        infer_status st = infer_grammar_prepare(g);
        pthread_mutex_lock(&e->mu);
        s->mask_st = st;
        if (st) snprintf(s->mask_err, sizeof s->mask_err, "%s", infer_last_error());
        s->mask_job = 3;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static void mask_queue(serve_engine *e, slot *s) {
    pthread_mutex_lock(&e->mu);
    s->mask_job = 1, s->mask_seq = ++e->mask_seq, s->mask_wait = 1;
    pthread_cond_signal(&e->gcv);
    pthread_mutex_unlock(&e->mu);
}

enum { PICK_WAIT = -2, PICK_FAIL = -3 };

// The slot's next token from its logits: the token, -1 when the grammar
// allows none, PICK_FAIL when it cannot be drawn (the slot has ended, saying
// why), PICK_WAIT when the grammar's mask is not known yet (queued for the
// grammar thread: the slot sits out until it is). *lg: the logits it was
// drawn from. Under a grammar (llama.cpp's order): the token drawn from the
// model's logits when the grammar allows it, else one drawn from the logits
// masked by the grammar. When log-probabilities are asked for, always the
// masked ones, so that they are those of what was drawn from.
static int32_t slot_pick(serve_engine *e, slot *s, const float **lg) {
    infer_grammar *g = s->t->req.grammar;
    *lg = s->logits;
    int32_t tok = -1;
    if (!g || s->t->req.top_logprobs < 0) {
        if ((tok = infer_sample(s->smp, s->logits, s->hist, s->n_hist)) < 0) return slot_end(s, NULL, infer_last_error()), PICK_FAIL;
        if (!g || infer_grammar_allows(g, tok)) return tok;
    }
    if (!infer_grammar_ready(g)) return mask_queue(e, s), PICK_WAIT;
    memcpy(e->masked, s->logits, sizeof(float) * (size_t)e->V);
    int n_ok = infer_grammar_mask(g, e->masked);
    if (n_ok < 0) return slot_end(s, NULL, infer_last_error()), PICK_FAIL;
    if (!n_ok) return -1;
    *lg = e->masked;
    if ((tok = infer_sample(s->smp, e->masked, s->hist, s->n_hist)) < 0) return slot_end(s, NULL, infer_last_error()), PICK_FAIL;
    return tok;
}

// After the slot's new token (drawn from logits lg): the text so far, a stop
// string, the grammar, the limits.
static void slot_token(serve_engine *e, slot *s, int32_t tok, const float *lg) {
    serve_task *t = s->t;
    infer_grammar *g = t->req.grammar;
    if (tok >= 0) { // (every token drawn: the first, from the prompt's last chunk, too)
        pthread_mutex_lock(&e->mu);
        e->counts.generated_tokens++;
        pthread_mutex_unlock(&e->mu);
    }
    if (tok < 0) {
        if (g && infer_grammar_complete(g)) slot_end(s, "stop", NULL);
        else slot_end(s, NULL, "the grammar allows no token to continue the text");
        return;
    }
    for (int i = 0; i < e->n_eog && !t->req.ignore_eos; i++)
        if (tok == e->eog[i]) { slot_end(s, "stop", NULL); return; }
    if (g && infer_grammar_accept(g, tok)) { slot_end(s, NULL, infer_last_error()); return; }
    if (t->req.top_logprobs >= 0) {
        serve_logprob lp;
        logprob_of(lg, e->V, tok, t->req.top_logprobs > 20 ? 20 : t->req.top_logprobs, &lp);
        pthread_mutex_lock(&t->mu);
        if (t->n_lp == t->cap_lp) {
            int cap = t->cap_lp ? 2 * t->cap_lp : 64;
            serve_logprob *p = realloc(t->lp, sizeof *p * (size_t)cap);
            if (p) t->lp = p, t->cap_lp = cap;
        }
        if (t->n_lp < t->cap_lp) t->lp[t->n_lp++] = lp;
        pthread_mutex_unlock(&t->mu);
    }
    s->hist[s->n_hist++] = tok;
    s->n_gen++;
    s->next = tok;
    pthread_mutex_lock(&t->mu);
    t->n_gen = s->n_gen;
    pthread_mutex_unlock(&t->mu);
    char *text = NULL;
    size_t len = 0;
    if (infer_detokenize(e->m, s->hist + t->req.n_prompt, s->n_gen, 1, &text, &len)) { slot_end(s, NULL, infer_last_error()); return; }
    size_t cut = serve_stop_at(text, len, t->req.stop, t->req.n_stop);
    if (cut < len) {
        task_publish(t, text, cut);
        free(text);
        slot_end(s, "stop", NULL);
        return;
    }
    int full = (t->req.max_tokens > 0 && s->n_gen >= t->req.max_tokens) || infer_ctx_n_past(s->ctx) + 1 >= e->n_ctx;
    int matched = g && infer_grammar_complete(g); // (only end-of-generation may follow: it need not be waited for)
    task_publish(t, text, full || matched ? len : serve_visible(text, len, t->req.stop, t->req.n_stop));
    free(text);
    if (matched) slot_end(s, "stop", NULL);
    else if (full) slot_end(s, "length", NULL);
}

// ---------------------------------------------------------------------------
// A job of several ranks (infer serve --tp N): rank 0 takes the requests and
// samples; before each call that runs the model it sends the other ranks
// what to do (a header of MSG_HDR ints, then `len` ints), and they do the same
// on their contexts (serve_follow), so every collective of the pass pairs up.
enum { MSG_STOP, MSG_TRUNCATE, MSG_STEP, MSG_HDR = 4 };

static int tp_send(serve_engine *e, int op, int a, int32_t *body, int len) {
    if (!e->tp) return 0;
    int32_t h[MSG_HDR] = {op, a, len, 0};
    return infer_tp_bcast(e->m, h, sizeof h) || (len && infer_tp_bcast(e->m, body, sizeof(int32_t) * (size_t)len)) ? -1 : 0;
}

// A step's message: n, then slot, tokens, wants logits, wants the token for
// each, then every entry's tokens.
static int tp_step(serve_engine *e, int n, slot *const *sl, const int32_t *const *ids, const int *nids, float *const *lg,
                   int32_t *const *tk) {
    if (!e->tp) return 0;
    int len = 1 + 4 * n;
    for (int i = 0; i < n; i++) len += nids[i];
    int32_t *b = malloc(sizeof(int32_t) * (size_t)len);
    if (!b) return -1;
    int at = 1 + 4 * n;
    b[0] = n;
    for (int i = 0; i < n; i++) {
        b[1 + 4 * i] = (int32_t)(sl[i] - e->s), b[2 + 4 * i] = nids[i], b[3 + 4 * i] = lg[i] != NULL, b[4 + 4 * i] = tk[i] != NULL;
        memcpy(b + at, ids[i], sizeof(int32_t) * (size_t)nids[i]);
        at += nids[i];
    }
    int rc = tp_send(e, MSG_STEP, 0, b, len);
    free(b);
    return rc;
}

// The slot takes the task, keeping the `shared` first prompt tokens its
// context already holds (at least one prompt token is evaluated again, for
// the logits).
static int slot_start(serve_engine *e, slot *s, serve_task *t, int shared) {
    int n = t->req.n_prompt, keep = shared < n - 1 ? shared : n - 1;
    tp_send(e, MSG_TRUNCATE, (int)(s - e->s), (int32_t[]){keep}, 1);
    infer_ctx_truncate(s->ctx, keep);
    s->whole = s->whole < keep ? s->whole : keep;
    s->t = t, s->generating = 0, s->n_fed = keep, s->n_gen = 0, s->used = ++e->steps;
    atomic_store(&s->busy, 1);
    pthread_mutex_lock(&t->mu);
    t->n_cached = keep;
    pthread_mutex_unlock(&t->mu);
    s->hist = malloc(sizeof(int32_t) * (size_t)(e->n_ctx + 1));
    if (!s->hist || infer_sampler_new(&t->req.sampling, e->V, &s->smp)) {
        slot_end(s, NULL, "out of memory for a slot");
        return -1;
    }
    memcpy(s->hist, t->req.prompt, sizeof(int32_t) * (size_t)n);
    s->n_hist = n, s->n_feed = n, s->preempted = 0;
    return 0;
}


// A slot whose mask the grammar thread has made draws its token now (and
// joins this step); one whose mask is on its way is waited for a little
// (a quarter of a step at most: a costly grammar's slot then sits out the
// step, not its neighbours). 0: the slot goes on waiting.
static int mask_arrived(serve_engine *e, slot *s) {
    pthread_mutex_lock(&e->mu);
    if (s->mask_job != 3) {
        double wait = e->step_s / 4 < 0.005 ? e->step_s / 4 : 0.005;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)(wait * 1e9);
        until.tv_sec += ns / 1000000000L, until.tv_nsec = ns % 1000000000L;
        while (s->mask_job != 3 && !e->stop)
            if (pthread_cond_timedwait(&e->cv, &e->mu, &until)) break;
    }
    int made = s->mask_job == 3;
    if (made) s->mask_job = 0;
    pthread_mutex_unlock(&e->mu);
    if (!made) return 0;
    s->mask_wait = 0;
    if (s->mask_st) { slot_end(s, NULL, s->mask_err); return 0; }
    const float *lg = NULL;
    int32_t tok = slot_pick(e, s, &lg);
    if (tok == PICK_WAIT) return 0; // (the memo restarted meanwhile: made again)
    if (tok != PICK_FAIL) slot_token(e, s, tok, lg);
    return s->t != NULL;
}

// ---------------------------------------------------------------------------
// Speculative decoding (--spec-ngram): a generating slot's step feeds its
// token and a draft; every row's logits come back, each as decoding alone
// would make them, and its sampler keeps the draft while it draws it.

// Drafts the slot's next tokens into s->rows (after s->next); 1 when there is
// a draft this step. None under a grammar or log-probabilities (their checks
// are per token), nor within K + 2 positions of the context's end or past
// max_tokens, so the slot ends where decoding one token a step would.
static int spec_draft(serve_engine *e, slot *s) {
    s->n_draft = 0;
    const serve_request *r = &s->t->req;
    if (!e->spec_k || e->split || e->tp || r->grammar || r->top_logprobs >= 0) return 0;
    int past = infer_ctx_n_past(s->ctx), k = e->spec_k;
    if (past + k + 2 >= e->n_ctx) return 0;
    if (r->max_tokens > 0 && k > r->max_tokens - s->n_gen - 1) k = r->max_tokens - s->n_gen - 1;
    if (k <= 0) return 0;
    s->n_draft = s->drafter ? infer_drafter_draft(s->drafter, s->hist, s->n_hist, k, e->draft_p_min, s->rows + 1)
                            : infer_spec_draft_ngram(s->hist, s->n_hist, CLI_SPEC_NMIN, CLI_SPEC_NMAX, k, s->rows + 1);
    if (s->n_draft < 0) s->n_draft = 0; // (the draft model failed: this step decodes one token, as without it)
    s->rows[0] = s->next, s->spec_past = past;
    return s->n_draft > 0;
}

// After the step: the tokens the slot's sampler keeps, one by one as a step
// of one token would take them (the slot may end on any); the cache keeps
// the rows of the tokens taken.
static void spec_take(serve_engine *e, slot *s) {
    int32_t out[CLI_SPEC_MAX + 1];
    int k = s->n_draft, got = infer_spec_accept(s->smp, s->slog, e->V, s->rows + 1, k, s->hist, s->n_hist, out);
    s->n_draft = 0;
    if (got < 0) { slot_end(s, NULL, infer_last_error()); return; }
    infer_ctx_truncate(s->ctx, s->spec_past + got);
    pthread_mutex_lock(&e->mu);
    e->counts.spec_drafted += k, e->counts.spec_accepted += got - 1;
    pthread_mutex_unlock(&e->mu);
    for (int j = 0; j < got && s->t; j++) slot_token(e, s, out[j], s->slog + (size_t)j * e->V);
    // (an ended slot's cache is reused by a prompt sharing its text: it holds no row past that text)
    if (!s->t && infer_ctx_n_past(s->ctx) > s->n_hist) infer_ctx_truncate(s->ctx, s->n_hist);
}

int serve_engine_set_draft(serve_engine *e, infer_model *dm, int k, float p_min, char *err, size_t errlen) {
    if (e->split || e->tp) return snprintf(err, errlen, "--model-draft: not with a model split by -ngl or --tp"), -1;
    for (int i = 0; i < e->n_slots; i++) {
        slot *s = &e->s[i];
        infer_ctx_params p = infer_ctx_default_params();
        p.n_ctx = e->n_ctx, p.n_threads = cli_threads();
        if (infer_ctx_create(dm, &p, &s->dctx) || infer_ctx_set_backend(s->dctx, serve_engine_backend(e)) ||
            infer_drafter_new(dm, s->dctx, e->m, &s->drafter))
            return snprintf(err, errlen, "--model-draft: %s", infer_last_error()), -1;
    }
    e->draft_p_min = p_min;
    serve_engine_set_spec(e, k);
    return e->spec_k ? 0 : (snprintf(err, errlen, "--model-draft: out of memory"), -1);
}

void serve_engine_set_spec(serve_engine *e, int k) {
    pthread_mutex_lock(&e->mu);
    e->spec_k = k;
    for (int i = 0; i < e->n_slots && k; i++)
        if (!e->s[i].slog) e->s[i].slog = infer_host_alloc(sizeof(float) * (size_t)e->V * (k + 1));
    for (int i = 0; i < e->n_slots; i++)
        if (!e->s[i].slog) e->spec_k = 0; // (out of memory: one token a step)
    pthread_mutex_unlock(&e->mu);
}

// One step: a token of every generating slot and the next prompt chunk of
// the waiting slots, oldest first, while the step's tokens stay within
// e->step_tokens (one chunk at least), in one call (on the CPU or the GPU:
// infer_batch_eval reads each weight once for all). A prompt's chunks are
// its PROMPT_CHUNK tokens from its start whatever else the step holds, so
// each is computed as alone. Returns how many slots it ran.
static int step(serve_engine *e) {
    infer_ctx *cx[MAX_SLOTS];
    const int32_t *ids[MAX_SLOTS];
    int nids[MAX_SLOTS], n = 0, all[MAX_SLOTS];
    float *lg[MAX_SLOTS];
    int32_t *tk[MAX_SLOTS];
    slot *sl[MAX_SLOTS];
    // which waiting prompts go: the decode rows first, then chunks oldest first (the least `used`)
    int wait[MAX_SLOTS], n_wait = 0, rows = 0;
    unsigned char take[MAX_SLOTS] = {0};
    for (int i = 0; i < e->n_slots; i++) {
        slot *s = &e->s[i];
        if (!s->t || s->mask_wait) continue;
        if (s->generating) rows++;
        else wait[n_wait++] = i;
    }
    for (int a = 1; a < n_wait; a++) // (insertion: a few slots)
        for (int b = a; b > 0 && e->s[wait[b]].used < e->s[wait[b - 1]].used; b--) {
            int x = wait[b];
            wait[b] = wait[b - 1], wait[b - 1] = x;
        }
    for (int k = 0, taken = 0; k < n_wait; k++) {
        const slot *s = &e->s[wait[k]];
        int rest = s->n_feed - s->n_fed, chunk = rest < PROMPT_CHUNK ? rest : PROMPT_CHUNK;
        if (taken && rows + chunk > e->step_tokens) continue;
        take[wait[k]] = 1, rows += chunk, taken++;
    }
    unsigned char off[MAX_SLOTS] = {0}; // (sitting out the step for memory, or preempted in it)
    char why[600];
    int gone = step_room(e, take, off, why, sizeof why);
    if (gone >= 0) slot_end(&e->s[gone], NULL, why);
    for (int i = 0; i < e->n_slots; i++) {
        slot *s = &e->s[i];
        if (!s->t) continue;
        pthread_mutex_lock(&s->t->mu);
        int cancelled = s->t->cancelled;
        pthread_mutex_unlock(&s->t->mu);
        if (cancelled) {
            if (s->mask_wait) { // (a mask being made is waited for: the grammar thread holds the grammar)
                pthread_mutex_lock(&e->mu);
                int busy = s->mask_job == 2;
                if (!busy) s->mask_job = 0, s->mask_wait = 0;
                pthread_mutex_unlock(&e->mu);
                if (busy) continue;
            }
            slot_end(s, NULL, NULL);
            continue;
        }
        if (off[i] || (s->mask_wait && !mask_arrived(e, s))) continue;
        if (!s->generating) {
            if (!take[i]) continue;
            int rest = s->n_feed - s->n_fed, chunk = rest < PROMPT_CHUNK ? rest : PROMPT_CHUNK;
            cx[n] = s->ctx, ids[n] = s->hist + s->n_fed, nids[n] = chunk, lg[n] = chunk == rest ? s->logits : NULL;
        } else {
            cx[n] = s->ctx, ids[n] = &s->next, nids[n] = 1, lg[n] = s->logits;
            if (spec_draft(e, s)) ids[n] = s->rows, nids[n] = 1 + s->n_draft, lg[n] = s->slog;
        }
        // greedy without log-probabilities or a grammar: only the token (picked where the logits are: on a GPU
        // they stay there)
        tk[n] = NULL;
        all[n] = s->generating && s->n_draft > 0;
        if (lg[n] && !all[n] && !e->split && !s->t->req.grammar && s->t->req.top_logprobs < 0 && infer_sampling_greedy(&s->t->req.sampling))
            tk[n] = &s->greedy, lg[n] = NULL;
        sl[n++] = s;
    }
    if (!n) return 0;
    double t0 = cli_now();
    infer_status st = INFER_OK;
    if (tp_step(e, n, sl, ids, nids, lg, tk)) st = INFER_ERR_IO;
    else if (!e->split) st = infer_batch_eval_rows(e->batch, cx, n, ids, nids, lg, tk, all);
    else // (a context split over two devices runs alone: batched passes run on one)
        for (int i = 0; i < n && !st; i++) st = infer_eval(cx[i], ids[i], nids[i], lg[i], 1);
    if (st && n > 1 && !e->tp) {
        // A failed pass fails none of the sequences it held (infer_batch_eval: on an error none has
        // advanced); each is run again alone -- the same numbers, a batch's row being its sequence alone --
        // and only those whose own pass fails end, with why. (Not under --tp: the ranks' steps are one.)
        int k = 0;
        for (int i = 0; i < n; i++) {
            infer_status si = e->split ? infer_eval(cx[i], ids[i], nids[i], lg[i], 1)
                                       : infer_batch_eval_rows(e->batch, &cx[i], 1, &ids[i], &nids[i], &lg[i], &tk[i], &all[i]);
            if (si) {
                char msg[256];
                snprintf(msg, sizeof msg, "%s", infer_last_error());
                slot_end(sl[i], NULL, msg);
                continue;
            }
            cx[k] = cx[i], ids[k] = ids[i], nids[k] = nids[i], lg[k] = lg[i], tk[k] = tk[i], all[k] = all[i], sl[k++] = sl[i];
        }
        pthread_mutex_lock(&e->mu);
        e->counts.steps_retried++;
        pthread_mutex_unlock(&e->mu);
        if (!k) return n;
        n = k, st = INFER_OK;
    }
    if (st) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", infer_last_error());
        for (int i = 0; i < n; i++) slot_end(sl[i], NULL, msg);
        return n;
    }
    e->step_s = cli_now() - t0;
    long long held = 0, backed = 0; // (the slots' contexts are this thread's: read here, shown under the lock)
    for (int i = 0; i < e->n_slots; i++) held += infer_ctx_n_past(e->s[i].ctx), backed += (long long)infer_ctx_kv_backed(e->s[i].ctx);
    pthread_mutex_lock(&e->mu);
    e->counts.kv_tokens = held, e->counts.kv_backed = backed;
    e->counts.steps++;
    int chunks = 0;
    for (int i = 0; i < n; i++)
        if (!sl[i]->generating) e->counts.prompt_tokens += nids[i], chunks++;
    if (chunks > e->counts.step_chunks_max) e->counts.step_chunks_max = chunks;
    e->counts.busy_slot_steps += n;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < n; i++) {
        slot *s = sl[i];
        if (!s->generating) {
            if (s->whole == s->n_fed && nids[i] == PROMPT_CHUNK) s->whole += PROMPT_CHUNK;
            s->n_fed += nids[i];
            if (s->n_fed < s->n_feed) continue;
            s->generating = 1, s->preempted = 0;
        }
        if (all[i]) {
            spec_take(e, s);
            continue;
        }
        const float *lg = NULL;
        if (tk[i] && s->greedy < 0) { // (that row's logits hold a NaN; the others' are whole)
            slot_end(s, NULL, "the model's logits hold NaN: its numbers are not finite (its weights? infer run --check-tensors)");
            continue;
        }
        int32_t tok = tk[i] ? s->greedy : slot_pick(e, s, &lg);
        if (tok == PICK_WAIT || tok == PICK_FAIL) continue;
        slot_token(e, s, tok, lg);
    }
    return n;
}

// (the engine's lock) a slot that a step would run: not waiting for a mask
// still being made (a cancelled one is ended by the step)
static int runnable(const serve_engine *e) {
    for (int i = 0; i < e->n_slots; i++) {
        const slot *s = &e->s[i];
        if (!s->t) continue;
        if (!s->mask_wait || s->mask_job == 3) return 1;
        pthread_mutex_lock(&s->t->mu);
        int cancelled = s->t->cancelled;
        pthread_mutex_unlock(&s->t->mu);
        if (cancelled && s->mask_job != 2) return 1;
    }
    for (int i = 0; e->qhead && i < e->n_slots; i++) // (a queued task and a free slot for it)
        if (!e->s[i].t) return 1;
    return 0;
}

// A slot's cache saved, restored, erased or looked at, between steps (the
// engine thread owns the contexts); not while a request holds the slot.
static void slot_op(serve_engine *e, serve_slot_op *o) {
    slot *s = &e->s[o->slot];
    double t0 = cli_now();
    o->busy = s->t != NULL, o->n_tokens = infer_ctx_n_past(s->ctx);
    if (o->op == SLOT_INFO) return;
    if (s->t) {
        o->status = 409, o->n_tokens = 0;
        snprintf(o->msg, sizeof o->msg, "slot %d is processing a request: try again when it is idle", o->slot);
        return;
    }
    infer_status st = INFER_OK;
    if (o->op == SLOT_ERASE) {
        tp_send(e, MSG_TRUNCATE, o->slot, (int32_t[]){0}, 1);
        infer_ctx_truncate(s->ctx, 0);
        s->whole = 0;
    } else if (o->op == SLOT_SAVE) {
        st = infer_ctx_state_save(s->ctx, o->path, s->cache, o->n_tokens, &o->bytes); // (cache: the n_past tokens its K/V hold)
    } else {
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)(e->n_ctx + 1)); // (as a slot's history: it becomes one)
        st = ids ? infer_ctx_state_load(s->ctx, o->path, ids, e->n_ctx, &o->n_tokens, &o->bytes) : INFER_ERR_NOMEM;
        if (!st) free(s->cache), s->cache = ids, s->used = ++e->steps, s->whole = o->n_tokens; // (a restored state: reused as it is)
        else free(ids);
    }
    if (st) {
        o->status = st == INFER_ERR_UNSUPPORTED ? 501 : st == INFER_ERR_NOMEM || o->op == SLOT_SAVE ? 500 : 400, o->n_tokens = 0;
        snprintf(o->msg, sizeof o->msg, "%s", st == INFER_ERR_NOMEM ? "out of memory" : infer_last_error());
    }
    o->ms = (cli_now() - t0) * 1e3;
}

static void *engine_main(void *arg) {
    serve_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && !runnable(e) && !e->ctl) pthread_cond_wait(&e->cv, &e->mu);
        if (e->stop) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        if (e->ctl) { // (before admitting: a request right after a restore finds the slot's cache)
            serve_slot_op *o = e->ctl;
            int n = e->n_ctl;
            pthread_mutex_unlock(&e->mu);
            for (int k = 0; k < n; k++) slot_op(e, &o[k]);
            pthread_mutex_lock(&e->mu);
            e->ctl = NULL;
            pthread_cond_broadcast(&e->ctl_cv);
        }
        int i, shared, preempted = 0;
        for (int j = 0; j < e->n_slots; j++) preempted |= e->s[j].t && e->s[j].preempted;
        // admit the queue's first while a slot is free (none while a preempted request waits for memory)
        while (!preempted && e->qhead && (i = pick_slot(e, e->qhead, &shared)) >= 0) {
            serve_task *t = e->qhead;
            int room = slot_room(e, i, t);
            if (room == 0) break; // (the caches' memory is taken: the queue waits for a running request to end)
            e->qhead = t->next;
            if (!e->qhead) e->qtail = NULL;
            e->n_queued--;
            t->admitted = 1;
            int copy, d = prefix_donor(e, t, i, shared, &copy);
            if (d >= 0 && !prefix_copy(e, &e->s[i], &e->s[d], t, copy)) shared = copy, e->counts.prompt_copied += copy;
            else if (d >= 0) shared = 0;
            if (room < 0) { // (no request runs that could give memory back: this one cannot run at all)
                char why[600];
                snprintf(why, sizeof why, "this request alone: %s", infer_last_error());
                task_end(t, NULL, why);
                continue;
            }
            slot_start(e, &e->s[i], t, shared);
            e->counts.prompt_cached += t->n_cached;
        }
        int go = runnable(e);
        pthread_mutex_unlock(&e->mu);
        if (go) step(e);
    }
    pthread_mutex_lock(&e->mu); // the grammar thread ends (its mask's work is bounded)
    e->gstop = 1;
    pthread_cond_broadcast(&e->gcv);
    pthread_mutex_unlock(&e->mu);
    if (e->gth_ok) pthread_join(e->gth, NULL), e->gth_ok = 0;
    tp_send(e, MSG_STOP, 0, NULL, 0);
    for (int i = 0; i < e->n_slots; i++)
        if (e->s[i].t) slot_end(&e->s[i], NULL, g_stopping);
    pthread_mutex_lock(&e->mu); // (submissions see stop and are refused from here on)
    serve_task *q = e->qhead;
    e->qhead = e->qtail = NULL, e->n_queued = 0;
    for (int k = 0; e->ctl && k < e->n_ctl; k++) e->ctl[k].status = 503, snprintf(e->ctl[k].msg, sizeof e->ctl[k].msg, "%s", g_stopping);
    e->ctl = NULL;
    pthread_cond_broadcast(&e->ctl_cv);
    pthread_mutex_unlock(&e->mu);
    while (q) {
        serve_task *t = q;
        q = q->next;
        task_end(t, NULL, g_stopping);
    }
    return NULL;
}

serve_engine *serve_engine_new(infer_model *m, int slots, int n_ctx, const char *device, long ngl, int queue_max, int step_tokens,
                               char *err, size_t errlen) {
    if (slots < 1 || slots > MAX_SLOTS) {
        snprintf(err, errlen, "--parallel %d: between 1 and %d", slots, MAX_SLOTS);
        return NULL;
    }
    serve_engine *e = calloc(1, sizeof *e);
    if (!e) return snprintf(err, errlen, "out of memory"), NULL;
    e->m = m, e->n_slots = slots, e->V = infer_model_n_vocab(m), e->queue_max = queue_max, e->step_tokens = step_tokens;
    e->n_eog = infer_model_eog(m, e->eog, 16);
    e->s = calloc((size_t)slots, sizeof *e->s);
    int ok = e->s != NULL;
    for (int i = 0; i < slots && ok; i++) {
        ok = !cli_ctx_new(m, n_ctx, &e->s[i].ctx) && !cli_place(e->s[i].ctx, device, ngl) &&
             (e->s[i].logits = infer_host_alloc(sizeof(float) * (size_t)e->V)) != NULL;
    }
    if (ok) e->n_ctx = infer_ctx_n_ctx(e->s[0].ctx), e->split = infer_ctx_split(e->s[0].ctx), e->kv_per_pos = infer_ctx_kv_bytes_per_pos(e->s[0].ctx);
    // (caches that grow: whether one slot's whole context fits their memory -- a request without max_tokens
    // needs it -- asked once now, and given back)
    e->grows = ok && infer_ctx_kv_backed(e->s[0].ctx) < e->kv_per_pos * (size_t)e->n_ctx;
    if (e->grows && infer_ctx_kv_reserve(e->s[0].ctx, e->n_ctx)) snprintf(e->kv_note, sizeof e->kv_note, "%s", infer_last_error());
    if (ok) infer_ctx_kv_trim(e->s[0].ctx);
    for (int i = 0; i < slots && ok; i++) e->counts.kv_backed += (long long)infer_ctx_kv_backed(e->s[i].ctx); // (as made)
    if (ok && e->step_tokens <= 0) // (the default: two chunks a step on a GPU, whose passes want rows; one on a CPU,
        // whose steps then stay as short as before, so the decoding slots beside them wait no longer)
        e->step_tokens = strcmp(infer_ctx_backend(e->s[0].ctx), "cpu") ? 2 * PROMPT_CHUNK : PROMPT_CHUNK;
    // (a deterministic GPU server reuses whole chunks only, so that an answer is the prompt's alone bit for bit
    // -- a run's products follow its length; by default it reuses every shared position, as a batch's products
    // take its rows as one anyway. INFER_SERVE_REUSE=all or =chunks forces either, on a CPU too --
    // tests/serve/test_slots.py)
    // (a CPU reuses every shared position: made --deterministic, an answer is then the prompt's alone bit for bit;
    // on the AMX prompt paths, its default where the CPU has AMX, close to it -- whole chunks only cost bench/ab's
    // serve row 12%)
    const char *ru = getenv("INFER_SERVE_REUSE");
    const int by_length = ok && strcmp(infer_ctx_backend(e->s[0].ctx), "cpu") != 0 && cli_deterministic();
    if (ok) e->chunked_reuse = ru && !strcmp(ru, "chunks") ? 1 : ru && !strcmp(ru, "all") ? 0 : by_length;
    e->tp = infer_model_tp_world(m) > 1 && infer_model_tp_rank(m) == 0;
    if (ok) ok = (e->masked = malloc(sizeof(float) * (size_t)e->V)) != NULL;
    if (ok) ok = !cli_batch_new(m, &e->batch);
    if (ok) {
        pthread_mutex_init(&e->mu, NULL);
        pthread_cond_init(&e->cv, NULL);
        pthread_cond_init(&e->gcv, NULL);
        pthread_cond_init(&e->ctl_cv, NULL);
        e->gth_ok = ok = !pthread_create(&e->gth, NULL, grammar_main, e);
        if (ok && !(ok = !pthread_create(&e->th, NULL, engine_main, e))) {
            pthread_mutex_lock(&e->mu);
            e->gstop = 1;
            pthread_cond_broadcast(&e->gcv);
            pthread_mutex_unlock(&e->mu);
            pthread_join(e->gth, NULL);
        }
        if (!ok) pthread_mutex_destroy(&e->mu), pthread_cond_destroy(&e->cv), pthread_cond_destroy(&e->gcv), pthread_cond_destroy(&e->ctl_cv);
    }
    if (!ok) {
        snprintf(err, errlen, "%s", *infer_last_error() ? infer_last_error() : "out of memory");
        for (int i = 0; e->s && i < slots; i++) infer_ctx_free(e->s[i].ctx), infer_host_free(e->s[i].logits);
        infer_batch_free(e->batch);
        free(e->masked), free(e->s), free(e);
        return NULL;
    }
    return e;
}

void serve_engine_stop(serve_engine *e) {
    if (!e || e->joined) return;
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->th, NULL);
    e->joined = 1;
}

void serve_engine_free(serve_engine *e) {
    if (!e) return;
    serve_engine_stop(e);
    for (int i = 0; i < e->n_slots; i++)
        infer_ctx_free(e->s[i].ctx), infer_host_free(e->s[i].logits), infer_host_free(e->s[i].slog), free(e->s[i].cache),
            infer_drafter_free(e->s[i].drafter), infer_ctx_free(e->s[i].dctx);
    infer_batch_free(e->batch);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    pthread_cond_destroy(&e->gcv);
    pthread_cond_destroy(&e->ctl_cv);
    free(e->masked);
    free(e->s);
    free(e);
}

int serve_engine_n_ctx(const serve_engine *e) { return e->n_ctx; }
int serve_engine_n_slots(const serve_engine *e) { return e->n_slots; }

void serve_engine_slot_ops(serve_engine *e, serve_slot_op *ops, int n) {
    pthread_mutex_lock(&e->mu);
    while (e->ctl && !e->stop) pthread_cond_wait(&e->ctl_cv, &e->mu); // (one caller's operations at a time)
    if (e->stop) {
        for (int k = 0; k < n; k++) ops[k].status = 503, snprintf(ops[k].msg, sizeof ops[k].msg, "%s", g_stopping);
    } else {
        e->ctl = ops, e->n_ctl = n;
        pthread_cond_broadcast(&e->cv);
        while (e->ctl == ops) pthread_cond_wait(&e->ctl_cv, &e->mu); // (the engine clears it, also when it stops)
    }
    pthread_mutex_unlock(&e->mu);
}
const char *serve_engine_backend(const serve_engine *e) { return infer_ctx_backend(e->s[0].ctx); }
int serve_engine_split(const serve_engine *e) { return e->split; }
size_t serve_engine_kv_per_pos(const serve_engine *e) { return e->kv_per_pos; }
const char *serve_engine_kv_note(const serve_engine *e) { return e->kv_note; }
const char *serve_engine_kv_types(const serve_engine *e) {
    static char s[32];
    snprintf(s, sizeof s, "%s / %s", infer_ctx_kv_type(e->s[0].ctx, 0), infer_ctx_kv_type(e->s[0].ctx, 1));
    return s;
}

void serve_engine_counts(serve_engine *e, serve_counts *c) {
    pthread_mutex_lock(&e->mu);
    *c = e->counts;
    c->busy_slots = 0, c->queued = e->n_queued, c->slots = e->n_slots;
    c->kv_capacity = (long long)e->n_slots * e->n_ctx, c->kv_bytes = c->kv_capacity * (long long)e->kv_per_pos;
    for (int i = 0; i < e->n_slots; i++) c->busy_slots += atomic_load(&e->s[i].busy);
    pthread_mutex_unlock(&e->mu);
}

serve_task *serve_submit(serve_engine *e, serve_request *r) {
    serve_task *t = calloc(1, sizeof *t);
    if (t) {
        t->req = *r;
        t->refs = 2;
        t->e = e;
        pthread_mutex_init(&t->mu, NULL);
        pthread_cond_init(&t->cv, NULL);
    } else {
        serve_request tmp = *r;
        infer_grammar_free(tmp.grammar);
        free(tmp.prompt);
        for (int i = 0; i < tmp.n_stop; i++) free(tmp.stop[i]);
        free(tmp.stop);
    }
    memset(r, 0, sizeof *r);
    if (!t) return NULL;
    pthread_mutex_lock(&e->mu);
    int idle = 0; // (queued requests the engine thread has not yet given to a free slot wait for nothing)
    for (int i = 0; i < e->n_slots; i++) idle += !atomic_load(&e->s[i].busy);
    if (e->stop || e->n_queued >= e->queue_max + idle) {
        pthread_mutex_unlock(&e->mu);
        task_free(t);
        return NULL;
    }
    if (e->qtail) e->qtail->next = t;
    else e->qhead = t;
    e->qtail = t;
    e->n_queued++;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return t;
}

void serve_task_wait(serve_task *t, size_t from, int timeout_ms, char **chunk, size_t *len, serve_state *st) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&t->mu);
    while (!t->done && t->len <= from)
        if (pthread_cond_timedwait(&t->cv, &t->mu, &until)) break;
    size_t n = t->len > from ? t->len - from : 0;
    *chunk = malloc(n + 1);
    if (*chunk) {
        if (n) memcpy(*chunk, t->text + from, n);
        (*chunk)[n] = 0;
    }
    *len = *chunk ? n : 0;
    st->done = t->done && (!*chunk || t->len <= from + n);
    st->finish = t->finish, st->failed = t->failed, st->stopping = t->stopping, st->n_prompt = t->req.n_prompt, st->n_gen = t->n_gen, st->n_cached = t->n_cached;
    snprintf(st->error, sizeof st->error, "%s", t->error);
    pthread_mutex_unlock(&t->mu);
}

int serve_task_logprobs(serve_task *t, int from, serve_logprob **out) {
    pthread_mutex_lock(&t->mu);
    int n = t->n_lp > from ? t->n_lp - from : 0;
    *out = n ? malloc(sizeof **out * (size_t)n) : NULL;
    if (*out) memcpy(*out, t->lp + from, sizeof **out * (size_t)n);
    else n = 0;
    pthread_mutex_unlock(&t->mu);
    return n;
}

// A queued task leaves the queue at once; a running one is ended by the
// engine at its next step.
void serve_task_cancel(serve_task *t) {
    serve_engine *e = t->e;
    pthread_mutex_lock(&e->mu);
    int queued = !t->admitted && !e->stop;
    if (queued) { // unlinked here (the queue is the engine's lock's)
        serve_task **p = &e->qhead, *prev = NULL;
        while (*p && *p != t) prev = *p, p = &(*p)->next;
        if (*p) {
            *p = t->next;
            if (e->qtail == t) e->qtail = prev;
            e->n_queued--;
            t->admitted = 1; // (no longer the queue's)
        } else {
            queued = 0;
        }
    }
    pthread_mutex_unlock(&e->mu);
    if (queued) {
        task_end(t, NULL, NULL);
        return;
    }
    pthread_mutex_lock(&t->mu);
    t->cancelled = 1;
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_lock(&e->mu); // (an engine waiting on masks wakes to end it)
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void serve_task_release(serve_task *t) { task_unref(t); }

int serve_follow(infer_model *m, int slots, int n_ctx, const char *device, long ngl, char *err, size_t errlen) {
    if (slots < 1 || slots > MAX_SLOTS) return snprintf(err, errlen, "--parallel %d: between 1 and %d", slots, MAX_SLOTS), -1;
    int V = infer_model_n_vocab(m), ok = 1, rc = -1, split = 0;
    infer_ctx *cx[MAX_SLOTS] = {0};
    infer_batch *batch = NULL;
    float *lg = infer_host_alloc(sizeof(float) * (size_t)V * MAX_SLOTS);
    int32_t tok[MAX_SLOTS], *body = NULL;
    ok = lg != NULL;
    for (int i = 0; i < slots && ok; i++) ok = !cli_ctx_new(m, n_ctx, &cx[i]) && !cli_place(cx[i], device, ngl);
    if (ok) split = infer_ctx_split(cx[0]), ok = !cli_batch_new(m, &batch);
    if (!ok) snprintf(err, errlen, "%s", *infer_last_error() ? infer_last_error() : "out of memory");
    for (int32_t h[MSG_HDR]; ok;) {
        if (infer_tp_bcast(m, h, sizeof h)) {
            snprintf(err, errlen, "%s", infer_last_error());
            break;
        }
        if (h[0] == MSG_STOP) {
            rc = 0;
            break;
        }
        if (h[2] < 0 || h[2] > (1 << 26) || !(body = realloc(body, sizeof(int32_t) * (size_t)(h[2] + 1))) ||
            (h[2] && infer_tp_bcast(m, body, sizeof(int32_t) * (size_t)h[2]))) {
            snprintf(err, errlen, "rank 0's message: %s", h[2] < 0 || h[2] > (1 << 26) ? "bad length" : infer_last_error());
            break;
        }
        if (h[0] == MSG_TRUNCATE && h[1] >= 0 && h[1] < slots) {
            infer_ctx_truncate(cx[h[1]], body[0]);
            continue;
        }
        int n = h[0] == MSG_STEP ? body[0] : -1;
        if (n < 1 || n > slots) {
            snprintf(err, errlen, "rank 0's message: op %d, %d entries", h[0], n);
            break;
        }
        infer_ctx *c[MAX_SLOTS];
        const int32_t *ids[MAX_SLOTS];
        int nids[MAX_SLOTS], at = 1 + 4 * n, bad = 0;
        float *l[MAX_SLOTS];
        int32_t *tk[MAX_SLOTS];
        for (int i = 0; i < n; i++) {
            int sl = body[1 + 4 * i];
            bad |= sl < 0 || sl >= slots;
            c[i] = bad ? NULL : cx[sl], nids[i] = body[2 + 4 * i], ids[i] = body + at, at += nids[i];
            l[i] = body[3 + 4 * i] ? lg + (size_t)V * i : NULL, tk[i] = body[4 + 4 * i] ? &tok[i] : NULL;
        }
        if (bad || at > h[2]) {
            snprintf(err, errlen, "rank 0's message: a step out of range");
            break;
        }
        infer_status st = INFER_OK;
        if (!split) st = infer_batch_eval_tokens(batch, c, n, ids, nids, l, tk);
        else
            for (int i = 0; i < n && !st; i++) st = infer_eval(c[i], ids[i], nids[i], l[i], 1);
        if (st) { // (rank 0's step failed too, or will find this rank gone)
            snprintf(err, errlen, "%s", infer_last_error());
            break;
        }
    }
    free(body);
    infer_batch_free(batch);
    for (int i = 0; i < slots; i++) infer_ctx_free(cx[i]);
    infer_host_free(lg);
    return rc;
}
