// VNNI versions of the q8_0, q4_K and q6_K kernels: the AVX2 code of
// vecdot_q32.h and vecdot_kq.h on 256-bit vectors under AVX-512 VNNI + VL,
// with one vpdpbusd (u8 x s8, four products summed into each int32 lane) for
// q8_0's maddubs + madd, and one vpdpwssd for the k-quants' madd with the
// scales + add. The integers are the ones the AVX2 kernels get and the float
// operations after them are the same, so the results are the AVX2 kernels'
// bit for bit (tests/test_kernels.c checks). On this Zen 4 per thread: dot8
// q4_K 55.0 -> 70.2 GMAC/s, q6_K 54.8 -> 77.1, q8_0 48.4 -> 48.2, dotr q8_0
// 34.4 -> 35.7; q4_K's 1-token kernel stays AVX2 (32.8 vs 31.3 with
// VNNI). The other 32-element types keep their AVX2 kernels (with the
// AVX-512 target their dot8 ran 5-13% slower even without dpbusd).
#include "tensor/vecdot_x86.h"

#define Q32_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))
#define Q32_VNNI 1
#define Q32_DPBUSD _mm256_dpbusd_epi32
#define Q32_DPWSSD _mm256_dpwssd_epi32
#define Q32_NAME(name) name##_vnni
#include "tensor/vecdot_q32.h"
#include "tensor/vecdot_kq.h"

#define VNNI_KERNEL(t) /* (grouped q8_0 activations) */                                                                                        \
    const vecdot_kernel vecdot_vnni_##t = {                                                                   \
        .act_type = DT_Q8_0, .dot = dot_##t##_vnni, .quant = act_quant_q8_0x4_avx2, .dot4 = dot4_##t##_vnni, \
        .dot8 = dot8_##t##_vnni, .grouped = 1, .dotr = dotr_##t##_vnni,                                       \
    };
VNNI_KERNEL(q8_0)
const vecdot_kernel vecdot_vnni_q4_K = {
    .act_type = DT_Q8_K, .dot = dot_q4_K_avx2, .quant = act_quant_q8_K, .dot4 = dot4_q4_K_vnni, .dot8 = dot8_q4_K_vnni,
};
const vecdot_kernel vecdot_vnni_q6_K = {
    .act_type = DT_Q8_K, .dot = dot_q6_K_vnni, .quant = act_quant_q8_K, .dot4 = dot4_q6_K_vnni, .dot8 = dot8_q6_K_vnni,
};
