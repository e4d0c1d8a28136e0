// A context's state on disk (infer_ctx_state_save / _load): a context read
// back from a file continues as the one saved did, bit for bit (the next
// token's logits, after the whole state or a prefix of it); the file is
// written whole (no temporary left); and a file cut short, changed, of
// another model (even one of the same shapes), of other cache types, or
// longer than the room given is refused by name, leaving no positions.
#include "check.h"
#include "infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NP = 12, N_CTX = 32 };
static const int32_t g_ids[NP + 1] = {1, 5, 9, 22, 7, 3, 15, 2, 8, 30, 4, 11, 6};

static void write_bytes(const char *path, const char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n, "could not write %s", path);
    if (f) fclose(f);
}

// Loading path into c is refused with st, an error holding `why`, and c holds nothing.
static void refused(infer_ctx *c, const char *path, int cap, infer_status want, const char *why) {
    int32_t ids[N_CTX];
    int n = -1;
    infer_status st = infer_ctx_state_load(c, path, ids, cap, &n, NULL);
    CHECK(st == want && strstr(infer_last_error(), why), "%s: status %d (want %d), \"%s\" (want \"%s\")", why, st, want,
          infer_last_error(), why);
    CHECK(n == 0 && (st == INFER_ERR_IO || infer_ctx_n_past(c) == 0 || infer_ctx_n_past(c) == NP), "%s: n %d, n_past %d", why, n,
          infer_ctx_n_past(c));
}

int main(void) {
    char dir[] = "/tmp/test_state_XXXXXX", path[256], bad[300];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/slot.bin", dir);
    infer_model *m = NULL, *other = NULL;
    CHECK(infer_model_load(FIXTURES_DIR "/llama", &m) == INFER_OK, "%s", infer_last_error());
    CHECK(infer_model_load(FIXTURES_DIR "/mistral", &other) == INFER_OK, "%s", infer_last_error());
    if (!m || !other) return check_summary("test_state");
    int V = infer_model_n_vocab(m);
    infer_ctx *a = NULL, *b = NULL, *o = NULL, *h = NULL;
    CHECK(!infer_ctx_new(m, N_CTX, &a) && !infer_ctx_new(m, N_CTX, &b) && !infer_ctx_new(other, N_CTX, &o) && !infer_ctx_new(m, N_CTX, &h),
          "%s", infer_last_error());
    CHECK(!infer_ctx_set_kv_type(h, "f16", "f16"), "%s", infer_last_error());
    float *ref = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V), *pre = malloc(sizeof(float) * NP * V);

    // the whole state: the next token's logits are the saved context's
    CHECK(!infer_eval(a, g_ids, NP, pre, 0), "%s", infer_last_error());
    size_t nb = 0;
    CHECK(!infer_ctx_state_save(a, path, g_ids, NP, &nb), "save: %s", infer_last_error());
    snprintf(bad, sizeof bad, "%s.tmp", path);
    CHECK(access(bad, F_OK) != 0, "the temporary %s is left", bad);
    size_t len = 0;
    char *file = test_read_file(path, &len);
    CHECK(file && len == nb && len > 48 + NP * 4, "the file's size %zu, save said %zu", len, nb);
    CHECK(!infer_eval(a, &g_ids[NP], 1, ref, 1), "%s", infer_last_error());
    int32_t ids[N_CTX];
    int n = 0;
    size_t rb = 0;
    CHECK(!infer_ctx_state_load(b, path, ids, N_CTX, &n, &rb), "load: %s", infer_last_error());
    CHECK(n == NP && infer_ctx_n_past(b) == NP && !memcmp(ids, g_ids, sizeof(int32_t) * NP) && rb == nb, "loaded %d tokens, n_past %d",
          n, infer_ctx_n_past(b));
    CHECK(!infer_eval(b, &g_ids[NP], 1, got, 1), "%s", infer_last_error());
    CHECK(!memcmp(ref, got, sizeof(float) * V), "the next token's logits after a load differ (rel err %g)", test_rel_err(got, ref, V));

    // a prefix: 8 positions saved, the rest evaluated after the load
    CHECK(!infer_ctx_state_save(a, path, g_ids, 8, NULL), "save 8: %s", infer_last_error());
    CHECK(!infer_ctx_state_load(b, path, ids, N_CTX, &n, NULL) && n == 8, "load 8: %s (%d)", infer_last_error(), n);
    CHECK(!infer_eval(b, &g_ids[8], NP - 8, got, 1), "%s", infer_last_error());
    CHECK(!memcmp(pre + (size_t)(NP - 1) * V, got, sizeof(float) * V), "a prefix's load: the last prompt token's logits differ");
    CHECK(infer_ctx_state_save(a, path, g_ids, NP + 2, NULL) == INFER_ERR_ARG, "saving more positions than the context holds");

    // hostile files (the whole state's bytes, cut or changed)
    infer_ctx_truncate(b, 0);
    CHECK(!infer_eval(b, g_ids, NP, NULL, 0), "%s", infer_last_error());
    snprintf(bad, sizeof bad, "%s/bad.bin", dir);
    write_bytes(bad, file, len / 2);
    refused(b, bad, N_CTX, INFER_ERR_FORMAT, "cut short");
    write_bytes(bad, file, 10);
    refused(b, bad, N_CTX, INFER_ERR_FORMAT, "header");
    write_bytes(bad, file, len - 1);
    refused(b, bad, N_CTX, INFER_ERR_FORMAT, "cut short");
    file[len / 2] ^= 0x40;
    write_bytes(bad, file, len);
    refused(b, bad, N_CTX, INFER_ERR_FORMAT, "checksum");
    file[len / 2] ^= 0x40;
    file[51] ^= 0x7f; // (the first token id's high byte: out of the vocabulary)
    write_bytes(bad, file, len);
    refused(b, bad, N_CTX, INFER_ERR_FORMAT, "outside the vocabulary");
    file[51] ^= 0x7f;
    file[0] = 'X';
    write_bytes(bad, file, len);
    refused(b, bad, N_CTX, INFER_ERR_FORMAT, "magic");
    file[0] = 'I';
    file[32] ^= 1; // (the token count: the size no longer follows)
    write_bytes(bad, file, len);
    refused(b, bad, N_CTX, INFER_ERR_FORMAT, "cut short");
    file[32] ^= 1;
    write_bytes(bad, file, len);
    refused(b, bad, 4, INFER_ERR_ARG, "do not fit");
    refused(o, bad, N_CTX, INFER_ERR_ARG, "another model");
    CHECK(strstr(infer_last_error(), "other weights") != NULL, "same shapes, another model: %s", infer_last_error());
    refused(h, bad, N_CTX, INFER_ERR_ARG, "f32 / f32");
    snprintf(bad, sizeof bad, "%s/none.bin", dir);
    refused(b, bad, N_CTX, INFER_ERR_IO, "No such file");
    // the good file still loads after all that
    CHECK(!infer_ctx_state_load(b, path, ids, N_CTX, &n, NULL) && n == 8, "reload (the prefix's file): %s", infer_last_error());
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.bin", dir);
    CHECK(infer_ctx_state_save(a, bad, g_ids, NP, NULL) == INFER_ERR_IO, "saving into a missing directory");

    free(file), free(ref), free(got), free(pre);
    infer_ctx_free(a), infer_ctx_free(b), infer_ctx_free(o), infer_ctx_free(h);
    infer_model_free(m), infer_model_free(other);
    unlink(path);
    snprintf(bad, sizeof bad, "%s/bad.bin", dir);
    unlink(bad);
    rmdir(dir);
    return check_summary("test_state");
}
