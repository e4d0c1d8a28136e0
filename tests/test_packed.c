// The CPU's products read the packed copies of the weights wherever this CPU
// has packed kernels for their type (tensor/pack.h), whatever ran first: a
// counter of products that read a packable weight in its stored layout
// (infer_cpu_unpacked_products) stays 0 through a vindex extraction of a
// freshly loaded model (its down_meta once ran unpacked, 5x slower, for
// months: issue 37), a CPU prompt and decode, and batched decode. A product
// on the unpacked weight itself must count (the counter can see the fault).
// The model: a small random-weight q8_0 Gemma 3 made by `infer synth`.
#include "check.h"
#include "infer.h"
#include "compute/cpu/ops.h"
#include "models/model.h"
#include "tensor/dtype.h"
#include "tensor/pack.h"
#include "base/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    char dir[] = "/tmp/infer-packed-XXXXXX", path[1200], cmd[2600];
    if (!mkdtemp(dir)) return fprintf(stderr, "mkdtemp failed\n"), 1;
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    snprintf(cmd, sizeof cmd, "'%s' synth --shape 270m --layers 2 --vocab 4096 --type q8_0 -o '%s' >/dev/null 2>&1", INFER_BIN, path);
    CHECK(system(cmd) == 0, "infer synth: %s", cmd);
    if (pack_kind_for(DT_Q8_0, 640) == PACK_NONE) // (no VNNI: nothing packs, so nothing can be missed)
        printf("  this CPU has no packed kernels (pack.h needs AVX-512 VNNI): the counter stays 0 by itself\n");

    // a vindex made from the model as loaded (no CPU pass yet), as `infer extract` does
    infer_model *m = NULL;
    CHECK(infer_model_load(path, &m) == INFER_OK, "load %s: %s", path, infer_last_error());
    if (!m) return check_summary("test_packed");
    unsigned long before = infer_cpu_unpacked_products();
    char vdir[1300];
    snprintf(vdir, sizeof vdir, "%s/v.vindex", dir);
    infer_extract_opts o = infer_extract_default();
    o.threads = 2;
    infer_extract_info info;
    CHECK(infer_vindex_extract(m, vdir, &o, &info) == INFER_OK, "extract: %s", infer_last_error());
    printf("  extract: %.2f s, down_meta %.2f s\n", info.seconds, info.seconds_down_meta);
    CHECK(infer_cpu_unpacked_products() == before, "extraction ran %lu products on unpacked weights that pack",
          infer_cpu_unpacked_products() - before);

    // a prompt and decode on the CPU, and batched decode
    infer_ctx *c = NULL, *c2 = NULL;
    CHECK(ctx_threads(m, 128, 2, &c) == INFER_OK && ctx_threads(m, 128, 2, &c2) == INFER_OK, "%s", infer_last_error());
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = 10 + 37 * i;
    float *lg = malloc(sizeof(float) * (size_t)infer_model_n_vocab(m) * 2);
    CHECK(infer_eval(c, ids, 16, lg, 1) == INFER_OK && infer_eval(c, ids, 1, lg, 1) == INFER_OK, "eval: %s", infer_last_error());
    infer_batch *b = NULL;
    infer_ctx *cx[2] = {c, c2};
    const int32_t *bi[2] = {ids + 3, ids + 5};
    int nb[2] = {1, 1};
    float *bl[2] = {lg, lg + infer_model_n_vocab(m)};
    CHECK(infer_batch_new(m, &b) == INFER_OK && infer_batch_set_threads(b, 2) == INFER_OK && infer_batch_eval(b, cx, 2, bi, nb, bl) == INFER_OK, "batch: %s", infer_last_error());
    CHECK(infer_cpu_unpacked_products() == before, "CPU evaluation ran %lu products on unpacked weights that pack",
          infer_cpu_unpacked_products() - before);
    infer_batch_free(b);
    infer_ctx_free(c), infer_ctx_free(c2);

    // the counter sees a product on a packable weight without its pack
    if (pack_kind_for(DT_Q8_0, m->cfg.n_embd) != PACK_NONE && m->output.w && m->output.w->type == DT_Q8_0) {
        weight raw = {.w = m->output.w};
        cpu_exec ex = {.pool = pool_new(1)};
        float *x = calloc((size_t)m->cfg.n_embd, sizeof *x);
        matmul(&ex, lg, x, &raw, NULL, 1, m->cfg.n_embd, m->cfg.n_vocab);
        CHECK(infer_cpu_unpacked_products() == before + 1, "a product on the head's stored rows is counted (%lu)",
              infer_cpu_unpacked_products() - before);
        free(x);
        cpu_exec_release(&ex);
        pool_free(ex.pool);
    }
    free(lg);
    infer_model_free(m);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
    return check_summary("test_packed");
}
