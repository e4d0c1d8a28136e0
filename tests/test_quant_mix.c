// Named quantization mixes pick each tensor's type as llama-quantize does,
// and `quantize` of an f32 GGUF equals converting straight to the mix.
#include "check.h"
#include "infer.h"
#include "tensor/dtype.h"
#include "models/gguf_convert.h"
#include "models/gguf_quantize.h"
#include "models/model.h"
#include "models/quant_mix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void rules(void) {
    quant_mix q;
    CHECK(!quant_mix_init(&q, "q3_z", 24, 0, 0), "unknown mix accepted");
    CHECK(quant_mix_init(&q, "q4_k_m", 24, 0, 1), "q4_k_m unknown");
    CHECK(q.ftype == 15, "q4_k_m ftype %d", q.ftype);
    // tied embeddings are the output head: q6_K; untied ones keep the base type
    CHECK(quant_mix_type(&q, "token_embd.weight", 2, 2048, DT_F16) == DT_Q6_K, "tied token_embd");
    CHECK(quant_mix_type(&q, "blk.0.attn_norm.weight", 1, 2048, DT_F16) == DT_F32, "norms stay f32");
    CHECK(quant_mix_type(&q, "blk.0.ffn_gate_inp.weight", 2, 2048, DT_F32) == DT_F32, "router kept");
    // use_more_bits for 24 layers: i < 3, i >= 21, (i - 3) % 3 == 2
    int want[24];
    for (int i = 0; i < 24; i++) want[i] = i < 3 || i >= 21 || (i - 3) % 3 == 2;
    int ok_v = 1, ok_d = 1, ok_q = 1;
    for (int i = 0; i < 24; i++) {
        char n[64];
        snprintf(n, sizeof n, "blk.%d.attn_q.weight", i);
        ok_q &= quant_mix_type(&q, n, 2, 2048, DT_F16) == DT_Q4_K;
        snprintf(n, sizeof n, "blk.%d.attn_v.weight", i);
        ok_v &= quant_mix_type(&q, n, 2, 2048, DT_F16) == (want[i] ? DT_Q6_K : DT_Q4_K);
        snprintf(n, sizeof n, "blk.%d.ffn_down.weight", i);
        ok_d &= quant_mix_type(&q, n, 2, 8192, DT_F16) == (want[i] ? DT_Q6_K : DT_Q4_K);
    }
    CHECK(ok_q && ok_v && ok_d, "q4_k_m layer rules: attn_q %d attn_v %d ffn_down %d", ok_q, ok_v, ok_d);
    // rows that are not whole 256-blocks fall back as llama.cpp does
    CHECK(quant_mix_type(&q, "blk.5.attn_q.weight", 2, 640, DT_F16) == DT_Q5_0, "q4_K -> q5_0 fallback");
    CHECK(quant_mix_type(&q, "blk.0.attn_v.weight", 2, 640, DT_F16) == DT_Q8_0, "q6_K -> q8_0 fallback");
    CHECK(quant_mix_type(&q, "token_embd.weight", 2, 640, DT_F16) == DT_Q8_0, "640-wide output head -> q8_0");
    quant_mix_init(&q, "q4_k_m", 24, 0, 0);
    CHECK(quant_mix_type(&q, "token_embd.weight", 2, 2048, DT_F16) == DT_Q4_K, "untied token_embd");
    CHECK(quant_mix_type(&q, "output.weight", 2, 2048, DT_F16) == DT_Q6_K, "output head");
    quant_mix_init(&q, "bf16", 24, 0, 0);
    CHECK(quant_mix_type(&q, "blk.0.attn_q.weight", 2, 2048, DT_Q4_K) == DT_BF16, "bf16 mix decodes quantized matrices");
    quant_mix_init(&q, "q4_k_m", 24, 8, 0);
    CHECK(quant_mix_type(&q, "blk.0.attn_v.weight", 2, 4096, DT_F16) == DT_Q8_0, "8 experts: attn_v q8_0");
}

// convert HF -> f32 GGUF -> quantize q8_0 gives the same model as convert HF -> q8_0.
static void roundtrip(const char *fam) {
    char dir[512], a[256], b[256], c[256];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES_DIR, fam);
    snprintf(a, sizeof a, "/tmp/infer-qm-%d-f32.gguf", (int)getpid());
    snprintf(b, sizeof b, "/tmp/infer-qm-%d-q8.gguf", (int)getpid());
    snprintf(c, sizeof c, "/tmp/infer-qm-%d-direct.gguf", (int)getpid());
    infer_model *hf = NULL, *f32 = NULL, *q = NULL, *d = NULL;
    CHECK(infer_model_load(dir, &hf) == INFER_OK, "%s", infer_last_error());
    if (!hf) return;
    CHECK(gguf_convert_mix(hf, a, "f32") == INFER_OK, "%s", infer_last_error());
    CHECK(gguf_convert_mix(hf, c, "q8_0") == INFER_OK, "%s", infer_last_error());
    CHECK(infer_model_load(a, &f32) == INFER_OK, "%s", infer_last_error());
    if (f32) CHECK(gguf_quantize(f32, b, "q8_0") == INFER_OK, "%s", infer_last_error());
    CHECK(gguf_quantize(hf, b, "q8_0") == INFER_ERR_ARG, "quantize of a safetensors model accepted");
    CHECK(infer_model_load(b, &q) == INFER_OK && infer_model_load(c, &d) == INFER_OK, "%s", infer_last_error());
    if (q && d) {
        int32_t ids[6] = {1, 5, 9, 33, 2, 7};
        int V = infer_model_n_vocab(q);
        float *lq = malloc(sizeof(float) * 6 * V), *ld = malloc(sizeof(float) * 6 * V);
        infer_ctx *cq, *cd;
        infer_ctx_new(q, 8, &cq);
        infer_ctx_new(d, 8, &cd);
        CHECK(infer_eval(cq, ids, 6, lq, 0) == INFER_OK && infer_eval(cd, ids, 6, ld, 0) == INFER_OK, "%s", infer_last_error());
        CHECK(!memcmp(lq, ld, sizeof(float) * 6 * V), "%s: quantize(f32 GGUF) differs from convert --type q8_0", fam);
        CHECK(!strcmp(infer_model_ftype(q), "Q8_0"), "%s: quantized model is %s", fam, infer_model_ftype(q));
        free(lq), free(ld);
        infer_ctx_free(cq), infer_ctx_free(cd);
    }
    infer_model_free(hf), infer_model_free(f32), infer_model_free(q), infer_model_free(d);
    unlink(a), unlink(b), unlink(c);
}

// The CPU backend (SIMD integer kernels) against the reference backend (the
// scalar oracles) on a model stored in each quantized type: the same q8
// activations meet the same blocks and only float summation order differs,
// but that can move an activation across a q8 rounding step, which these
// tiny random models amplify (one such flip at one of 12 positions grows to
// a few % of the logits' RMS by the last layer). So the bound is loose; a
// wrong or missing operation is off by the whole RMS. The kernels themselves
// are held to their oracles tightly in test_kernels. (The fixtures' rows of
// 64 are not whole k-quant blocks, so k-quant matrices fall back to f16 here.)
static void backends(const char *fam) {
    char dir[512], path[256];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES_DIR, fam);
    infer_model *hf = NULL;
    CHECK(infer_model_load(dir, &hf) == INFER_OK, "%s", infer_last_error());
    if (!hf) return;
    int types[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q2_K, DT_Q3_K, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_MXFP4};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        snprintf(path, sizeof path, "/tmp/infer-qb-%d.gguf", (int)getpid());
        infer_model *q = NULL;
        CHECK(gguf_convert(hf, path, types[i]) == INFER_OK && infer_model_load(path, &q) == INFER_OK, "%s", infer_last_error());
        unlink(path);
        if (!q) continue;
        int32_t ids[12] = {1, 5, 9, 33, 2, 7, 11, 40, 3, 8, 19, 27};
        int V = infer_model_n_vocab(q);
        float *lc = malloc(sizeof(float) * 12 * V), *lr = malloc(sizeof(float) * 12 * V);
        infer_ctx *c;
        CHECK(infer_ctx_new(q, 16, &c) == INFER_OK, "%s", infer_last_error());
        CHECK(infer_eval(c, ids, 12, lc, 0) == INFER_OK, "%s", infer_last_error());
        infer_ctx_reset(c);
        CHECK(infer_ctx_set_backend(c, "reference") == INFER_OK, "%s", infer_last_error());
        CHECK(infer_eval(c, ids, 12, lr, 0) == INFER_OK, "%s", infer_last_error());
        double e = test_rel_err(lc, lr, (size_t)12 * V);
        CHECK(e <= 0.1, "%s %s: CPU backend vs reference backend, max error %.3g of the RMS", fam, dtype_get(types[i])->name, e);
        printf("%-8s %-6s CPU vs reference backend: %.2e of RMS\n", fam, dtype_get(types[i])->name, e);
        free(lc), free(lr);
        infer_ctx_free(c);
        infer_model_free(q);
    }
    infer_model_free(hf);
}

int main(void) {
    rules();
    backends("qwen3");
    backends("gemma3");
    roundtrip("qwen3");
    roundtrip("gemma3");
    return check_summary("quant_mix");
}
