// The GGUF reader against corrupt files (llama.cpp's own list from
// tests/test-gguf.cpp, and more): every one is refused with a message naming
// the problem, never a crash. Also: the metadata getters on a good file, every
// truncation and many byte flips of a good file, and a tiny model whose unused
// tensor has a type we cannot compute with (fine) or whose embeddings do (an
// "unsupported type" error).
#include "check.h"
#include "infer.h"
#include "models/gguf.h"
#include "models/gguf_write.h"
#include "tensor/dtype.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// A byte builder for hand-made files.

typedef struct { unsigned char p[1 << 16]; size_t n; } bb;

static void b_raw(bb *b, const void *x, size_t n) { memcpy(b->p + b->n, x, n); b->n += n; }
static void b_u32(bb *b, uint32_t v) { unsigned char x[4] = {v, v >> 8, v >> 16, v >> 24}; b_raw(b, x, 4); }
static void b_u64(bb *b, uint64_t v) { for (int i = 0; i < 8; i++) b->p[b->n++] = (unsigned char)(v >> (8 * i)); }
static void b_str(bb *b, const char *s) { b_u64(b, strlen(s)); b_raw(b, s, strlen(s)); }
static void b_pad(bb *b, size_t a) { while (b->n % a) b->p[b->n++] = 0; }
static void b_head(bb *b, uint32_t version, uint64_t nt, uint64_t nkv) { b_raw(b, "GGUF", 4); b_u32(b, version); b_u64(b, nt); b_u64(b, nkv); }
static void b_kv_u32(bb *b, const char *k, uint32_t v) { b_str(b, k); b_u32(b, GGUF_U32); b_u32(b, v); }
static void b_tensor(bb *b, const char *name, uint32_t nd, const int64_t *ne, uint32_t type, uint64_t off) {
    b_str(b, name);
    b_u32(b, nd);
    for (uint32_t i = 0; i < nd; i++) b_u64(b, (uint64_t)ne[i]);
    b_u32(b, type);
    b_u64(b, off);
}

// Parses b and expects failure with `want` in the message.
static void expect_bad(const bb *b, const char *want, const char *what) {
    gguf_file *g = NULL;
    infer_status st = gguf_parse(&g, b->p, b->n, "bad.gguf");
    CHECK(st != INFER_OK && !g, "%s: accepted", what);
    if (st == INFER_OK) { gguf_close(g); return; }
    const char *msg = infer_last_error();
    CHECK(strstr(msg, want) && strstr(msg, "bad.gguf"), "%s: message \"%s\" should name the file and say \"%s\"", what, msg, want);
}

// A valid file: two kvs, one f32 tensor [4, 2] at offset 0, data present.
static void good_file(bb *b) {
    b->n = 0;
    b_head(b, 3, 1, 2);
    b_kv_u32(b, "general.alignment", 32);
    b_str(b, "general.architecture"); b_u32(b, GGUF_STRING); b_str(b, "llama");
    int64_t ne[2] = {4, 2};
    b_tensor(b, "t", 2, ne, 0, 0);
    b_pad(b, 32);
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    b_raw(b, x, sizeof x);
}

static void test_corrupt(void) {
    bb *b = calloc(1, sizeof *b);
    int64_t ne[2] = {4, 2};

    good_file(b);
    gguf_file *g;
    CHECK(gguf_parse(&g, b->p, b->n, "good.gguf") == INFER_OK, "good file: %s", infer_last_error());
    gguf_close(g);

    good_file(b); b->p[4] = 2; // version 2 has the same layout
    CHECK(gguf_parse(&g, b->p, b->n, "v2.gguf") == INFER_OK && g->version == 2, "version 2: %s", infer_last_error());
    gguf_close(g);

    good_file(b); b->p[3] = 'X';
    expect_bad(b, "bad magic", "bad magic");
    b->n = 0; b_raw(b, "GG", 2);
    expect_bad(b, "too short", "two bytes");

    b->n = 0; b_head(b, 1, 0, 0);
    expect_bad(b, "unsupported GGUF version 1", "version 1");
    b->n = 0; b_head(b, 4, 0, 0);
    expect_bad(b, "unsupported GGUF version 4", "version 4");
    b->n = 0; b_head(b, 0x03000000, 0, 0);
    expect_bad(b, "big-endian", "big-endian version");

    b->n = 0; b_head(b, 3, UINT64_MAX, 0);
    expect_bad(b, "tensor count -1", "negative tensor count");
    b->n = 0; b_head(b, 3, 1ull << 40, 0);
    expect_bad(b, "tensor count", "huge tensor count");
    b->n = 0; b_head(b, 3, 0, UINT64_MAX);
    expect_bad(b, "key-value count -1", "negative kv count");
    b->n = 0; b_head(b, 3, 0, 1ull << 40);
    expect_bad(b, "key-value count", "huge kv count");

    b->n = 0; b_head(b, 3, 0, 1); b_u64(b, 1000); b_raw(b, "abcdefghijklmnopqrstuvwxyz", 26);
    expect_bad(b, "string length 1000 runs past the end", "key longer than the file");
    b->n = 0; b_head(b, 3, 0, 1); b_str(b, "k"); b_u32(b, GGUF_STRING); b_u64(b, 1ull << 62); b_raw(b, "xyz", 3);
    expect_bad(b, "runs past the end", "string value longer than the file");
    b->n = 0; b_head(b, 3, 0, 1); b_str(b, "k"); b_u32(b, 13); b_u32(b, 0);
    expect_bad(b, "unknown value type 13", "unknown kv type");
    b->n = 0; b_head(b, 3, 0, 1); b_str(b, "k"); b_u32(b, GGUF_ARRAY); b_u32(b, 77); b_u64(b, 1); b_u32(b, 0);
    expect_bad(b, "array of unknown value type 77", "array of unknown type");
    b->n = 0; b_head(b, 3, 0, 1); b_str(b, "k"); b_u32(b, GGUF_ARRAY); b_u32(b, GGUF_U64); b_u64(b, 1ull << 61); b_u64(b, 0);
    expect_bad(b, "runs past the end", "array count larger than the file");
    b->n = 0; b_head(b, 3, 0, 1); b_str(b, "k"); b_u32(b, GGUF_ARRAY); b_u32(b, GGUF_STRING); b_u64(b, 3); b_str(b, "a");
    expect_bad(b, "runs past the end", "array of strings cut short");
    b->n = 0; b_head(b, 3, 0, 1); b_str(b, "k"); b_u32(b, GGUF_ARRAY);
    for (int d = 0; d < 12; d++) { b_u32(b, GGUF_ARRAY); b_u64(b, 1); }
    b_u32(b, GGUF_U8); b_u64(b, 0);
    expect_bad(b, "nested more than", "arrays nested too deep");

    b->n = 0; b_head(b, 3, 0, 0);
    CHECK(gguf_parse(&g, b->p, b->n, "empty.gguf") == INFER_OK, "a header with nothing after it is valid: %s", infer_last_error());
    gguf_close(g);
    b->n = 0; b_head(b, 3, 0, 1); b_kv_u32(b, "", 1);
    expect_bad(b, "key 0 is empty", "empty key");
    b->n = 0; b_head(b, 3, 0, 1); b_u64(b, UINT64_MAX); b_raw(b, "0123456789abcdef", 16);
    expect_bad(b, "runs past the end", "key length -1");
    b->n = 0; b_head(b, 3, 0, 2); b_kv_u32(b, "a.b", 1); b_kv_u32(b, "a.b", 2);
    expect_bad(b, "duplicate key \"a.b\"", "duplicate keys");
    b->n = 0; b_head(b, 3, 0, 1); b_kv_u32(b, "general.alignment", 3);
    expect_bad(b, "not a power of two", "alignment 3");
    b->n = 0; b_head(b, 3, 0, 1); b_kv_u32(b, "general.alignment", 0);
    expect_bad(b, "not a power of two", "alignment 0");
    b->n = 0; b_head(b, 3, 0, 1); b_str(b, "general.alignment"); b_u32(b, GGUF_I32); b_u32(b, 32);
    expect_bad(b, "general.alignment must be u32", "alignment of the wrong type");

    char longname[80];
    memset(longname, 'n', 64);
    longname[64] = 0;
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, longname, 2, ne, 0, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "too long", "tensor name of 64 bytes");
    int64_t ne5[5] = {1, 1, 1, 1, 1};
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 5, ne5, 0, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "5 dimensions", "five dims");
    int64_t neg[2] = {4, -2};
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, neg, 0, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "negative dimension", "negative shape");
    int64_t big[3] = {1ll << 31, 1ll << 31, 1ll << 31};
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 3, big, 0, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "overflows", "overflowing shape");
    int64_t big2[2] = {1ll << 62, 1};
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, big2, 0, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "byte size overflows", "f32 byte size overflowing");
    int64_t mid[2] = {1 << 20, 1};
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, mid, 0, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "needs bytes [0, 4194304)", "tensor larger than the data");
    int64_t zero[2] = {4, 0}; // a zero dimension is a valid, empty tensor
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, zero, 0, 0); b_pad(b, 32);
    CHECK(gguf_parse(&g, b->p, b->n, "zero.gguf") == INFER_OK && g->tensors[0].nbytes == 0, "zero dim: %s", infer_last_error());
    gguf_close(g);
    int64_t wrap[3] = {4, (1ll << 30) - 1, (1ll << 30) + 1}; // f32 bytes = 2^64 - 16: padding would wrap
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 3, wrap, 0, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "needs bytes", "byte size near 2^64");
    int64_t huge4[4] = {4ll * INT32_MAX, 4ll * INT32_MAX, 4ll * INT32_MAX, 4ll * INT32_MAX};
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 4, huge4, 0, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "overflows", "dims of 4 * INT32_MAX");
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, ne, 4, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "unknown tensor type 4", "removed ggml type 4");
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, ne, 999, 0); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "unknown tensor type 999", "type 999");
    int64_t odd[2] = {30, 1};
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, odd, 8, 0); b_pad(b, 32); b_raw(b, b->p, 64);
    if (dtype_get(8)) expect_bad(b, "whole number", "q8_0 row not a multiple of 32");

    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, ne, 0, 1 << 20); b_pad(b, 32); b_raw(b, b->p, 32);
    expect_bad(b, "outside", "offset outside the data");
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, ne, 0, 8); b_pad(b, 32); b_raw(b, b->p, 64);
    expect_bad(b, "not a multiple of the alignment", "misaligned offset");
    b->n = 0; b_head(b, 3, 2, 0); b_tensor(b, "t", 2, ne, 0, 0); b_tensor(b, "t", 2, ne, 0, 32); b_pad(b, 32); b_raw(b, b->p, 64);
    expect_bad(b, "duplicate tensor name \"t\"", "duplicate tensor names");
    b->n = 0; b_head(b, 3, 2, 0); b_tensor(b, "a", 2, ne, 0, 0); b_tensor(b, "b", 2, ne, 0, 0); b_pad(b, 32); b_raw(b, b->p, 64);
    expect_bad(b, "overlaps", "overlapping tensors");
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, ne, 0, 0); b_pad(b, 32); b_raw(b, b->p, 16);
    expect_bad(b, "truncated", "data shorter than the tensor");
    b->n = 0; b_head(b, 3, 1, 0); b_tensor(b, "t", 2, ne, 0, 0);
    expect_bad(b, "truncated", "no data section at all");

    // Nested arrays are read: [[1, 2], [3]] of u8.
    b->n = 0; b_head(b, 3, 0, 1); b_str(b, "n"); b_u32(b, GGUF_ARRAY); b_u32(b, GGUF_ARRAY); b_u64(b, 2);
    b_u32(b, GGUF_U8); b_u64(b, 2); b->p[b->n++] = 1; b->p[b->n++] = 2;
    b_u32(b, GGUF_U8); b_u64(b, 1); b->p[b->n++] = 3;
    CHECK(gguf_parse(&g, b->p, b->n, "nested.gguf") == INFER_OK, "nested arrays: %s", infer_last_error());
    if (g) {
        const gguf_value *a = NULL;
        CHECK(gguf_get_arr(g, "n", GGUF_ARRAY, &a) == INFER_OK && a && a->n == 2, "nested array");
        const gguf_value *x = a ? gguf_arr_item(a, 1) : NULL;
        CHECK(x && x->type == GGUF_ARRAY && x->elem_type == GGUF_U8 && x->n == 1 && gguf_arr_int(x, 0) == 3, "inner array");
        CHECK(a && gguf_arr_item(a, 2) == NULL, "inner array out of range");
        gguf_close(g);
    }

    // Every truncation of a good file fails cleanly; byte flips never crash.
    good_file(b);
    bb *c = calloc(1, sizeof *c);
    int refused = 0;
    for (size_t n = 0; n < b->n; n++) {
        if (gguf_parse(&g, b->p, n, "cut.gguf") == INFER_OK) gguf_close(g);
        else refused++;
    }
    CHECK(refused == (int)b->n, "only %d of %zu truncations refused", refused, b->n);
    uint32_t seed = 12345;
    for (int k = 0; k < 20000; k++) {
        memcpy(c, b, sizeof *b);
        for (int j = 0; j < 3; j++) {
            seed = seed * 1664525u + 1013904223u;
            c->p[(seed >> 8) % c->n] ^= (unsigned char)(1u << ((seed >> 3) & 7));
        }
        if (gguf_parse(&g, c->p, c->n, "flip.gguf") == INFER_OK) gguf_close(g);
    }
    free(c);
    free(b);
}

// ---------------------------------------------------------------------------
// Getters on a file made by the writer.

static void test_getters(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/meta.gguf", dir);
    gguf_writer *w = gguf_writer_new();
    gguf_set_u32(w, "a.u32", 7);
    gguf_set_i32(w, "a.i32", -3);
    gguf_set_f32(w, "a.f32", 0.5f);
    gguf_set_bool(w, "a.bool", 1);
    gguf_set_str(w, "a.str", "hello");
    uint32_t arr[3] = {4, 5, 6};
    gguf_set_arr(w, "a.arr", GGUF_U32, arr, 3);
    const char *strs[] = {"x", "", "yz"};
    gguf_set_arr_str(w, "a.strs", strs, 3);
    gguf_set_u32(w, "a.u32", 8); // replaces
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t ne[2] = {3, 2};
    gguf_add_tensor_raw(w, "w", DT_F32, 2, ne, data, sizeof data);
    CHECK(gguf_write_file(w, path) == INFER_OK, "%s", infer_last_error());
    gguf_writer_free(w);

    gguf_file *g;
    CHECK(gguf_open(&g, path) == INFER_OK, "%s", infer_last_error());
    if (!g) return;
    int64_t i = 0;
    double d = 0;
    int bo = 0;
    const char *s = NULL;
    size_t n = 0;
    CHECK(gguf_get_int(g, "a.u32", 0, 100, &i) == INFER_OK && i == 8, "u32 %lld", (long long)i);
    CHECK(gguf_get_int(g, "a.i32", -10, 10, &i) == INFER_OK && i == -3, "i32 %lld", (long long)i);
    CHECK(gguf_get_int(g, "a.i32", 0, 10, &i) != INFER_OK && strstr(infer_last_error(), "a.i32"), "range: %s", infer_last_error());
    CHECK(gguf_get_f64(g, "a.f32", &d) == INFER_OK && d == 0.5, "f32 %g", d);
    CHECK(gguf_get_bool(g, "a.bool", &bo) == INFER_OK && bo == 1, "bool");
    CHECK(gguf_get_str(g, "a.str", &s, &n) == INFER_OK && n == 5 && !memcmp(s, "hello", 5), "str");
    CHECK(gguf_get_str(g, "a.u32", &s, &n) != INFER_OK && strstr(infer_last_error(), "must be a string"), "type mismatch: %s", infer_last_error());
    char small[4];
    CHECK(gguf_get_str_copy(g, "a.str", small, sizeof small) != INFER_OK, "copy into a small buffer must fail");
    i = 99;
    CHECK(gguf_get_int(g, "absent", 0, 1, &i) == INFER_OK && i == 99, "absent key leaves the value");
    const gguf_value *a;
    CHECK(gguf_get_arr(g, "a.arr", GGUF_U32, &a) == INFER_OK && a && a->n == 3 && gguf_arr_int(a, 2) == 6, "u32 array");
    CHECK(gguf_get_arr(g, "a.strs", GGUF_STRING, &a) == INFER_OK && a && a->n == 3, "string array");
    if (a) {
        s = gguf_arr_str(a, 2, &n);
        CHECK(s && n == 2 && !memcmp(s, "yz", 2), "string element");
        CHECK(gguf_arr_str(a, 3, &n) == NULL, "out of range element");
    }
    int per[4];
    int found;
    CHECK(gguf_get_int_or_arr(g, "a.u32", 4, 0, 100, per, &found) == INFER_OK && found && per[3] == 8, "scalar for every layer");
    CHECK(gguf_get_int_or_arr(g, "a.arr", 4, 0, 100, per, &found) != INFER_OK && strstr(infer_last_error(), "one per layer"),
          "array of the wrong length: %s", infer_last_error());
    CHECK(g->n_tensors == 1 && g->tensors[0].nbytes == sizeof data && g->data_offset % 32 == 0, "tensor info");
    gguf_close(g);
}

// ---------------------------------------------------------------------------
// A tiny llama written with the writer: an unusable type is an error only
// where the model uses the tensor.

static infer_status noise(void *user, int64_t row, float *out) {
    int64_t n = (int64_t)(intptr_t)user;
    for (int64_t i = 0; i < n; i++) out[i] = (float)(((row * 131 + i * 71) % 97) - 48) / 480.0f;
    return INFER_OK;
}

static infer_status ones(void *user, int64_t row, float *out) {
    int64_t n = (int64_t)(intptr_t)user;
    for (int64_t i = 0; i < n; i++) out[i] = 1.0f;
    return INFER_OK;
}

static void tiny_llama(const char *path, int embd_type, int extra_type) {
    enum { E = 8, H = 2, F = 16, V = 16 };
    static unsigned char junk[66 * 64];
    gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u32(w, "llama.context_length", 64);
    gguf_set_u32(w, "llama.embedding_length", E);
    gguf_set_u32(w, "llama.block_count", 1);
    gguf_set_u32(w, "llama.feed_forward_length", F);
    gguf_set_u32(w, "llama.attention.head_count", H);
    gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    int64_t emb[2] = {E, V}, sq[2] = {E, E}, up[2] = {E, F}, dn[2] = {F, E}, vec[1] = {E};
    if (embd_type == DT_F32) gguf_add_tensor(w, "token_embd.weight", DT_F32, 2, emb, noise, (void *)(intptr_t)E);
    else gguf_add_tensor_raw(w, "token_embd.weight", embd_type, 2, emb, junk, 66 * 4);
    gguf_add_tensor(w, "output_norm.weight", DT_F32, 1, vec, ones, (void *)(intptr_t)E);
    gguf_add_tensor(w, "blk.0.attn_norm.weight", DT_F32, 1, vec, ones, (void *)(intptr_t)E);
    gguf_add_tensor(w, "blk.0.ffn_norm.weight", DT_F32, 1, vec, ones, (void *)(intptr_t)E);
    const char *sqn[] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight"};
    for (int i = 0; i < 4; i++) gguf_add_tensor(w, sqn[i], DT_F16, 2, sq, noise, (void *)(intptr_t)E);
    gguf_add_tensor(w, "blk.0.ffn_gate.weight", DT_BF16, 2, up, noise, (void *)(intptr_t)E);
    gguf_add_tensor(w, "blk.0.ffn_up.weight", DT_F32, 2, up, noise, (void *)(intptr_t)E);
    gguf_add_tensor(w, "blk.0.ffn_down.weight", DT_F32, 2, dn, noise, (void *)(intptr_t)F);
    int64_t xne[2] = {256, 4};
    if (extra_type >= 0) gguf_add_tensor_raw(w, "blk.0.extra.weight", extra_type, 2, xne, junk, 66 * 4);
    CHECK(gguf_write_file(w, path) == INFER_OK, "%s", infer_last_error());
    gguf_writer_free(w);
}

static void test_model_types(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    const int iq2_xxs = 16; // a ggml type our dtype table does not compute with
    infer_model *m = NULL;
    tiny_llama(path, DT_F32, dtype_get(iq2_xxs) ? -1 : iq2_xxs);
    CHECK(infer_model_load(path, &m) == INFER_OK, "tiny llama with an unused iq2_xxs tensor: %s", infer_last_error());
    if (m) {
        infer_ctx *c;
        float logits[16];
        int32_t ids[3] = {1, 2, 3};
        CHECK(infer_ctx_new(m, 8, &c) == INFER_OK, "%s", infer_last_error());
        CHECK(infer_eval(c, ids, 3, logits, 1) == INFER_OK, "%s", infer_last_error());
        int finite = 1;
        for (int i = 0; i < 16; i++) finite &= logits[i] == logits[i];
        CHECK(finite, "tiny llama logits are NaN");
        infer_ctx_free(c);
        infer_model_free(m);
    }
    if (!dtype_get(iq2_xxs)) {
        tiny_llama(path, iq2_xxs, -1);
        CHECK(infer_model_load(path, &m) != INFER_OK, "embeddings of an unsupported type must not load");
        CHECK(strstr(infer_last_error(), "token_embd.weight") && strstr(infer_last_error(), "unsupported type iq2_xxs"),
              "message: %s", infer_last_error());
    }
    // A corrupt file through the public loader names the file.
    FILE *f = fopen(path, "r+b");
    if (f) { fseek(f, 8, SEEK_SET); fputc(0xff, f); fputc(0xff, f); fclose(f); }
    CHECK(infer_model_load(path, &m) != INFER_OK && strstr(infer_last_error(), path), "corrupt: %s", infer_last_error());
}

int main(void) {
    char dir[] = "/tmp/infer_gguf_bad_XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_corrupt();
    test_getters(dir);
    test_model_types(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
    return check_summary("gguf_bad");
}
