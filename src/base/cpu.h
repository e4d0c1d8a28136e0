// What the CPU can do, asked once (thread-safely) for the life of the process.
#ifndef INFER_BASE_CPU_H
#define INFER_BASE_CPU_H

// 1 when the CPU has AVX2, FMA and F16C: every SIMD kernel checks this one test.
int cpu_has_avx2(void);
// 1 when it also has AVX-512 F, VL and VNNI (256-bit dpbusd), and the
// environment variable INFER_NO_VNNI is unset or "0" (set: the AVX2 kernels,
// for comparisons).
int cpu_has_vnni(void);
// 1 when it has that and AVX512_BF16 (vdpbf16ps) as well.
int cpu_has_avx512bf16(void);
// 1 when it also has AMX tiles with bf16 (TDPBF16PS), the OS has granted
// this process the tile state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM), and
// INFER_NO_AMX is unset or "0".
int cpu_has_amx_bf16(void);
// AMX's int8 products as well (INFER_NO_AMX_INT8=1: not used)
int cpu_has_amx_int8(void);

// The memory the kernel says is available (/proc/meminfo's MemAvailable: free
// plus what it can reclaim), in bytes; 0 when it cannot tell.
#include <stddef.h>
size_t mem_available(void);

#endif
