// infer extract: a loaded model -> a vindex directory (vindex.h).
//
// Per layer, the FFN matrices are decoded to floats in the [F, H] shape a
// feature wants: gate and up rows as stored ([out, in]), the down vectors as
// the columns of ffn_down ([H, F]). They are re-encoded row by row on the
// thread pool and streamed to the files, which are hashed as they are
// written. Then the embedding (copied as stored), the lm_head (re-encoded),
// down_meta (down_meta.c), weights.gguf and, last, index.json.
#include "vindex/extract_impl.h"
#include "tensor/dtype.h"
#include "models/quant_mix.h"
#include "base/pool.h"
#include "base/sha256.h"
#include "base/error.h"
#include "base/tmpfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void vindex_extract_defaults(vindex_extract_opts *o) {
    memset(o, 0, sizeof *o);
    o->gate_type = DT_F16;
    o->ffn_type = DT_Q8_0;
    o->lm_head_type = DT_Q4_K;
    o->down_top = 10;
    o->threads = 1;
}

// ---------------------------------------------------------------------------
// An output file, hashed as it is written.

typedef struct {
    FILE *f;
    char path[4096];
    sha256_ctx h;
    uint64_t off;
} sink;

static infer_status sink_open(sink *s, const char *dir, int file) {
    snprintf(s->path, sizeof s->path, "%s/%s", dir, vindex_file_names[file]);
    sha256_init(&s->h);
    s->off = 0;
    s->f = fopen(s->path, "wb");
    return s->f ? INFER_OK : fail(INFER_ERR_IO, "%s: cannot create: %s", s->path, strerror(errno));
}

static infer_status sink_write(sink *s, const void *p, size_t n) {
    if (fwrite(p, 1, n, s->f) != n) return fail(INFER_ERR_IO, "%s: write failed: %s", s->path, strerror(errno));
    sha256_update(&s->h, p, n);
    s->off += n;
    return INFER_OK;
}

// Zeros up to the next multiple of VINDEX_ALIGN: every part starts aligned.
static infer_status sink_align(sink *s) {
    static const unsigned char zeros[VINDEX_ALIGN];
    size_t pad = (VINDEX_ALIGN - s->off % VINDEX_ALIGN) % VINDEX_ALIGN;
    return pad ? sink_write(s, zeros, pad) : INFER_OK;
}

static infer_status sink_close(sink *s, uint64_t *bytes, char hex[65]) {
    int ok = fclose(s->f) == 0;
    s->f = NULL;
    if (!ok) return fail(INFER_ERR_IO, "%s: write failed: %s", s->path, strerror(errno));
    unsigned char d[32];
    sha256_final(&s->h, d);
    sha256_hex(d, hex);
    *bytes = s->off;
    return INFER_OK;
}

// ---------------------------------------------------------------------------
// Float rows of the source

// Row r (n_in values) of w seen as [n_out, n_in]: a stored row, or for a
// transposed weight (stored [n_in, n_out], GPT-2's Conv1D; float types only,
// checked in check_model) a stored column.
static void weight_row(const weight *w, int64_t r, int64_t n_in, float *out) {
    const tensor *t = w->w;
    const dtype_traits *tr = dtype_get(t->type);
    size_t rs = dtype_row_size(t->type, t->ne[0]);
    if (!w->trans) {
        tr->to_float((const char *)t->data + rs * (size_t)r, out, n_in);
        return;
    }
    for (int64_t i = 0; i < n_in; i++) tr->to_float((const char *)t->data + rs * (size_t)i + tr->size * (size_t)r, out + i, 1);
}

// One layer's FFN as floats, each [F, H]: G gate rows, U up rows, D down
// vectors. A plain MLP has no gate: G is NULL there.
typedef struct {
    float *G, *U, *D, *tmp; // tmp: [H, F], ffn_down as stored
    int64_t F, H;
    int gated;
} layer_floats;

static void decode_layer(const infer_model *m, int il, layer_floats *lf) {
    const layer_weights *l = &m->layers[il];
    int64_t F = lf->F, H = lf->H;
    for (int64_t f = 0; f < F; f++) {
        if (l->ffn_gate_up.w) {
            // Phi-3's fused rows: [gate; up] (the forward pass splits them the same way)
            weight_row(&l->ffn_gate_up, f, H, lf->G + f * H);
            weight_row(&l->ffn_gate_up, F + f, H, lf->U + f * H);
        } else {
            if (lf->gated) weight_row(&l->ffn_gate, f, H, lf->G + f * H);
            weight_row(&l->ffn_up, f, H, lf->U + f * H);
        }
    }
    // down: [H, F] as a product y = W x; feature f writes column f
    for (int64_t i = 0; i < H; i++) weight_row(&l->ffn_down, i, F, lf->tmp + i * F);
    for (int64_t i = 0; i < H; i++)
        for (int64_t f = 0; f < F; f++) lf->D[f * H + i] = lf->tmp[i * F + f];
}

// ---------------------------------------------------------------------------
// Encoding rows on the thread pool

typedef void (*row_fn)(const void *src, int64_t r, float *out);

typedef struct {
    row_fn row;
    const void *src;
    int type;
    int64_t n, r0, rows;  // rows r0 .. r0+rows of n elements
    unsigned char *dst;   // rows x row size
    float *scratch;       // n floats per thread
} enc_job;

static void enc_task(void *arg, int ith, int nth) {
    const enc_job *a = arg;
    const dtype_traits *tr = dtype_get(a->type);
    size_t rs = dtype_row_size(a->type, a->n);
    float *x = a->scratch + (size_t)ith * (size_t)a->n;
    for (int64_t r = a->rows * ith / nth; r < a->rows * (ith + 1) / nth; r++) {
        a->row(a->src, a->r0 + r, x);
        tr->from_float(x, a->dst + rs * (size_t)r, a->n);
    }
}

static void encode_rows(pool *p, row_fn row, const void *src, int type, int64_t n, int64_t r0, int64_t rows,
                        unsigned char *dst, float *scratch) {
    enc_job job = {row, src, type, n, r0, rows, dst, scratch};
    pool_run(p, enc_task, &job);
}

// ffn.bin rows: 3f gate (up when not gated), 3f+1 up (zeros when not gated), 3f+2 down
static void ffn_row(const void *src, int64_t r, float *out) {
    const layer_floats *lf = src;
    int64_t f = r / 3, k = r % 3, H = lf->H;
    const float *p = k == 2 ? lf->D : k == 0 ? (lf->gated ? lf->G : lf->U) : lf->gated ? lf->U : NULL;
    if (p) memcpy(out, p + f * H, sizeof(float) * (size_t)H);
    else memset(out, 0, sizeof(float) * (size_t)H);
}

static void gate_row(const void *src, int64_t r, float *out) {
    const layer_floats *lf = src;
    memcpy(out, (lf->gated ? lf->G : lf->U) + r * lf->H, sizeof(float) * (size_t)lf->H);
}

typedef struct {
    const weight *w;
    int64_t H;
} head_src;

static void head_row(const void *src, int64_t r, float *out) {
    const head_src *h = src;
    weight_row(h->w, r, h->H, out);
}

// ---------------------------------------------------------------------------

typedef struct {
    const infer_model *m;
    const char *dir;
    const vindex_extract_opts *o;
    int L, F, H, V, K;
    int types[4];            // gate, ffn, lm_head, embeddings as written
    sink s[VF_COUNT];
    vindex_layout lay;
    int *n_feat;             // (L)
    vrange *gate, *ffn, *meta; // (L) each: where the layer's parts went
    float *scratch;          // H floats per thread
    cpu_exec ex;             // its own threads and kernel scratch
    int64_t meta_done;       // features of down_meta done before this layer
    double seconds_meta;
} extractor;

static void progress(const extractor *x, const char *stage, int64_t done, int64_t total) {
    if (x->o->progress) x->o->progress(x->o->user, stage, done, total);
}

// What the vindex can hold: dense FFNs whose rows decode.
static infer_status check_model(const infer_model *m) {
    const infer_config *c = &m->cfg;
    if (c->n_expert)
        return fail(INFER_ERR_UNSUPPORTED, "%s: a mixture of experts (%d experts); a vindex holds dense FFNs only for now",
                    m->path, c->n_expert);
    if (c->fam->ffn != FFN_GATED && c->fam->ffn != FFN_PLAIN)
        return fail(INFER_ERR_UNSUPPORTED, "%s: FFN kind of %s is not supported by the vindex", m->path, c->model_type);
    const weight *ws[5] = {&m->output, NULL, NULL, NULL, NULL};
    for (int il = 0; il < c->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        ws[1] = &l->ffn_gate, ws[2] = &l->ffn_up, ws[3] = &l->ffn_gate_up, ws[4] = &l->ffn_down;
        for (int k = 0; k < 5; k++) {
            const tensor *t = ws[k]->w;
            if (!t) continue;
            const dtype_traits *tr = dtype_get(t->type);
            if (!tr) return fail(INFER_ERR_UNSUPPORTED, "tensor %s: type %s cannot be decoded", t->name, t->type_name);
            if (ws[k]->trans && tr->blck != 1)
                return fail(INFER_ERR_UNSUPPORTED, "tensor %s: a transposed %s matrix cannot be read by columns", t->name, tr->name);
        }
    }
    if (!dtype_get(m->tok_embd->type)) return fail(INFER_ERR_UNSUPPORTED, "tensor %s: unknown type", m->tok_embd->name);
    return INFER_OK;
}

// The requested type, or llama.cpp's fallback when its blocks do not divide H.
static int fit_type(int want, int H) {
    const dtype_traits *tr = dtype_get(want);
    if (tr && tr->from_float && H % tr->blck == 0) return want;
    return quant_fit(want, H);
}

static infer_status write_layers(extractor *x) {
    const infer_model *m = x->m;
    int64_t F = x->F, H = x->H;
    size_t rs_gate = dtype_row_size(x->types[0], H), rs_ffn = dtype_row_size(x->types[1], H);
    layer_floats lf = {malloc(sizeof(float) * F * H), malloc(sizeof(float) * F * H), malloc(sizeof(float) * F * H),
                       malloc(sizeof(float) * F * H), F, H, x->lay.gated};
    unsigned char *enc = malloc(rs_ffn * 3 * (size_t)F > rs_gate * (size_t)F ? rs_ffn * 3 * (size_t)F : rs_gate * (size_t)F);
    infer_status st = lf.G && lf.U && lf.D && lf.tmp && enc ? INFER_OK : fail(INFER_ERR_NOMEM, "out of memory");
    for (int il = 0; il < x->L && !st; il++) {
        x->n_feat[il] = (int)F;
        decode_layer(m, il, &lf);
        encode_rows(x->ex.pool, gate_row, &lf, x->types[0], H, 0, F, enc, x->scratch);
        st = sink_align(&x->s[VF_GATE]);
        x->gate[il] = (vrange){x->s[VF_GATE].off, rs_gate * (size_t)F};
        if (!st) st = sink_write(&x->s[VF_GATE], enc, x->gate[il].bytes);
        encode_rows(x->ex.pool, ffn_row, &lf, x->types[1], H, 0, 3 * F, enc, x->scratch);
        if (!st) st = sink_align(&x->s[VF_FFN]);
        x->ffn[il] = (vrange){x->s[VF_FFN].off, rs_ffn * 3 * (size_t)F};
        if (!st) st = sink_write(&x->s[VF_FFN], enc, x->ffn[il].bytes);
        progress(x, "ffn", il + 1, x->L);
    }
    free(lf.G);
    free(lf.U);
    free(lf.D);
    free(lf.tmp);
    free(enc);
    return st;
}

static infer_status write_embeddings(extractor *x) {
    const tensor *t = x->m->tok_embd;
    x->lay.embd = (vrange){0, dtype_row_size(t->type, x->H) * (size_t)x->V};
    infer_status st = sink_write(&x->s[VF_EMBD], t->data, x->lay.embd.bytes);
    progress(x, "embeddings", 1, 1);
    return st;
}

// lm_head.bin: the output weight re-encoded, in blocks of rows.
static infer_status write_lm_head(extractor *x) {
    enum { RB = 4096 };
    size_t rs = dtype_row_size(x->types[2], x->H);
    unsigned char *enc = malloc(rs * RB);
    if (!enc) return fail(INFER_ERR_NOMEM, "out of memory");
    head_src hs = {&x->m->output, x->H};
    x->lay.lm = (vrange){0, rs * (size_t)x->V};
    infer_status st = INFER_OK;
    for (int64_t r0 = 0; r0 < x->V && !st; r0 += RB) {
        int64_t n = x->V - r0 < RB ? x->V - r0 : RB;
        encode_rows(x->ex.pool, head_row, &hs, x->types[2], x->H, r0, n, enc, x->scratch);
        st = sink_write(&x->s[VF_LM], enc, rs * (size_t)n);
        progress(x, "lm_head", r0 + n, x->V);
    }
    free(enc);
    return st;
}

static void meta_progress(void *u, int64_t done) {
    extractor *x = u;
    progress(x, "down_meta", x->meta_done + done, (int64_t)x->L * x->F);
}

// down_meta.bin: per layer, the down vectors decoded again (exact, from the
// source) against the output weight as stored (exact for float heads; for
// quantized ones the engine's q8 activations, as its own logits are made).
static infer_status write_down_meta(extractor *x) {
    int64_t F = x->F, H = x->H, K = x->K;
    // the head's packed rows where this CPU has packed kernels: made now if the model has not run on the CPU yet
    // (the packs are made at a first CPU pass; without them down_meta takes the unpacked products, 5x slower)
    infer_status pst = x->K ? model_ensure_packed((infer_model *)x->m) : INFER_OK;
    if (pst) return pst;
    const weight *out = &x->m->output;
    tensor head = *out->w;
    weight hw = *out; // (its packed rows too)
    float *head_f32 = NULL;
    if (out->trans) {
        // rows of a transposed head are columns: one f32 copy in [V, H] order
        head_f32 = malloc(sizeof(float) * (size_t)x->V * (size_t)H);
        if (!head_f32) return fail(INFER_ERR_NOMEM, "out of memory");
        for (int64_t r = 0; r < x->V; r++) weight_row(out, r, H, head_f32 + r * H);
        head.type = DT_F32;
        head.ne[0] = H;
        head.ne[1] = x->V;
        head.data = head_f32;
        head.nbytes = sizeof(float) * (size_t)x->V * (size_t)H;
        hw = (weight){.w = &head};
    }
    layer_floats lf = {malloc(sizeof(float) * F * H), malloc(sizeof(float) * F * H), malloc(sizeof(float) * F * H),
                       malloc(sizeof(float) * F * H), F, H, x->lay.gated};
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(F * (K ? K : 1)));
    float *sc = malloc(sizeof(float) * (size_t)(F * (K ? K : 1)));
    unsigned char *buf = malloc((size_t)(8 * F * (K ? K : 1)));
    infer_status st = lf.G && lf.U && lf.D && lf.tmp && ids && sc && buf ? INFER_OK : fail(INFER_ERR_NOMEM, "out of memory");
    x->meta_done = 0;
    for (int il = 0; il < x->L && !st; il++) {
        vrange *r = &x->meta[il];
        st = sink_align(&x->s[VF_META]);
        *r = (vrange){x->s[VF_META].off, (uint64_t)(8 * F * K)};
        if (!K || st) continue;
        decode_layer(x->m, il, &lf);
        if ((st = down_meta_topk(&x->ex, &hw, lf.D, (int)F, (int)H, (int)K, ids, sc, meta_progress, x))) continue;
        x->meta_done += F;
        for (int64_t f = 0; f < F; f++) {
            memcpy(buf + 8 * K * f, ids + K * f, 4 * (size_t)K);
            memcpy(buf + 8 * K * f + 4 * K, sc + K * f, 4 * (size_t)K);
        }
        st = sink_write(&x->s[VF_META], buf, r->bytes);
    }
    free(lf.G);
    free(lf.U);
    free(lf.D);
    free(lf.tmp);
    free(ids);
    free(sc);
    free(buf);
    free(head_f32);
    return st;
}

// A vindex is written whole or not at all: into a staging directory beside
// the destination ("<dir>.tmp.<pid>"), which then takes the destination's
// place in one step (an existing vindex there is exchanged with it, then
// removed, its index.json first). Until then the destination keeps what it
// had; a stopped process leaves at most the staging directory, which is no
// vindex (index.json comes last) -- unless SIGKILL came in the instant
// between the last write and the exchange, or the exchange and the old one's
// first unlink: then a whole copy of the new or the old vindex. The
// destination must be new, an empty directory or a vindex.
static int dir_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n == 0;
}

static infer_status check_dest(const infer_model *m, const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) != 0) return errno == ENOENT ? INFER_OK : fail(INFER_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return fail(INFER_ERR_ARG, "%s exists and is not a directory", dir);
    if (same_file(dir, m->path))
        return fail(INFER_ERR_ARG, "%s: this is the directory the model is read from; write the vindex to another", dir);
    if (!vindex_is_dir(dir) && !dir_empty(dir))
        return fail(INFER_ERR_ARG, "%s exists and is neither empty nor a vindex: give a new directory, an empty one or a "
                    "vindex to replace", dir);
    return INFER_OK;
}

// A replaced vindex, no vindex from its first step on (its index.json
// first), then removed.
static int drop_replaced(const char *dir) {
    char path[4300];
    snprintf(path, sizeof path, "%s/index.json", dir);
    unlink(path);
    return tmp_remove_dir(dir);
}

static infer_status publish(const char *stage, const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) == 0 && dir_empty(dir)) rmdir(dir);
    if (rename(stage, dir) == 0) return INFER_OK;
    if (errno != ENOTEMPTY && errno != EEXIST) return fail(INFER_ERR_IO, "%s: cannot rename %s to it: %s", dir, stage, strerror(errno));
    // a vindex there: exchanged in one step, the old one then at the staging name
    if (syscall(SYS_renameat2, AT_FDCWD, stage, AT_FDCWD, dir, 2 /* RENAME_EXCHANGE */) == 0) {
        if (drop_replaced(stage)) fprintf(stderr, "infer: the replaced vindex is left in %s\n", stage);
        return INFER_OK;
    }
    // (file systems without the exchange: the old one moved aside first)
    char old[4200];
    snprintf(old, sizeof old, "%s.old.%ld", dir, (long)getpid());
    if (rename(dir, old) != 0) return fail(INFER_ERR_IO, "%s: cannot move it aside: %s", dir, strerror(errno));
    if (rename(stage, dir) != 0) {
        int e = errno;
        rename(old, dir);
        return fail(INFER_ERR_IO, "%s: cannot rename %s to it: %s", dir, stage, strerror(e));
    }
    if (drop_replaced(old)) fprintf(stderr, "infer: the replaced vindex is left in %s\n", old);
    return INFER_OK;
}

// A Hugging Face source's tokenizer files, copied beside weights.gguf (whose
// metadata then holds no vocabulary): the vindex stays a whole model.
static infer_status copy_tokenizer(extractor *x) {
    struct stat sb;
    if (x->m->gguf || stat(x->m->path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return INFER_OK;
    for (int i = 0; i < VF_OPT_TOKENIZERS; i++) {
        char src[4096], dst[4096];
        snprintf(src, sizeof src, "%s/%s", x->m->path, vindex_opt_names[i]);
        snprintf(dst, sizeof dst, "%s/%s", x->dir, vindex_opt_names[i]);
        FILE *in = fopen(src, "rb");
        if (!in) continue;
        FILE *out = fopen(dst, "wb");
        if (!out) { fclose(in); return fail(INFER_ERR_IO, "%s: cannot create: %s", dst, strerror(errno)); }
        char buf[1 << 16];
        size_t n, total = 0;
        int ok = 1;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0) ok &= fwrite(buf, 1, n, out) == n, total += n;
        ok &= !ferror(in);
        fclose(in);
        ok &= fclose(out) == 0;
        if (!ok) return fail(INFER_ERR_IO, "%s: copy from %s failed", dst, src);
        infer_status st = vindex_hash_file(dst, x->lay.opt_sha256[i]);
        if (st) return st;
        x->lay.opt_present[i] = 1;
        x->lay.opt_bytes[i] = total;
    }
    return INFER_OK;
}

static infer_status run(extractor *x) {
    char path[4096];
    snprintf(path, sizeof path, "%s/index.json", x->dir);
    if (unlink(path) != 0 && errno != ENOENT) return fail(INFER_ERR_IO, "%s: cannot replace: %s", path, strerror(errno));
    infer_status st = INFER_OK;
    for (int i = 0; i < VF_WEIGHTS && !st; i++) st = sink_open(&x->s[i], x->dir, i);
    if (!st) st = write_layers(x);
    if (!st) st = write_embeddings(x);
    if (!st) st = write_lm_head(x);
    double t0 = now();
    if (!st) st = write_down_meta(x);
    x->seconds_meta = now() - t0;
    for (int i = 0; i < VF_WEIGHTS && !st; i++) st = sink_close(&x->s[i], &x->lay.file_bytes[i], x->lay.sha256[i]);
    if (st) return st;
    progress(x, "weights.gguf", 0, 1);
    snprintf(path, sizeof path, "%s/%s", x->dir, vindex_file_names[VF_WEIGHTS]);
    if ((st = vindex_write_weights(x->m, path))) return st;
    if ((st = vindex_hash_file(path, x->lay.sha256[VF_WEIGHTS]))) return st;
    struct stat sb;
    if (stat(path, &sb) != 0) return fail(INFER_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    x->lay.file_bytes[VF_WEIGHTS] = (uint64_t)sb.st_size;
    progress(x, "weights.gguf", 1, 1);
    if ((st = copy_tokenizer(x))) return st;
    if (x->o->lm_clusters) { // the lm_head index: the model's head rows clustered
        int C = x->o->lm_clusters < 0 ? lm_index_auto_clusters((int)x->V) : x->o->lm_clusters;
        progress(x, "lm_index", 0, 1);
        snprintf(path, sizeof path, "%s/%s", x->dir, vindex_opt_names[VF_OPT_LM_INDEX]);
        head_src hs = {&x->m->output, x->H};
        uint64_t bytes = 0;
        const weight *out = &x->m->output;
        if ((st = lm_index_build(&x->ex, head_row, &hs, out->trans ? NULL : out->w, (int)x->V, (int)x->H, C, path, &bytes))) return st;
        if ((st = vindex_hash_file(path, x->lay.opt_sha256[VF_OPT_LM_INDEX]))) return st;
        x->lay.opt_present[VF_OPT_LM_INDEX] = 1, x->lay.opt_bytes[VF_OPT_LM_INDEX] = bytes;
        progress(x, "lm_index", 1, 1);
    }
    snprintf(path, sizeof path, "%s/index.json", x->dir);
    if ((st = vindex_write_index(x->m, path, &x->lay))) return st;
    progress(x, "index.json", 1, 1);
    return INFER_OK;
}

infer_status vindex_extract(const infer_model *m, const char *dir, const vindex_extract_opts *o, vindex_extract_info *info) {
    double t0 = now();
    infer_status st = check_model(m);
    if (st) return st;
    const infer_config *c = &m->cfg;
    if (o->gate_type != DT_F32 && o->gate_type != DT_F16 && o->gate_type != DT_Q4_0)
        return fail(INFER_ERR_ARG, "extract: gate vectors are f32, f16 or q4_0");
    const int want[3] = {o->gate_type, o->ffn_type, o->lm_head_type};
    for (int k = 0; k < 3; k++)
        if (!dtype_get(want[k]) || !dtype_get(want[k])->from_float)
            return fail(INFER_ERR_ARG, "extract: no encoder for type %d", want[k]);
    if (o->down_top < 0 || o->down_top > VINDEX_MAX_DOWN_TOP || o->down_top > c->n_vocab)
        return fail(INFER_ERR_ARG, "extract: --down-top %d is outside [0, %d]", o->down_top,
                    c->n_vocab < VINDEX_MAX_DOWN_TOP ? c->n_vocab : VINDEX_MAX_DOWN_TOP);
    char dir_buf[4096]; // (without trailing slashes: the staging directory goes beside it, not inside)
    size_t dl = strlen(dir);
    if (dl >= sizeof dir_buf) return fail(INFER_ERR_ARG, "%s: the path is too long", dir);
    memcpy(dir_buf, dir, dl + 1);
    while (dl > 1 && dir_buf[dl - 1] == '/') dir_buf[--dl] = 0;
    dir = dir_buf;
    if ((st = check_dest(m, dir))) return st;
    char stage[4200];
    if (tmp_name(stage, sizeof stage, dir)) return fail(INFER_ERR_ARG, "%s: the path is too long", dir);
    tmp_remove_dir(stage); // (a stale one of this pid)
    if (mkdir(stage, 0777) != 0) return fail(INFER_ERR_IO, "%s: cannot create the directory: %s", stage, strerror(errno));
    int track = tmp_track(stage, 1);

    extractor x = {.m = m, .dir = stage, .o = o, .L = c->n_layer, .F = c->n_ff, .H = c->n_embd, .V = c->n_vocab, .K = o->down_top};
    for (int k = 0; k < 3; k++) x.types[k] = fit_type(want[k], x.H);
    x.types[3] = m->tok_embd->type;
    x.n_feat = calloc((size_t)x.L, sizeof *x.n_feat);
    x.gate = calloc((size_t)x.L, sizeof *x.gate);
    x.ffn = calloc((size_t)x.L, sizeof *x.ffn);
    x.meta = calloc((size_t)x.L, sizeof *x.meta);
    x.ex.pool = pool_new(o->threads > 1 ? o->threads : 1);
    x.scratch = malloc(sizeof(float) * (size_t)x.H * (size_t)pool_size(x.ex.pool));
    if (!x.n_feat || !x.gate || !x.ffn || !x.meta || !x.scratch) st = fail(INFER_ERR_NOMEM, "out of memory");
    vindex_layout *lay = &x.lay;
    memcpy(lay->types, x.types, sizeof lay->types);
    memcpy(lay->requested, want, sizeof lay->requested);
    lay->gated = c->fam->ffn == FFN_GATED;
    lay->down_top = x.K;
    lay->n_layer = x.L;
    lay->n_feat = x.n_feat;
    lay->gate = x.gate;
    lay->ffn = x.ffn;
    lay->meta = x.meta;
    if (!st) st = run(&x);
    if (!st) st = publish(stage, dir); // (at once: a whole staging directory stands as short a time as can be)
    for (int i = 0; i < VF_WEIGHTS; i++)
        if (x.s[i].f) fclose(x.s[i].f);
    free(x.n_feat);
    free(x.gate);
    free(x.ffn);
    free(x.meta);
    free(x.scratch);
    cpu_exec_release(&x.ex);
    pool_free(x.ex.pool);
    if (st) tmp_remove_dir(stage);
    tmp_untrack(track);
    if (st) return fail_wrap(st, "extract %s", dir);
    if (info) {
        info->gate_type = x.types[0];
        info->ffn_type = x.types[1];
        info->lm_head_type = x.types[2];
        info->embd_type = x.types[3];
        info->seconds = now() - t0;
        info->seconds_down_meta = x.seconds_meta;
        info->bytes = 0;
        for (int i = 0; i < VF_COUNT; i++) info->bytes += x.lay.file_bytes[i];
    }
    return INFER_OK;
}
