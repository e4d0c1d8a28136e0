// llama-server's slot endpoints (serve.h): GET /slots, and POST
// /slots/ID?action=save|restore|erase, whose files (save, restore: the body's
// "filename", a plain name) live in --slot-save-path. A long system prompt's
// KV cache so outlives a restart: after a restore, a request whose prompt
// begins with the slot's tokens evaluates only the rest.
#include "serve.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int json_out(cJSON *j, char **out) {
    *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return *out ? 0 : -1;
}

static int refuse(serve_check *k, int status, const char *msg) {
    k->status = status;
    snprintf(k->msg, sizeof k->msg, "%s", msg);
    return -1;
}

// GET /slots: each slot's id, positions, whether a request holds it, and the tokens its cache holds.
static int list(serve_engine *e, char **out) {
    int n = serve_engine_n_slots(e);
    serve_slot_op *o = calloc((size_t)n, sizeof *o);
    if (!o) return -1;
    for (int i = 0; i < n; i++) o[i] = (serve_slot_op){.op = SLOT_INFO, .slot = i};
    serve_engine_slot_ops(e, o, n);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "id", i);
        cJSON_AddNumberToObject(s, "n_ctx", serve_engine_n_ctx(e));
        cJSON_AddBoolToObject(s, "is_processing", o[i].busy);
        cJSON_AddNumberToObject(s, "n_cached", o[i].n_tokens);
        cJSON_AddItemToArray(a, s);
    }
    free(o);
    return json_out(a, out);
}

static int plain_name(const char *s) {
    if (!*s || *s == '.' || strlen(s) > 200) return 0;
    for (; *s; s++)
        if (*s == '/' || (unsigned char)*s < 0x20 || *s == 0x7f) return 0;
    return 1;
}

// The body's "filename": a plain name of a file in dir (no '/', not starting
// with '.': nothing outside it, no hidden or temporary file), into path.
static int file_of(serve_check *k, const char *dir, const char *body, size_t len, char *path, size_t cap, char *name, size_t ncap) {
    cJSON *j = serve_parse_body(k, body, len);
    if (!j) return -1;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "filename");
    int rc = -1;
    if (!cJSON_IsString(f)) serve_bad(k, "filename", "'filename' must be a string, the name of a file in --slot-save-path");
    else if (!plain_name(f->valuestring))
        serve_bad(k, "filename", "'filename' must be a plain file name of 1 to 200 bytes (no '/', no control characters, not starting with '.')");
    else {
        snprintf(path, cap, "%s/%s", dir, f->valuestring);
        snprintf(name, ncap, "%s", f->valuestring);
        rc = 0;
    }
    cJSON_Delete(j);
    return rc;
}

int serve_slots_answer(serve_check *k, serve_engine *e, const char *dir, const char *url, const char *method, const char *action,
                       const char *body, size_t len, char **out) {
    *out = NULL;
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!e) return refuse(k, 501, "this server has no slots (the model is an encoder)");
    if (!strcmp(url, "/slots")) {
        if (!get) return refuse(k, 405, "/slots: use GET (a slot's actions: POST /slots/ID?action=save|restore|erase)");
        return list(e, out) ? refuse(k, 500, "out of memory") : 0;
    }
    if (strcmp(method, "POST")) return refuse(k, 405, "/slots/ID: use POST, with ?action=save|restore|erase");
    const char *id = url + 7; // (after "/slots/")
    int n = serve_engine_n_slots(e);
    long slot = -1;
    if (*id && strspn(id, "0123456789") == strlen(id) && strlen(id) < 6) slot = strtol(id, NULL, 10);
    if (slot < 0 || slot >= n) return serve_bad(k, "id_slot", "slot \"%.40s\": the slots are 0 to %d", id, n - 1);
    int op = !action ? -1 : !strcmp(action, "save") ? SLOT_SAVE : !strcmp(action, "restore") ? SLOT_RESTORE : !strcmp(action, "erase") ? SLOT_ERASE : -1;
    if (op < 0) return serve_bad(k, "action", "?action= must be save, restore or erase (got \"%.40s\")", action ? action : "");
    char path[4352], name[256] = "";
    serve_slot_op o = {.op = op, .slot = (int)slot, .path = path};
    if (op != SLOT_ERASE) {
        if (!dir) return refuse(k, 501, "saving and restoring slots needs the server started with --slot-save-path DIR");
        if (file_of(k, dir, body, len, path, sizeof path, name, sizeof name)) return -1;
    }
    serve_engine_slot_ops(e, &o, 1);
    if (o.status) return refuse(k, o.status, o.msg);
    cJSON *j = cJSON_CreateObject(), *t = NULL;
    cJSON_AddNumberToObject(j, "id_slot", (double)slot);
    if (op == SLOT_ERASE) {
        cJSON_AddNumberToObject(j, "n_erased", o.n_tokens);
        return json_out(j, out) ? refuse(k, 500, "out of memory") : 0;
    }
    cJSON_AddStringToObject(j, "filename", name);
    cJSON_AddNumberToObject(j, op == SLOT_SAVE ? "n_saved" : "n_restored", o.n_tokens);
    cJSON_AddNumberToObject(j, op == SLOT_SAVE ? "n_written" : "n_read", (double)o.bytes);
    t = cJSON_AddObjectToObject(j, "timings");
    cJSON_AddNumberToObject(t, op == SLOT_SAVE ? "save_ms" : "restore_ms", o.ms);
    return json_out(j, out) ? refuse(k, 500, "out of memory") : 0;
}
