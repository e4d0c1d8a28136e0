// Shared helpers of the CLI subcommands. The CLI uses the engine through
// infer.h alone.
#ifndef INFER_CLI_H
#define INFER_CLI_H

#include <getopt.h>
#include <stdint.h>
#include "infer.h"

// Each subcommand: returns the process exit status.
int cmd_info(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench_components(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench_knn(int argc, char **argv);
int cmd_extract(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_walk(int argc, char **argv);
int cmd_bench_walk(int argc, char **argv);
int cmd_bench_lm(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_serve(int argc, char **argv);
// bench --spec-ngram's (or --model-draft's) decode test (cmd_bench_spec.c): text_path NULL for bench/data/spec-edit.txt
struct cli_draft;
int bench_spec(infer_model *m, const char *text_path, int n_tg, int reps, int k, struct cli_draft *dr, const char *fmt, long threads,
               const char *device, long ngl);

// ---------------------------------------------------------------------------
// Options. Each subcommand has one table of long options (getopt_long) and
// the string of its short ones; the flags several share are parsed here, into
// cli_opts, and their table rows are these macros.

// getopt_long values of the shared long-only flags; a subcommand numbers its
// own from OPT_LOCAL.
enum {
    OPT_TEMP = 256, OPT_TOP_K, OPT_TOP_P, OPT_MIN_P, OPT_REPEAT_PENALTY, OPT_REPEAT_LAST_N, OPT_PRESENCE_PENALTY,
    OPT_FREQUENCY_PENALTY, OPT_DEVICE, OPT_NGL, OPT_CTK, OPT_CTV,
    OPT_CALIB, OPT_CALIB_TOKENS, // (CLI_OPTS_GRAPH_AUTO's)
    OPT_SPEC, OPT_DRAFT, OPT_DRAFT_MAX, OPT_DRAFT_PMIN, // (CLI_OPTS_SPEC's)
    OPT_NUMA, OPT_DETERMINISTIC,
    OPT_LOCAL = 300,
};

#define CLI_OPT_HELP {"help", no_argument, NULL, 'h'}
#define CLI_OPT_MODEL {"model", required_argument, NULL, 'm'}
#define CLI_OPT_THREADS {"threads", required_argument, NULL, 't'}
// --numa distribute|isolate|numactl|none: infer_numa_init (as llama.cpp's)
#define CLI_OPT_NUMA {"numa", required_argument, NULL, OPT_NUMA}, {"deterministic", no_argument, NULL, OPT_DETERMINISTIC}
#define CLI_USAGE_NUMA                                                                                            \
    "      --numa S           the threads on NUMA nodes, as llama.cpp's: distribute (spread over every node),\n"   \
    "                         isolate (the node it starts on), numactl (the CPUs numactl gave), none (default)\n"   \
    "      --deterministic    a token's logits the same however a prompt is split into calls: on a CPU with\n"    \
    "                         AMX, prompts on the decode kernels (2-3x slower); on a GPU, a batch's sequences\n"   \
    "                         each as alone (infer_ctx_params.deterministic)\n"
#define CLI_OPT_CTX {"ctx-size", required_argument, NULL, 'c'}
// --device cpu|cuda: the backend a context runs on (cuda: the first GPU)
#define CLI_OPT_DEVICE {"device", required_argument, NULL, OPT_DEVICE}
// -ngl, --n-gpu-layers N: llama.cpp's layers on the GPU (cli_next reads "-ngl" as the long flag)
#define CLI_OPT_NGL {"n-gpu-layers", required_argument, NULL, OPT_NGL}
#define CLI_USAGE_DEVICE                                                                                          \
    "      --device cpu|cuda  where the model runs (default: cuda when a GPU is present, else cpu)\n"                 \
    "  -ngl, --n-gpu-layers N with cuda: the last N layers on the GPU, the others on the CPU; the output\n"         \
    "                         layer too when N > the layer count (as llama.cpp: 99 = all, the default)\n"
// -ctk, --cache-type-k and -ctv, --cache-type-v TYPE: the KV cache's types
// (infer_ctx_set_kv_type; cli_next reads "-ctk" / "-ctv" as the long flags)
#define CLI_OPTS_CACHE {"cache-type-k", required_argument, NULL, OPT_CTK}, {"cache-type-v", required_argument, NULL, OPT_CTV}
#define CLI_USAGE_CACHE                                                                                           \
    "  -ctk, --cache-type-k T the KV cache's keys as f32, f16 or q8_0 (default: f16 for quantized weights,\n"     \
    "                         whose K/V llama.cpp rounds to f16 anyway; f32 for 16- and 32-bit ones, exact;\n"     \
    "                         f16 for them halves the cache)\n"                                                      \
    "  -ctv, --cache-type-v T the same for its values\n"
// llama.cpp's sampling flags (short: -s)
#define CLI_OPTS_SAMPLING                                                                                            \
    {"seed", required_argument, NULL, 's'}, {"temp", required_argument, NULL, OPT_TEMP},                              \
        {"top-k", required_argument, NULL, OPT_TOP_K}, {"top-p", required_argument, NULL, OPT_TOP_P},                 \
        {"min-p", required_argument, NULL, OPT_MIN_P}, {"repeat-penalty", required_argument, NULL, OPT_REPEAT_PENALTY}, \
        {"repeat-last-n", required_argument, NULL, OPT_REPEAT_LAST_N},                                                \
        {"presence-penalty", required_argument, NULL, OPT_PRESENCE_PENALTY},                                          \
        {"frequency-penalty", required_argument, NULL, OPT_FREQUENCY_PENALTY}

// What the shared flags set (the ones a subcommand's table lists).
typedef struct {
    const char *cmd;         // the subcommand, for messages
    const char *usage;       // what -h, --help prints
    const char *model;       // -m, --model: NULL until given
    long n_ctx;              // -c, --ctx-size: 0 until given
    long threads;            // -t, --threads: 0 until given (also handed to cli_set_threads)
    infer_sampling sampling; // -s, --seed, --temp, ...: llama.cpp's defaults and a seed from cli_seed()
    long ngl;                // -ngl, --n-gpu-layers: -1 (all) until given
    const char *ctk, *ctv;   // -ctk, -ctv: NULL (the default) until given; cli_place applies them
    const char *calib;       // --calib (CLI_OPTS_GRAPH_AUTO): NULL until given
    long calib_tokens;       // --calib-tokens: CLI_CALIB_TOKENS until given
    int status;              // the exit status when cli_next returns CLI_STOP
    int ngl_read;            // (cli_next has rewritten "-ngl" as "--n-gpu-layers")
} cli_opts;

enum { CLI_END = 0, CLI_STOP = -1 };

void cli_opts_init(cli_opts *o, const char *cmd, const char *usage);

// The next of the subcommand's own options (its value in optarg), CLI_END
// after the last (the arguments that are not options are then argv[optind..]),
// or CLI_STOP: after -h printed the usage to stdout (status 0), or after a
// bad command line was reported in one line on stderr (status 1). shortopts:
// getopt's string for the table (without a leading ':').
int cli_next(cli_opts *o, int argc, char **argv, const char *shortopts, const struct option *longopts);

// Places a new context where the flags say: the KV cache types of -ctk / -ctv
// (the last parsed), then ngl GPU layers (-1: all),
// so that a device lays its memory out once, then the backend: device's, or
// with device NULL cuda where a GPU is present and runs the model (else cpu;
// what made it fall back is said on stderr, once). 0, or -1 with the reason
// in infer_last_error().
int cli_place(infer_ctx *c, const char *device, long ngl);

// The -t thread count (1 until given) of what the helpers below make: a
// model's own lookups (infer_model_set_threads), contexts, batches. 0, or -1
// with the reason in infer_last_error().
void cli_set_threads(int n);
int cli_threads(void);
int cli_deterministic(void); // --deterministic given
int cli_model_load(const char *path, infer_model **m);
int cli_ctx_new(infer_model *m, int n_ctx, infer_ctx **c);
int cli_batch_new(infer_model *m, infer_batch **b);

// A seed that differs from run to run (wall-clock nanoseconds and the process id).
uint64_t cli_seed(void);

// ---------------------------------------------------------------------------
// Values and reports

// Prints "infer: <message>" to stderr and returns 1.
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Parses "1,2,3" into a new array; NULL (with a message) when malformed.
int32_t *cli_parse_ids(const char *s, int *n);
// Parses a non-negative integer flag value; -1 (reported) when malformed or above max.
long cli_parse_count(const char *flag, const char *s, long max);

// The default model (Gemma 3 270M Q4_K_M) from the cache, fetched with
// scripts/fetch-model.sh when absent; NULL (with a message) on failure.
const char *cli_default_model(void);
// The default of infer serve and infer chat: an instruction-tuned model
// (SmolLM2-135M-Instruct Q4_1), fetched the same way.
const char *cli_chat_model(void);

// A text file whole, NUL-terminated (malloc'd; *len its bytes), or NULL
// with a message naming cmd and the file: unreadable, empty or over 16 MB.
char *cli_read_text(const char *cmd, const char *path, size_t *len);
// path, or the repository's bench/data/english.txt when path is NULL (into buf)
const char *cli_bench_text(const char *path, char *buf, size_t cap);

// --graph SPEC: "auto:KL" ("autoc:KL": the walk by contribution) becomes the
// graph infer_graph_auto picks on the first o->calib_tokens tokens of the
// calibration text (o->calib, or bench/data/english.txt), reported on
// stderr; any other spec is copied. 0 (out holds the spec), or 1 with the
// error printed. cli_graph_flags: 1 (reported) when --calib or
// --calib-tokens is given without an auto graph, else 0.
enum { CLI_CALIB_TOKENS = 128 };
#define CLI_USAGE_GRAPH_AUTO \
    "                         auto:KL (autoc:KL, the walk by contribution): dense or walk@P% chosen per layer on a\n" \
    "                         calibration text so that the mean KL against dense stays <= KL (infer_graph_auto)\n" \
    "      --calib FILE       auto's calibration text (default bench/data/english.txt)\n" \
    "      --calib-tokens N   auto calibrates on the text's first N tokens (default 128)\n"
#define CLI_OPTS_GRAPH_AUTO {"calib", required_argument, NULL, OPT_CALIB}, {"calib-tokens", required_argument, NULL, OPT_CALIB_TOKENS}
int cli_graph(const cli_opts *o, infer_model *m, const char *graph, char *out, size_t cap);
int cli_graph_flags(const cli_opts *o, const char *graph);

// --spec-ngram [K] (also --draft-ngram): speculative decoding with the n-gram
// drafter (infer_spec_draft_ngram), K draft tokens a pass checked in one pass
// of K + 1 rows. cli_spec_k reads K from the option's value (optarg, or the
// next argument when it is a number, which it then takes): CLI_SPEC_K when
// none, -1 (reported) when out of 1..CLI_SPEC_MAX.
enum { CLI_SPEC_K = 8, CLI_SPEC_MAX = 32, CLI_SPEC_NMIN = 1, CLI_SPEC_NMAX = 3 };
#define CLI_OPTS_SPEC                                                                                             \
    {"spec-ngram", optional_argument, NULL, OPT_SPEC}, {"draft-ngram", optional_argument, NULL, OPT_SPEC},       \
        {"model-draft", required_argument, NULL, OPT_DRAFT}, {"draft-max", required_argument, NULL, OPT_DRAFT_MAX}, \
        {"draft-p-min", required_argument, NULL, OPT_DRAFT_PMIN}
#define CLI_USAGE_SPEC                                                                                                   \
    "      --spec-ngram [K]   speculative decoding: K tokens (default 8) drafted a step from the text's own past (the\n" \
    "                         longest of its last 3..1 tokens seen before, and what followed), checked in one pass;\n"   \
    "                         the same text as without (greedy; sampled with the same seed); also --draft-ngram\n"      \
    "      --model-draft M    speculative decoding with a draft model of the same vocabulary (a Hugging Face directory\n" \
    "                         or a .gguf file): its greedy guesses, up to --draft-max N (default 16) a step, ending\n"  \
    "                         where its next guess is less likely than --draft-p-min P (default 0.75)\n"
int cli_spec_k(const char *cmd, int argc, char **argv, const char *arg);
// --model-draft and its settings: cli_draft_opt takes one of the options
// (0, or -1 reported); cli_drafter_new loads the draft model and its context
// of n_ctx positions on the target's device (0, or -1 reported).
typedef struct cli_draft {
    const char *model;
    int max;
    float p_min;
    infer_model *m;
    infer_ctx *c;
    infer_drafter *d;
} cli_draft;
void cli_draft_init(cli_draft *d);
int cli_draft_opt(cli_draft *d, const char *cmd, int opt, const char *arg);
int cli_drafter_new(cli_draft *d, infer_model *target, int n_ctx, const char *device);
void cli_draft_free(cli_draft *d);

double cli_now(void);
long cli_peak_rss_kib(void);
long cli_rss_kib(void); // resident now

#endif
