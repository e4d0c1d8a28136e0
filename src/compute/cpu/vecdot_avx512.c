// AVX-512 VNNI versions of the 32-element block kernels: the same code as
// the AVX2 ones (vecdot_q32.h) with dpbusd for the u8 x s8 sums, on 256-bit
// vectors (AVX512VL). The integers are the same as maddubs + madd gives, so
// the results are the AVX2 kernels' bit for bit; the other types keep their
// AVX2 kernels.
#include "compute/cpu/vecdot.h"
#include "models/dtype.h"
#include "models/quant.h"

#include "compute/cpu/simd_x86.h"

#define Q32_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))
#define Q32_VNNI 1
#define Q32_NAME(name) name##_vnni
#include "compute/cpu/vecdot_q32.h"

void vecdot_avx512vnni_patch(vecdot_kernel *t) {
    vecdot_kernel *k;
#define PATCH(dt, name)                      \
    k = &t[dt];                              \
    k->dot = dot_##name##_vnni;              \
    k->dot4 = dot4_##name##_vnni;            \
    k->dot8 = dot8_##name##_vnni;            \
    k->dotr = dotr_##name##_vnni;
    PATCH(DT_Q8_0, q8_0)
    PATCH(DT_Q4_0, q4_0)
    PATCH(DT_Q4_1, q4_1)
    PATCH(DT_Q5_0, q5_0)
    PATCH(DT_MXFP4, mxfp4)
#undef PATCH
}
