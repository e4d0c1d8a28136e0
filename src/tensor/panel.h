// Prompt products on AMX-INT8 in panels (issue 41): the weights of 32 rows
// decoded once into int8 tiles and used by every token of a pass.
//
// A row's values are requantized per 256 columns: int8 q = rint(v / s) with
// s = max|v| / 127 over those columns (one float a (row, 256)), decoded from
// the stored type (q4_K, q6_K and q8_0 straight from their blocks, the other
// types through their to_float). The tokens are quantized the same way (a
// float a (token, 256)). TDPBSSD sums a (row, token, 256 columns) exactly in
// int32; each sum then adds s_row * s_token * sum to the (row, token)'s float
// in the order of the columns. A token's outputs therefore depend on its own
// activations alone: the same bits whatever tokens run beside it, but not
// the VNNI kernels' bits (the weights lose about 8 bits' precision in their
// requantization; the reference backend stays the oracle, test_kernels).
//
// Layouts: a panel is, for rows 0-15 then 16-31, n/64 A tiles (16 rows x 64
// int8, row-major, 1 KB each), then its scales ps[half][n/256][16]. The
// tokens are blocks of 16, each n/64 B tiles (16 granules of 4 columns x 16
// tokens: byte 64 k + 4 t + e = token t's column 4 k + e), then their scales
// xd[block][n/256][16]. Tokens past the last are zeros.
#ifndef INFER_TENSOR_PANEL_H
#define INFER_TENSOR_PANEL_H

#include <stddef.h>
#include <stdint.h>

enum { PANEL_ROWS = 32, PANEL_TOK = 16 };

// 1 where panels are in use: an AMX-INT8 CPU (cpu_has_amx_int8) and
// INFER_AMX_PANEL not 0 in the environment (on by default; a context made
// deterministic keeps the kernels: cpu_exec.exact)
int panel_enabled(void);
// 1 where rows of this dtype with n columns decode into panels (n a multiple
// of 32 and of the type's block; past a multiple of 256 the last super-block
// is zero-padded, in the weights and the tokens)
int panel_type_ok(int dtype, int64_t n);
// bytes of one panel (tiles and scales) of n columns, of the tokens' blocks
size_t panel_bytes(int64_t n);
size_t panel_act_bytes(int T, int64_t n);
// Rows [0, rows) (rows <= 32; row r at w + r * row_bytes, of the dtype) into
// the panel p; rows past `rows` are zeros. Returns 0, or -1 for a dtype
// panel_type_ok refuses.
int panel_decode(int dtype, const void *w, size_t row_bytes, int rows, int64_t n, void *p);
// the int8 scale of a q4_K super-block's panel values: the largest value in size its sub-blocks' scales and
// mins can make, over 127 (not the largest the block holds: the decode looks values up in a table a sub-block)
float panel_q4_K_scale(const void *block);
// The blocks [b0, b1) of T tokens (token i at x + tok[i] * xstride floats,
// tok NULL: i) into the tokens' area xb (panel_act_bytes(T, n)).
void panel_act(const float *x, size_t xstride, const int *tok, int T, int64_t n, void *xb, int b0, int b1);
// y[tok[t] * ldy + r] = row r of panel p . token t (+ bias[r]) for the tokens
// of block blk (those below T) and rows r < rows.
void panel_run(const void *p, int64_t n, const void *xb, int T, int blk, const int *tok, float *y, size_t ldy, int rows,
               const float *bias);
// panel_run in parts: the super-blocks [k0, k1) of block blk's sums added
// to acc[row * 16 + token] (32 x 16 floats, 64-byte aligned; zeros at first),
// then panel_store writes them as panel_run does. Super-blocks taken in order
// over any parts give panel_run's bits.
void panel_run_k(const void *p, int64_t n, const void *xb, int T, int blk, int64_t k0, int64_t k1, float *acc);
void panel_store(const float *acc, int T, int blk, const int *tok, float *y, size_t ldy, int rows, const float *bias);
// panel_store streams whole aligned lines past the caches: a thread calls
// panel_fence before other threads may read what it stored.
void panel_fence(void);
// The same sums in plain C (test_kernels' oracle): each (row, token)'s int32
// sums per 256 columns from the tiles, then the floats in panel_run's order.
void panel_run_ref(const void *p, int64_t n, const void *xb, int T, int blk, const int *tok, float *y, size_t ldy, int rows,
                   const float *bias);

// bf16 weights (a GGUF file's: ggml's numerics, bf16 activations) are not
// requantized: panel_pack_bf16 lays 32 rows out as A tiles (16 rows x 32
// columns, 1 KB a K step; rows past `rows` zeros), the tokens are bf16 B
// tiles (16 column pairs x 16 tokens: element 32 k + 2 t + e = token t's
// column 2 k + e), blocks of 16 tokens, an even number of them (the last pair
// padded with zeros). TDPBF16PS sums a (row, token) over all the columns in
// f32; a token's outputs again depend on its own activations alone.
size_t panel_bf16_bytes(int64_t n);
void panel_pack_bf16(const void *w, size_t rb, int rows, int64_t n, void *p);
// The types of 32-column blocks (one scale a block: q4_0, q5_0, q8_0, and
// f16) take these bf16 panels too, decoded (panel_decode_bf16: to_float's
// values rounded to bf16): requantized to int8 per 256 columns, with the
// tokens likewise, their products lost ~3x the precision of the kernels'
// (q8_0 tokens per 32 columns) on Gemma 3 270M; as bf16 about none.
// panel_bf16_type: 1 for such a type (and bf16 itself).
int panel_bf16_type(int dtype);
void panel_decode_bf16(int dtype, const void *w, size_t rb, int rows, int64_t n, void *p);
size_t panel_act_bf16_bytes(int T, int64_t n);
void panel_act_bf16(const float *x, size_t xstride, const int *tok, int T, int64_t n, void *xb, int b0, int b1);
// y[tok[t] * ldy + r] (+ bias[r]) for the tokens of blocks 2 pair and 2 pair + 1 below T, rows r < rows
void panel_run_bf16(const void *p, int rows, int64_t n, const void *xb, int T, int pair, const int *tok, float *y, size_t ldy,
                    const float *bias);
// panel_run_bf16 in parts: the K steps (32 columns) [st0, st1) of token blocks 2 pair, 2 pair + 1 added to
// acc (4 C tiles, 1024 floats, 64-byte aligned; zeros at first), then panel_store_bf16 writes them.
void panel_run_bf16_k(const void *p, int64_t n, const void *xb, int pair, int64_t st0, int64_t st1, float *acc);
void panel_store_bf16(const float *acc, int rows, int T, int pair, const int *tok, float *y, size_t ldy, const float *bias);
void panel_run_bf16_ref(const void *p, int rows, int64_t n, const void *xb, int T, int pair, const int *tok, float *y, size_t ldy,
                        const float *bias);

#endif
