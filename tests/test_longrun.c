// Long runs keep memory flat: 10,000 generated tokens (sampled, one at a
// time, with the sampler's history) and 1,000 contexts made and freed, on
// fixture models (the llama and sliding-window gemma3 shapes). Resident
// memory is read from /proc after a warm-up and again at the end: it may not
// grow by more than 4 MB. The sanitizer build runs the same loops under
// LeakSanitizer (CI: detect_leaks=1), which fails on anything not freed; its
// allocator holds freed memory in a quarantine, turned off here so that the
// resident figures mean the same there. Also: a model's files replaced on
// disk (renamed over) while it is loaded.
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

// 10,000 tokens: a context of 512 positions, refilled from its last 32
// positions when full (as a chat that drops old turns would), each token
// sampled from the logits with temperature and penalties over the history.
static void generate(infer_model *m, const char *fam) {
    const int N = 10000, C = 512, H = 32;
    int V = infer_model_n_vocab(m);
    infer_ctx *c = NULL;
    infer_status st = ctx_threads(m, C, 2, &c);
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
        if (i == 2 * C + 100) warm = test_rss_kb(); // (the cache and scratch have been touched by then)
    }
    CHECK(!bad, "%s: generation failed: %s", fam, infer_last_error());
    long end = test_rss_kb();
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
        if (ctx_threads(m, 64 + (i % 7) * 100, 2, &c)) { bad = 1; break; }
        int32_t ids[3] = {1, (i * 7) % V, (i * 13) % V};
        bad |= infer_eval(c, ids, 3, logits, 1) != INFER_OK;
        infer_ctx_free(c);
        if (i == 20) warm = test_rss_kb();
    }
    CHECK(!bad, "%s: a context cycle failed: %s", fam, infer_last_error());
    long end = test_rss_kb();
    CHECK(end - warm < FLAT_KB, "%s: resident memory grew by %ld KB over 980 context cycles", fam, end - warm);
    printf("%s: 1000 contexts, resident %ld KB after 20, %ld KB at the end\n", fam, warm, end);
    free(logits);
}

// A model file replaced while it is mapped -- a new download renamed over it
// -- changes nothing for the model already loaded (its mapping keeps the old
// file), and a new load reads the new file.
static void replaced(const char *fam) {
    char dir[] = "/tmp/infer-replaced-XXXXXX", cmd[2048], st_path[1100];
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    snprintf(cmd, sizeof cmd, "cp %s/%s/config.json %s/%s/*.safetensors* %s/", FIXTURES_DIR, fam, FIXTURES_DIR, fam, dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    infer_model *m = NULL, *m2 = NULL;
    infer_status st = infer_model_load(dir, &m);
    CHECK(!st, "%s: %s", dir, infer_last_error());
    if (st) return;
    int V = infer_model_n_vocab(m);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V), *n = malloc(sizeof(float) * (size_t)V);
    int32_t ids[4] = {1, 5, 9, 3};
    infer_ctx *c = NULL;
    CHECK(!ctx_threads(m, 16, 2, &c) && !infer_eval(c, ids, 4, a, 1), "%s: eval: %s", fam, infer_last_error());
    // every shard rewritten with other values (zeros after each header) and renamed over the old one
    snprintf(cmd, sizeof cmd,
             "cd %s && for f in *.safetensors; do python3 -c 'import struct,sys; b=open(sys.argv[1],\"rb\").read(); "
             "n=8+struct.unpack(\"<Q\",b[:8])[0]; open(sys.argv[1]+\".new\",\"wb\").write(b[:n]+bytes(len(b)-n))' $f && "
             "mv $f.new $f; done", dir);
    CHECK(system(cmd) == 0, "rewriting the shards");
    infer_ctx_reset(c);
    CHECK(!infer_eval(c, ids, 4, b, 1), "%s: eval after the rename: %s", fam, infer_last_error());
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)V), "%s: the loaded model's logits changed when its files were replaced", fam);
    st = infer_model_load(dir, &m2);
    CHECK(!st, "%s: loading the new files: %s", fam, infer_last_error());
    infer_ctx *c2 = NULL;
    if (!st && !ctx_threads(m2, 16, 2, &c2) && !infer_eval(c2, ids, 4, n, 1))
        CHECK(memcmp(a, n, sizeof(float) * (size_t)V) != 0, "%s: a new load did not read the new files", fam);
    infer_ctx_free(c2);
    infer_model_free(m2);
    infer_ctx_free(c);
    infer_model_free(m);
    free(a), free(b), free(n);
    snprintf(st_path, sizeof st_path, "rm -rf %s", dir);
    if (system(st_path)) {}
}

int main(void) {
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
        replaced(fams[i]);
    }
    return check_summary("test_longrun");
}
