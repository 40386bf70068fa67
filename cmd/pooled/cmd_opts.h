/* cmd_opts.h - the options of the commands that run a model, parsed into structs by
 * functions that neither run anything nor exit (the option fuzzer calls them). Each parse
 * returns 0 when the command should go on, 1 after printing the one-line error, 2 after
 * printing --help to stdout (the command then exits 0). */
#ifndef PL_CMD_OPTS_H
#define PL_CMD_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "model_args.h"

/* How a command opens its model: model_open's way (the opener NULL), or a room host's
 * (cmd_room.c: its own layers and the workers' stages in the chain). NULL after printing
 * the one-line error. */
typedef pooled_model *(*model_opener)(const model_args *a, void *ud);

typedef struct {
    model_args ma;
    pooled_sample_opts sp;                         /* sampling only: the rest is the command's */
    const char *prompt, *prompt_ids, *prompt_file; /* exactly one is set; -p - and -f -:
                                                       standard input */
    int64_t n_predict;
    bool print_ids, ignore_eos, seeded;
    stop_list stop;
} run_opts;
int run_opts_parse(int argc, char **argv, run_opts *o);
/* Run as `pooled run` does with the options parsed, the model opened by open (NULL:
 * model_open). Returns the exit status. */
int run_with(const run_opts *ro, model_opener open, void *ud);

typedef struct {
    model_args ma;
    pooled_sample_opts sp;
    const char *system;
    int64_t n_predict; /* -1: until the model ends its turn */
    bool think, timings, seeded;
    stop_list stop;
} chat_opts;
int chat_opts_parse(int argc, char **argv, chat_opts *o);
/* Chat as `pooled chat` does with the options parsed; open as for run_with. */
int chat_with(const chat_opts *co, model_opener open, void *ud);

/* --streams: at most POOLED_MAX_PARALLEL sessions of one model; --verify-cost: a verify
 * pass of pooled_session_verify checks up to 16 ids (1 + 15 drafts) */
enum { BENCH_STREAMS_MAX = 8, BENCH_STREAM_LIMIT = POOLED_MAX_PARALLEL, BENCH_SPEC_MAX = 15 };

typedef struct {
    model_args ma;
    int64_t n_prompt, n_gen, reps; /* not both 0 */
    bool json;
    /* --verify-cost: the drafts per verify pass to time (distinct, 1..BENCH_SPEC_MAX each,
     * the library's PL_SPEC_MAX), in the order given; n_verify 0: not asked (needs
     * n_prompt >= 1) */
    int verify_k[BENCH_SPEC_MAX];
    int n_verify;
    /* --streams: the counts of concurrent streams to time (1..BENCH_STREAM_LIMIT each,
     * distinct, in the order given; n_streams 0: not asked; needs n_prompt, n_gen >= 1);
     * --ids: print each stream's ids with the table */
    int streams[BENCH_STREAMS_MAX];
    int n_streams;
    bool print_ids;
} bench_opts;
int bench_opts_parse(int argc, char **argv, bench_opts *o);
/* Bench as `pooled bench` does with the options parsed; open as for run_with (with the
 * context sized for the test). */
int bench_with(const bench_opts *bo, model_opener open, void *ud);

#endif
