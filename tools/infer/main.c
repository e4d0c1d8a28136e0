// infer: the command-line interface. One file per subcommand.
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

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
    "  synth --shape 1b --type q4_k_m -o X.gguf  a GGUF of random weights with Gemma 3's shapes (270m 1b 4b 12b 27b)\n"
    "        --arch llama --shape 8b|70b         ... with Llama 3's shapes\n"
    "  quantize IN.gguf OUT.gguf TYPE            re-encode a GGUF file's matrices (q8_0, q4_k_m, q6_k, f16, ...)\n"
    "  extract [-m MODEL] -o OUT.vindex          write a vindex: FFN per feature, gate vectors, down_meta, lm_head\n"
    "          [--gate f32|f16|q4] [--ffn f16|q8_0|q4_k] [--lm-head q4_k|q8_0|q4_0|f16] [--down-top N] [-t N]\n"
    "  verify  DIR.vindex                        check a vindex's index, byte ranges and sha256 of every file\n"
    "  tokenize [-m MODEL] -p TEXT               the token ids of a text (MODEL may be a vocabulary alone)\n"
    "  embed -m MODEL -p TEXT [-p TEXT ...]      embeddings of texts (BERT encoders, or pooled from a decoder)\n"
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
    {"embed", cmd_embed},
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

// `--tp N [--split row|layer]` after a command that runs a model (run,
// logits, bench, serve): the command as rank 0 of a job of N ranks, one process
// each, splitting the model by rows (tensor parallel) or layers (pipeline),
// started here with the same arguments (INFER_TP_WORLD, INFER_TP_RANK,
// INFER_TP_ID and one sampling seed in the environment; infer_model_load
// reads them). The other ranks' output goes to /dev/null (INFER_TP_VERBOSE=1:
// their stderr stays), and they end when rank 0 does. Returns -1 to go on as
// rank 0 (the flag taken out of argv), else the exit status.
static pid_t g_ranks[INFER_TP_MAX_RANKS];
static int g_n_ranks;

// Takes `--NAME V` or `--NAME=V` out of argv (after the command, before any
// "--"): V, or NULL when absent ("" when the value is missing).
static const char *take_flag(int *argc, char **argv, const char *name) {
    size_t k = strlen(name);
    for (int i = 2; i < *argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (strncmp(argv[i], "--", 2) || strncmp(argv[i] + 2, name, k) || (argv[i][2 + k] && argv[i][2 + k] != '=')) continue;
        int eq = argv[i][2 + k] == '=';
        const char *v = eq ? argv[i] + 3 + k : i + 1 < *argc ? argv[i + 1] : "";
        int drop = eq || i + 1 >= *argc ? 1 : 2;
        memmove(argv + i, argv + i + drop, sizeof *argv * (size_t)(*argc - i - drop + 1));
        *argc -= drop;
        return v;
    }
    return NULL;
}

static int tp_launch(int *argc, char **argv) {
    const char *val = take_flag(argc, argv, "tp"), *split = take_flag(argc, argv, "split");
    if (split && strcmp(split, "row") && strcmp(split, "layer"))
        return cli_error("--split: \"%s\" is not row (tensor parallel) or layer (pipeline)", split);
    if (split && !val) return cli_error("--split %s: with --tp N (the number of processes)", split);
    if (!val) return -1;
    char *end;
    errno = 0;
    long n = strtol(val, &end, 10);
    if (errno || end == val || *end || n < 1 || n > INFER_TP_MAX_RANKS)
        return cli_error("--tp: \"%s\" is not a number of ranks (1 to %d)", val, INFER_TP_MAX_RANKS);
    if (n == 1) return -1;
    if (strcmp(argv[1], "run") && strcmp(argv[1], "logits") && strcmp(argv[1], "bench") && strcmp(argv[1], "serve"))
        return cli_error("--tp: %s does not run split over processes (run, logits, bench and serve do)", argv[1]);
    if (getenv("INFER_TP_WORLD")) return cli_error("--tp: already a rank of a job (INFER_TP_WORLD is set)");
    char id[64], num[32];
    infer_tp_new_id(id, sizeof id);
    snprintf(num, sizeof num, "%ld", n);
    setenv("INFER_TP_WORLD", num, 1), setenv("INFER_TP_ID", id, 1), setenv("INFER_TP_RANK", "0", 1);
    setenv("INFER_TP_SPLIT", split ? split : "row", 1);
    unsetenv("INFER_TP_ADDR"); // (one host: its ranks meet in shared memory; TCP is for ranks started by hand)
    // NVLink multicast: never, in every rank (compute/nccl.c sets them too)
    setenv("NCCL_NVLS_ENABLE", "0", 1), setenv("NVSHMEM_DISABLE_NVLS", "1", 1), setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
    snprintf(num, sizeof num, "%llu", (unsigned long long)cli_seed());
    setenv("INFER_TP_SEED", num, 0); // (one default seed: the ranks sample the same tokens from the same logits)
    const char *v = getenv("INFER_TP_VERBOSE");
    int verbose = v && *v && *v != '0';
    fflush(NULL);
    for (int r = 1; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) return cli_error("--tp: starting rank %d: %s", r, strerror(errno));
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM); // (rank 0 gone: so is this one)
            snprintf(num, sizeof num, "%d", r);
            setenv("INFER_TP_RANK", num, 1);
            int fd = open("/dev/null", O_RDWR);
            if (fd >= 0) {
                dup2(fd, 0), dup2(fd, 1);
                if (!verbose) dup2(fd, 2);
            }
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        g_ranks[g_n_ranks++] = pid;
    }
    return -1;
}

// Rank 0's command is done: the others finish their part (their last
// collective was rank 0's), or are stopped.
static int tp_wait(int rc) {
    for (int i = 0; i < g_n_ranks; i++) {
        int status = 0;
        if (rc) kill(g_ranks[i], SIGTERM);
        if (waitpid(g_ranks[i], &status, 0) == g_ranks[i] && !rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            rc = cli_error("--tp: rank %d ended with status %d (INFER_TP_VERBOSE=1 shows its messages)", i + 1,
                           WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    return rc;
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
    int tp = tp_launch(&argc, argv);
    if (tp >= 0) return tp;
    for (size_t i = 0; i < sizeof g_commands / sizeof g_commands[0]; i++)
        if (!strcmp(argv[1], g_commands[i].name)) return tp_wait(g_commands[i].run(argc - 1, argv + 1));
    return cli_error("unknown command \"%s\" (infer --help lists them)", argv[1]);
}
