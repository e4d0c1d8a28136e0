// The server's text rules (serve.h): where a stop string cuts the text, how
// much of it may be shown while tokens still come, and text made valid UTF-8
// for JSON.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE // memmem
#endif
#include "serve.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t serve_stop_at(const char *s, size_t n, char *const *stop, int n_stop) {
    size_t cut = n;
    for (int i = 0; i < n_stop; i++) {
        const char *p = memmem(s, n, stop[i], strlen(stop[i]));
        if (p && (size_t)(p - s) < cut) cut = (size_t)(p - s);
    }
    return cut;
}

size_t serve_visible(const char *s, size_t n, char *const *stop, int n_stop) {
    size_t hold = 0; // the longest end of the text that begins a stop string
    for (int i = 0; i < n_stop; i++) {
        size_t L = strlen(stop[i]);
        for (size_t k = L - 1 < n ? L - 1 : n; k > hold; k--)
            if (!memcmp(s + n - k, stop[i], k)) {
                hold = k;
                break;
            }
    }
    size_t v = n - hold, i = v; // then back over an unfinished UTF-8 character
    while (i > 0 && v - i < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--;
    if (i > 0) {
        unsigned char c = (unsigned char)s[i - 1];
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (v - (i - 1) < need) v = i - 1;
    }
    return v;
}

char *serve_utf8_clean(const char *s, size_t n) {
    char *o = malloc(3 * n + 1), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 && c >= 0xC2 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 && c <= 0xF4 ? 4 : 0;
        int ok = k > 0 && i + k <= n && c != 0;
        for (size_t j = 1; ok && j < k; j++) ok = ((unsigned char)s[i + j] & 0xC0) == 0x80;
        if (ok && k == 3) ok = !(c == 0xE0 && (unsigned char)s[i + 1] < 0xA0) && !(c == 0xED && (unsigned char)s[i + 1] >= 0xA0);
        if (ok && k == 4) ok = !(c == 0xF0 && (unsigned char)s[i + 1] < 0x90) && !(c == 0xF4 && (unsigned char)s[i + 1] >= 0x90);
        if (ok) memcpy(q, s + i, k), q += k, i += k;
        else memcpy(q, "\xEF\xBF\xBD", 3), q += 3, i++;
    }
    *q = 0;
    return o;
}

void serve_add_text(cJSON *o, const char *name, const char *s, size_t n) {
    char *c = serve_utf8_clean(s, n);
    cJSON_AddStringToObject(o, name, c ? c : "");
    free(c);
}

void serve_failed_error(cJSON *j, const serve_state *st, int *status) {
    cJSON *e = cJSON_AddObjectToObject(j, "error");
    char msg[300];
    snprintf(msg, sizeof msg, "generation failed: %s", st->error[0] ? st->error : "cancelled");
    *status = st->stopping ? 503 : 500;
    cJSON_AddStringToObject(e, "message", st->stopping ? "the server is stopping; try again shortly" : msg);
    cJSON_AddStringToObject(e, "type", "server_error");
    cJSON_AddNullToObject(e, "param");
    cJSON_AddNullToObject(e, "code");
}
