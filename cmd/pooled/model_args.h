/* model_args.h - what run, chat and bench share: the options that choose a model and where
 * it runs (-m, --backend, --threads, --ctx, --kv), loading it with progress, the one-line
 * report of what was loaded, and the sampling options of run and chat. */
#ifndef PL_CMD_MODEL_ARGS_H
#define PL_CMD_MODEL_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "format/gguf.h"
#include "model/model.h"
#include "gpu/gpu.h"
#include "runtime/draft.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/stop.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *path;    /* -m */
    const char *backend; /* --backend auto|cpu|webgpu */
    int64_t threads;     /* -t, 0: one per core */
    int64_t ctx;         /* --ctx, 0: the model's default */
    uint32_t kv;         /* --kv f16|f32|q8 (PL_TYPE_F16, F32, Q8_0) */
    int act_q8;          /* --act q8|f32: quantised activations for Q4_0/Q8_0 weights */
    int64_t split;       /* run --split N: through a chain of N local stages (0: whole) */
    /* room host: load the embedding, the head and only layers [host_first, host_last)
     * (maybe none); the caller fills stages[] with the workers' remote stages */
    bool room_host;
    int host_first, host_last;
    int spec; /* --spec: MODEL_SPEC_OFF, _LOOKUP, _MTP or _AUTO */
} model_args;

enum { MODEL_SPEC_OFF, MODEL_SPEC_LOOKUP, MODEL_SPEC_MTP, MODEL_SPEC_AUTO };

typedef struct {
    pl_gguf *g;
    pl_backend *be;
    pl_model *m;
    pl_tokenizer *tok; /* NULL unless asked for */
    pl_state_opts so;  /* context and cache as the options asked */
    const char *note;  /* the backend's remark, printed with the report */
    /* --split N: m holds only the embedding and the head; parts[i] holds the layers
     * stages[i] runs, an equal share each, in order (a room's host: remote stages, no
     * parts) */
    int n_stages;
    pl_model *parts[PL_CHAIN_MAX_STAGES];
    pl_stage *stages[PL_CHAIN_MAX_STAGES];
} loaded_model;

model_args model_args_defaults(void);
/* "f16", "f32" or "q8": the --kv name of a cache type */
const char *model_kv_name(uint32_t kv_type);

/* The GPU backend's settings from the environment (the library reads none): POOLED_DAWN,
 * POOLED_GPU_FUSE=0, POOLED_GPU_TUNE=0|verbose, POOLED_GPU_GEMV, POOLED_GPU_ROBUST=1,
 * POOLED_GPU_TOGGLES, POOLED_GPU_PRELOAD=1, POOLED_GPU_FA=0|1 (the prefill attention
 * kernel, on by default), POOLED_GPU_PROFILE(_AT), and the tuning cache
 * in $XDG_CACHE_HOME/pooled (else ~/.cache/pooled). */
void gpu_opts_from_env(pl_gpu_backend_opts *o);

/* If argv[*i] is one of the shared options, take it (and its value) and return true;
 * a bad value prints the error and sets *err. */
bool model_args_take(int argc, char **argv, int *i, model_args *a, bool *err);

/* The options' help lines. */
extern const char *const model_args_help;

/* Open, map and load the model (and its tokenizer when want_tok); with a->split, as a host
 * and that many local stages. On failure prints the one-line error and returns false,
 * with everything freed. */
bool model_load(const model_args *a, bool want_tok, loaded_model *l);
/* The drafter --spec asks for (*out NULL for off): the MTP drafter when model_load made
 * the state to draft (so.draft: --spec mtp, or auto on a model with the block), else
 * prompt lookup; ses must come from l's state options and outlive the drafter. */
pl_status model_drafter(const model_args *a, const loaded_model *l, pl_session *ses,
                        pl_drafter **out);
/* "off", "lookup" or "mtp": what model_drafter makes. */
const char *model_drafter_name(const model_args *a, const loaded_model *l);
/* "spec: 40 passes, 58 of 90 drafts accepted (64.4%), 2.45 ids per pass" on stderr. */
void spec_report(const pl_gen_stats *st);
/* A session over what was loaded: the whole model, or the host and its stages. */
pl_status model_session(const loaded_model *l, pl_session **out);
/* "loaded llama 'stories260K' (292.8K params, 1.1 MiB f32) | ctx 512 of 2048 | kv f16 |
 * cpu, 2 threads" on stderr. */
void model_report(const loaded_model *l);
void model_unload(loaded_model *l);

/* --temp, --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty,
 * --frequency-penalty, --repeat-last-n, --seed: like model_args_take. *seeded is set when
 * --seed was given. */
bool sampler_args_take(int argc, char **argv, int *i, pl_sampler_params *p, bool *seeded,
                       bool *err);
extern const char *const sampler_args_help;

/* --stop STRING, repeatable (run, chat): the text ends before the first one that appears. */
typedef struct {
    const char *s[PL_STOP_MAX];
    int n;
} stop_list;
bool stop_args_take(int argc, char **argv, int *i, stop_list *l, bool *err);
extern const char *const stop_args_help;
/* A seed from the clock and the process id, for runs without --seed. */
uint64_t sampler_args_clock_seed(void);

#endif
