// Shared helpers of the CLI subcommands.
#ifndef INFER_CLI_H
#define INFER_CLI_H

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
int cmd_bench_knn(int argc, char **argv);
int cmd_extract(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_walk(int argc, char **argv);
int cmd_bench_walk(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);

// Prints "infer: <message>" to stderr and returns 1.
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Parses "1,2,3" into a new array; NULL (with a message) when malformed.
int32_t *cli_parse_ids(const char *s, int *n);
// Parses a non-negative integer flag value; -1 when malformed.
long cli_parse_count(const char *flag, const char *s, long max);
// Takes the value of a flag at argv[*i], advancing *i; NULL if missing.
const char *cli_value(int argc, char **argv, int *i);

// Parses one llama.cpp sampling flag at argv[*i] (-s --seed --temp --top-k
// --top-p --min-p --repeat-penalty --repeat-last-n --presence-penalty
// --frequency-penalty) into p: 1 if taken, 0 if not a sampling flag, -1 on error.
int cli_sampling_flag(int argc, char **argv, int *i, infer_sampling *p);

// Parses -t/--threads N at argv[*i] and sets the thread count: 1 if taken,
// 0 if not that flag, -1 on error (reported).
int cli_threads_flag(int argc, char **argv, int *i);

// The default model (Gemma 3 270M Q4_K_M) from the cache, fetched with
// scripts/fetch-model.sh when absent; NULL (with a message) on failure.
const char *cli_default_model(void);

double cli_now(void);
long cli_peak_rss_kib(void);
long cli_rss_kib(void); // resident now

#endif
