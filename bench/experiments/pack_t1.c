// One token against packed k-quant weights held in the cache: the VNNI
// kernel's own speed (pack_vnni_q6_K / q4_K's tile at T = 1), GB/s of packed
// weights, the best of 30 passes of 20 over ROWS rows of 4096 (256 rows: in
// a Zen 4 core's L2). Decode reads these weights from memory; this says
// whether the kernel or the memory is the limit. Links the engine's library:
//   gcc -O2 -Isrc -Iinclude -o /tmp/pack_t1 bench/experiments/pack_t1.c build/libinfer_internal.a -lm -lpthread
//   /tmp/pack_t1 q6|q4 [ROWS]
// (2026-12-07, 2-core AMD EPYC, alternating 8 times: q6_K 33.5 GB/s with 4
// accumulators a token, 38.2 with 2; q4_K 48.0 with 4, 47.5 with 2.)
#include "tensor/pack.h"
#include "tensor/dtype.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  int kind = argc>1 && !strcmp(argv[1],"q4") ? PACK_Q4_K : PACK_Q6_K; int dt = kind==PACK_Q4_K? DT_Q4_K: DT_Q6_K;
  int rows=argc>2?atoi(argv[2]):256, cols=4096;
  size_t rs = dtype_row_size(dt, cols);
  unsigned char *src=malloc(rs*rows); srand(1); for(size_t i=0;i<rs*rows;i++) src[i]=rand();
  size_t pb = pack_bytes(kind, rows, cols); void *dst=aligned_alloc(64,(pb+63)/64*64);
  pack_rows(kind, src, rows, cols, dst);
  const pack_kernel *k = pack_kernel_get(kind);
  float *x=malloc(4*cols); for(int i=0;i<cols;i++) x[i]=(rand()%200-100)/50.0f;
  void *xa=aligned_alloc(64,(pack_act_row_size(kind,cols)+63)/64*64); k->quant(x,xa,cols);
  float out[8]; size_t gb=pack_group_bytes(kind,cols); double best=1e9; volatile float sink=0;
  for(int r=0;r<30;r++){ double t0=now(); for(int it=0;it<20;it++) for(int g=0;g<rows/8;g++){ k->tile((char*)dst+gb*g, xa, 0, 1, cols, out, 0); sink+=out[0]; }
    double t=(now()-t0)/20; if(t<best)best=t; }
  printf("%s T=1: %.1f GB/s of packed weights (%d rows x %d, %.0f us a pass)\n", kind==PACK_Q4_K?"q4_K":"q6_K", pb/best/1e9, rows, cols, best*1e6);
}
