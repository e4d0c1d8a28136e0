// infer: the command-line interface. One file per subcommand.
#include "cli.h"

#include <stdio.h>
#include <signal.h>
#include <string.h>

static const char *g_usage =
    "usage: infer <command> [options]\n"
    "\n"
    "commands:\n"
    "  info    -m MODEL                          describe a model: config in effect, tensors, memory\n"
    "  logits  -m MODEL --ids 1,2,3 --out FILE   write f32 logits (T x V) for exactly these ids\n"
    "  run     [-m MODEL] -p TEXT [-n N]         generate text (llama.cpp's sampling flags; --temp 0 is greedy)\n"
    "  run     -m MODEL --ids 1,2,3 -n N         the same from token ids, printing token ids\n"
    "  chat    [-m MODEL] [--system TEXT]        interactive chat with the model's chat template\n"
    "  serve   [-m MODEL] [--port 8080] [--parallel N]  an OpenAI-compatible HTTP server\n"
    "  bench   -m MODEL [-t N -p 512 -n 128 -r 5 -o md|json]   prompt and generation speed (llama-bench table)\n"
    "  bench-components [-m MODEL] [-t N -p 6]   µs per layer for each component, and a synthetic Gemma-3-4B layer\n"
    "  bench-knn [-t N] [--features F --hidden H -k K]   gate KNN µs per layer (f32, f16, q4_0), Gemma-3-4B shape\n"
    "  convert HF_DIR OUT.gguf [--type f16]      write a GGUF file that llama.cpp loads (f32 f16 bf16 q8_0 q4_k_m ...)\n"
    "  synth --shape 1b --type q4_k_m -o X.gguf  a GGUF of random weights with Gemma 3's shapes (270m 1b 4b 12b)\n"
    "  quantize IN.gguf OUT.gguf TYPE            re-encode a GGUF file's matrices (q8_0, q4_k_m, q6_k, f16, ...)\n"
    "  extract [-m MODEL] -o OUT.vindex          write a vindex: FFN per feature, gate vectors, down_meta, lm_head\n"
    "          [--gate f32|f16|q4] [--ffn f16|q8_0|q4_k] [--lm-head q4_k|q8_0|q4_0|f16] [--down-top N] [-t N]\n"
    "  verify  DIR.vindex                        check a vindex's index, byte ranges and sha256 of every file\n"
    "  tokenize [-m MODEL] -p TEXT               the token ids of a text (MODEL may be a vocabulary alone)\n"
    "  predict [-m MODEL] [-x VINDEX] -p TEXT [--graph SPEC] [-k K] [--template TEXT] [--walk-only]\n"
    "                                            next-token top 5 with probabilities, phase times, error vs dense\n"
    "  walk    -x VINDEX [-m MODEL] -p TEXT [--layers A-B] [-k K]   the features that fire at each layer, and what they write\n"
    "  bench-walk [-m MODEL] -x VINDEX [-f TEXT] [--ks 1,5,10,...]   walk vs dense: top-1 agreement, KL, FFN time\n"
    "  bench-lm [-m MODEL] -x VINDEX [-f TEXT] [--probes 8,16,...]   the lm_head index vs the head: recall, time\n"
    "\n"
    "MODEL is a Hugging Face directory (config.json + *.safetensors), a .gguf file, or a vindex directory.\n"
    "infer <command> -h prints a command's options.\n"
    "Graphs (SPEC): dense | walk[@K|@P%] | cached:0-B, per layer: \"cached:0-8,walk:9-13@10%,dense:14-17\".\n";

// The subcommands by name ("help" is -h).
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} g_commands[] = {
    {"info", cmd_info},
    {"logits", cmd_logits},
    {"run", cmd_run},
    {"chat", cmd_chat},
    {"serve", cmd_serve},
    {"bench", cmd_bench},
    {"bench-components", cmd_bench_components},
    {"bench-knn", cmd_bench_knn},
    {"bench-walk", cmd_bench_walk},
    {"bench-lm", cmd_bench_lm},
    {"convert", cmd_convert},
    {"synth", cmd_synth},
    {"quantize", cmd_quantize},
    {"extract", cmd_extract},
    {"verify", cmd_verify},
    {"tokenize", cmd_tokenize},
    {"predict", cmd_predict},
    {"walk", cmd_walk},
};

// Stopped by a signal: the files being written are removed (their
// destinations keep what they had), then the signal takes its usual course.
static void on_stop(int sig) {
    infer_abandon_writes();
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv) {
    // (a file-size limit makes writes fail with a message instead of killing us)
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    signal(SIGHUP, on_stop);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        fputs(g_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    for (size_t i = 0; i < sizeof g_commands / sizeof g_commands[0]; i++)
        if (!strcmp(argv[1], g_commands[i].name)) return g_commands[i].run(argc - 1, argv + 1);
    return cli_error("unknown command \"%s\" (infer --help lists them)", argv[1]);
}
