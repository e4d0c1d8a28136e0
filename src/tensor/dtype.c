// The per-type traits table: every kernel that reads weights dispatches here.
#include "tensor/dtype.h"
#include "base/half.h"
#include "tensor/quant.h"

// Tensor data in a safetensors file need not be aligned to its element size,
// so elements are loaded with memcpy (a plain load on x86, and no UB).
static inline float load_f32(const void *p, int64_t i) { float v; memcpy(&v, (const char *)p + 4 * i, 4); return v; }
static inline uint16_t load_u16(const void *p, int64_t i) { uint16_t v; memcpy(&v, (const char *)p + 2 * i, 2); return v; }

// ---------------------------------------------------------------------------
// f32

static void f32_to_float(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }

static float f32_dot(const void *w, const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += load_f32(w, i) * x[i];
    return s;
}

static void f32_from_float(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }

// ---------------------------------------------------------------------------
// f16

static void f16_to_float(const void *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = f16_to_f32(load_u16(x, i));
}

static float f16_dot(const void *w, const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += f16_to_f32(load_u16(w, i)) * x[i];
    return s;
}

static void f16_from_float(const float *x, void *y, int64_t n) {
    uint16_t *a = y;
    for (int64_t i = 0; i < n; i++) a[i] = f32_to_f16(x[i]);
}

// ---------------------------------------------------------------------------
// bf16

static void bf16_to_float(const void *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_f32(load_u16(x, i));
}

static float bf16_dot(const void *w, const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += bf16_to_f32(load_u16(w, i)) * x[i];
    return s;
}

static void bf16_from_float(const float *x, void *y, int64_t n) {
    uint16_t *a = y;
    for (int64_t i = 0; i < n; i++) a[i] = f32_to_bf16(x[i]);
}

// ---------------------------------------------------------------------------

static const dtype_traits g_traits[DT_COUNT] = {
    [DT_F32] = {"f32", 1, 4, f32_to_float, f32_dot, f32_from_float},
    [DT_F16] = {"f16", 1, 2, f16_to_float, f16_dot, f16_from_float},
    [DT_BF16] = {"bf16", 1, 2, bf16_to_float, bf16_dot, bf16_from_float},
    // ggml's quantized blocks: codecs in quant.c, layouts in quant.h
    [DT_Q4_0] = {"q4_0", QK, sizeof(block_q4_0), q4_0_to_float, q4_0_dot, q4_0_from_float},
    [DT_Q4_1] = {"q4_1", QK, sizeof(block_q4_1), q4_1_to_float, q4_1_dot, q4_1_from_float},
    [DT_Q5_0] = {"q5_0", QK, sizeof(block_q5_0), q5_0_to_float, q5_0_dot, q5_0_from_float},
    [DT_Q5_1] = {"q5_1", QK, sizeof(block_q5_1), q5_1_to_float, q5_1_dot, q5_1_from_float},
    [DT_Q8_0] = {"q8_0", QK, sizeof(block_q8_0), q8_0_to_float, q8_0_dot, q8_0_from_float},
    [DT_Q2_K] = {"q2_K", QK_K, sizeof(block_q2_K), q2_K_to_float, q2_K_dot, q2_K_from_float},
    [DT_Q3_K] = {"q3_K", QK_K, sizeof(block_q3_K), q3_K_to_float, q3_K_dot, q3_K_from_float},
    [DT_Q4_K] = {"q4_K", QK_K, sizeof(block_q4_K), q4_K_to_float, q4_K_dot, q4_K_from_float},
    [DT_Q5_K] = {"q5_K", QK_K, sizeof(block_q5_K), q5_K_to_float, q5_K_dot, q5_K_from_float},
    [DT_Q6_K] = {"q6_K", QK_K, sizeof(block_q6_K), q6_K_to_float, q6_K_dot, q6_K_from_float},
    [DT_Q8_K] = {"q8_K", QK_K, sizeof(block_q8_K), q8_K_to_float, q8_K_dot, q8_K_from_float},
    [DT_MXFP4] = {"mxfp4", QK, sizeof(block_mxfp4), mxfp4_to_float, mxfp4_dot, mxfp4_from_float},
};

const dtype_traits *dtype_get(int type) {
    if (type < 0 || type >= DT_COUNT || !g_traits[type].name) return NULL;
    return &g_traits[type];
}

size_t dtype_row_size(int type, int64_t n) {
    const dtype_traits *t = dtype_get(type);
    if (!t || n < 0 || n % t->blck) return 0;
    return (size_t)(n / t->blck) * t->size;
}
