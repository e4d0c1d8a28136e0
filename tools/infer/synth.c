// Random-weight Gemma 3 checkpoints of real models' shapes (bf16 safetensors
// and config.json in a directory), for benchmarks of sizes we have no weights
// for: infer synth, infer bench-components.
#include "synth.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const synth_shape g_shapes[] = {
    // name, vocab, hidden, ffn, layers, heads, kv heads, head dim, sliding window, max positions (Gemma 3's configs)
    {"270m", 262144, 640, 2048, 18, 4, 1, 256, 512, 32768},
    {"1b", 262144, 1152, 6912, 26, 4, 1, 256, 512, 32768},
    {"4b", 262144, 2560, 10240, 34, 8, 4, 256, 1024, 131072},
    {"12b", 262144, 3840, 15360, 48, 16, 8, 256, 1024, 131072},
    {"27b", 262144, 5376, 21504, 62, 32, 16, 128, 1024, 131072}, // (issue 16: larger than one GPU in bf16 with a long context)
};

const synth_shape *synth_find(const char *name) {
    for (size_t i = 0; i < sizeof g_shapes / sizeof g_shapes[0]; i++)
        if (!strcmp(g_shapes[i].name, name)) return &g_shapes[i];
    return NULL;
}

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

// One tensor of random bf16 values: s * noise, or for norms (Gemma's 1 + w) s * noise.
static int put_tensor(FILE *f, long long n, float s) {
    enum { CH = 4096 };
    uint16_t buf[CH];
    for (long long i = 0; i < n; i += CH) {
        int k = n - i < CH ? (int)(n - i) : CH;
        for (int j = 0; j < k; j++) buf[j] = to_bf16(s * frand());
        if (fwrite(buf, 2, (size_t)k, f) != (size_t)k) return 0;
    }
    return 1;
}

typedef struct { char name[96]; long long r, c; int norm; } synth_tensor;

int synth_write(const char *dir, const synth_shape *sh, int layers, int vocab) {
    int L = layers > 0 ? layers : sh->layers, V = vocab > 0 ? vocab : sh->vocab;
    int H = sh->hidden, NH = sh->heads, NKV = sh->kv_heads, HD = sh->head_dim, FF = sh->ffn;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"model_type\": \"gemma3_text\", \"architectures\": [\"Gemma3ForCausalLM\"], \"hidden_size\": %d,"
               " \"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d,"
               " \"intermediate_size\": %d, \"vocab_size\": %d, \"rms_norm_eps\": 1e-6, \"query_pre_attn_scalar\": 256,"
               " \"sliding_window\": %d, \"max_position_embeddings\": %d, \"hidden_activation\": \"gelu_pytorch_tanh\","
               " \"tie_word_embeddings\": true, \"layer_types\": [",
            H, L, NH, NKV, HD, FF, V, sh->window, sh->max_pos);
    for (int i = 0; i < L; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", (i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
    fprintf(f, "], \"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0},"
               " \"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}}\n");
    if (fclose(f)) return 0;

    int n = 2 + 13 * L;
    synth_tensor *t = calloc((size_t)n, sizeof *t);
    char *hdr = malloc((size_t)n * 160 + 64);
    if (!t || !hdr) { free(t), free(hdr); return 0; }
    int k = 0;
    t[k++] = (synth_tensor){"model.embed_tokens.weight", V, H, 0};
    t[k++] = (synth_tensor){"model.norm.weight", 1, H, 1};
    for (int l = 0; l < L; l++) {
        static const struct { const char *s; int kind; } per[] = {
            {"input_layernorm", 0}, {"post_attention_layernorm", 0}, {"pre_feedforward_layernorm", 0},
            {"post_feedforward_layernorm", 0}, {"self_attn.q_norm", 1}, {"self_attn.k_norm", 1}, {"self_attn.q_proj", 2},
            {"self_attn.k_proj", 3}, {"self_attn.v_proj", 3}, {"self_attn.o_proj", 4}, {"mlp.gate_proj", 5},
            {"mlp.up_proj", 5}, {"mlp.down_proj", 6},
        };
        for (int p = 0; p < 13; p++) {
            synth_tensor *x = &t[k++];
            snprintf(x->name, sizeof x->name, "model.layers.%d.%s.weight", l, per[p].s);
            switch (per[p].kind) {
            case 0: x->r = 1, x->c = H, x->norm = 1; break;
            case 1: x->r = 1, x->c = HD, x->norm = 1; break;
            case 2: x->r = (long long)NH * HD, x->c = H; break;
            case 3: x->r = (long long)NKV * HD, x->c = H; break;
            case 4: x->r = H, x->c = (long long)NH * HD; break;
            case 5: x->r = FF, x->c = H; break;
            default: x->r = H, x->c = FF; break;
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
    // (HF's init: normal(0, 0.02); uniform of the same spread here; norms near 0, Gemma's 1 + w)
    for (int i = 0; ok && i < n; i++) ok = put_tensor(f, t[i].r * t[i].c, t[i].norm ? 0.1f : 0.0346f);
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
