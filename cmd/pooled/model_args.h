/* model_args.h - what the commands share: the options that choose a model and where it runs
 * (-m, --backend, --threads, --ctx, --kv, --act, --spec), --stop, and opening the model
 * with them through the public API (pooled.h) with a progress line and the one-line report.
 * Only pooled.h below: the commands that run on the public API include nothing else of the
 * library (model_load.h is the internal loader of the others). */
#ifndef PL_CMD_MODEL_ARGS_H
#define PL_CMD_MODEL_ARGS_H

#include <pooled.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const char *path;    /* -m */
    const char *backend; /* --backend auto|cpu|webgpu */
    int64_t threads;     /* -t, 0: one per core */
    int64_t ctx;         /* --ctx, 0: the model's default */
    int kv;              /* --kv f16|f32|q8 (POOLED_KV_*) */
    int act_q8;          /* --act q8|f32: quantised activations for Q4_0/Q8_0 weights */
    int64_t split;       /* run --split N: through a chain of N local stages (0: whole) */
    /* room host: load the embedding, the head and only layers [host_first, host_last)
     * (maybe none); the caller fills stages[] with the workers' remote stages */
    bool room_host;
    int host_first, host_last;
    int spec; /* --spec: MODEL_SPEC_OFF, _LOOKUP, _MTP or _AUTO */
    /* bench's: the prompt ids of one pass (0: the model's default), and the state sized for
     * verify passes whatever --spec says */
    int64_t n_batch;
    bool verify;
} model_args;

/* --spec's choices: pooled.h's (the model's sizing and a generation's drafter alike) */
enum {
    MODEL_SPEC_OFF = POOLED_SPEC_OFF,
    MODEL_SPEC_LOOKUP = POOLED_SPEC_LOOKUP,
    MODEL_SPEC_MTP = POOLED_SPEC_MTP,
    MODEL_SPEC_AUTO = POOLED_SPEC_AUTO
};

model_args model_args_defaults(void);
/* "f16", "f32" or "q8": the --kv name of a cache type (POOLED_KV_*) */
const char *model_kv_name(int kv);

/* If argv[*i] is one of the shared options, take it (and its value) and return true;
 * a bad value prints the error and sets *err. */
bool model_args_take(int argc, char **argv, int *i, model_args *a, bool *err);

/* The options' help lines. */
extern const char *const model_args_help;

/* The GPU backend's tuning switches from the environment, as pooled_model_opts.gpu_options
 * takes them (the library reads none): POOLED_GPU_FUSE=0, _TUNE=0|verbose, _GEMV, _GEMM,
 * _ROBUST=1, _TOGGLES, _PRELOAD=1, _XPRE, _SMX, _TOPK, _MOESH, _MOECOMB, _FA=0|1, _DR,
 * _CHUNK, _MC, _EXACT, _GEMM_MIN, _PROFILE_AT (README). Static storage. */
const char *gpu_options_from_env(void);
/* The tuning cache folder: $XDG_CACHE_HOME/pooled, else ~/.cache/pooled (NULL: neither
 * set). Static storage. */
const char *gpu_tune_cache_dir(void);
/* POOLED_CPU_COPY: unset 0 (auto), "0" -1 (the mapped file), "1" 1 (a copy), else -2. */
int cpu_copy_from_env(void);

/* The options of pooled_model_open as a asks (the GPU switches and the tuning cache from
 * the environment as above, POOLED_CPU_COPY, POOLED_ROOM_FRAME; n_parallel: pooled_model_opts'),
 * or false after printing why not. */
bool model_opts(const model_args *a, int n_parallel, pooled_model_opts *o);
/* After an open that returned rc with *m: the progress line cleared; the error printed and
 * NULL, or m after a warning for weights holding NaN or Inf. */
typedef struct load_progress_state load_progress_state;
pooled_model *model_opened(const model_args *a, int rc, pooled_model *m,
                           const load_progress_state *ps);
/* model_opts, pooled_model_open with a "loading NN%" line on a terminal for big files, and
 * model_opened: the model, or NULL after one error line. */
pooled_model *model_open(const model_args *a, int n_parallel);
/* "loaded llama 'stories260K' (292.8K params, 1.1 MiB f32) | ctx 512 of 2048 | kv f16 |
 * cpu, 2 threads" on stderr, after the backend's note if it has one. */
void model_open_report(const pooled_model *m);
void load_report(const pooled_model_info *in);
/* "spec: 40 passes, 58 of 90 drafts accepted (64.4%), 2.45 ids per pass" on stderr: a
 * speculating generation's counters. */
void spec_report(const pooled_result *r);

/* The "loading NN%" line (pooled_model_opts.progress): rewritten in place on stderr, for
 * files of 64 MiB or more; the caller clears it (shown) when the load returns. */
struct load_progress_state {
    bool shown;
    int last_pct;
};
void load_progress(void *ud, uint64_t done, uint64_t total);

/* --temp, --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty,
 * --frequency-penalty, --repeat-last-n, --seed into p: like model_args_take. *seeded is set
 * when --seed was given. */
bool sampler_args_take(int argc, char **argv, int *i, pooled_sample_opts *p, bool *seeded,
                       bool *err);
extern const char *const sampler_args_help;

/* --stop STRING, repeatable (run, chat): the text ends before the first one that appears. */
enum { STOP_ARGS_MAX = 16, STOP_ARGS_LEN = 256 };
typedef struct {
    const char *s[STOP_ARGS_MAX];
    int n;
} stop_list;
bool stop_args_take(int argc, char **argv, int *i, stop_list *l, bool *err);
extern const char *const stop_args_help;
/* A seed from the clock and the process id, for runs without --seed. */
uint64_t sampler_args_clock_seed(void);

#endif
