// What a grid-wide barrier costs on this GPU, against a dependent kernel launch in a captured
// graph (an experiment for a persistent decode kernel; nvcc -arch=sm_90 -O3 barrier_exp.cu):
// a kernel of B blocks x T threads passes K barriers, either cooperative groups' grid.sync()
// or a counter in global memory (one atomic add a block, spinning on a generation word),
// with and without a small matrix-vector's worth of reads between the barriers.
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>

namespace cg = cooperative_groups;

static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

// reads `per` floats a block between barriers (a row slice of a matrix-vector product)
static __device__ float work(const float *w, int per, int step) {
    float s = 0;
    const float *p = w + ((size_t)blockIdx.x * per + (size_t)step * gridDim.x * per) % (64u << 20);
    for (int i = threadIdx.x; i < per; i += blockDim.x) s += p[i];
    return s;
}

__global__ void k_coop(int k, const float *w, int per, float *out) {
    cg::grid_group g = cg::this_grid();
    float s = 0;
    for (int i = 0; i < k; i++) {
        if (per) s += work(w, per, i);
        g.sync();
    }
    if (s == 12345.f) out[0] = s;
}

// a sense-reversing barrier: count arrivals, the last resets the count and bumps the generation
static __device__ void bar(unsigned *count, volatile unsigned *gen, unsigned nblocks) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned g0 = *gen;
        __threadfence();
        if (atomicAdd(count, 1) == nblocks - 1) {
            *count = 0;
            __threadfence();
            atomicAdd((unsigned *)gen, 1);
        } else {
            while (*gen == g0) { }
        }
        __threadfence();
    }
    __syncthreads();
}

__global__ void k_atomic(int k, const float *w, int per, float *out, unsigned *count, unsigned *gen) {
    float s = 0;
    for (int i = 0; i < k; i++) {
        if (per) s += work(w, per, i);
        bar(count, gen, gridDim.x);
    }
    if (s == 12345.f) out[0] = s;
}

__global__ void k_step(const float *w, int per, float *out, int i) {
    float s = work(w, per, i);
    if (s == 12345.f) out[0] = s;
}

int main() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    float *w, *out;
    unsigned *cnt;
    cudaMalloc(&w, (64u << 20) * sizeof(float) + (1u << 20));
    cudaMemset(w, 0, (64u << 20) * sizeof(float));
    cudaMalloc(&out, 64);
    cudaMalloc(&cnt, 64);
    cudaMemset(cnt, 0, 64);
    cudaStream_t st;
    cudaStreamCreate(&st);
    const int K = 2000;
    printf("SMs %d; microseconds a barrier (or a launch), K=%d\n", sms, K);
    int blocks_per[] = {1, 2}, threads[] = {256, 512}, pers[] = {0, 2048, 8192};
    for (int bp : blocks_per)
        for (int t : threads)
            for (int per : pers) {
                int nb = sms * bp;
                void *args[] = {(void *)&K, &w, &per, &out};
                cudaLaunchCooperativeKernel((void *)k_coop, nb, t, args, 0, st);
                cudaStreamSynchronize(st);
                double t0 = now();
                cudaLaunchCooperativeKernel((void *)k_coop, nb, t, args, 0, st);
                cudaStreamSynchronize(st);
                double coop = (now() - t0) * 1e6 / K;
                cudaError_t e = cudaGetLastError();
                if (e) printf("coop: %s\n", cudaGetErrorString(e));
                k_atomic<<<nb, t, 0, st>>>(K, w, per, out, cnt, cnt + 1);
                cudaStreamSynchronize(st);
                t0 = now();
                k_atomic<<<nb, t, 0, st>>>(K, w, per, out, cnt, cnt + 1);
                cudaStreamSynchronize(st);
                double atom = (now() - t0) * 1e6 / K;
                e = cudaGetLastError();
                if (e) printf("atomic: %s\n", cudaGetErrorString(e));
                // the same steps as separate kernels in a captured graph
                cudaGraph_t g;
                cudaGraphExec_t ge;
                cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
                for (int i = 0; i < 200; i++) k_step<<<nb, t, 0, st>>>(w, per ? per : 1, out, i);
                cudaStreamEndCapture(st, &g);
                cudaGraphInstantiate(&ge, g, 0);
                cudaGraphLaunch(ge, st);
                cudaStreamSynchronize(st);
                t0 = now();
                for (int r = 0; r < 10; r++) cudaGraphLaunch(ge, st);
                cudaStreamSynchronize(st);
                double graph = (now() - t0) * 1e6 / 2000;
                cudaGraphExecDestroy(ge);
                cudaGraphDestroy(g);
                printf("blocks %3d threads %3d floats/block %5d (%.1f MB a step) | grid.sync %.2f | atomic barrier %.2f | graph launch %.2f\n",
                       nb, t, per, nb * (double)per * 4 / 1e6, coop, atom, graph);
            }
    return 0;
}
