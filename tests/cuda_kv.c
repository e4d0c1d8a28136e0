// test_cuda's checks of the KV cache and whole contexts (linked into test_cuda where CUDA is built): a deep
// prompt against the CPU, the memory that backs a cache as it grows (vmem.cu), chunks shared between
// ranges, and a prefix shared by page between contexts.
#include "check.h"
#include "cuda_test.h"
#include "infer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cuda_kv_counts(int *checks, int *failed) { *checks = g_checks, *failed = g_failed; }

// A prompt pass deep in a long context, whose rows' scores do not all fit
// the scores' memory (SCORES_MAX: 4 heads x 4096 positions x 1100 rows): its
// runs go through cuBLAS in one launch (the per-row kernel in groups where a
// run is short), every row's logits those of the CPU within the fixtures'
// tolerance.
void check_deep_prompt(void) {
    infer_model *m = NULL;
    infer_ctx *c[2] = {NULL, NULL};
    if (infer_model_load(FIXTURES_DIR "/llama", &m)) { CHECK(0, "deep prompt: %s", infer_last_error()); return; }
    enum { DEPTH = 2900, T = 1100 };
    int V = infer_model_n_vocab(m);
    int32_t *ids = malloc(sizeof(int32_t) * (DEPTH + T));
    float *lg[2] = {malloc(sizeof(float) * (size_t)V * T), malloc(sizeof(float) * (size_t)V * T)};
    unsigned seed = 7;
    for (int i = 0; ids && i < DEPTH + T; i++) ids[i] = (int32_t)(((seed = seed * 1103515245u + 12345u) >> 8) % (unsigned)V);
    int ok = ids && lg[0] && lg[1];
    for (int b = 0; ok && b < 2; b++)
        ok = !infer_ctx_new(m, 4096, &c[b]) && !infer_ctx_set_backend(c[b], b ? "cuda" : "cpu") && !infer_eval(c[b], ids, DEPTH, NULL, 0) &&
             !infer_eval(c[b], ids + DEPTH, T, lg[b], 0);
    CHECK(ok, "deep prompt: %s", infer_last_error());
    double worst = 0;
    for (int t = 0; ok && t < T; t++) {
        const float *a = lg[0] + (size_t)t * V, *g = lg[1] + (size_t)t * V;
        double rs = 0, md = 0;
        for (int i = 0; i < V; i++) rs += (double)a[i] * a[i], md = fabs((double)g[i] - a[i]) > md ? fabs((double)g[i] - a[i]) : md;
        rs = sqrt(rs / V) + 1e-30;
        worst = md / rs > worst ? md / rs : worst;
    }
    CHECK(ok && worst <= 1e-3, "deep prompt (%d rows after %d): worst %.3g of a row's RMS from the CPU", T, DEPTH, worst);
    printf("deep prompt (%d rows at depth %d, scores of every row over the scores' memory): worst %.3g of a row's RMS from the CPU\n",
           T, DEPTH, worst);
    infer_ctx_free(c[0]), infer_ctx_free(c[1]);
    free(ids), free(lg[0]), free(lg[1]);
    infer_model_free(m);
}

// Memory backed as used (vmem.cu): a range of three chunks, backed one part at a time, written and read
// back; a trim gives back the chunks wholly past what it keeps, and the count of bytes backed follows
void check_vm(cuda_dev *d) {
    size_t g = cuda_vm_granularity(d);
    CHECK(g > 0 && g % 4096 == 0, "virtual memory: granularity %zu", g);
    if (!g) return;
    size_t m0 = cuda_vm_mapped();
    unsigned char *va = cuda_vm_reserve(d, 3 * g - 100);
    CHECK(va && cuda_vm_is(va) && !cuda_vm_is(va + 1) && cuda_vm_mapped() == m0, "virtual memory: reserve: %s", cuda_status());
    if (!va) return;
    CHECK(!cuda_vm_commit(d, va, 10, 20) && cuda_vm_mapped() == m0 + g, "virtual memory: the first chunk");
    CHECK(!cuda_vm_commit(d, va, g - 1, 2) && cuda_vm_mapped() == m0 + 2 * g, "virtual memory: the second chunk (across the boundary)");
    CHECK(cuda_vm_commit(d, va, 2 * g, g + 1) && cuda_vm_mapped() == m0 + 2 * g, "virtual memory: a commit past the range refused");
    unsigned char *h = malloc(2 * g), *z = calloc(1, 2 * g);
    for (size_t i = 0; h && i < 2 * g; i++) h[i] = (unsigned char)(i * 7 + 1);
    CHECK(h && z && !cuda_download(d, h, va, 2 * g) && !memcmp(h, z, 2 * g), "virtual memory: backed chunks start zeroed");
    for (size_t i = 0; h && i < 2 * g; i++) h[i] = (unsigned char)(i * 7 + 1);
    CHECK(h && !cuda_upload(d, va, h, 2 * g) && !cuda_download(d, z, va, 2 * g) && !memcmp(h, z, 2 * g), "virtual memory: written, read back");
    cuda_vm_trim(d, va, g / 2, 3 * g); // (the first chunk is partly kept: only the second goes)
    CHECK(cuda_vm_mapped() == m0 + g, "virtual memory: trim (%zu bytes backed, want %zu)", cuda_vm_mapped() - m0, g);
    CHECK(h && z && !cuda_download(d, z, va, g) && !memcmp(h, z, g), "virtual memory: the kept chunk's bytes stay");
    CHECK(!cuda_vm_commit(d, va, g, 1) && cuda_vm_mapped() == m0 + 2 * g, "virtual memory: backed again");
    cuda_vm_free(d, va);
    CHECK(!cuda_vm_is(va) && cuda_vm_mapped() == m0, "virtual memory: freed");
    free(h), free(z);
}

// Chunks shared between two ranges (a prefix's pages): mapped in place of a range's own, the memory held
// once; copy on write makes a range's shared chunk its own copy, after which a write to either side leaves
// the other's bytes; a range freed while another maps its chunk leaves that chunk to the other
void check_vm_share(cuda_dev *d) {
    size_t g = cuda_vm_granularity(d);
    if (!g) return;
    size_t m0 = cuda_vm_mapped();
    unsigned char *a = cuda_vm_reserve(d, 3 * g), *b = cuda_vm_reserve(d, 3 * g), *h = malloc(3 * g), *z = malloc(3 * g);
    int ok = a && b && h && z && !cuda_vm_commit(d, a, 0, 3 * g) && !cuda_vm_commit(d, b, 0, g);
    for (size_t i = 0; ok && i < 3 * g; i++) h[i] = (unsigned char)(i * 13 + 5);
    ok = ok && !cuda_upload(d, a, h, 3 * g);
    CHECK(ok && cuda_vm_mapped() == m0 + 4 * g, "vm share: two ranges backed: %s", cuda_status());
    if (!ok) goto out;
    CHECK(!cuda_vm_share(d, b, 0, a, 0, 2 * g) && cuda_vm_mapped() == m0 + 3 * g, "vm share: a's two chunks mapped in b, b's own given back");
    CHECK(cuda_vm_shared(b, 0, 3 * g) == 2 && cuda_vm_shared(a, 0, 3 * g) == 2 && cuda_vm_shared(a, 2 * g, g) == 0, "vm share: the shared chunks counted");
    CHECK(!cuda_download(d, z, b, 2 * g) && !memcmp(z, h, 2 * g), "vm share: b reads a's bytes");
    CHECK(cuda_vm_share(d, b, 1, a, 0, g) && cuda_vm_share(d, b, 0, a, 0, 4 * g) && cuda_vm_share(d, a, 0, a, 0, g), "vm share: a part not of whole chunks, past the range, or of itself refused");
    CHECK(!cuda_vm_private(d, b, 10, 1) && cuda_vm_mapped() == m0 + 4 * g && cuda_vm_shared(b, 0, g) == 0 && cuda_vm_shared(b, g, g) == 1,
          "vm share: b's first chunk its own (copy on write)");
    CHECK(!cuda_download(d, z, b, g) && !memcmp(z, h, g), "vm share: the copy holds the shared bytes");
    memset(z, 0x5a, g);
    CHECK(!cuda_upload(d, b, z, g) && !cuda_download(d, z, a, g) && !memcmp(z, h, g), "vm share: b's write leaves a's bytes");
    CHECK(!cuda_vm_private(d, a, g, g) && cuda_vm_mapped() == m0 + 5 * g && !cuda_vm_shared(a, 0, 3 * g) && !cuda_vm_shared(b, 0, 3 * g),
          "vm share: a's second chunk its own");
    memset(z, 0xa5, g);
    CHECK(!cuda_upload(d, a + g, z, g) && !cuda_download(d, z, b + g, g) && !memcmp(z, h + g, g), "vm share: a's write leaves b's bytes");
    CHECK(!cuda_vm_share(d, b, 2 * g, a, 2 * g, g) && cuda_vm_mapped() == m0 + 5 * g, "vm share: a chunk b had not backed");
    cuda_vm_free(d, a), a = NULL;
    CHECK(cuda_vm_mapped() == m0 + 3 * g && !cuda_vm_shared(b, 0, 3 * g), "vm share: a freed, the chunk b maps stays (%zu chunks, want 3)",
          (cuda_vm_mapped() - m0) / g);
    CHECK(!cuda_download(d, z, b + g, 2 * g) && !memcmp(z, h + g, 2 * g), "vm share: b's bytes after a is gone");
out:
    if (a) cuda_vm_free(d, a);
    if (b) cuda_vm_free(d, b);
    CHECK(cuda_vm_mapped() == m0, "vm share: all given back");
    free(h), free(z);
}

// worst |a - b| of n rows of V logits, over each row's RMS of a
static double logit_dist(const float *a, const float *b, int n, int V) {
    double worst = 0;
    for (int t = 0; t < n; t++) {
        double rs = 0, md = 0;
        for (int i = 0; i < V; i++) {
            double e = fabs((double)a[(size_t)t * V + i] - b[(size_t)t * V + i]);
            rs += (double)a[(size_t)t * V + i] * a[(size_t)t * V + i], md = e > md ? e : md;
        }
        rs = sqrt(rs / V) + 1e-30;
        worst = md / rs > worst ? md / rs : worst;
    }
    return worst;
}

// A prefix's pages shared between contexts (INFER_CUDA_KV_VM=1, f32 caches: 16384 positions a chunk of the
// llama fixture's layers): infer_ctx_copy maps the source's whole chunks, copying only the tail; the copy
// then rewinds into a shared chunk and writes there, the source goes on past its prefix and later rewinds
// into a chunk still shared; every context's logits stay those of a context that never shared
void check_prefix_share(void) {
    enum { P = 34000, R1 = 20000, R2 = 1000, N = 64 };
    infer_model *m = NULL;
    infer_ctx *a = NULL, *b = NULL, *r = NULL;
    setenv("INFER_CUDA_KV_VM", "1", 1);
    if (infer_model_load(FIXTURES_DIR "/llama", &m)) { CHECK(0, "prefix share: %s", infer_last_error()); goto out; }
    const int V = infer_model_n_vocab(m);
    int32_t *ids = malloc(sizeof(int32_t) * (P + 4 * N));
    float *lg = malloc(sizeof(float) * (size_t)V * N), *lr = malloc(sizeof(float) * (size_t)V * N);
    unsigned seed = 11;
    for (int i = 0; ids && i < P + 4 * N; i++) ids[i] = (int32_t)(((seed = seed * 1103515245u + 12345u) >> 8) % (unsigned)V);
    const int32_t *X = ids + P, *Y = ids + P + N, *W = ids + P + 2 * N, *Z = ids + P + 3 * N;
    int ok = ids && lg && lr;
    infer_ctx **cs[3] = {&a, &b, &r};
    for (int i = 0; ok && i < 3; i++)
        ok = !infer_ctx_new(m, 40000, cs[i]) && !infer_ctx_set_backend(*cs[i], "cuda") && !infer_ctx_set_kv_type(*cs[i], "f32", "f32");
    ok = ok && !infer_eval(a, ids, P, NULL, 0);
    CHECK(ok, "prefix share: %s", infer_last_error());
    if (!ok) goto done;
    size_t m0 = cuda_vm_mapped();
    ok = !infer_ctx_copy(b, a, P);
    size_t grew = cuda_vm_mapped() - m0, g = 2u << 20;
    // (4 layers, K and V: the chunk holding positions 32768.. of each copied, the two before it shared)
    CHECK(ok && infer_ctx_n_past(b) == P && grew <= 8 * g && infer_ctx_kv_backed(b) >= (size_t)P * 8 * 128,
          "prefix share: the copy's new memory %zu MiB (want at most %zu), backed %zu: %s", grew >> 20, 8 * g >> 20, infer_ctx_kv_backed(b),
          ok ? "" : infer_last_error());
    printf("prefix share: a copy of %d positions took %zu MiB (copied in full: %zu)\n", P, grew >> 20, infer_ctx_kv_backed(b) >> 20);
    // b rewinds into its second chunk (shared) and writes there; a goes on past its prefix
    infer_ctx_truncate(b, R1);
    ok = ok && !infer_eval(b, Y, N, lg, 0) && !infer_eval(r, ids, R1, NULL, 0) && !infer_eval(r, Y, N, lr, 0);
    CHECK(ok && logit_dist(lr, lg, N, V) <= 1e-4, "prefix share: the copy rewound into a shared chunk: %.3g from alone %s", ok ? logit_dist(lr, lg, N, V) : -1.0,
          ok ? "" : infer_last_error());
    ok = ok && !infer_eval(a, X, N, lg, 0);
    infer_ctx_truncate(r, 0);
    ok = ok && !infer_eval(r, ids, P, NULL, 0) && !infer_eval(r, X, N, lr, 0);
    CHECK(ok && logit_dist(lr, lg, N, V) <= 1e-4, "prefix share: the source after the copy wrote its chunk: %.3g from alone %s", ok ? logit_dist(lr, lg, N, V) : -1.0,
          ok ? "" : infer_last_error());
    // a rewinds into its first chunk (still shared with b); then b goes on, reading its first chunk
    infer_ctx_truncate(a, R2);
    infer_ctx_truncate(r, 0);
    ok = ok && !infer_eval(a, Z, N, lg, 0) && !infer_eval(r, ids, R2, NULL, 0) && !infer_eval(r, Z, N, lr, 0);
    CHECK(ok && logit_dist(lr, lg, N, V) <= 1e-4, "prefix share: the source rewound into a shared chunk: %.3g from alone", ok ? logit_dist(lr, lg, N, V) : -1.0);
    infer_ctx_truncate(r, 0);
    ok = ok && !infer_eval(b, W, N, lg, 0) && !infer_eval(r, ids, R1, NULL, 0) && !infer_eval(r, Y, N, NULL, 0) && !infer_eval(r, W, N, lr, 0);
    CHECK(ok && logit_dist(lr, lg, N, V) <= 1e-4, "prefix share: the copy after the source wrote there: %.3g from alone %s", ok ? logit_dist(lr, lg, N, V) : -1.0,
          ok ? "" : infer_last_error());
done:
    free(ids), free(lg), free(lr);
out:
    infer_ctx_free(a), infer_ctx_free(b), infer_ctx_free(r);
    infer_model_free(m);
    unsetenv("INFER_CUDA_KV_VM");
}
