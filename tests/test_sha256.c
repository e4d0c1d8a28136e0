// SHA-256 against the FIPS 180-2 / NIST CAVS example vectors, and the
// streaming interface giving the same digest however the input is split.
#include "check.h"
#include "base/sha256.h"

#include <string.h>

static void hex_of(const char *s, size_t n, char out[65]) { sha256_buf_hex(s, n, out); }

int main(void) {
    static const struct { const char *in, *hex; } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char h[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        hex_of(v[i].in, strlen(v[i].in), h);
        CHECK(!strcmp(h, v[i].hex), "vector %zu: got %s", i, h);
    }

    // one million 'a', fed in uneven pieces
    static char a[1000000];
    memset(a, 'a', sizeof a);
    sha256_ctx c;
    unsigned char d[32];
    sha256_init(&c);
    size_t off = 0, step = 1;
    while (off < sizeof a) {
        size_t k = step < sizeof a - off ? step : sizeof a - off;
        sha256_update(&c, a + off, k);
        off += k;
        step = step * 3 % 1000 + 1;
    }
    sha256_final(&c, d);
    sha256_hex(d, h);
    CHECK(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "a x 1e6: got %s", h);

    // every length around the padding boundaries: split or whole gives the same digest
    unsigned char buf[200];
    for (int i = 0; i < 200; i++) buf[i] = (unsigned char)(i * 37 + 11);
    int same = 1;
    for (size_t n = 0; n <= 200; n++) {
        char whole[65], parts[65];
        sha256_buf_hex(buf, n, whole);
        sha256_init(&c);
        for (size_t j = 0; j < n; j++) sha256_update(&c, buf + j, 1);
        sha256_final(&c, d);
        sha256_hex(d, parts);
        same &= !strcmp(whole, parts);
    }
    CHECK(same, "byte-by-byte digests differ from whole-buffer digests");
    return check_summary("test_sha256");
}
