// Refusing is cheap: small files whose headers claim huge counts (layers,
// experts, heads, head and hidden sizes, FFN widths, contexts, vocabularies,
// arrays and strings) are each loaded in a child process -- and, when one
// loads, given a context and a token -- and must end cleanly (no signal), a
// refusal naming what is wrong, within 1 s of CPU time and 100 MB more
// resident memory than the child started with: the cost of a file is in
// proportion to the file, not to what its header claims. GGUF headers over a
// grid of counts, Hugging Face config.json files the same way.
#include "check.h"
#include "infer.h"
#include "models/gguf.h"

#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define MAX_CPU_S 1.0
#define MAX_RSS_KB (100 * 1024)

typedef struct {
    int status;      // infer_status of the load (or of the context / eval after it)
    double cpu;      // seconds of CPU time in the child
    long rss_kb;     // peak resident memory above the child's start
    char msg[240];
} outcome;

static double cpu_s(const struct rusage *r) {
    return r->ru_utime.tv_sec + r->ru_stime.tv_sec + (r->ru_utime.tv_usec + r->ru_stime.tv_usec) * 1e-6;
}

// Loads path in a child (then a context of the model's default size and one
// token when it loads); the child's cost and result.
static void run_case(const char *path, const char *what, int may_load) {
    int fd[2];
    if (pipe(fd)) { CHECK(0, "pipe"); return; }
    pid_t p = fork();
    if (p == 0) {
        close(fd[0]);
        long rss0 = test_rss_kb();
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        outcome o = {0};
        infer_model *m = NULL;
        o.status = infer_model_load(path, &m);
        if (!o.status) {
            infer_ctx *c = NULL;
            o.status = infer_ctx_new(m, 0, &c);
            if (!o.status) {
                int32_t id = 0;
                float *logits = malloc(sizeof(float) * (size_t)infer_model_n_vocab(m));
                o.status = logits ? infer_eval(c, &id, 1, logits, 1) : INFER_ERR_NOMEM;
                free(logits);
                infer_ctx_free(c);
            }
            infer_model_free(m);
        }
        if (o.status) snprintf(o.msg, sizeof o.msg, "%s", infer_last_error());
        getrusage(RUSAGE_SELF, &r1);
        o.cpu = cpu_s(&r1) - cpu_s(&r0);
        o.rss_kb = r1.ru_maxrss - rss0;
        if (write(fd[1], &o, sizeof o) != (ssize_t)sizeof o) _exit(3);
        _exit(0);
    }
    close(fd[1]);
    outcome o;
    ssize_t got = read(fd[0], &o, sizeof o);
    close(fd[0]);
    int ws = 0;
    waitpid(p, &ws, 0);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && got == (ssize_t)sizeof o, "%s: the child ended badly (status 0x%x)", what, ws);
    if (got != (ssize_t)sizeof o) return;
    CHECK(o.cpu < MAX_CPU_S, "%s: %.2f s of CPU (%s)", what, o.cpu, o.status ? o.msg : "loaded");
    CHECK(o.rss_kb < MAX_RSS_KB, "%s: %ld MB of memory (%s)", what, o.rss_kb >> 10, o.status ? o.msg : "loaded");
    CHECK(o.status || may_load, "%s: loaded", what);
    CHECK(!o.status || (o.msg[0] && strcmp(o.msg, "out of memory")), "%s: the refusal \"%s\" names nothing", what, o.msg);
}

// ---------------------------------------------------------------------------
// GGUF headers

typedef struct { unsigned char *p; size_t n, cap; } bb;

static void b_raw(bb *b, const void *x, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}
static void b_u32(bb *b, uint32_t v) { b_raw(b, &v, 4); }
static void b_u64(bb *b, uint64_t v) { b_raw(b, &v, 8); }
static void b_str(bb *b, const char *s) { b_u64(b, strlen(s)); b_raw(b, s, strlen(s)); }
static void b_kv_u32(bb *b, const char *k, uint32_t v) { b_str(b, k); b_u32(b, GGUF_U32); b_u32(b, v); }
static void b_kv_str(bb *b, const char *k, const char *v) { b_str(b, k); b_u32(b, GGUF_STRING); b_str(b, v); }

typedef struct {
    uint32_t layers, experts, used, heads, kv_heads, key_len, embd, ff, ctx, vocab;
    int tensors;       // per-layer tensors written (for the first layers), beside token_embd
    uint64_t arr_n;    // a tokenizer.ggml.tokens array claiming this many strings (0: none)
} gguf_case;

static void write_gguf(const char *path, const gguf_case *g) {
    bb b = {0};
    int nt = 1 + g->tensors, nkv = 12 + (g->arr_n ? 1 : 0);
    b_raw(&b, "GGUF", 4);
    b_u32(&b, 3);
    b_u64(&b, (uint64_t)nt);
    b_u64(&b, (uint64_t)nkv);
    b_kv_str(&b, "general.architecture", "llama");
    b_kv_u32(&b, "llama.block_count", g->layers);
    b_kv_u32(&b, "llama.embedding_length", g->embd);
    b_kv_u32(&b, "llama.feed_forward_length", g->ff);
    b_kv_u32(&b, "llama.attention.head_count", g->heads);
    b_kv_u32(&b, "llama.attention.head_count_kv", g->kv_heads);
    b_kv_u32(&b, "llama.attention.key_length", g->key_len);
    b_kv_u32(&b, "llama.attention.value_length", g->key_len);
    b_kv_u32(&b, "llama.context_length", g->ctx);
    b_kv_u32(&b, "llama.expert_count", g->experts);
    b_kv_u32(&b, "llama.expert_used_count", g->used);
    b_kv_u32(&b, "llama.vocab_size", g->vocab);
    if (g->arr_n) { // an array of strings whose count is far beyond the file
        b_str(&b, "tokenizer.ggml.tokens");
        b_u32(&b, GGUF_ARRAY);
        b_u32(&b, GGUF_STRING);
        b_u64(&b, g->arr_n);
        b_str(&b, "a");
    }
    // tensors: token_embd [embd, vocab] (f32), then small ones named for layers
    b_str(&b, "token_embd.weight");
    b_u32(&b, 2);
    b_u64(&b, g->embd);
    b_u64(&b, g->vocab);
    b_u32(&b, 0);
    b_u64(&b, 0);
    size_t off = ((size_t)g->embd * g->vocab * 4 + 31) & ~(size_t)31;
    for (int i = 0; i < g->tensors; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", i);
        b_str(&b, name);
        b_u32(&b, 3);
        b_u64(&b, 32);
        b_u64(&b, 1);
        b_u64(&b, g->experts ? g->experts : 1);
        b_u32(&b, 0);
        b_u64(&b, off);
        off += ((size_t)32 * (g->experts ? g->experts : 1) * 4 + 31) & ~(size_t)31;
    }
    while (b.n % 32) b_raw(&b, "", 1);
    // as much data as fits in a small file (the rest is missing: a truncated file)
    size_t data = off < (1 << 16) ? off : (1 << 16);
    unsigned char *z = calloc(1, data + 1);
    b_raw(&b, z, data);
    free(z);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b.p, 1, b.n, f) != b.n) abort();
    fclose(f);
    free(b.p);
}

static void test_gguf_grid(const char *dir) {
    static const uint32_t layers[] = {1, 4096}, experts[] = {0, 8, 65536}, heads[] = {4, 65536}, key_len[] = {16, 65536},
                          embd[] = {64, 1 << 20}, ff[] = {128, 1 << 20}, ctx[] = {4096, 1 << 30};
    char path[512];
    snprintf(path, sizeof path, "%s/claims.gguf", dir);
    int n = 0;
    for (size_t a = 0; a < 2; a++)
        for (size_t e = 0; e < 3; e++)
            for (size_t h = 0; h < 2; h++)
                for (size_t k = 0; k < 2; k++)
                    for (size_t d = 0; d < 2; d++)
                        for (size_t f = 0; f < 2; f++)
                            for (size_t c = 0; c < 2; c++)
                                for (int t = 0; t < 2; t++) {
                                    gguf_case g = {layers[a], experts[e], experts[e] ? 2 : 0, heads[h], heads[h], key_len[k],
                                                   embd[d], ff[f], ctx[c], 16, t ? 64 : 0, 0};
                                    if (g.tensors > (int)g.layers) g.tensors = (int)g.layers;
                                    write_gguf(path, &g);
                                    char what[200];
                                    snprintf(what, sizeof what,
                                             "GGUF: %u layers, %u experts, %u heads of %u, embd %u, ff %u, ctx %u, %d tensors",
                                             g.layers, g.experts, g.heads, g.key_len, g.embd, g.ff, g.ctx, g.tensors);
                                    run_case(path, what, 0);
                                    n++;
                                }
    // arrays and vocabularies beyond the file
    gguf_case big = {2, 0, 0, 4, 4, 16, 64, 128, 4096, 16, 0, (uint64_t)1 << 40};
    write_gguf(path, &big);
    run_case(path, "GGUF: a tokens array of 2^40 strings", 0);
    big.arr_n = 0, big.vocab = 1 << 24;
    write_gguf(path, &big);
    run_case(path, "GGUF: a token_embd of 2^24 rows, its data missing", 0);
    printf("gguf: %d header grids\n", n);
}

// ---------------------------------------------------------------------------
// Hugging Face config.json

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    if (!f || fputs(s, f) < 0) abort();
    fclose(f);
}

static void write_st(const char *path, int rows, int cols) { // one f32 tensor: model.embed_tokens.weight
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr, "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[0,%d]}}",
                     rows, cols, rows * cols * 4);
    while (n % 8) hdr[n++] = ' ';
    FILE *f = fopen(path, "wb");
    uint64_t len = (uint64_t)n;
    if (!f || fwrite(&len, 8, 1, f) != 1 || fwrite(hdr, 1, (size_t)n, f) != (size_t)n) abort();
    for (int i = 0; i < rows * cols * 4; i++) fputc(0, f);
    fclose(f);
}

static void test_hf_grid(const char *dir) {
    static const int layers[] = {1, 4096}, experts[] = {0, 8, 65536}, heads[] = {4, 65536}, head_dim[] = {16, 65536},
                     hidden[] = {64, 1 << 20}, ff[] = {128, 1 << 20}, pos[] = {4096, 1 << 30};
    char d[512], p[600];
    snprintf(d, sizeof d, "%s/hf", dir);
    mkdir(d, 0700);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    write_st(p, 16, 64);
    snprintf(p, sizeof p, "%s/config.json", d);
    int n = 0;
    for (size_t a = 0; a < 2; a++)
        for (size_t e = 0; e < 3; e++)
            for (size_t h = 0; h < 2; h++)
                for (size_t k = 0; k < 2; k++)
                    for (size_t s = 0; s < 2; s++)
                        for (size_t f = 0; f < 2; f++)
                            for (size_t c = 0; c < 2; c++) {
                                char cfg[1024];
                                snprintf(cfg, sizeof cfg,
                                         "{\"architectures\":[\"%s\"],\"model_type\":\"%s\",\"hidden_size\":%d,\"intermediate_size\":%d,"
                                         "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"head_dim\":%d,\"num_hidden_layers\":%d,"
                                         "\"vocab_size\":16,\"rms_norm_eps\":1e-5,\"max_position_embeddings\":%d,"
                                         "\"num_local_experts\":%d,\"num_experts_per_tok\":%d}",
                                         experts[e] ? "MixtralForCausalLM" : "LlamaForCausalLM", experts[e] ? "mixtral" : "llama",
                                         hidden[s], ff[f], heads[h], heads[h], head_dim[k], layers[a], pos[c], experts[e],
                                         experts[e] ? 2 : 0);
                                write_text(p, cfg);
                                char what[200];
                                snprintf(what, sizeof what, "config.json: %d layers, %d experts, %d heads of %d, hidden %d, ff %d, positions %d",
                                         layers[a], experts[e], heads[h], head_dim[k], hidden[s], ff[f], pos[c]);
                                run_case(d, what, 0);
                                n++;
                            }
    // 65 experts a token, with 128 experts (overran moe()'s arrays once)
    write_text(p, "{\"architectures\":[\"MixtralForCausalLM\"],\"model_type\":\"mixtral\",\"hidden_size\":64,\"intermediate_size\":128,"
                  "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"num_hidden_layers\":1,\"vocab_size\":16,"
                  "\"rms_norm_eps\":1e-5,\"num_local_experts\":128,\"num_experts_per_tok\":65}");
    run_case(d, "config.json: 65 experts a token", 0);
    printf("hf: %d config grids\n", n);
}

int main(void) {
    char dir[] = "/tmp/infer-amplify-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_gguf_grid(dir);
    test_hf_grid(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    return check_summary("test_amplify");
}
