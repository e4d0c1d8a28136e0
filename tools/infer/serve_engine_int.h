// The engine's objects (serve_engine.c), shared with its parts in other
// files (serve_prefix.c: which slot a prompt takes and what it reuses). Only
// the engine thread touches a slot's context and its fields unless a comment
// says otherwise.
#ifndef INFER_SERVE_ENGINE_INT_H
#define INFER_SERVE_ENGINE_INT_H
#include "serve.h"
#include "cli.h"

#include <pthread.h>
#include <stdatomic.h>

enum { PROMPT_CHUNK = 256, MAX_SLOTS = 256 };

struct serve_task {
    serve_request req;
    serve_engine *e;    // its engine
    int admitted;       // taken from the queue (the engine's lock)
    int n_cached;       // prompt tokens the slot's cache already held
    pthread_mutex_t mu; // guards what follows
    pthread_cond_t cv;
    char *text;         // the visible text
    size_t len;
    int done, failed, cancelled, refs, n_gen, stopping;
    serve_logprob *lp;  // per generated token, when asked for
    int n_lp, cap_lp;
    const char *finish;
    char error[256];
    serve_task *next;   // the queue (the engine's lock)
};

typedef struct {
    infer_ctx *ctx;
    serve_task *t;      // NULL: free (the engine thread's)
    atomic_int busy;    // t != NULL, for the other threads (serve_engine_counts)
    int generating;     // 0: prompt, 1: generating
    int n_fed;          // prompt tokens evaluated
    int n_feed;         // the tokens of hist it evaluates before it draws (its prompt's; all it holds, once preempted)
    int preempted;      // its cache given back for an older request's (step_room): its text is evaluated again
    int32_t *hist;      // prompt + generated (the penalties' history)
    int n_hist, n_gen;
    int32_t next;       // the token to feed
    int32_t greedy;     // the step's greedy token, when the slot takes it without logits
    int32_t rows[CLI_SPEC_MAX + 1]; // a speculative step's tokens: next, then the draft
    int n_draft, spec_past; // ... the draft's length (0: none this step) and the cache's positions before the step
    float *slog;        // (--spec-ngram) the step's rows of logits, (K + 1) x V
    infer_ctx *dctx;    // (--model-draft) the draft model's context, and its drafter
    infer_drafter *drafter;
    infer_sampler *smp;
    float *logits;
    int32_t *cache;     // the tokens whose K/V the context holds (its n_past of them)
    int whole;          // its first positions made as whole prompt chunks from position 0 (what a GPU reuses)
    long used;          // the step it was last given a task (least recently used first)
    int mask_wait;      // its logits wait for the grammar's mask, made on the grammar thread (it sits out the steps meanwhile)
    int mask_job;       // (the engine's lock) 0 none, 1 queued, 2 being made, 3 made
    long mask_seq;      // (the engine's lock) its place in the grammar thread's queue
    infer_status mask_st;
    char mask_err[256];
} slot;

struct serve_engine {
    infer_model *m;
    int n_slots, n_ctx, V, queue_max, n_queued, stop, joined;
    size_t kv_per_pos;  // the slots' KV cache bytes a position
    char kv_note[256];  // where a slot's whole context does not fit the caches' memory: why (else "")
    int step_tokens;    // the most tokens a step takes (decode rows and prompt chunks; one chunk at least)
    int split;          // the slots are split between the GPU and the CPU (-ngl): each runs alone
    int grows;          // the caches take memory as they grow (the CPU's; a GPU's under INFER_CUDA_KV_VM): a request is
                        // admitted with its prompt's, and takes more step by step (step_room)
    int chunked_reuse;  // a prompt reuses whole chunks of a slot's cache (a GPU: a run's products follow its length)
    int tp;             // rank 0 of a job of several (infer serve --tp): the others are told each step (serve_follow)
    int spec_k;         // --spec-ngram's K (0: off)
    float draft_p_min;  // --model-draft's --draft-p-min (the slots' drafters)
    long steps;
    serve_counts counts; // (the engine's lock)
    slot *s;
    infer_batch *batch;
    int32_t eog[16];
    int n_eog;
    float *masked;      // (V) logits under a grammar (the slot's stay as the model gave them)
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_task *qhead, *qtail;
    // the grammar thread: masks of grammars that cost more than a look-up are made there, off the steps
    pthread_t gth;
    pthread_cond_t gcv; // (with mu) a job queued, or stop
    int gstop, gth_ok;
    long mask_seq;
    double step_s;      // the last step's seconds (how long a step waits for a mask on its way)
    serve_slot_op *ctl; // (the engine's lock) the slot operations waiting, or being done (serve_engine_slot_ops)
    int n_ctl;
    pthread_cond_t ctl_cv; // (with mu) ctl done, or free for the next
};

// serve_prefix.c: the free slot for a prompt (*shared: the positions of its
// cache the prompt shares), -1 when none is free; another slot whose cache
// shares more, and the copy of that prefix into the slot taken
int pick_slot(serve_engine *e, const serve_task *t, int *shared);
int prefix_donor(serve_engine *e, const serve_task *t, int to, int shared, int *len);
int prefix_copy(const serve_engine *e, slot *to, const slot *from, const serve_task *t, int n);

// serve_room.c: whether slot i's cache can hold task t's first positions (1; 0: not while other requests
// run -- it waits; -1: not even alone), and the memory for a step's rows, the oldest request first
// (take: the prompt slots the step takes): off[i] set for a slot that sits out the step or was preempted
// in it; the slot that cannot go on even alone (why: its error), else -1
int slot_room(serve_engine *e, int i, const serve_task *t);
int step_room(serve_engine *e, const unsigned char *take, unsigned char *off, char *why, size_t whylen);

#endif
