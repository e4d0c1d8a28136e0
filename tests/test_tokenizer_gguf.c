// The tokenizer of a GGUF file (tokenizer.ggml.* metadata, through
// tokenizer_from_gguf): the same corpus must give the same ids as through
// tokenizer.json. For Gemma 3 this is the path that derives the merges from
// the scores. Vocabulary metadata of the wrong element types is refused.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer.h"
#include "base/error.h"
#include "check.h"
#include "models/gguf.h"
#include "models/gguf_write.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"

#define ROOT TEST_DATA_DIR "/../.."

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *d = malloc((size_t)n + 1);
    if (fread(d, 1, (size_t)n, f) != (size_t)n) n = 0;
    d[n] = 0;
    fclose(f);
    return d;
}

static void check_model(const char *name) {
    char cmd[2048], path[1024] = {0};
    snprintf(cmd, sizeof cmd, "cd '%s' && scripts/fetch-model.sh %s", ROOT, name);
    FILE *p = popen(cmd, "r");
    if (p) {
        if (!fgets(path, sizeof path, p)) path[0] = 0;
        int rc = pclose(p);
        if (rc) path[0] = 0;
    }
    path[strcspn(path, "\n")] = 0;
    CHECK(path[0], "could not fetch the %s GGUF (`%s` failed; needs network and pip)", name, cmd);
    if (!path[0]) return;
    gguf_file *g = NULL;
    infer_status st = gguf_open(&g, path);
    CHECK(st == INFER_OK, "%s: %s", path, infer_last_error());
    tokenizer *t = NULL;
    if (!st) {
        st = tokenizer_from_gguf(g, &t);
        CHECK(st == INFER_OK && t, "%s: %s", path, infer_last_error());
    }
    if (t) {
        char *corpus = slurp(TEST_DATA_DIR "/tokenizer/corpus.txt");
        snprintf(cmd, sizeof cmd, TEST_DATA_DIR "/tokenizer/%s.ids", name);
        char *exp = slurp(cmd);
        CHECK(corpus && exp, "corpus or %s missing", cmd);
        int n = 0, match = 0;
        int32_t *want = malloc(sizeof(int32_t) << 16);
        for (char *c = corpus, *e = exp; c && e && *c && *e; n++) {
            char *cn = strchr(c, '\n'), *en = strchr(e, '\n');
            if (!cn || !en) break;
            *cn = 0, *en = 0;
            size_t nw = 0;
            for (char *q = e, *end;; q = end) {
                long v = strtol(q, &end, 10);
                if (end == q || nw == 1 << 16) break;
                want[nw++] = (int32_t)v;
            }
            int32_t *ids;
            size_t nids;
            if (!tokenizer_encode(t, c, strlen(c), true, true, &ids, &nids)) {
                int same = nids == nw && !memcmp(ids, want, nw * sizeof *ids);
                match += same;
                if (!same && n - match < 4) fprintf(stderr, "%s (GGUF) line %d differs: \"%s\"\n", name, n, c);
                free(ids);
            }
            c = cn + 1, e = en + 1;
        }
        printf("%s from GGUF metadata: %d/%d lines match\n", name, match, n);
        CHECK(n >= 2000 && match == n, "%s from GGUF: %d of %d lines differ", name, n - match, n);
        free(want), free(corpus), free(exp);
        tokenizer_free(t);
    }
    gguf_close(g);
}

// A small vocabulary written with the given element types must be refused
// (never cast) unless the types are ones llama.cpp reads.
static void check_types(int tokens_type, int scores_type, int types_type, int want_ok, const char *what) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/infer-tokgguf-%d.gguf", (int)getpid());
    gguf_writer *w = gguf_writer_new();
    const char *toks[4] = {"<unk>", "<s>", "a", "b"};
    float sc[4] = {0, 0, -1, -2};
    int32_t ty[4] = {2, 3, 1, 1};
    int32_t ti[4] = {0, 1, 2, 3};
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_str(w, "tokenizer.ggml.model", "llama");
    if (tokens_type == GGUF_STRING) gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 4);
    else gguf_set_arr(w, "tokenizer.ggml.tokens", GGUF_I32, ti, 4);
    if (scores_type == GGUF_F32) gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, sc, 4);
    else if (scores_type == GGUF_I32) gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_I32, ti, 4);
    else gguf_set_arr_str(w, "tokenizer.ggml.scores", toks, 4);
    if (types_type == GGUF_I32) gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, ty, 4);
    else gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_F32, sc, 4);
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    CHECK(gguf_write_file(w, path) == INFER_OK, "%s", infer_last_error());
    gguf_writer_free(w);
    gguf_file *g = NULL;
    tokenizer *t = NULL;
    CHECK(gguf_open(&g, path) == INFER_OK, "%s", infer_last_error());
    infer_status st = g ? tokenizer_from_gguf(g, &t) : INFER_ERR_IO;
    if (want_ok) CHECK(st == INFER_OK && t, "%s: %s", what, infer_last_error());
    else {
        CHECK(st == INFER_ERR_FORMAT && !t, "%s: accepted", what);
        CHECK(strstr(infer_last_error(), "tokenizer.ggml.") != NULL, "%s: message \"%s\" names no key", what, infer_last_error());
    }
    tokenizer_free(t);
    gguf_close(g);
    unlink(path);
}

// A tokenizer we do not run is refused with the key, its value and what is supported.
static void check_refusal(const char *model, const char *pre, const char *key) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/infer-tokgguf-r%d.gguf", (int)getpid());
    gguf_writer *w = gguf_writer_new();
    const char *toks[3] = {"a", "b", "ab"};
    const char *merges[1] = {"a b"};
    gguf_set_str(w, "tokenizer.ggml.model", model);
    if (pre) gguf_set_str(w, "tokenizer.ggml.pre", pre);
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    CHECK(gguf_write_file(w, path) == INFER_OK, "%s", infer_last_error());
    gguf_writer_free(w);
    gguf_file *g = NULL;
    tokenizer *t = NULL;
    CHECK(gguf_open(&g, path) == INFER_OK, "%s", infer_last_error());
    infer_status st = g ? tokenizer_from_gguf(g, &t) : INFER_ERR_IO;
    const char *msg = infer_last_error(), *value = pre ? pre : model;
    CHECK(st == INFER_ERR_UNSUPPORTED && !t, "%s '%s' accepted", key, value);
    CHECK(strstr(msg, key) && strstr(msg, value) && (strstr(msg, "supported") || strstr(msg, "known")),
          "refusal of %s '%s' says \"%s\"", key, value, msg);
    printf("refused as expected: %s\n", msg);
    tokenizer_free(t);
    gguf_close(g);
    unlink(path);
}

int main(void) {
    check_model("gemma3");
    check_model("smollm2");
    check_types(GGUF_STRING, GGUF_F32, GGUF_I32, 1, "right types");
    check_types(GGUF_I32, GGUF_F32, GGUF_I32, 0, "tokens as int32");
    check_types(GGUF_STRING, GGUF_I32, GGUF_I32, 1, "scores as int32"); // llama.cpp reads these too
    check_types(GGUF_STRING, GGUF_STRING, GGUF_I32, 0, "scores as strings");
    check_types(GGUF_STRING, GGUF_F32, GGUF_F32, 0, "token types as f32");
    check_refusal("plamo2", NULL, "tokenizer.ggml.model");
    check_refusal("gpt2", "no-such-pre", "tokenizer.ggml.pre");
    return check_summary("test_tokenizer_gguf");
}
