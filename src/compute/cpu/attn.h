// Attention kernels for one KV head and the group of query heads sharing it.
// Query and score strides are in floats; a cache's rows are of its type
// (compute/backend.h's enum kv_type: f32, f16 or q8_0), their stride in
// bytes. The scalar versions are the oracle of the SIMD ones.
#ifndef INFER_COMPUTE_CPU_ATTN_H
#define INFER_COMPUTE_CPU_ATTN_H

#include <stddef.h>
#include <string.h>
#include "base/half.h"
#include "compute/backend.h"
#include "tensor/quant.h"
#include "compute/cpu/ops.h"

// Value i of a cache row of type ty, as a float (exact for every type).
static inline float kv_at(const void *row, int ty, int i) {
    if (ty == KV_F16) return f16_to_f32(((const uint16_t *)row)[i]);
    if (ty == KV_Q8_0) {
        const block_q8_0 *b = (const block_q8_0 *)row + i / 32;
        uint16_t h;
        memcpy(&h, b->d, 2);
        return f16_to_f32(h) * (float)b->qs[i % 32];
    }
    return ((const float *)row)[i];
}

// s[g * sstride + p] = (q_g . k_p) * scale for the group's heads g (q_g =
// q + g * hd) and positions p < n (k_p: kstride bytes after k_(p-1), hd
// values of type kt).
void attn_scores(const float *q, int group, int hd, const void *k, int kt, size_t kstride, int n, float scale, float *s,
                 size_t sstride);
// o_g += sum_p s[g * sstride + p] * v_p for o_g = o + g * hd, in order of p
// (so a range split in pieces accumulates to the same floats).
void attn_mix(const float *s, size_t sstride, int group, int n, const void *v, int vt, size_t vstride, int hd, float *o);

void attn_scores_ref(const float *q, int group, int hd, const void *k, int kt, size_t kstride, int n, float scale, float *s,
                     size_t sstride);
void attn_mix_ref(const float *s, size_t sstride, int group, int n, const void *v, int vt, size_t vstride, int hd, float *o);

// Long prompts on AMX-BF16 (attn_amx.c): 1 where d's rows may take it (an
// AMX-BF16 CPU, INFER_AMX_ATTN not 0, hd a multiple of 32 up to 256, no softcap
// or sinks); attn_flash computes the nb blocks listed (all their rows, every
// KV head) on ex's threads, their bf16 tiles in ex's scratch: 0, or -1 where
// it could not (scratch; nothing written). Not the f32 kernels' floats: bf16
// queries, keys, values and probabilities, within ~1e-2 of the reference.
int attn_flash_enabled(void); // an AMX-BF16 or AVX512-BF16 CPU, INFER_AMX_ATTN not 0
int attn_flash_ok(const attn_desc *d);
int attn_flash(cpu_exec *ex, const attn_desc *d, const int *blks, int nb);

#endif
