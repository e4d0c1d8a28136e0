// What the CPU can do, asked once (thread-safely) for the life of the process.
#ifndef INFER_BASE_CPU_H
#define INFER_BASE_CPU_H

// 1 when the CPU has AVX2, FMA and F16C: every SIMD kernel checks this one test.
int cpu_has_avx2(void);

#endif
