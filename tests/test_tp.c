// Tensor parallelism (models/shard.c, base/comm.c) on one host without a
// GPU: two processes, ranks 0 and 1 of a job, each with its share of every
// fixture family's heads, features and vocabulary, must give the logits of
// the whole model at every position of a prompt in two passes and of decode
// steps (within the CPU backend's tolerance against the reference: the sums
// over the ranks round differently), and both ranks the same bits; greedy
// tokens identical. A world of one is the whole model bit for bit. Then what
// is refused or fails with a message rather than a hang: mixture-of-experts
// models, q and k normed across the heads (OLMo 2), ranks out of range, a job whose other rank never comes, a rank
// that dies mid-run.
#include "check.h"
#include "infer.h"
#include "base/comm.h"
#include "inference/context.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { NP1 = 7, NP2 = 5, ND = 3, NT = NP1 + NP2 + ND };

static void fill(int32_t *ids, int n, int V, unsigned seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((seed = seed * 1103515245u + 12345u) >> 8) % V;
}

// The prompt in two passes (logits at every position), then ND decode steps
// of the greedy token: NT rows of logits into out.
static int run(infer_model *m, int32_t *ids, float *out, int V) {
    infer_ctx *c = NULL;
    int ok = infer_ctx_new(m, 32, &c) == INFER_OK && infer_ctx_set_threads(c, 2) == INFER_OK;
    ok = ok && infer_eval(c, ids, NP1, out, 0) == INFER_OK;
    ok = ok && infer_eval(c, ids + NP1, NP2, out + (size_t)NP1 * V, 0) == INFER_OK;
    for (int i = NP1 + NP2; ok && i < NT; i++) {
        const float *prev = out + (size_t)(i - 1) * V;
        int best = 0;
        for (int v = 1; v < V; v++) best = prev[v] > prev[best] ? v : best;
        ids[i] = best;
        ok = infer_eval(c, ids + i, 1, out + (size_t)i * V, 1) == INFER_OK;
    }
    infer_ctx_free(c);
    return ok;
}

// Rank `rank` of a job of two: its logits against want; the count of
// failures (the child's exit status), its logits into got.
static int rank_run(const char *dir, const char *id, int rank, const float *want, float *got, int V, const char *name) {
    infer_model *m = NULL;
    int32_t ids[NT];
    fill(ids, NT, V, 7);
    if (infer_model_load_tp(dir, rank, 2, id, &m)) {
        fprintf(stderr, "FAIL %s rank %d: %s\n", name, rank, infer_last_error());
        return 1;
    }
    int bad = 0;
    if (!run(m, ids, got, V)) {
        fprintf(stderr, "FAIL %s rank %d: %s\n", name, rank, infer_last_error());
        bad++;
    } else
        for (int r = 0; r < NT; r++) {
            double e = test_rel_err(got + (size_t)r * V, want + (size_t)r * V, (size_t)V);
            if (e > 1e-4) fprintf(stderr, "FAIL %s rank %d row %d: max error %.3g of the RMS from the whole model\n", name, rank, r, e), bad++;
        }
    infer_model_free(m);
    return bad;
}

static void check_family(const char *name, const char *dir) {
    infer_model *m;
    if (infer_model_load(dir, &m)) {
        CHECK(0, "%s: %s", name, infer_last_error());
        return;
    }
    int V = infer_model_n_vocab(m), moe = m->cfg.n_expert > 0, qk_full = m->cfg.fam->qk_norm_full;
    float *want = malloc(sizeof(float) * NT * V), *got = malloc(sizeof(float) * NT * V);
    int32_t ids[NT], ids1[NT];
    fill(ids, NT, V, 7);
    memcpy(ids1, ids, sizeof ids);
    CHECK(run(m, ids, want, V), "%s: the whole model: %s", name, infer_last_error());
    infer_model_free(m);

    // a world of one: the whole model, bit for bit
    CHECK(infer_model_load_tp(dir, 0, 1, NULL, &m) == INFER_OK, "%s: world 1: %s", name, infer_last_error());
    if (m) {
        CHECK(run(m, ids1, got, V) && !memcmp(got, want, sizeof(float) * NT * V), "%s: world 1 differs from the whole model", name);
        infer_model_free(m);
    }

    char id[64];
    comm_new_id(id, sizeof id);
    if (moe || qk_full) { // refused by each rank (OLMo 2: q and k normed over all the heads, which no rank holds)
        const char *why = moe ? "mixture-of-experts" : "whole q and k";
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            infer_model *m1 = NULL;
            _exit(infer_model_load_tp(dir, 1, 2, id, &m1) == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), why) ? 0 : 1);
        }
        CHECK(infer_model_load_tp(dir, 0, 2, id, &m) == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), why),
              "%s: split: %s", name, m ? "loaded" : infer_last_error());
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: rank 1 not refused so", name);
        infer_model_free(m);
        free(want), free(got);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        float *g1 = malloc(sizeof(float) * NT * V);
        int bad = rank_run(dir, id, 1, want, g1, V, name);
        // rank 1's bits for rank 0 to compare: through a file beside the job
        char path[128];
        snprintf(path, sizeof path, "/tmp/%s.rank1", id);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(g1, sizeof(float), (size_t)NT * V, f) != (size_t)NT * V) bad++;
        if (f) fclose(f);
        _exit(bad > 100 ? 100 : bad);
    }
    int bad = rank_run(dir, id, 0, want, got, V, name);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(bad == 0, "%s: rank 0 of 2: %d rows off the whole model's logits", name, bad);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: rank 1 of 2 failed (status %d)", name, status);
    char path[128];
    snprintf(path, sizeof path, "/tmp/%s.rank1", id);
    float *g1 = malloc(sizeof(float) * NT * V);
    FILE *f = fopen(path, "rb");
    int same = f && fread(g1, sizeof(float), (size_t)NT * V, f) == (size_t)NT * V && !memcmp(g1, got, sizeof(float) * NT * V);
    if (f) fclose(f);
    unlink(path);
    CHECK(same, "%s: ranks 0 and 1 hold different logits", name);
    free(g1), free(want), free(got);
}

// What fails, and says so, rather than hanging.
static void check_errors(const char *dir) {
    infer_model *m = NULL;
    CHECK(infer_model_load_tp(dir, 2, 2, "x", &m) == INFER_ERR_ARG && !m, "rank 2 of 2 accepted");
    CHECK(infer_model_load_tp(dir, 0, 0, "x", &m) == INFER_ERR_ARG && !m, "world 0 accepted");
    CHECK(infer_model_load_tp(dir, 0, 2, "bad/id", &m) != INFER_OK && !m && strstr(infer_last_error(), "job id"),
          "a job id with '/': %s", infer_last_error());
    // the other rank never comes
    char id[64];
    comm_new_id(id, sizeof id);
    setenv("INFER_TP_TIMEOUT", "1", 1);
    CHECK(infer_model_load_tp(dir, 0, 2, id, &m) == INFER_ERR_IO && !m && strstr(infer_last_error(), "1 of 2 ranks joined"),
          "a job whose rank 1 never comes: %s", infer_last_error());
    unsetenv("INFER_TP_TIMEOUT");
    // the environment's job, with a bad number
    setenv("INFER_TP_WORLD", "two", 1);
    CHECK(infer_model_load(dir, &m) == INFER_ERR_ARG && !m && strstr(infer_last_error(), "INFER_TP_WORLD"),
          "INFER_TP_WORLD=two: %s", infer_last_error());
    unsetenv("INFER_TP_WORLD");
    // rank 1 loads, then dies before the first pass: rank 0's pass fails with a message
    comm_new_id(id, sizeof id);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        infer_model *m1 = NULL;
        if (infer_model_load_tp(dir, 1, 2, id, &m1)) _exit(1);
        _exit(0); // (dies with the job open)
    }
    int ok = infer_model_load_tp(dir, 0, 2, id, &m) == INFER_OK;
    CHECK(ok, "rank 0 beside a rank that dies: load: %s", infer_last_error());
    int status;
    waitpid(pid, &status, 0);
    if (ok) {
        infer_ctx *c = NULL;
        int V = infer_model_n_vocab(m);
        float *lg = malloc(sizeof(float) * V);
        int32_t t = 1;
        CHECK(infer_ctx_new(m, 8, &c) == INFER_OK, "ctx: %s", infer_last_error());
        infer_status st = c ? infer_eval(c, &t, 1, lg, 1) : INFER_OK;
        CHECK(st == INFER_ERR_IO && strstr(infer_last_error(), "has exited"), "a pass beside a dead rank: %s",
              st ? infer_last_error() : "succeeded");
        infer_ctx_free(c);
        free(lg);
    }
    infer_model_free(m);
}

int main(int argc, char **argv) {
    char **dirs;
    int n = test_fixture_dirs(&dirs, argc > 1 ? argv[1] : NULL);
    CHECK(n > 0, "no fixture families under %s", FIXTURES_DIR);
    for (int i = 0; i < n; i++) {
        const char *name = strrchr(dirs[i], '/') + 1;
        check_family(name, dirs[i]);
        if (!strcmp(name, "llama")) check_errors(dirs[i]);
        free(dirs[i]);
    }
    free(dirs);
    return check_summary("test_tp");
}
