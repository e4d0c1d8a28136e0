// Random weights with real models' shapes, for benchmarks of sizes we have no
// weights for: a model whose values are made as the converter reads them (infer
// synth), or the bf16 checkpoint of the same values (config.json and
// safetensors in a directory, as Hugging Face transformers saves them: infer
// bench-components, infer synth --hf).
#include "synth.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const synth_shape g_shapes[] = {
    // Gemma 3's configs (sliding window every layer but each sixth; rope thetas the family's)
    {.arch = "gemma3", .name = "270m", .vocab = 262144, .hidden = 640, .ffn = 2048, .layers = 18, .heads = 4,
     .kv_heads = 1, .head_dim = 256, .window = 512, .max_pos = 32768},
    {.arch = "gemma3", .name = "1b", .vocab = 262144, .hidden = 1152, .ffn = 6912, .layers = 26, .heads = 4,
     .kv_heads = 1, .head_dim = 256, .window = 512, .max_pos = 32768},
    {.arch = "gemma3", .name = "4b", .vocab = 262144, .hidden = 2560, .ffn = 10240, .layers = 34, .heads = 8,
     .kv_heads = 4, .head_dim = 256, .window = 1024, .max_pos = 131072},
    {.arch = "gemma3", .name = "12b", .vocab = 262144, .hidden = 3840, .ffn = 15360, .layers = 48, .heads = 16,
     .kv_heads = 8, .head_dim = 256, .window = 1024, .max_pos = 131072},
    // (issue 16: larger than one GPU in bf16 with a long context)
    {.arch = "gemma3", .name = "27b", .vocab = 262144, .hidden = 5376, .ffn = 21504, .layers = 62, .heads = 32,
     .kv_heads = 16, .head_dim = 128, .window = 1024, .max_pos = 131072},
    // Llama 3's configs (Meta-Llama-3-8B, -70B)
    {.arch = "llama", .name = "8b", .vocab = 128256, .hidden = 4096, .ffn = 14336, .layers = 32, .heads = 32,
     .kv_heads = 8, .head_dim = 128, .max_pos = 8192, .rope_theta = 500000},
    {.arch = "llama", .name = "70b", .vocab = 128256, .hidden = 8192, .ffn = 28672, .layers = 80, .heads = 64,
     .kv_heads = 8, .head_dim = 128, .max_pos = 8192, .rope_theta = 500000},
};
#define N_SHAPES (sizeof g_shapes / sizeof g_shapes[0])

// ---------------------------------------------------------------------------
// The archs: config.json and the tensors of a layer

// A layer tensor's shape: [rows, cols] in H (hidden), HD (head dim), NH, NKV, FF.
enum { P_NORM, P_HEAD_NORM, P_Q, P_KV, P_O, P_UP, P_DOWN };
typedef struct { const char *name; int kind; } synth_part;

typedef struct {
    const char *name, *title;
    void (*config)(FILE *f, const synth_shape *sh, int L, int V);
    const synth_part *parts; // a layer's tensors, model.layers.N.<name>.weight
    int n_parts;
    int tied;          // no lm_head: the output matrix is the embedding
    int norm_plus_one; // norms scale by 1 + w (Gemma): stored near 0, not near 1
    int fan_in;        // matrices of spread 1/sqrt(cols), else HF's init for every matrix (std 0.02)
} synth_arch;

static void gemma3_config(FILE *f, const synth_shape *sh, int L, int V) {
    fprintf(f, "{\"model_type\": \"gemma3_text\", \"architectures\": [\"Gemma3ForCausalLM\"], \"hidden_size\": %d,"
               " \"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d,"
               " \"intermediate_size\": %d, \"vocab_size\": %d, \"rms_norm_eps\": 1e-6, \"query_pre_attn_scalar\": 256,"
               " \"sliding_window\": %d, \"max_position_embeddings\": %d, \"hidden_activation\": \"gelu_pytorch_tanh\","
               " \"tie_word_embeddings\": true, \"layer_types\": [",
            sh->hidden, L, sh->heads, sh->kv_heads, sh->head_dim, sh->ffn, V, sh->window, sh->max_pos);
    for (int i = 0; i < L; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", (i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
    fprintf(f, "], \"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0},"
               " \"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}}\n");
}

// LlamaForCausalLM's config.json (no bos/eos ids: 128000 and 128001 are past a --vocab of tests)
static void llama_config(FILE *f, const synth_shape *sh, int L, int V) {
    fprintf(f, "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": %d,"
               " \"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d,"
               " \"intermediate_size\": %d, \"vocab_size\": %d, \"rms_norm_eps\": 1e-5, \"rope_theta\": %.1f,"
               " \"max_position_embeddings\": %d, \"hidden_act\": \"silu\", \"attention_bias\": false,"
               " \"mlp_bias\": false, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}\n",
            sh->hidden, L, sh->heads, sh->kv_heads, sh->head_dim, sh->ffn, V, sh->rope_theta, sh->max_pos);
}

static const synth_part g_gemma3_parts[] = {
    {"input_layernorm", P_NORM}, {"post_attention_layernorm", P_NORM}, {"pre_feedforward_layernorm", P_NORM},
    {"post_feedforward_layernorm", P_NORM}, {"self_attn.q_norm", P_HEAD_NORM}, {"self_attn.k_norm", P_HEAD_NORM},
    {"self_attn.q_proj", P_Q}, {"self_attn.k_proj", P_KV}, {"self_attn.v_proj", P_KV}, {"self_attn.o_proj", P_O},
    {"mlp.gate_proj", P_UP}, {"mlp.up_proj", P_UP}, {"mlp.down_proj", P_DOWN},
};
static const synth_part g_llama_parts[] = {
    {"input_layernorm", P_NORM}, {"post_attention_layernorm", P_NORM}, {"self_attn.q_proj", P_Q},
    {"self_attn.k_proj", P_KV}, {"self_attn.v_proj", P_KV}, {"self_attn.o_proj", P_O},
    {"mlp.gate_proj", P_UP}, {"mlp.up_proj", P_UP}, {"mlp.down_proj", P_DOWN},
};

static const synth_arch g_archs[] = {
    {.name = "gemma3", .title = "Gemma 3", .config = gemma3_config, .parts = g_gemma3_parts,
     .n_parts = sizeof g_gemma3_parts / sizeof g_gemma3_parts[0], .tied = 1, .norm_plus_one = 1},
    // (1/sqrt(cols): each matrix keeps its input's spread, so 80 layers' residual stays
    // tens, not hundreds, and the logits' spread stays near 1)
    {.name = "llama", .title = "Llama 3", .config = llama_config, .parts = g_llama_parts,
     .n_parts = sizeof g_llama_parts / sizeof g_llama_parts[0], .fan_in = 1},
};
#define N_ARCHS (sizeof g_archs / sizeof g_archs[0])

static const synth_arch *arch_find(const char *name) {
    for (size_t i = 0; i < N_ARCHS; i++)
        if (!strcmp(g_archs[i].name, name)) return &g_archs[i];
    return NULL;
}

const char *synth_archs(void) {
    static char buf[64];
    size_t o = 0;
    for (size_t i = 0; i < N_ARCHS && o < sizeof buf; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? ", " : "", g_archs[i].name);
    return buf;
}

const char *synth_title(const char *arch) {
    const synth_arch *a = arch_find(arch);
    return a ? a->title : NULL;
}

void synth_shape_names(const char *arch, char *buf, size_t n) {
    size_t o = 0;
    if (n) buf[0] = 0;
    for (size_t i = 0; i < N_SHAPES; i++)
        if (!strcmp(g_shapes[i].arch, arch) && o < n)
            o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? ", " : "", g_shapes[i].name);
}

const synth_shape *synth_find(const char *arch, const char *name) {
    for (size_t i = 0; i < N_SHAPES; i++)
        if (!strcmp(g_shapes[i].arch, arch) && !strcmp(g_shapes[i].name, name)) return &g_shapes[i];
    return NULL;
}

// ---------------------------------------------------------------------------
// Values: one xorshift64 stream, the tensors' values one after another in the
// checkpoint's order. A tensor's first state is reached by jumping (the step
// is linear over GF(2), so n steps are a 64x64 bit matrix, T^n, built from
// the T^(2^k)), not by stepping: synth_write's checkpoint, written in order,
// and a tensor made alone (synth_spec, in the converter's order, on every
// core) hold the same values.

#define SEED 0x9E3779B97F4A7C15ull

static uint64_t step(uint64_t x) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
}

// uniform in [-1, 1) from a state
static float unit(uint64_t x) { return (float)((x >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1; }

// bf16 of f, rounded to nearest even (the weights are random: no NaN)
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

// n values base + s * uniform[-1, 1) as bf16, from state x; returns the state after them
static uint64_t gen(uint64_t x, uint16_t *out, int64_t n, float base, float s) {
    for (int64_t i = 0; i < n; i++) {
        x = step(x);
        out[i] = to_bf16(base + s * unit(x));
    }
    return x;
}

typedef struct { uint64_t col[64][64]; } jumps; // col[k][j]: T^(2^k) of bit j

static uint64_t apply(const uint64_t *m, uint64_t x) {
    uint64_t r = 0;
    for (int j = 0; x; j++, x >>= 1)
        if (x & 1) r ^= m[j];
    return r;
}

static void jumps_init(jumps *J) {
    for (int j = 0; j < 64; j++) J->col[0][j] = step(1ull << j);
    for (int k = 1; k < 64; k++)
        for (int j = 0; j < 64; j++) J->col[k][j] = apply(J->col[k - 1], J->col[k - 1][j]);
}

// the state n steps after the seed
static uint64_t jump(const jumps *J, uint64_t n) {
    uint64_t x = SEED;
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1) x = apply(J->col[k], x);
    return x;
}

// ---------------------------------------------------------------------------
// The checkpoint: config.json's text and the tensors, in safetensors' order

typedef struct {
    char name[96];
    long long r, c; // rows, columns (a vector: r 1)
    float base, s;  // values base + s * uniform[-1, 1)
    uint64_t off;   // its first value's place in the stream
} synth_tensor;

typedef struct {
    char name[64];          // general.name: "synth-llama-70b"
    char *config;           // config.json's text
    synth_tensor *t;
    int n;
    infer_tensor_spec *spec; // t as infer_model_spec's tensors
    jumps J;
} synth_model;

static void model_free(synth_model *m) {
    if (!m) return;
    free(m->config), free(m->t), free(m->spec), free(m);
}

static synth_model *model_new(const synth_shape *sh, int layers, int vocab) {
    const synth_arch *a = arch_find(sh->arch);
    if (!a) return NULL;
    int L = layers > 0 ? layers : sh->layers, V = vocab > 0 ? vocab : sh->vocab;
    long long H = sh->hidden, NH = sh->heads, NKV = sh->kv_heads, HD = sh->head_dim, FF = sh->ffn;
    synth_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    snprintf(m->name, sizeof m->name, "synth-%s-%s", sh->arch, sh->name);
    size_t len;
    FILE *f = open_memstream(&m->config, &len);
    if (!f) { free(m); return NULL; }
    a->config(f, sh, L, V);
    if (fclose(f)) { model_free(m); return NULL; }
    m->n = 2 + !a->tied + a->n_parts * L;
    m->t = calloc((size_t)m->n, sizeof *m->t);
    m->spec = calloc((size_t)m->n, sizeof *m->spec);
    if (!m->t || !m->spec) { model_free(m); return NULL; }
    synth_tensor *t = m->t;
    int k = 0;
    t[k++] = (synth_tensor){.name = "model.embed_tokens.weight", .r = V, .c = H};
    t[k++] = (synth_tensor){.name = "model.norm.weight", .r = 1, .c = H};
    if (!a->tied) t[k++] = (synth_tensor){.name = "lm_head.weight", .r = V, .c = H};
    for (int l = 0; l < L; l++) {
        for (int p = 0; p < a->n_parts; p++) {
            synth_tensor *x = &t[k++];
            snprintf(x->name, sizeof x->name, "model.layers.%d.%s.weight", l, a->parts[p].name);
            switch (a->parts[p].kind) {
            case P_NORM: x->r = 1, x->c = H; break;
            case P_HEAD_NORM: x->r = 1, x->c = HD; break;
            case P_Q: x->r = NH * HD, x->c = H; break;
            case P_KV: x->r = NKV * HD, x->c = H; break;
            case P_O: x->r = H, x->c = NH * HD; break;
            case P_UP: x->r = FF, x->c = H; break;
            default: x->r = H, x->c = FF; break; // P_DOWN
            }
        }
    }
    // Norms: 1 + 0.1 noise as applied (Gemma's 1 + w: w stored as 0.1 noise).
    // Matrices: uniform of std 0.02 (HF's init: normal(0, 0.02)), or of std 1/sqrt(cols)
    // (uniform on [-s, s] has std s/sqrt(3)); the embedding (t[0]) always 0.02: its rows are looked
    // up, not summed, and the first norm rescales them.
    uint64_t off = 0;
    for (int i = 0; i < m->n; i++) {
        synth_tensor *x = &t[i];
        x->base = 0, x->s = 0.0346f;
        if (x->r == 1) x->base = a->norm_plus_one ? 0.0f : 1.0f, x->s = 0.1f;
        else if (a->fan_in && i > 0) x->s = sqrtf(3.0f / (float)x->c);
        x->off = off;
        off += (uint64_t)(x->r * x->c);
        infer_tensor_spec *sp = &m->spec[i];
        sp->name = x->name, sp->type = INFER_TYPE_BF16;
        if (x->r == 1) sp->nd = 1, sp->shape[0] = x->c;
        else sp->nd = 2, sp->shape[0] = x->r, sp->shape[1] = x->c;
    }
    jumps_init(&m->J);
    return m;
}

int synth_write(const char *dir, const synth_shape *sh, int layers, int vocab) {
    synth_model *m = model_new(sh, layers, vocab);
    if (!m) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    int ok = f && fputs(m->config, f) >= 0;
    if (f && fclose(f)) ok = 0;
    char *hdr = ok ? malloc((size_t)m->n * 160 + 64) : NULL;
    if (!hdr) { model_free(m); return 0; }
    size_t o = 0, off = 0;
    o += (size_t)sprintf(hdr + o, "{");
    for (int i = 0; i < m->n; i++) {
        const synth_tensor *t = &m->t[i];
        size_t bytes = (size_t)(t->r * t->c * 2);
        if (t->r == 1)
            o += (size_t)sprintf(hdr + o, "%s\"%s\": {\"dtype\": \"BF16\", \"shape\": [%lld], \"data_offsets\": [%zu, %zu]}", i ? ", " : "",
                                 t->name, t->c, off, off + bytes);
        else
            o += (size_t)sprintf(hdr + o, "%s\"%s\": {\"dtype\": \"BF16\", \"shape\": [%lld, %lld], \"data_offsets\": [%zu, %zu]}",
                                 i ? ", " : "", t->name, t->r, t->c, off, off + bytes);
        off += bytes;
    }
    o += (size_t)sprintf(hdr + o, "}");
    while (o % 8) hdr[o++] = ' ';
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ok = (f = fopen(path, "wb")) != NULL;
    uint64_t hl = o;
    ok = ok && fwrite(&hl, 8, 1, f) == 1 && fwrite(hdr, 1, o, f) == o;
    // the values in order, a chunk at a time: the stream runs on from tensor to tensor
    enum { CH = 4096 };
    uint16_t buf[CH];
    uint64_t x = SEED;
    for (int i = 0; ok && i < m->n; i++) {
        const synth_tensor *t = &m->t[i];
        for (long long j = 0, n = t->r * t->c; ok && j < n; j += CH) {
            int k = n - j < CH ? (int)(n - j) : CH;
            x = gen(x, buf, k, t->base, t->s);
            ok = fwrite(buf, 2, (size_t)k, f) == (size_t)k;
        }
    }
    if (f && fclose(f)) ok = 0;
    free(hdr);
    model_free(m);
    return ok;
}

void synth_remove(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    remove(path);
    remove(dir);
}

// ---------------------------------------------------------------------------
// The model made as it is converted

// values [i0, i1) of a tensor (a thread's share)
typedef struct { const synth_model *m; const synth_tensor *t; uint16_t *out; int64_t i0, i1; } gen_job;

static void *gen_part(void *arg) {
    const gen_job *g = arg;
    gen(jump(&g->m->J, g->t->off + (uint64_t)g->i0), g->out + g->i0, g->i1 - g->i0, g->t->base, g->t->s);
    return NULL;
}

// infer_fill_fn: a tensor's values, as synth_write writes them, made on every core
static int fill(void *user, const char *name, void *dst, size_t nbytes) {
    const synth_model *m = user;
    const synth_tensor *t = NULL;
    for (int i = 0; i < m->n && !t; i++)
        if (!strcmp(m->t[i].name, name)) t = &m->t[i];
    int64_t n = t ? t->r * t->c : 0;
    if (!t || nbytes != (size_t)n * 2) return 1;
    enum { MAX_THREADS = 64, PER_THREAD = 1 << 20 };
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t nt = (n + PER_THREAD - 1) / PER_THREAD;
    if (nt > ncpu) nt = ncpu;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt < 1) nt = 1;
    gen_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int k = 0; k < nt; k++) {
        jobs[k] = (gen_job){m, t, dst, n * k / nt, n * (k + 1) / nt};
        if (k > 0) started[k] = pthread_create(&th[k], NULL, gen_part, &jobs[k]) == 0;
    }
    gen_part(&jobs[0]);
    for (int k = 1; k < nt; k++) {
        if (started[k]) pthread_join(th[k], NULL);
        else gen_part(&jobs[k]); // (no thread: made here)
    }
    return 0;
}

int synth_spec(infer_model_spec *spec, const synth_shape *sh, int layers, int vocab) {
    synth_model *m = model_new(sh, layers, vocab);
    if (!m) return 0;
    *spec = (infer_model_spec){.name = m->name, .config = m->config, .tensors = m->spec, .n_tensors = m->n, .fill = fill, .user = m};
    return 1;
}

void synth_spec_free(infer_model_spec *spec) {
    model_free(spec->user);
    memset(spec, 0, sizeof *spec);
}
