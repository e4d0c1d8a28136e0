// Row kernels of the matmul, chosen once per weight type and CPU.
//
// Quantized weights take the integer path, as ggml does: the activations are
// quantized once per product to the type's act_type (q8_0 or q8_K), then each
// weight row is dotted with them in integer arithmetic. Float weights (f32,
// f16, bf16) are dotted with f32 activations. The scalar versions here are the
// oracle of the SIMD ones (vecdot_avx2.c), and tests/test_kernels.c holds them
// to it.
#ifndef INFER_TENSOR_VECDOT_H
#define INFER_TENSOR_VECDOT_H

#include <stddef.h>
#include <stdint.h>

// s = row w (n elements, stored type) . x (n elements of the act type, or f32)
typedef float (*vec_dot_fn)(const void *w, const void *x, int n);

// Quantizes n activations to the kernel's act_type.
typedef void (*act_quant_fn)(const float *x, void *y, int n);

// s[r] = row w . x_r for the 4 activation rows x_r = x + r * stride (bytes):
// the prefill kernel, which unpacks each weight block once for 4 tokens.
typedef void (*vec_dot4_fn)(const void *w, const void *x, size_t stride, int n, float *s);

// s[k] = row (w + k * wstride bytes) . x for 4 weight rows: the decode
// kernel, which loads the token's activations once for 4 rows.
typedef void (*vec_dotr_fn)(const void *w, size_t wstride, const void *x, int n, float *s);

// s[k * 4 + r] = row k (w + k * wstride bytes) . token r (x + r * xstride
// bytes), for 2 rows by 4 tokens.
typedef void (*vec_tile_fn)(const void *w, size_t wstride, const void *x, size_t xstride, int n, float *s);

typedef struct {
    int act_type;      // dtype the activations are given in (DT_F32 for float weights)
    vec_dot_fn dot;
    act_quant_fn quant; // NULL for DT_F32
    vec_dot4_fn dot4;   // NULL: 4 calls of dot
    vec_dot4_fn dot8;   // 8 rows of the act type at once (as dot4), or NULL
    int grouped;        // quant writes grouped q8_0 activations (act_q8_0_group)
    vec_dotr_fn dotr;   // 4 weight rows against one token (decode), or NULL
    vec_tile_fn tile24; // 2 weight rows by 4 tokens (float weights' prefill), or NULL
    vec_tile_fn tile44; // 4 weight rows by 4 tokens (s[k * 4 + r]), preferred to tile24, or NULL
} vecdot_kernel;

// Grouped q8_0 activations (kernels with `grouped`): the row's blocks in
// groups of four, each 128 value bytes, the four scales as f32 (the f16
// scale widened) and the four int32 sums of the values; the last group's
// empty slots are zero. act_q8_0_group converts plain q8_0 blocks to it;
// act_row_size is the bytes of one activation row for kernel k.
#define ACT_GROUP_BYTES 160
void act_q8_0_group(const void *blocks, void *grouped, int n);
size_t act_row_size(const vecdot_kernel *k, int n);

// The packed kernels' q8_0 activations (pack.h), a row of nb blocks: the
// values (32 bytes a block), then per block minus the sum of its values
// (int32), then the scales as f32, then 32 bytes of padding; rows are
// act_packed_row_size bytes apart.
#define XP_QS(x) ((const int8_t *)(x))
#define XP_NEGSUM(x, nb) ((const int32_t *)((const char *)(x) + 32 * (size_t)(nb)))
#define XP_D(x, nb) ((const float *)((const char *)(x) + 36 * (size_t)(nb)))
static inline size_t act_packed_row_size(int n) { return (40 * (size_t)(n / 32) + 32 + 63) & ~(size_t)63; }

// The packed k-quant kernels' q8_K activations, a row of n values: the values
// (as quantize_row_q8_K makes them), the sums of each 16 (int16), the sums of
// each 32 (int16), the f32 scale of each 256, then 32 bytes of padding.
#define XPK_QS(x) ((const int8_t *)(x))
#define XPK_BS16(x, n) ((const int16_t *)((const char *)(x) + (size_t)(n)))
#define XPK_BS32(x, n) ((const int16_t *)((const char *)(x) + (size_t)(n) + (size_t)(n) / 8))
#define XPK_D(x, n) ((const float *)((const char *)(x) + (size_t)(n) + (size_t)(n) / 8 + (size_t)(n) / 16))
static inline size_t act_packed_k_row_size(int n) { return ((size_t)n + (size_t)n / 8 + (size_t)n / 16 + (size_t)n / 64 + 32 + 63) & ~(size_t)63; }

// Activation quantizers, as ggml's CPU backend quantizes activations on x86
// (quantize_row_q8_0: scale 127/amax, round half to even; quantize_row_q8_K:
// the reference), so results track llama.cpp's for the same file.
void act_quant_q8_0(const float *x, void *y, int n);
void act_quant_q8_K(const float *x, void *y, int n);
// f32 -> bf16 rounded to nearest even (NaN kept quiet), ggml's fp32_to_bf16
void act_quant_bf16_ref(const float *x, void *y, int n);
void act_quant_bf16_avx2(const float *x, void *y, int n); // (the same bits, AVX2)

// Each type's row in the traits table (dtype.c) holds its scalar kernel and
// its SIMD one; these pick from it.
//
// The kernel for a weight type: SIMD when the CPU has it, else scalar. NULL
// for types without one (the matmul then uses the traits' f32 dot).
const vecdot_kernel *vecdot_get(int wtype);
// The scalar reference kernel of a weight type (NULL if none).
const vecdot_kernel *vecdot_get_ref(int wtype);
// The best SIMD kernel of a weight type on this CPU: the VNNI one where the
// type has one and the CPU has VNNI, else the AVX2 one (NULL if none or the
// CPU lacks AVX2).
const vecdot_kernel *vecdot_get_simd(int wtype);
// The kernel of ggml's CPU numerics for weights of a type in a GGUF file
// (weight.ggml): bf16 weights meet activations rounded to bf16, as ggml's
// vec_dot_type for bf16 is bf16 (vecdot_bf16.c), on AVX512_BF16 where the CPU
// has it; every other type gets vecdot_get's kernel (its activation type is
// ggml's already). vecdot_get_ggml_ref: the scalar oracle of the same.
const vecdot_kernel *vecdot_get_ggml(int wtype);
const vecdot_kernel *vecdot_get_ggml_ref(int wtype);
// "avx512vnni", "avx2", or "scalar": the best ISA vecdot_get hands out on
// this CPU (types without a VNNI kernel get their AVX2 one).
const char *vecdot_isa(void);
// Forces the scalar kernels (for comparisons); returns the previous setting.
int vecdot_force_scalar(int on);
int vecdot_scalar_forced(void);

// The scalar oracles (vecdot_ref.c), ggml's generic vec_dot_<w>_<act>:
// float weights against f32 activations, the rest against q8_0 or q8_K.
#define VECDOT_REF(w, a) float vecdot_##w##_##a(const void *w, const void *x, int n);
VECDOT_REF(f32, f32)
VECDOT_REF(f16, f32)
VECDOT_REF(bf16, f32)
VECDOT_REF(bf16, bf16)
VECDOT_REF(q8_0, q8_0)
VECDOT_REF(q4_0, q8_0)
VECDOT_REF(q4_1, q8_0)
VECDOT_REF(q5_0, q8_0)
VECDOT_REF(q5_1, q8_0)
VECDOT_REF(mxfp4, q8_0)
VECDOT_REF(q2_K, q8_K)
VECDOT_REF(q3_K, q8_K)
VECDOT_REF(q4_K, q8_K)
VECDOT_REF(q5_K, q8_K)
VECDOT_REF(q6_K, q8_K)
#undef VECDOT_REF

// The AVX2 kernels (vecdot_avx2.c).
extern const vecdot_kernel vecdot_avx2_f32, vecdot_avx2_f16, vecdot_avx2_bf16, vecdot_avx2_q8_0,
    vecdot_avx2_q4_0, vecdot_avx2_q4_1, vecdot_avx2_q5_0, vecdot_avx2_q5_1, vecdot_avx2_mxfp4,
    vecdot_avx2_q2_K, vecdot_avx2_q3_K, vecdot_avx2_q4_K, vecdot_avx2_q5_K, vecdot_avx2_q6_K;
// The AVX-512 VNNI (+VL) kernels of q8_0, q4_K and q6_K (vecdot_vnni.c):
// the AVX2 ones with dpbusd / dpwssd, the same results bit for bit.
extern const vecdot_kernel vecdot_vnni_q8_0, vecdot_vnni_q4_K, vecdot_vnni_q6_K;
// bf16 weights x bf16 activations (vecdot_bf16.c): the oracle, AVX2, AVX512_BF16.
extern const vecdot_kernel vecdot_ref_bf16_bf16, vecdot_avx2_bf16_bf16, vecdot_avx512bf16_bf16;

#endif
