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

// Prints "infer: <message>" to stderr and returns 1.
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Parses "1,2,3" into a new array; NULL (with a message) when malformed.
int32_t *cli_parse_ids(const char *s, int *n);
// Parses a non-negative integer flag value; -1 when malformed.
long cli_parse_count(const char *flag, const char *s, long max);
// Takes the value of a flag at argv[*i], advancing *i; NULL if missing.
const char *cli_value(int argc, char **argv, int *i);

double cli_now(void);
long cli_peak_rss_kib(void);

#endif
