// Bad checkpoints and bad requests get a clear error naming the file and the
// problem: never a crash, a hang or a huge allocation.
#include "check.h"
#include "infer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static void write_file(const char *name, const void *data, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static void write_text(const char *name, const char *text) { write_file(name, text, strlen(text)); }

static void remove_file(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    unlink(path);
}

// A safetensors file: 8-byte header length, the header, then `data` bytes of zeros.
static void write_st(const char *name, const char *header, size_t data, uint64_t hlen_override) {
    size_t h = strlen(header);
    size_t n = 8 + h + data;
    unsigned char *b = calloc(1, n);
    uint64_t hl = hlen_override ? hlen_override : h;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hl >> (8 * i));
    memcpy(b + 8, header, h);
    write_file(name, b, n);
    free(b);
}

// A tiny llama: hidden 8, 1 layer, 2 heads of 4, vocab 16, ffn 16; all f32.
static const char *g_config =
    "{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
    " \"num_key_value_heads\": 2, \"intermediate_size\": 16, \"vocab_size\": 16, \"rms_norm_eps\": 1e-5,"
    " \"max_position_embeddings\": 64}";

typedef struct { const char *name; int rows, cols; } spec;
static const spec g_tensors[] = {
    {"model.embed_tokens.weight", 16, 8},
    {"model.norm.weight", 0, 8},
    {"model.layers.0.input_layernorm.weight", 0, 8},
    {"model.layers.0.post_attention_layernorm.weight", 0, 8},
    {"model.layers.0.self_attn.q_proj.weight", 8, 8},
    {"model.layers.0.self_attn.k_proj.weight", 8, 8},
    {"model.layers.0.self_attn.v_proj.weight", 8, 8},
    {"model.layers.0.self_attn.o_proj.weight", 8, 8},
    {"model.layers.0.mlp.gate_proj.weight", 16, 8},
    {"model.layers.0.mlp.up_proj.weight", 16, 8},
    {"model.layers.0.mlp.down_proj.weight", 8, 16},
};
enum { N_TENSORS = sizeof g_tensors / sizeof g_tensors[0] };

// A 1-D tensor of 8 written after the others when set.
static const char *g_extra;

// Writes model.safetensors for the tiny llama, leaving out tensor `skip`
// (-1: none) and giving tensor `bad` (-1: none) one extra row.
static void write_model(int skip, int bad) {
    char h[4096];
    size_t o = 0, off = 0;
    o += (size_t)snprintf(h + o, sizeof h - o, "{\"__metadata__\": {\"format\": \"pt\"}");
    for (int i = 0; i < N_TENSORS; i++) {
        if (i == skip) continue;
        const spec *s = &g_tensors[i];
        int rows = s->rows + (i == bad);
        size_t n = (size_t)(rows ? rows : 1) * s->cols * 4;
        if (rows) o += (size_t)snprintf(h + o, sizeof h - o, ", \"%s\": {\"dtype\": \"F32\", \"shape\": [%d, %d], \"data_offsets\": [%zu, %zu]}", s->name, rows, s->cols, off, off + n);
        else o += (size_t)snprintf(h + o, sizeof h - o, ", \"%s\": {\"dtype\": \"F32\", \"shape\": [%d], \"data_offsets\": [%zu, %zu]}", s->name, s->cols, off, off + n);
        off += n;
    }
    if (g_extra) {
        o += (size_t)snprintf(h + o, sizeof h - o, ", \"%s\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [%zu, %zu]}",
                              g_extra, off, off + 32);
        off += 32;
    }
    snprintf(h + o, sizeof h - o, "}");
    write_st("model.safetensors", h, off, 0);
}

// Loads g_dir and expects failure with `status` and a message holding `what`
// and (when file is given) the file's name.
static void expect_fail(const char *label, infer_status status, const char *what, const char *file) {
    infer_model *m = NULL;
    infer_status st = infer_model_load(g_dir, &m);
    const char *msg = infer_last_error();
    CHECK(st == status, "%s: status %s, want %s (%s)", label, infer_status_name(st), infer_status_name(status), msg);
    CHECK(m == NULL, "%s: a model was returned", label);
    CHECK(strstr(msg, what) != NULL, "%s: message \"%s\" lacks \"%s\"", label, msg, what);
    if (file) CHECK(strstr(msg, file) != NULL, "%s: message \"%s\" does not name %s", label, msg, file);
    CHECK(strchr(msg, '\n') == NULL, "%s: message is not one line", label);
    infer_model_free(m);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/infer-badinput-%d", (int)getpid());
    mkdir(g_dir, 0700);

    // The valid tiny model loads and runs.
    write_text("config.json", g_config);
    write_model(-1, -1);
    infer_model *m = NULL;
    CHECK(infer_model_load(g_dir, &m) == INFER_OK, "valid tiny model: %s", infer_last_error());
    if (m) {
        infer_ctx *c = NULL;
        CHECK(infer_ctx_new(m, 8, &c) == INFER_OK, "%s", infer_last_error());
        float logits[16];
        int32_t ok_ids[2] = {1, 15}, big[1] = {16}, neg[1] = {-1};
        CHECK(infer_eval(c, ok_ids, 2, NULL, 0) == INFER_OK, "%s", infer_last_error());
        CHECK(infer_eval(c, big, 1, logits, 1) == INFER_ERR_ARG, "id == n_vocab accepted");
        CHECK(strstr(infer_last_error(), "outside the vocabulary") != NULL, "%s", infer_last_error());
        CHECK(infer_eval(c, neg, 1, logits, 1) == INFER_ERR_ARG, "negative id accepted");
        int32_t many[16] = {0};
        CHECK(infer_eval(c, many, 16, NULL, 0) == INFER_ERR_ARG, "more tokens than the context accepted");
        CHECK(strstr(infer_last_error(), "do not fit") != NULL, "%s", infer_last_error());
        CHECK(infer_eval(c, many, 0, NULL, 0) == INFER_ERR_ARG, "zero tokens accepted");
        infer_ctx *huge = NULL;
        CHECK(infer_ctx_new(m, -5, &huge) == INFER_ERR_ARG && !huge, "negative context accepted");
        infer_ctx_free(c);
        infer_model_free(m);
    }

    // --- safetensors
    write_model(-1, -1);
    {
        // truncated: cut the data short
        char path[512];
        snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
        struct stat sb;
        stat(path, &sb);
        CHECK(truncate(path, sb.st_size - 100) == 0, "truncate");
        expect_fail("truncated data", INFER_ERR_FORMAT, "outside", "model.safetensors");
        CHECK(truncate(path, 5) == 0, "truncate");
        expect_fail("shorter than the header length", INFER_ERR_FORMAT, "truncated", "model.safetensors");
    }
    write_st("model.safetensors", "{}", 0, 1u << 30);
    expect_fail("header length past the end", INFER_ERR_FORMAT, "past the end", "model.safetensors");
    write_st("model.safetensors", "[1, 2, 3]", 0, 0);
    expect_fail("header not an object", INFER_ERR_FORMAT, "not a JSON object", "model.safetensors");
    write_st("model.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [4]", 0, 0);
    expect_fail("header not JSON", INFER_ERR_FORMAT, "not a JSON object", "model.safetensors");
    write_st("model.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 8, 0);
    expect_fail("offsets outside the data", INFER_ERR_FORMAT, "outside", "tensor a");
    write_st("model.safetensors",
             "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
             " \"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}", 32, 0);
    expect_fail("overlapping tensors", INFER_ERR_FORMAT, "overlap", "model.safetensors");
    write_st("model.safetensors", "{\"a\": {\"dtype\": \"Q9\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 16, 0);
    expect_fail("unknown dtype", INFER_ERR_FORMAT, "unknown dtype \"Q9\"", "model.safetensors");
    write_st("model.safetensors", "{\"a\": {\"dtype\": \"F16\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 16, 0);
    expect_fail("shape x dtype != byte range", INFER_ERR_FORMAT, "shape x dtype is 8 bytes", "tensor a");
    write_st("model.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 4294967296], \"data_offsets\": [0, 16]}}", 16, 0);
    expect_fail("overflowing shape", INFER_ERR_FORMAT, "overflow", "tensor a");
    write_st("model.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [-4], \"data_offsets\": [0, 16]}}", 16, 0);
    expect_fail("negative shape", INFER_ERR_FORMAT, "non-negative", "tensor a");
    write_st("model.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [16, 0]}}", 16, 0);
    expect_fail("reversed offsets", INFER_ERR_FORMAT, "begin <= end", "tensor a");
    write_st("model.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4, 0);
    expect_fail("too many dims", INFER_ERR_UNSUPPORTED, "dimensions", "tensor a");

    // --- shards
    write_model(-1, -1);
    write_text("model.safetensors.index.json", "{\"weight_map\": {\"model.norm.weight\": \"../etc/passwd\"}}");
    expect_fail("shard path escapes the directory", INFER_ERR_FORMAT, "bad shard name", "index.json");
    write_text("model.safetensors.index.json", "{\"weight_map\": {\"model.norm.weight\": \"model-00002.safetensors\"}}");
    expect_fail("missing shard", INFER_ERR_IO, "cannot open", "model-00002.safetensors");
    write_text("model.safetensors.index.json", "{\"weight_map\": {\"model.nope\": \"model.safetensors\"}}");
    expect_fail("index names a tensor the shard lacks", INFER_ERR_FORMAT, "missing from", "model.nope");
    write_text("model.safetensors.index.json", "{\"metadata\": {}}");
    expect_fail("index without weight_map", INFER_ERR_FORMAT, "weight_map", "index.json");
    remove_file("model.safetensors.index.json");

    // --- tensors against the config
    write_model(6, -1);
    expect_fail("missing tensor", INFER_ERR_FORMAT, "missing tensor", "v_proj");
    write_model(-1, 4);
    expect_fail("wrong shape", INFER_ERR_FORMAT, "config implies", "q_proj");
    write_model(-1, 0);
    expect_fail("wrong vocab rows", INFER_ERR_FORMAT, "config implies", "embed_tokens");

    // --- config.json
    // a tensor of a layer the config does not have: the layer count disagrees with the tensors
    g_extra = "model.layers.1.input_layernorm.weight";
    write_model(-1, -1);
    expect_fail("a tensor past the layer count", INFER_ERR_FORMAT, "but the config has 1 layers (num_hidden_layers)",
                "model.layers.1.input_layernorm.weight");
    g_extra = NULL;
    write_model(-1, -1);
    remove_file("config.json");
    expect_fail("missing config.json", INFER_ERR_IO, "cannot open", "config.json");
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8,");
    expect_fail("malformed config.json", INFER_ERR_FORMAT, "not valid JSON", "config.json");
    write_text("config.json", "[]");
    expect_fail("config.json not an object", INFER_ERR_FORMAT, "not a JSON object", "config.json");
    write_text("config.json", "{\"model_type\": \"nosuchmodel\", \"hidden_size\": 8}");
    expect_fail("unknown architecture", INFER_ERR_UNSUPPORTED, "unknown architecture \"nosuchmodel\"", "config.json");
    write_text("config.json", "{\"hidden_size\": 8}");
    expect_fail("no model_type", INFER_ERR_FORMAT, "model_type", "config.json");
    write_text("config.json", "{\"model_type\": \"llama\", \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 16}");
    expect_fail("missing hidden_size", INFER_ERR_FORMAT, "hidden_size", "config.json");
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": \"8\", \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 16}");
    expect_fail("hidden_size of the wrong type", INFER_ERR_FORMAT, "hidden_size", "config.json");
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 1000000000, \"num_attention_heads\": 2, \"vocab_size\": 16}");
    expect_fail("absurd layer count", INFER_ERR_FORMAT, "num_hidden_layers", "config.json");
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 3, \"vocab_size\": 16}");
    expect_fail("heads not a multiple of kv heads", INFER_ERR_FORMAT, "multiple", "config.json");
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 16, \"rope_scaling\": {\"type\": \"warp\", \"factor\": 2}}");
    expect_fail("unknown rope type", INFER_ERR_UNSUPPORTED, "rope type \"warp\"", "config.json");
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 16, \"hidden_act\": \"sparkle\"}");
    expect_fail("unknown activation", INFER_ERR_UNSUPPORTED, "activation", "config.json");
    // 80 experts per token (a stack overflow in moe() once): refused at load, naming the field
    write_text("config.json", "{\"model_type\": \"mixtral\", \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 16, \"intermediate_size\": 16, \"num_local_experts\": 128, \"num_experts_per_tok\": 80}");
    expect_fail("80 experts per token", INFER_ERR_UNSUPPORTED, "num_experts_per_tok", "config.json");
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 65536, \"head_dim\": 65536, \"vocab_size\": 16}");
    expect_fail("heads x head_dim overflowing", INFER_ERR_FORMAT, "num_attention_heads x head_dim", "config.json");
    write_text("config.json", "{\"model_type\": \"mixtral\", \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 16, \"intermediate_size\": 16, \"num_local_experts\": 65536, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 1000000}");
    expect_fail("experts x expert size overflowing", INFER_ERR_FORMAT, "num_local_experts x moe_intermediate_size", "config.json");
    // head and layer counts that disagree with the tensors
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"head_dim\": 8, \"vocab_size\": 16, \"intermediate_size\": 16}");
    expect_fail("head_dim against q_proj", INFER_ERR_FORMAT, "num_attention_heads x head_dim", "q_proj");
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"vocab_size\": 16, \"intermediate_size\": 16}");
    expect_fail("more layers than tensors", INFER_ERR_FORMAT, "layer 1", "input_layernorm");
    write_text("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"vocab_size\": 16, \"layer_types\": [\"full_attention\"]}");
    expect_fail("layer_types of the wrong length", INFER_ERR_FORMAT, "layer_types", "config.json");

    // --- not a model at all
    char nodir[300];
    snprintf(nodir, sizeof nodir, "%s/nope", g_dir);
    infer_model *m2 = NULL;
    CHECK(infer_model_load(nodir, &m2) == INFER_ERR_IO && !m2, "missing path accepted");
    CHECK(strstr(infer_last_error(), "nope") != NULL, "%s", infer_last_error());

    // clean up
    remove_file("config.json");
    remove_file("model.safetensors");
    rmdir(g_dir);
    return check_summary("badinput");
}
