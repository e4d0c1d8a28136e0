// Tokenizing speed of the GGUF tokenizer, one thread, for bench/compare-tokenize
// (which runs llama.cpp's llama_tokenize on the same texts, scripts/llamacpp-tok.cpp).
//
//   build/bench_tokenize VOCAB.gguf TEXTS.bin [R]
//
// TEXTS.bin: each text as a little-endian uint32 byte count and the bytes.
// Every text is encoded R times (default 5) without BOS/EOS or special-token
// parsing; prints "bytes B tokens T seconds S MB/s X".
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer.h"
#include "base/error.h"
#include "models/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s VOCAB.gguf TEXTS.bin [R]\n", argv[0]);
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    gguf_file *g = NULL;
    tokenizer *t = NULL;
    if (gguf_open(&g, argv[1]) || tokenizer_from_gguf(g, &t) || !t) {
        fprintf(stderr, "%s: %s\n", argv[1], t ? "" : infer_last_error());
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", argv[2]);
        return 1;
    }
    char **texts = NULL;
    size_t *lens = NULL, n = 0, cap = 0;
    unsigned char h[4];
    while (fread(h, 1, 4, f) == 4) {
        size_t len = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 | (size_t)h[3] << 24;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            texts = realloc(texts, sizeof *texts * cap);
            lens = realloc(lens, sizeof *lens * cap);
        }
        texts[n] = malloc(len + 1);
        if (fread(texts[n], 1, len, f) != len) {
            fprintf(stderr, "%s: truncated\n", argv[2]);
            return 1;
        }
        lens[n++] = len;
    }
    fclose(f);
    size_t bytes = 0, tokens = 0;
    double t0 = now();
    for (int r = 0; r < reps; r++)
        for (size_t i = 0; i < n; i++) {
            int32_t *ids;
            size_t nids;
            if (tokenizer_encode(t, texts[i], lens[i], false, false, &ids, &nids)) {
                fprintf(stderr, "text %zu: %s\n", i, infer_last_error());
                return 1;
            }
            bytes += lens[i];
            tokens += nids;
            free(ids);
        }
    double sec = now() - t0;
    printf("bytes %zu tokens %zu seconds %.6f MB/s %.3f\n", bytes, tokens, sec, bytes / sec / 1e6);
    for (size_t i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(lens);
    tokenizer_free(t);
    gguf_close(g);
    return 0;
}
