// The server's text rules (tools/infer/serve_text.c) over emoji and CJK:
// stop strings cut where they begin, text is shown growing without ever
// showing part of a stop string or of a UTF-8 character.
#include "check.h"
#include "../tools/infer/serve.h"

#include <string.h>

// feeds s one byte at a time as tokens would bring it: what is shown only
// grows, is whole UTF-8 and never holds a stop string's beginning that the
// final cut removes; returns the final shown text's length
static size_t feed(const char *s, char *const *stop, int n_stop, const char *want) {
    size_t n = strlen(s), shown = 0, cut = n;
    for (size_t i = 1; i <= n; i++) {
        cut = serve_stop_at(s, i, stop, n_stop);
        if (cut < i) break;
        size_t v = serve_visible(s, i, stop, n_stop);
        CHECK(v >= shown, "\"%s\": shown text shrank at byte %zu (%zu -> %zu)", want, i, shown, v);
        if (v > shown) shown = v;
        CHECK(v == 0 || ((unsigned char)s[v] & 0xC0) != 0x80 || v == i, "\"%s\": shown text ends inside a character at byte %zu", want, v);
    }
    CHECK(shown <= strlen(want) && !memcmp(s, want, shown), "\"%s\": shown more than the final text (%zu bytes)", want, shown);
    size_t fin = cut < n ? cut : n;
    CHECK(fin == strlen(want) && !memcmp(s, want, fin), "\"%s\": the text ends at %zu (want %zu)", want, fin, strlen(want));
    return fin;
}

int main(void) {
    char *stop1[] = {"END"}, *stop_emoji[] = {"🙂!"}, *stop_cjk[] = {"再见"}, *two[] = {"zz", "界"};
    feed("Hello 🙂 world END more", stop1, 1, "Hello 🙂 world ");
    feed("你好，世界 END", stop1, 1, "你好，世界 ");
    feed("smile 🙂🙂! then", stop_emoji, 1, "smile 🙂");
    feed("你好再见了", stop_cjk, 1, "你好");
    feed("hello 世界 zz", two, 2, "hello 世");
    feed("no stop here 🎉 at all", stop1, 1, "no stop here 🎉 at all");
    // a partial stop at the end is held back, then shown when it turns out not to be one
    const char *s = "ab EN";
    CHECK(serve_visible(s, strlen(s), stop1, 1) == 3, "a possible stop at the end is held back");
    CHECK(serve_visible("ab ENx", 6, stop1, 1) == 6, "a held-back end is shown once it is not a stop");
    // an unfinished emoji (4 bytes) is held back byte by byte
    const char *e = "x\xF0\x9F\x99\x82";
    for (size_t i = 1; i < 4; i++) CHECK(serve_visible(e, i + 1, NULL, 0) == 1, "an emoji's first %zu bytes are held back", i);
    CHECK(serve_visible(e, 5, NULL, 0) == 5, "the whole emoji is shown");
    return check_summary("serve_text");
}
