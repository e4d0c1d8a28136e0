// Every fixture family converted to GGUF (f32 and f16), loaded back, and
// checked against transformers' logits with test_fixtures' tolerance: max
// abs error <= 1e-3 of the reference RMS and the same top-1 everywhere; and
// each as an infer_model_spec, converted to the same bytes (check_spec).
//
// f16 of a checkpoint stored in f32 (gemma2, gpt2) rounds every weight to 11
// significant bits (relative step 2^-11); measured 1.8e-3 and 2.0e-3 of the
// RMS, so those get 5e-3. bf16 and f16 checkpoints convert to f16 exactly
// here (tiny weights, well inside f16's range): measured <= 6e-6.
#include "check.h"
#include "infer.h"
#include "models/model.h"
#include "models/gguf.h"
#include "models/gguf_convert.h"
#include "tensor/dtype.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// infer_convert_gguf_spec: the checkpoint as a spec (config.json's text, its
// tensors declared, their bytes made by a fill that copies them) converts to
// the same file, byte for byte, as the directory (config.json and the
// safetensors files only: a spec holds no generation_config.json).

typedef struct { const infer_model *m; const char *fail_on; int calls; } fill_src;

static int fill_copy(void *user, const char *name, void *dst, size_t nbytes) {
    fill_src *f = user;
    f->calls++;
    const tensor *t = store_find(&f->m->store, name);
    if (!t || t->nbytes != nbytes || (f->fail_on && !strcmp(name, f->fail_on))) return 1;
    memcpy(dst, t->data, nbytes);
    return 0;
}

static int same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = test_read_file(a, &na), *y = test_read_file(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

static void check_spec(const char *dir, const char *fam, const char *tmp) {
    char sub[1200], path[1600], src[1600], a[1400], b[1400];
    snprintf(sub, sizeof sub, "%s/%s", tmp, fam); // the reference: config.json and safetensors, named as the spec
    mkdir(sub, 0777);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strcmp(e->d_name, "config.json") || strstr(e->d_name, ".safetensors")) {
            snprintf(src, sizeof src, "%s/%s", dir, e->d_name);
            snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
            CHECK(symlink(src, path) == 0, "%s: symlink %s", fam, path);
        }
    if (d) closedir(d);
    infer_model *m;
    CHECK(infer_model_load(sub, &m) == INFER_OK, "%s: %s", fam, infer_last_error());
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *config = test_read_file(path, NULL);
    int n = m ? m->store.n : 0, floats = 1;
    infer_tensor_spec *ts = calloc((size_t)n + 1, sizeof *ts);
    for (int i = 0; i < n; i++) {
        const tensor *t = &m->store.t[i];
        floats &= t->type == DT_F32 || t->type == DT_F16 || t->type == DT_BF16;
        ts[i] = (infer_tensor_spec){.name = t->name, .type = t->type, .nd = t->nd};
        for (int k = 0; k < t->nd; k++) ts[i].shape[k] = t->ne[t->nd - 1 - k];
    }
    fill_src fs = {m, NULL, 0};
    infer_model_spec spec = {.name = fam, .config = config, .tensors = ts, .n_tensors = n, .fill = fill_copy, .user = &fs};
    snprintf(a, sizeof a, "%s/%s.dir.gguf", tmp, fam);
    snprintf(b, sizeof b, "%s/%s.spec.gguf", tmp, fam);
    if (m && config && floats) {
        infer_status st = infer_convert_gguf_spec(&spec, b, "q8_0", NULL);
        if (m->cfg.n_expert) {
            CHECK(st == INFER_ERR_UNSUPPORTED && strstr(infer_last_error(), "experts"), "%s: a spec with experts: %s", fam,
                  st ? infer_last_error() : "converted");
        } else {
            CHECK(st == INFER_OK, "%s: convert the spec: %s", fam, infer_last_error());
            CHECK(infer_convert_gguf(m, a, "q8_0") == INFER_OK, "%s: convert: %s", fam, infer_last_error());
            CHECK(same_bytes(a, b), "%s: the spec's GGUF differs from the directory's", fam);
            printf("%-20s spec: the same file as the checkpoint's (%d tensors made)\n", fam, fs.calls);
            // a tensor that cannot be made stops the write, which leaves nothing behind
            fs.fail_on = ts[n / 2].name;
            unlink(b);
            st = infer_convert_gguf_spec(&spec, b, "q8_0", NULL);
            CHECK(st != INFER_OK && strstr(infer_last_error(), fs.fail_on), "%s: a failed fill: %s", fam,
                  st ? infer_last_error() : "converted");
            CHECK(access(b, F_OK) != 0, "%s: a failed fill left %s", fam, b);
        }
    }
    // nothing but what this test made is left in tmp (no NAME.tmp.PID)
    d = opendir(tmp);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *x = e->d_name, *ok[] = {".", "..", fam, strrchr(a, '/') + 1, strrchr(b, '/') + 1};
        int known = 0;
        for (int k = 0; k < 5; k++) known |= !strcmp(x, ok[k]);
        CHECK(known, "%s: %s left in %s", fam, x, tmp);
    }
    if (d) closedir(d);
    unlink(a), unlink(b);
    d = opendir(sub);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') snprintf(path, sizeof path, "%s/%s", sub, e->d_name), unlink(path);
    if (d) closedir(d);
    rmdir(sub);
    free(ts);
    free(config);
    infer_model_free(m);
}

static void check_family(const char *dir, const char *tmp) {
    char path[1200], out[1200];
    const char *fam = strrchr(dir, '/') + 1;
    snprintf(path, sizeof path, "%s/reference.json", dir);
    char *text = test_read_file(path, NULL);
    if (!text) return;
    cJSON *ref = cJSON_Parse(text);
    free(text);
    const cJSON *jids = cJSON_GetObjectItem(ref, "input_ids");
    int T = cJSON_GetArraySize(jids);
    int32_t *ids = malloc(sizeof *ids * (size_t)T);
    int k = 0;
    for (const cJSON *e = jids->child; e; e = e->next) ids[k++] = (int32_t)e->valuedouble;

    infer_model *hf;
    CHECK(infer_model_load(dir, &hf) == INFER_OK, "%s: %s", fam, infer_last_error());
    if (!hf) goto done;
    int V = infer_model_n_vocab(hf);
    int low_precision_source = !strcmp(hf->cfg.dtype, "bfloat16") || !strcmp(hf->cfg.dtype, "float16");
    size_t n_ref = 0;
    snprintf(path, sizeof path, "%s/ref_logits.f32", dir);
    float *ref_logits = (float *)test_read_file(path, &n_ref);
    CHECK(ref_logits && n_ref == sizeof(float) * (size_t)T * V, "%s: reference logits", fam);
    float *logits = malloc(sizeof(float) * (size_t)T * V);

    const int types[2] = {DT_F32, DT_F16};
    for (int ti = 0; ti < 2 && ref_logits; ti++) {
        const char *tn = dtype_get(types[ti])->name;
        snprintf(out, sizeof out, "%s/%s.%s.gguf", tmp, fam, tn);
        CHECK(gguf_convert(hf, out, types[ti]) == INFER_OK, "%s %s: convert: %s", fam, tn, infer_last_error());

        // The file names llama.cpp's architecture.
        gguf_file *g = NULL;
        char arch[32] = "";
        CHECK(gguf_open(&g, out) == INFER_OK, "%s", infer_last_error());
        if (g) {
            gguf_get_str_copy(g, "general.architecture", arch, sizeof arch);
            CHECK(!strcmp(arch, gguf_arch_of(hf->cfg.model_type)), "%s: architecture %s", fam, arch);
            gguf_close(g);
        }

        infer_model *m;
        CHECK(infer_model_load(out, &m) == INFER_OK, "%s %s: load: %s", fam, tn, infer_last_error());
        if (!m) continue;
        CHECK(m->n_unused == 0, "%s %s: %d tensors not used", fam, tn, m->n_unused);
        infer_ctx *c;
        CHECK(infer_ctx_new(m, T + 4, &c) == INFER_OK, "%s", infer_last_error());
        CHECK(infer_eval(c, ids, T, logits, 0) == INFER_OK, "%s", infer_last_error());
        double e = test_rel_err(logits, ref_logits, (size_t)T * V);
        double tol = types[ti] == DT_F16 && !low_precision_source ? 5e-3 : 1e-3;
        int top_ok = 1;
        for (int t = 0; t < T; t++) top_ok &= test_argmax(logits + (size_t)t * V, V) == test_argmax(ref_logits + (size_t)t * V, V);
        CHECK(e <= tol, "%s %s: logits max error %.3g of the RMS (bound %.0e)", fam, tn, e, tol);
        CHECK(top_ok, "%s %s: top-1 differs at some position", fam, tn);
        printf("%-20s %-4s %s  max error %.2e of RMS  top-1 %s\n", fam, tn, arch, e, top_ok ? "same" : "DIFFERS");
        infer_ctx_free(c);
        infer_model_free(m);
        unlink(out);
    }
    free(logits);
    free(ref_logits);
    infer_model_free(hf);
done:
    free(ids);
    cJSON_Delete(ref);
}

int main(void) {
    char tmp[] = "/tmp/infer_gguf_convert_XXXXXX";
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    char **dirs;
    int n = test_fixture_dirs(&dirs, NULL);
    CHECK(n > 0, "no fixture families in %s", FIXTURES_DIR);
    for (int i = 0; i < n; i++) {
        check_family(dirs[i], tmp);
        check_spec(dirs[i], strrchr(dirs[i], '/') + 1, tmp);
        free(dirs[i]);
    }
    free(dirs);
    rmdir(tmp);
    return check_summary("gguf_convert");
}
