/* args.h - tiny helpers the subcommands share for parsing their options. */
#ifndef PL_CMD_ARGS_H
#define PL_CMD_ARGS_H

#include <stdbool.h>
#include <stdint.h>

/* If argv[*i] is `name` (or `alias`, may be NULL), take the next argument as its value:
 * returns true and advances *i. A missing value prints an error and sets *err. */
bool arg_take(int argc, char **argv, int *i, const char *name, const char *alias,
              const char **value, bool *err);

/* Parse a whole string as an integer / float in [lo, hi]; false (with a printed one-line
 * error naming `opt`) if it is not one. */
bool arg_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool arg_float(const char *opt, const char *s, double lo, double hi, double *out);

/* Print "pooled: <msg>" as one line on stderr and return 1 (for `return die(...)`). */
int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Flush standard output; false once any write to it has failed (the first failure's reason
 * is kept for out_close). Streaming output calls it after each piece and stops on false. */
bool out_flush(void);

/* At exit: flush standard output. A write error (full disk, closed, broken pipe with
 * SIGPIPE ignored) prints "pooled: writing standard output: REASON" and makes a
 * successful status 1; a failed command's status and its one error line are kept. */
int out_close(int rc);

/* die("PATH: MSG"), or die("MSG") when the message already starts with "PATH:" (file
 * errors from the library name their path). */
int die_path(const char *path, const char *msg);

#endif
