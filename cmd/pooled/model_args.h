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
} model_args;

enum { MODEL_SPEC_OFF, MODEL_SPEC_LOOKUP, MODEL_SPEC_MTP, MODEL_SPEC_AUTO };

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

/* Open the model as the options ask (the GPU switches and the tuning cache from the
 * environment as above; n_parallel: pooled_model_opts'), with a "loading NN%" line on a
 * terminal for big files and a warning for weights holding NaN or Inf. On failure prints
 * the one-line error and returns NULL. a->split, a->room_host and a->spec are not its
 * business (model_load.h). */
pooled_model *model_open(const model_args *a, int n_parallel);
/* "loaded llama 'stories260K' (292.8K params, 1.1 MiB f32) | ctx 512 of 2048 | kv f16 |
 * cpu, 2 threads" on stderr, after the backend's note if it has one. */
void model_open_report(const pooled_model *m);
void load_report(const pooled_model_info *in);

/* The "loading NN%" line (pooled_model_opts.progress): rewritten in place on stderr, for
 * files of 64 MiB or more; the caller clears it (shown) when the load returns. */
typedef struct {
    bool shown;
    int last_pct;
} load_progress_state;
void load_progress(void *ud, uint64_t done, uint64_t total);

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
