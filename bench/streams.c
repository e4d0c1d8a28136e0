// Memory read bandwidth with 1-2 threads (or the thread counts given, e.g.
// `/tmp/streams 1 4 16`) and 1-8 interleaved streams per thread (the figures in
// bench/results/cpu.md's notes): 512 MiB (2 GiB with more than 2 threads) read 5 times,
// best kept.
// build: cc -O2 -pthread bench/streams.c -o /tmp/streams && /tmp/streams
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static char *buf;
static size_t N;
static int S, NT;

__attribute__((target("avx2"))) static void *work(void *arg) {
    long id = (long)arg;
    size_t per = N / NT, len = per / S;
    const char *base = buf + per * id;
    __m256i a = _mm256_setzero_si256();
    for (size_t i = 0; i < len; i += 64)
        for (int s = 0; s < S; s++) {
            const char *p = base + len * s + i;
            _mm_prefetch(p + 2048, _MM_HINT_NTA);
            a = _mm256_add_epi64(a, _mm256_load_si256((const __m256i *)p));
            a = _mm256_add_epi64(a, _mm256_load_si256((const __m256i *)(p + 32)));
        }
    long r[4];
    _mm256_storeu_si256((__m256i *)r, a);
    return (void *)(r[0] + r[1] + r[2] + r[3]);
}

int main(int argc, char **argv) {
    int counts[16] = {1, 2}, nc = 2;
    if (argc > 1) {
        nc = 0;
        for (int i = 1; i < argc && nc < 16; i++) {
            int t = atoi(argv[i]);
            if (t < 1 || t > 256) { fprintf(stderr, "streams: thread count '%s' is not 1..256\n", argv[i]); return 2; }
            counts[nc++] = t;
        }
    }
    N = (size_t)512 << 20;
    for (int i = 0; i < nc; i++)
        if (counts[i] > 2) N = (size_t)2048 << 20;
    buf = aligned_alloc(64, N);
    if (!buf) return 1;
    memset(buf, 1, N);
    for (int c = 0; c < nc; c++)
        for (NT = counts[c], S = 1; S <= 8; S *= 2) {
            double best = 1e9;
            for (int it = 0; it < 5; it++) {
                double t0 = now();
                pthread_t th[256];
                for (long i = 0; i < NT; i++) pthread_create(&th[i], 0, work, (void *)i);
                for (int i = 0; i < NT; i++) pthread_join(th[i], 0);
                double t = now() - t0;
                if (t < best) best = t;
            }
            printf("threads %d, streams per thread %d: %.2f GB/s\n", NT, S, N / best / 1e9);
        }
    free(buf);
    return 0;
}
