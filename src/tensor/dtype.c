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
    [DT_F32] = {
        .name = "f32", .blck = 1, .size = 4,
        .to_float = f32_to_float, .dot = f32_dot, .from_float = f32_from_float,
        .ref = {.act_type = DT_F32, .dot = vecdot_f32_f32},
        .avx2 = &vecdot_avx2_f32,
    },
    [DT_F16] = {
        .name = "f16", .blck = 1, .size = 2,
        .to_float = f16_to_float, .dot = f16_dot, .from_float = f16_from_float,
        .ref = {.act_type = DT_F32, .dot = vecdot_f16_f32},
        .avx2 = &vecdot_avx2_f16,
    },
    [DT_BF16] = {
        .name = "bf16", .blck = 1, .size = 2,
        .to_float = bf16_to_float, .dot = bf16_dot, .from_float = bf16_from_float,
        .ref = {.act_type = DT_F32, .dot = vecdot_bf16_f32},
        .avx2 = &vecdot_avx2_bf16,
    },
    // ggml's quantized blocks: layouts in quant.h, codecs in quant_q32.c and
    // quant_kq.c, row kernels in vecdot_ref.c (the oracles) and vecdot_avx2.c
    [DT_Q4_0] = {
        .name = "q4_0", .blck = QK, .size = sizeof(block_q4_0),
        .to_float = q4_0_to_float, .dot = q4_0_dot, .from_float = q4_0_from_float,
        .ref = {.act_type = DT_Q8_0, .dot = vecdot_q4_0_q8_0, .quant = act_quant_q8_0},
        .avx2 = &vecdot_avx2_q4_0,
    },
    [DT_Q4_1] = {
        .name = "q4_1", .blck = QK, .size = sizeof(block_q4_1),
        .to_float = q4_1_to_float, .dot = q4_1_dot, .from_float = q4_1_from_float,
        .ref = {.act_type = DT_Q8_0, .dot = vecdot_q4_1_q8_0, .quant = act_quant_q8_0},
        .avx2 = &vecdot_avx2_q4_1,
    },
    [DT_Q5_0] = {
        .name = "q5_0", .blck = QK, .size = sizeof(block_q5_0),
        .to_float = q5_0_to_float, .dot = q5_0_dot, .from_float = q5_0_from_float,
        .ref = {.act_type = DT_Q8_0, .dot = vecdot_q5_0_q8_0, .quant = act_quant_q8_0},
        .avx2 = &vecdot_avx2_q5_0,
    },
    [DT_Q5_1] = {
        .name = "q5_1", .blck = QK, .size = sizeof(block_q5_1),
        .to_float = q5_1_to_float, .dot = q5_1_dot, .from_float = q5_1_from_float,
        .ref = {.act_type = DT_Q8_0, .dot = vecdot_q5_1_q8_0, .quant = act_quant_q8_0},
        .avx2 = &vecdot_avx2_q5_1,
    },
    [DT_Q8_0] = {
        .name = "q8_0", .blck = QK, .size = sizeof(block_q8_0),
        .to_float = q8_0_to_float, .dot = q8_0_dot, .from_float = q8_0_from_float,
        .ref = {.act_type = DT_Q8_0, .dot = vecdot_q8_0_q8_0, .quant = act_quant_q8_0},
        .avx2 = &vecdot_avx2_q8_0,
        .vnni = &vecdot_vnni_q8_0,
    },
    [DT_Q2_K] = {
        .name = "q2_K", .blck = QK_K, .size = sizeof(block_q2_K),
        .to_float = q2_K_to_float, .dot = q2_K_dot, .from_float = q2_K_from_float,
        .ref = {.act_type = DT_Q8_K, .dot = vecdot_q2_K_q8_K, .quant = act_quant_q8_K},
        .avx2 = &vecdot_avx2_q2_K,
    },
    [DT_Q3_K] = {
        .name = "q3_K", .blck = QK_K, .size = sizeof(block_q3_K),
        .to_float = q3_K_to_float, .dot = q3_K_dot, .from_float = q3_K_from_float,
        .ref = {.act_type = DT_Q8_K, .dot = vecdot_q3_K_q8_K, .quant = act_quant_q8_K},
        .avx2 = &vecdot_avx2_q3_K,
    },
    [DT_Q4_K] = {
        .name = "q4_K", .blck = QK_K, .size = sizeof(block_q4_K),
        .to_float = q4_K_to_float, .dot = q4_K_dot, .from_float = q4_K_from_float,
        .ref = {.act_type = DT_Q8_K, .dot = vecdot_q4_K_q8_K, .quant = act_quant_q8_K},
        .avx2 = &vecdot_avx2_q4_K,
        .vnni = &vecdot_vnni_q4_K,
    },
    [DT_Q5_K] = {
        .name = "q5_K", .blck = QK_K, .size = sizeof(block_q5_K),
        .to_float = q5_K_to_float, .dot = q5_K_dot, .from_float = q5_K_from_float,
        .ref = {.act_type = DT_Q8_K, .dot = vecdot_q5_K_q8_K, .quant = act_quant_q8_K},
        .avx2 = &vecdot_avx2_q5_K,
    },
    [DT_Q6_K] = {
        .name = "q6_K", .blck = QK_K, .size = sizeof(block_q6_K),
        .to_float = q6_K_to_float, .dot = q6_K_dot, .from_float = q6_K_from_float,
        .ref = {.act_type = DT_Q8_K, .dot = vecdot_q6_K_q8_K, .quant = act_quant_q8_K},
        .avx2 = &vecdot_avx2_q6_K,
        .vnni = &vecdot_vnni_q6_K,
    },
    [DT_Q8_K] = {
        .name = "q8_K", .blck = QK_K, .size = sizeof(block_q8_K),
        .to_float = q8_K_to_float, .dot = q8_K_dot, .from_float = q8_K_from_float,
    },
    [DT_MXFP4] = {
        .name = "mxfp4", .blck = QK, .size = sizeof(block_mxfp4),
        .to_float = mxfp4_to_float, .dot = mxfp4_dot, .from_float = mxfp4_from_float,
        .ref = {.act_type = DT_Q8_0, .dot = vecdot_mxfp4_q8_0, .quant = act_quant_q8_0},
        .avx2 = &vecdot_avx2_mxfp4,
    },
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
