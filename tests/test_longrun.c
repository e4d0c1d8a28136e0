// Long runs keep memory flat: 10,000 generated tokens (sampled, one at a
// time, with the sampler's history) and 1,000 contexts made and freed, on
// fixture models (the llama and sliding-window gemma3 shapes). Resident
// memory is read from /proc after a warm-up and again at the end: it may not
// grow by more than 4 MB. The sanitizer build runs the same loops under
// LeakSanitizer (CI: detect_leaks=1), which fails on anything not freed; its
// allocator holds freed memory in a quarantine, turned off here so that the
// resident figures mean the same there.
#include "check.h"
#include "infer.h"

#include <stdint.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LONGRUN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(LONGRUN_ASAN)
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "quarantine_size_mb=0:thread_local_quarantine_size_kb=0"; }
#endif

#define FLAT_KB 4096

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

// 10,000 tokens: a context of 512 positions, refilled from its last 32
// positions when full (as a chat that drops old turns would), each token
// sampled from the logits with temperature and penalties over the history.
static void generate(infer_model *m, const char *fam) {
    const int N = 10000, C = 512, H = 32;
    int V = infer_model_n_vocab(m);
    infer_ctx *c = NULL;
    infer_status st = infer_ctx_new(m, C, &c);
    CHECK(!st, "%s: ctx: %s", fam, infer_last_error());
    if (st) return;
    infer_sampling sp = infer_sampling_default();
    sp.temp = 0.8f, sp.top_k = 40, sp.repeat_penalty = 1.1f, sp.seed = 7;
    infer_sampler *s = NULL;
    CHECK(!infer_sampler_new(&sp, V, &s), "%s: sampler: %s", fam, infer_last_error());
    float *logits = malloc(sizeof(float) * (size_t)V);
    int32_t *hist = malloc(sizeof(int32_t) * (size_t)N);
    int32_t tok = 1;
    long warm = 0;
    int bad = 0;
    for (int i = 0; i < N && s && logits && hist && !bad; i++) {
        if (infer_ctx_n_past(c) == C) { // keep the last H positions: re-evaluated from the history
            infer_ctx_reset(c);
            bad |= infer_eval(c, hist + i - H, H - 1, NULL, 1) != INFER_OK;
        }
        bad |= infer_eval(c, &tok, 1, logits, 1) != INFER_OK;
        hist[i] = tok;
        int n_hist = i + 1 < 64 ? i + 1 : 64;
        tok = infer_sample(s, logits, hist + i + 1 - n_hist, n_hist);
        bad |= tok < 0 || tok >= V;
        if (i == 2 * C + 100) warm = rss_kb(); // (the cache and scratch have been touched by then)
    }
    CHECK(!bad, "%s: generation failed: %s", fam, infer_last_error());
    long end = rss_kb();
    CHECK(end - warm < FLAT_KB, "%s: resident memory grew by %ld KB from token %d to token %d", fam, end - warm, 2 * C + 100, N);
    printf("%s: %d tokens, resident %ld KB after %d, %ld KB at the end\n", fam, N, warm, 2 * C + 100, end);
    free(logits);
    free(hist);
    infer_sampler_free(s);
    infer_ctx_free(c);
}

// 1,000 contexts of varied sizes made, used for a few tokens and freed.
static void cycles(infer_model *m, const char *fam) {
    int V = infer_model_n_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)V);
    long warm = 0;
    int bad = 0;
    for (int i = 0; i < 1000 && logits && !bad; i++) {
        infer_ctx *c = NULL;
        if (infer_ctx_new(m, 64 + (i % 7) * 100, &c)) { bad = 1; break; }
        int32_t ids[3] = {1, (i * 7) % V, (i * 13) % V};
        bad |= infer_eval(c, ids, 3, logits, 1) != INFER_OK;
        infer_ctx_free(c);
        if (i == 20) warm = rss_kb();
    }
    CHECK(!bad, "%s: a context cycle failed: %s", fam, infer_last_error());
    long end = rss_kb();
    CHECK(end - warm < FLAT_KB, "%s: resident memory grew by %ld KB over 980 context cycles", fam, end - warm);
    printf("%s: 1000 contexts, resident %ld KB after 20, %ld KB at the end\n", fam, warm, end);
    free(logits);
}

int main(void) {
    infer_set_threads(2);
    static const char *const fams[] = {"llama", "gemma3"};
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", FIXTURES_DIR, fams[i]);
        infer_model *m = NULL;
        infer_status st = infer_model_load(path, &m);
        CHECK(!st, "%s: %s", path, infer_last_error());
        if (st) continue;
        generate(m, fams[i]);
        cycles(m, fams[i]);
        infer_model_free(m);
    }
    return check_summary("test_longrun");
}
