// Random-weight checkpoints of real models' shapes (bf16 safetensors and
// config.json in a directory, as Hugging Face transformers saves them), for
// benchmarks of sizes we have no weights for: infer synth, infer bench-components.
#include "synth.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
// Values

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { // uniform in [-1, 1)
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

// bf16 of f, rounded to nearest even (the weights are random: no NaN)
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

// One tensor of n random bf16 values, base + s * uniform[-1, 1), written a chunk at a time.
static int put_tensor(FILE *f, long long n, float base, float s) {
    enum { CH = 4096 };
    uint16_t buf[CH];
    for (long long i = 0; i < n; i += CH) {
        int k = n - i < CH ? (int)(n - i) : CH;
        for (int j = 0; j < k; j++) buf[j] = to_bf16(base + s * frand());
        if (fwrite(buf, 2, (size_t)k, f) != (size_t)k) return 0;
    }
    return 1;
}

// ---------------------------------------------------------------------------
// The checkpoint

typedef struct { char name[96]; long long r, c; int norm; } synth_tensor;

int synth_write(const char *dir, const synth_shape *sh, int layers, int vocab) {
    const synth_arch *a = arch_find(sh->arch);
    if (!a) return 0;
    int L = layers > 0 ? layers : sh->layers, V = vocab > 0 ? vocab : sh->vocab;
    long long H = sh->hidden, NH = sh->heads, NKV = sh->kv_heads, HD = sh->head_dim, FF = sh->ffn;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    a->config(f, sh, L, V);
    if (fclose(f)) return 0;

    // the tensor list (names and shapes only: the values are made as they are written)
    int n = 2 + !a->tied + a->n_parts * L;
    synth_tensor *t = calloc((size_t)n, sizeof *t);
    char *hdr = malloc((size_t)n * 160 + 64);
    if (!t || !hdr) { free(t), free(hdr); return 0; }
    int k = 0;
    t[k++] = (synth_tensor){"model.embed_tokens.weight", V, H, 0};
    t[k++] = (synth_tensor){"model.norm.weight", 1, H, 1};
    if (!a->tied) t[k++] = (synth_tensor){"lm_head.weight", V, H, 0};
    for (int l = 0; l < L; l++) {
        for (int p = 0; p < a->n_parts; p++) {
            synth_tensor *x = &t[k++];
            snprintf(x->name, sizeof x->name, "model.layers.%d.%s.weight", l, a->parts[p].name);
            switch (a->parts[p].kind) {
            case P_NORM: x->r = 1, x->c = H, x->norm = 1; break;
            case P_HEAD_NORM: x->r = 1, x->c = HD, x->norm = 1; break;
            case P_Q: x->r = NH * HD, x->c = H; break;
            case P_KV: x->r = NKV * HD, x->c = H; break;
            case P_O: x->r = H, x->c = NH * HD; break;
            case P_UP: x->r = FF, x->c = H; break;
            default: x->r = H, x->c = FF; break; // P_DOWN
            }
        }
    }
    size_t o = 0, off = 0;
    o += (size_t)sprintf(hdr + o, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)(t[i].r * t[i].c * 2);
        if (t[i].r == 1)
            o += (size_t)sprintf(hdr + o, "%s\"%s\": {\"dtype\": \"BF16\", \"shape\": [%lld], \"data_offsets\": [%zu, %zu]}", i ? ", " : "",
                                 t[i].name, t[i].c, off, off + bytes);
        else
            o += (size_t)sprintf(hdr + o, "%s\"%s\": {\"dtype\": \"BF16\", \"shape\": [%lld, %lld], \"data_offsets\": [%zu, %zu]}",
                                 i ? ", " : "", t[i].name, t[i].r, t[i].c, off, off + bytes);
        off += bytes;
    }
    o += (size_t)sprintf(hdr + o, "}");
    while (o % 8) hdr[o++] = ' ';
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int ok = (f = fopen(path, "wb")) != NULL;
    uint64_t hl = o;
    ok = ok && fwrite(&hl, 8, 1, f) == 1 && fwrite(hdr, 1, o, f) == o;
    // Norms: 1 + 0.1 noise as applied (Gemma's 1 + w: w stored as 0.1 noise).
    // Matrices: uniform of std 0.02 (HF's init: normal(0, 0.02)), or of std 1/sqrt(cols)
    // (uniform on [-s, s] has std s/sqrt(3)); the embedding (t[0]) always 0.02: its rows are looked
    // up, not summed, and the first norm rescales them.
    for (int i = 0; ok && i < n; i++) {
        float base = 0, s = 0.0346f;
        if (t[i].norm) base = a->norm_plus_one ? 0.0f : 1.0f, s = 0.1f;
        else if (a->fan_in && i > 0) s = sqrtf(3.0f / (float)t[i].c);
        ok = put_tensor(f, t[i].r * t[i].c, base, s);
    }
    if (f && fclose(f)) ok = 0;
    free(t), free(hdr);
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
