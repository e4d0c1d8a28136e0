// Reference ids from llama.cpp's own tokenizer, for scripts/gen-tokenizer-llamacpp.py.
// Built by that script against libllama from the llama-cpp-python sdist (in the
// cache outside the repository); never part of the engine.
//
//   llamacpp-tok VOCAB.gguf TEXTS.bin            one block per text (below)
//   llamacpp-tok VOCAB.gguf TEXTS.bin --bench R  tokenizing speed: R passes, MB/s
//
// TEXTS.bin: the texts, each as a little-endian uint32 byte count and the bytes.
// Output per text, three lines:
//   S <ids>    llama_tokenize(add_special = true,  parse_special = true)
//   P <ids>    llama_tokenize(add_special = false, parse_special = false)
//   D <hex>    llama_detokenize(P's ids, remove_special = false, unparse_special = true)
// A call that throws prints "E <message>" in place of its line.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

static void quiet(enum ggml_log_level, const char *, void *) {}

static std::vector<std::string> read_texts(const char *path) {
    std::vector<std::string> out;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    uint32_t n;
    while (fread(&n, 4, 1, f) == 1) {
        std::string s(n, '\0');
        if (n && fread(&s[0], 1, n, f) != n) {
            fprintf(stderr, "%s: truncated\n", path);
            exit(1);
        }
        out.push_back(s);
    }
    fclose(f);
    return out;
}

static std::vector<llama_token> tokenize(const llama_vocab *v, const std::string &s, bool add, bool parse) {
    std::vector<llama_token> ids(s.size() + 16);
    int n = llama_tokenize(v, s.data(), (int32_t)s.size(), ids.data(), (int32_t)ids.size(), add, parse);
    if (n < 0) {
        ids.resize(-n);
        n = llama_tokenize(v, s.data(), (int32_t)s.size(), ids.data(), (int32_t)ids.size(), add, parse);
    }
    ids.resize(n < 0 ? 0 : n);
    return ids;
}

static void print_ids(char tag, const std::vector<llama_token> &ids) {
    putchar(tag);
    for (llama_token t : ids) printf(" %d", t);
    putchar('\n');
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s VOCAB.gguf TEXTS.bin [--bench R]\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m) {
        printf("E cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab *v = llama_model_get_vocab(m);
    std::vector<std::string> texts = read_texts(argv[2]);
    if (argc >= 5 && !strcmp(argv[3], "--bench")) {
        int reps = atoi(argv[4]);
        size_t bytes = 0, tokens = 0;
        auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; r++)
            for (const std::string &s : texts) {
                bytes += s.size();
                tokens += tokenize(v, s, false, false).size();
            }
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("bytes %zu tokens %zu seconds %.6f MB/s %.3f\n", bytes, tokens, sec, bytes / sec / 1e6);
        return 0;
    }
    for (const std::string &s : texts) {
        std::vector<llama_token> p;
        try {
            print_ids('S', tokenize(v, s, true, true));
        } catch (const std::exception &e) {
            printf("E %s\n", e.what());
        }
        try {
            p = tokenize(v, s, false, false);
            print_ids('P', p);
        } catch (const std::exception &e) {
            printf("E %s\n", e.what());
        }
        try {
            std::vector<char> buf(s.size() * 4 + 64);
            int n = llama_detokenize(v, p.data(), (int32_t)p.size(), buf.data(), (int32_t)buf.size(), false, true);
            if (n < 0) {
                buf.resize(-n);
                n = llama_detokenize(v, p.data(), (int32_t)p.size(), buf.data(), (int32_t)buf.size(), false, true);
            }
            putchar('D');
            putchar(' ');
            for (int i = 0; i < n; i++) printf("%02x", (unsigned char)buf[i]);
            putchar('\n');
        } catch (const std::exception &e) {
            printf("E %s\n", e.what());
        }
    }
    llama_model_free(m);
    return 0;
}
