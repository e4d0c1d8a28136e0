// Weights repacked for the CPU's VNNI kernels, and those kernels.
//
// A product with many tokens is limited by the arithmetic after the integer
// sums: with rows stored one after another, every (block, token, row) ends in
// eight int32 lanes that need a convert and a multiply-add of their own. Here
// 8 rows are interleaved in 4-byte granules, so one dpbusd multiplies 4
// values of each of the 8 rows by the same 4 activation values (broadcast):
// lane r holds row r's sum, eight dpbusd finish a block for 8 rows, and one
// convert and one multiply-add scale all 8 (1 per 256 products, not per 32).
//
// A packed matrix is groups of 8 rows (the last padded with zero rows), each
// group its nb = cols / 32 blocks in order; a block of 8 rows is one record:
//   q8_0: the 8 f16 scales, then granule vectors V_0..V_7 (32 bytes each:
//         V_g holds elements 4g..4g+3 of rows 0..7), values stored as w + 128;
//   q5_0: the 8 f16 scales, 8 32-bit masks (bit j of mask g: bit 4 of byte
//         j of V_g), then 4 nibble vectors (byte j of vector h: V_2h[j] in
//         the low nibble, V_2h+1[j] in the high), values w + 16;
//   q4_0: the 8 f16 scales, then the 4 nibble vectors, values w + 8.
//   q4_K (a record per 256 columns): the 8 f16 d, the 8 f16 dmin, the 8
//         sub-blocks' scales (8 bytes each, one per row), the mins in pairs
//         (pair p: per row m_2p, m_2p+1), then per 32-column sub-block its 4
//         nibble vectors as q5_0's (values 0..15);
//   q6_K: the 8 f16 d, the 16 sub-blocks' signed scales in pairs (pair p: per
//         row sc_2p, sc_2p+1), then per 16-column sub-block its 4 granule
//         vectors: two nibble vectors (V_0|V_1, V_2|V_3) and one vector of
//         their 2-bit high parts (V_0 in bits 0-1 .. V_3 in bits 6-7).
//   bf16 (AMX CPUs, a GGUF file's bf16 weights): per 32 columns the B tile
//         of TDPBF16PS, 16 rows of 32 bytes: row k holds for each of the 8
//         rows its columns 2k and 2k+1 (a 4-byte granule), 512 bytes.
// The records hold the bytes of the 8 rows' blocks (q4_K's unpacked scales
// and mins take 32 more), so packing costs little memory beyond the copy (the
// mapped originals are left untouched). The activations are quantized to
// q8_0 in the layout of XP_* (vecdot.h), or for the k-quants to q8_K in that
// of XPK_*; pack_act_row_size gives the bytes of a row.
#ifndef INFER_TENSOR_PACK_H
#define INFER_TENSOR_PACK_H

#include <stddef.h>
#include <stdint.h>

enum pack_kind { PACK_NONE, PACK_Q8_0, PACK_Q5_0, PACK_Q4_0, PACK_Q4_K, PACK_Q6_K, PACK_BF16 };

// The packing this CPU's kernels take for weights of a dtype with `cols`
// columns: PACK_NONE where there is none (no VNNI, another type, or the
// kernels switched off by vecdot_force_scalar or INFER_NO_PACK=1).
int pack_kind_for(int dtype, int64_t cols);
// bytes of one block record (8 rows), of one group of 8 rows, of a matrix
size_t pack_record_bytes(int kind);
size_t pack_group_bytes(int kind, int64_t cols);
size_t pack_bytes(int kind, int64_t rows, int64_t cols);
// bytes of one token's activations for the kernels of a kind
size_t pack_act_row_size(int kind, int n);
// Packs `rows` rows of `cols` (rows of the dtype's row size, one after
// another) into dst (pack_bytes of it).
void pack_rows(int kind, const void *src, int64_t rows, int64_t cols, void *dst);

// out[t * ldo + r] = row r of the group . token t (x + t * xstride bytes),
// for T tokens of n columns. Every (row, token) sees the same operations
// whatever T, so a batch equals one-token calls bit for bit.
typedef void (*pack_tile_fn)(const void *group, const void *x, size_t xstride, int T, int n, float *out, size_t ldo);
// The scalar oracle of a kind: the same sums in plain C (test_kernels).
void pack_tile_ref(int kind, const void *group, const void *x, size_t xstride, int T, int n, float *out);

// The kernel of a kind: its activation quantizer (ACT_PACKED layout) and tile.
// tile2: two neighbouring groups at once (group, and group + gbytes: 16 rows,
// out[t * ldo + 0..15]), each (row, token) the same floats as tile's; NULL
// where a kernel has none.
typedef void (*pack_tile2_fn)(const void *group, size_t gbytes, const void *x, size_t xstride, int T, int n, float *out, size_t ldo);
typedef struct {
    void (*quant)(const float *x, void *y, int n);
    pack_tile_fn tile;
    int tokens; // tokens a call best takes a multiple of (0: any; AMX's q8_0: 16, its tile's rows)
    pack_tile2_fn tile2;
} pack_kernel;
const pack_kernel *pack_kernel_get(int kind);

// the VNNI kernels (vecdot_pack.c)
extern const pack_kernel pack_vnni_q8_0, pack_vnni_q5_0, pack_vnni_q4_0, pack_vnni_q4_K, pack_vnni_q6_K;
// the AMX kernel of bf16 weights (pack_amx.c): bf16 activations (plain rows,
// as act_quant_bf16_ref makes them), tokens 16 at a time through TDPBF16PS,
// the even 32-column blocks summed into one tile and the odd into another,
// then the two added; each token's sums are the same whatever T.
extern const pack_kernel pack_amx_bf16;
// the AMX-INT8 kernel of packed q8_0 weights (pack_amx.c): 16 or 8 tokens a
// pass through TDPBSUD, each (row, token) bit for bit the VNNI kernel's, which
// it hands the tokens short of 8; pack_kernel_get's q8_0 kernel on AMX-INT8
// CPUs (INFER_NO_AMX_INT8=1: the VNNI one)
extern const pack_kernel pack_amx_q8_0;
// the AMX-INT8 kernel of packed q4_K weights (pack_amx.c): each sub-block's
// nibbles unpacked to a B tile, its sums by TDPBSUD, the rest the VNNI
// kernel's, bit for bit; likewise pack_kernel_get's q4_K kernel on AMX-INT8
extern const pack_kernel pack_amx_q4_K;
// and of packed q6_K weights (16-column sub-blocks: A tiles of 16 values, B of 4 granules)
extern const pack_kernel pack_amx_q6_K;
// loads the tile configuration of panel_amx.c (panel.h) on this thread,
// unless loaded already (the kernels above share the thread's record of it)
void amx_configure_panel(void);
// the scalar quantizer of the k-quant kernels' activations (the oracle of theirs)
void pack_quant_k_ref(const float *x, void *y, int n);

#endif
