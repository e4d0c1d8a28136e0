// A damaged vindex gives a clear error, never a crash or an unbounded
// allocation (run it under ASan/UBSan too):
//   - each file truncated: vindex_open names it;
//   - a byte flipped in each file: vindex_open passes (it does not hash),
//     vindex_verify names the file;
//   - index.json corrupted: not JSON, keys missing, wrong JSON types, numbers
//     out of range, fractional, negative or huge counts, unaligned, overlapping
//     and out-of-file ranges, unknown types and files, a down_meta id outside
//     the vocabulary: each case with the words of its message;
//   - then every key of index.json removed in turn and every number replaced
//     by hostile values: each open fails cleanly or opens a consistent vindex.
#include "check.h"
#include "infer.h"
#include "vindex/vindex.h"
#include "vindex/extract.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *g_files[] = {"gate_vectors.bin", "ffn.bin", "down_meta.bin", "embeddings.bin", "lm_head.bin", "weights.gguf"};
enum { N_FILES = 6 };

static char g_dir[256];     // the vindex under test
static char *g_index;       // its good index.json
static size_t g_index_len;

static void path_of(char *p, size_t n, const char *name) { snprintf(p, n, "%s/%s", g_dir, name); }

static void put_file(const char *name, const void *data, size_t n) {
    char p[512];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n) { perror(p); exit(2); }
    fclose(f);
}

// vindex_open fails, and its message holds `want`.
static void expect_open_fails(const char *label, const char *want) {
    vindex *v = (vindex *)1;
    infer_status st = vindex_open(g_dir, &v);
    CHECK(st != INFER_OK && v == NULL, "%s: opened", label);
    if (st) CHECK(strstr(infer_last_error(), want) != NULL, "%s: message \"%s\" lacks \"%s\"", label, infer_last_error(), want);
    if (!st) vindex_close(v);
}

// ---------------------------------------------------------------------------
// damaged files

static void check_files(void) {
    for (int i = 0; i < N_FILES; i++) {
        size_t n;
        char p[512];
        path_of(p, sizeof p, g_files[i]);
        unsigned char *good = (unsigned char *)test_read_file(p, &n);
        CHECK(good && n > 0, "%s: unreadable", g_files[i]);
        if (!good || !n) continue;
        // truncated by one byte, and to nothing
        put_file(g_files[i], good, n - 1);
        expect_open_fails(g_files[i], g_files[i]);
        CHECK(vindex_verify(g_dir) != INFER_OK && strstr(infer_last_error(), g_files[i]), "truncated %s: verify: %s", g_files[i],
              infer_last_error());
        put_file(g_files[i], good, 0);
        expect_open_fails(g_files[i], g_files[i]);
        // one byte flipped in the middle of the last part (a score in down_meta, never an id)
        good[n - 1 - (n > 8 ? 2 : 0)] ^= 0x40;
        put_file(g_files[i], good, n);
        vindex *v = NULL;
        CHECK(vindex_open(g_dir, &v) == INFER_OK, "%s flipped: open hashes nothing, yet: %s", g_files[i], infer_last_error());
        vindex_close(v);
        CHECK(vindex_verify(g_dir) != INFER_OK && strstr(infer_last_error(), g_files[i]) && strstr(infer_last_error(), "sha256"),
              "%s flipped: verify says: %s", g_files[i], infer_last_error());
        good[n - 1 - (n > 8 ? 2 : 0)] ^= 0x40;
        put_file(g_files[i], good, n);
        free(good);
    }
    // a down_meta id outside the vocabulary (the first id of layer 0)
    size_t n;
    char p[512];
    path_of(p, sizeof p, "down_meta.bin");
    unsigned char *good = (unsigned char *)test_read_file(p, &n), *bad = malloc(n);
    memcpy(bad, good, n);
    int32_t id = 1 << 30;
    memcpy(bad, &id, 4);
    put_file("down_meta.bin", bad, n);
    expect_open_fails("down_meta id", "outside the vocabulary");
    put_file("down_meta.bin", good, n);
    free(good);
    free(bad);
    CHECK(vindex_verify(g_dir) == INFER_OK, "restored: %s", infer_last_error());
}

// ---------------------------------------------------------------------------
// corrupted index.json

// The good index with one edit made by a path "a.b[2].c" and a JSON value
// (NULL: remove the key).
static void edit(const char *label, const char *at, const char *value, const char *want) {
    cJSON *root = cJSON_Parse(g_index), *parent = NULL, *node = root;
    char key[64] = "";
    for (const char *s = at; *s && node;) {
        parent = node;
        if (*s == '[') {
            int i = atoi(s + 1);
            node = cJSON_GetArrayItem(node, i);
            snprintf(key, sizeof key, "[%d", i);
            s = strchr(s, ']') + 1;
        } else {
            size_t n = strcspn(s, ".[");
            snprintf(key, sizeof key, "%.*s", (int)n, s);
            node = cJSON_GetObjectItemCaseSensitive(node, key);
            s += n;
        }
        if (*s == '.') s++;
    }
    CHECK(node != NULL, "%s: no %s in index.json", label, at);
    if (!node) { cJSON_Delete(root); return; }
    if (key[0] == '[') {
        int i = atoi(key + 1);
        if (value) cJSON_ReplaceItemInArray(parent, i, cJSON_Parse(value));
        else cJSON_DeleteItemFromArray(parent, i);
    } else if (value) cJSON_ReplaceItemInObjectCaseSensitive(parent, key, cJSON_Parse(value));
    else cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
    char *text = cJSON_Print(root);
    put_file("index.json", text, strlen(text));
    expect_open_fails(label, want);
    free(text);
    cJSON_Delete(root);
}

static void check_index(void) {
    put_file("index.json", "{\"format\": ", 11);
    expect_open_fails("truncated JSON", "not valid JSON");
    put_file("index.json", "[1, 2]", 6);
    expect_open_fails("an array", "not a JSON object");
    put_file("index.json", "", 0);
    expect_open_fails("empty", "not valid JSON");

    edit("no format", "format", NULL, "format is missing");
    edit("other format", "format", "\"gguf\"", "format is \"gguf\"");
    edit("no version", "version", NULL, "version is missing");
    edit("version as a string", "version", "\"1\"", "version must be a number");
    edit("version 2", "version", "2", "version 2");
    edit("no config", "config", NULL, "config is missing");
    edit("no model", "model", NULL, "model is missing");
    edit("n_layer huge", "model.n_layer", "1e9", "model.n_layer");
    edit("n_layer fractional", "model.n_layer", "2.5", "not an integer");
    edit("n_layer not the layers", "model.n_layer", "4000", "n_ff has 4 entries for 4000 layers");
    edit("n_layer 0", "model.n_layer", "0", "not an integer in [1,");
    edit("n_embd huge", "model.n_embd", "1e300", "model.n_embd");
    edit("n_embd other", "model.n_embd", "128", "bytes");
    edit("n_vocab huge", "model.n_vocab", "4294967296", "model.n_vocab");
    edit("n_vocab other", "model.n_vocab", "100000", "embeddings.bytes");
    edit("gated a number", "model.gated", "1", "model.gated must be true or false");
    edit("n_ff short", "model.n_ff[3]", NULL, "n_ff has 3 entries");
    edit("n_ff differs", "model.n_ff[1]", "64", "n_ff[1] differs");
    edit("no types", "types", NULL, "types is missing");
    edit("unknown type", "types.ffn", "\"q9_9\"", "unknown type \"q9_9\"");
    edit("type a number", "types.lm_head", "8", "types.lm_head must be a string");
    edit("gate q8_0", "types.gate", "\"q8_0\"", "gate vectors are f32, f16 or q4_0");
    edit("type of other size", "types.ffn", "\"f32\"", "layers[0].ffn.bytes");
    edit("k-quant of rows of 64", "types.lm_head", "\"q4_K\"", "not whole q4_K blocks");
    edit("down_top negative", "down_top", "-1", "down_top");
    edit("down_top huge", "down_top", "1e12", "down_top");
    edit("down_top other", "down_top", "11", "down_meta.bytes");
    edit("no layers", "layers", NULL, "layers is missing");
    edit("layers an object", "layers", "{}", "layers must be an array");
    edit("layer a number", "layers[2]", "7", "layers[2] must be an object");
    edit("a layer removed", "layers[3]", NULL, "layers has 3 entries");
    edit("no features", "layers[0].features", NULL, "layers[0].features is missing");
    edit("features huge", "layers[0].features", "1e15", "layers[0].features");
    edit("features 2^24", "layers[0].features", "16777216", "n_ff[0] differs");
    edit("features negative", "layers[1].features", "-128", "layers[1].features");
    edit("no ffn range", "layers[1].ffn", NULL, "layers[1].ffn is missing");
    edit("ffn range a string", "layers[1].ffn", "\"ffn.bin\"", "layers[1].ffn must be an object");
    edit("ffn in another file", "layers[1].ffn.file", "\"gate_vectors.bin\"", "expected \"ffn.bin\"");
    edit("offset negative", "layers[2].ffn.offset", "-64", "layers[2].ffn.offset");
    edit("offset past the end", "layers[3].ffn.offset", "1048576", "past the end of ffn.bin");
    edit("offset 1e15 - 64", "layers[3].ffn.offset", "999999999999936", "past the end");
    edit("offset 2^53 + 64", "layers[3].ffn.offset", "9007199254741056", "layers[3].ffn.offset");
    edit("offset beyond 2^53", "layers[3].ffn.offset", "1e300", "not an integer");
    edit("offset unaligned", "layers[0].gate_vectors.offset", "32", "not a multiple of 64");
    edit("overlap", "layers[1].gate_vectors.offset", "0", "overlap");
    edit("bytes short", "layers[2].down_meta.bytes", "8", "down_meta.bytes is 8");
    edit("bytes huge", "layers[2].gate_vectors.bytes", "1e18", "gate_vectors.bytes");
    edit("no embeddings", "embeddings", NULL, "embeddings is missing");
    edit("embeddings past the end", "embeddings.offset", "64", "past the end of embeddings.bin");
    edit("no files", "files", NULL, "files is missing");
}

// Keys with dots ("ffn.bin") do not fit edit()'s paths: these edit "files".
static void edit_file(const char *label, const char *name, const char *field, const char *value, const char *want) {
    cJSON *root = cJSON_Parse(g_index), *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    if (!name) cJSON_AddItemToObject(files, "../../etc/passwd", cJSON_Parse("{\"bytes\": 1, \"sha256\": \"00\"}"));
    else if (!field) cJSON_DeleteItemFromObjectCaseSensitive(files, name);
    else {
        cJSON *f = cJSON_GetObjectItemCaseSensitive(files, name);
        if (value) cJSON_ReplaceItemInObjectCaseSensitive(f, field, cJSON_Parse(value));
        else cJSON_DeleteItemFromObjectCaseSensitive(f, field);
    }
    char *text = cJSON_Print(root);
    put_file("index.json", text, strlen(text));
    expect_open_fails(label, want);
    free(text);
    cJSON_Delete(root);
}

static void check_files_section(void) {
    edit_file("ffn.bin not listed", "ffn.bin", NULL, NULL, "files.ffn.bin is missing");
    edit_file("no bytes", "lm_head.bin", "bytes", NULL, "files.lm_head.bin.bytes is missing");
    edit_file("bytes wrong", "ffn.bin", "bytes", "1024", "index.json says 1024");
    edit_file("bytes huge", "ffn.bin", "bytes", "1e20", "files.ffn.bin.bytes");
    edit_file("sha256 short", "weights.gguf", "sha256", "\"abc\"", "64 lowercase hex digits");
    edit_file("sha256 a number", "weights.gguf", "sha256", "12", "sha256 must be a string");
    edit_file("unknown file", NULL, NULL, NULL, "unknown file \"../../etc/passwd\"");
}

// ---------------------------------------------------------------------------
// every key removed and every number made hostile: fail cleanly or open

static int g_tries, g_opened;

static void try_open(cJSON *root) {
    char *text = cJSON_PrintUnformatted(root);
    put_file("index.json", text, strlen(text));
    free(text);
    vindex *v = NULL;
    g_tries++;
    if (vindex_open(g_dir, &v) == INFER_OK) {
        // what opened must be consistent: the last byte of every part is readable
        g_opened++;
        for (int il = 0; il < vindex_n_layer(v); il++) {
            const tensor *t = vindex_ffn(v, il);
            volatile unsigned char x = ((const unsigned char *)t->data)[t->nbytes - 1];
            (void)x;
        }
        vindex_close(v);
    }
}

// The k-th node under node, depth first from 0, with its parent; k counts down.
static cJSON *nth(cJSON *node, int *k, cJSON **parent) {
    for (cJSON *c = node->child; c; c = c->next) {
        if ((*k)-- == 0) { *parent = node; return c; }
        cJSON *r = nth(c, k, parent);
        if (r) return r;
    }
    return NULL;
}

static void check_hostile(void) {
    static const char *hostile[] = {"-1", "0", "1.5", "1e300", "-1e300", "9007199254740993", "2147483648", "\"x\"", "null", "[]"};
    for (int k = 0;; k++) {
        cJSON *root = cJSON_Parse(g_index), *parent = NULL;
        int i = k;
        cJSON *n = nth(root, &i, &parent);
        if (!n) { cJSON_Delete(root); break; }
        int number = cJSON_IsNumber(n);
        cJSON_Delete(cJSON_DetachItemViaPointer(parent, n));
        try_open(root);
        cJSON_Delete(root);
        for (size_t h = 0; number && h < sizeof hostile / sizeof hostile[0]; h++) {
            root = cJSON_Parse(g_index);
            i = k;
            n = nth(root, &i, &parent);
            cJSON_ReplaceItemViaPointer(parent, n, cJSON_Parse(hostile[h]));
            try_open(root);
            cJSON_Delete(root);
        }
    }
    CHECK(g_tries > 200, "only %d hostile index.json tried", g_tries);
    printf("hostile index.json: %d tried, %d opened (keys that are only informative)\n", g_tries, g_opened);
    put_file("index.json", g_index, g_index_len);
}

int main(void) {
    char tmp[] = "/tmp/infer_vindex_bad_XXXXXX";
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    snprintf(g_dir, sizeof g_dir, "%s/llama.vindex", tmp);
    infer_model *m;
    if (infer_model_load(FIXTURES_DIR "/llama", &m)) { fprintf(stderr, "%s\n", infer_last_error()); return 1; }
    vindex_extract_opts o;
    vindex_extract_defaults(&o);
    CHECK(vindex_extract(m, g_dir, &o, NULL) == INFER_OK, "extract: %s", infer_last_error());
    infer_model_free(m);
    char p[512];
    path_of(p, sizeof p, "index.json");
    g_index = test_read_file(p, &g_index_len);
    CHECK(g_index && vindex_verify(g_dir) == INFER_OK, "the good vindex: %s", infer_last_error());
    if (!g_index) return check_summary("test_vindex_bad");

    check_files();
    check_index();
    check_files_section();
    put_file("index.json", g_index, g_index_len);
    CHECK(vindex_verify(g_dir) == INFER_OK, "restored: %s", infer_last_error());
    check_hostile();
    CHECK(vindex_verify(g_dir) == INFER_OK, "restored: %s", infer_last_error());

    free(g_index);
    for (int i = 0; i < N_FILES; i++) { path_of(p, sizeof p, g_files[i]); unlink(p); }
    path_of(p, sizeof p, "index.json");
    unlink(p);
    rmdir(g_dir);
    rmdir(tmp);
    return check_summary("test_vindex_bad");
}
