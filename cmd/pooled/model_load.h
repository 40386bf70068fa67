/* model_load.h - loading a model through the library's internal API, for the commands that
 * need more than pooled.h gives: a chain of local stages (run --split), a room's host, the
 * MTP drafter, and the benchmarks' internal timings. The others open models with
 * model_args.h's model_open. */
#ifndef PL_CMD_MODEL_LOAD_H
#define PL_CMD_MODEL_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "format/gguf.h"
#include "gpu/gpu.h"
#include "model/model.h"
#include "model_args.h"
#include "runtime/draft.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/stop.h"
#include "tokenizer/tokenizer.h"

_Static_assert(STOP_ARGS_MAX == PL_STOP_MAX && STOP_ARGS_LEN == PL_STOP_LEN,
               "--stop's limits are the library's");

/* The cache type of a --kv choice (POOLED_KV_*) as the state options take it. */
static inline uint32_t model_kv_type(int kv) {
    return kv == POOLED_KV_F32 ? PL_TYPE_F32 : kv == POOLED_KV_Q8 ? PL_TYPE_Q8_0 : PL_TYPE_F16;
}

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

/* The GPU backend's settings from the environment (model_args.h's gpu_options_from_env,
 * POOLED_DAWN, POOLED_GPU_PROFILE, the tuning cache). */
void gpu_opts_from_env(pl_gpu_backend_opts *o);

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
/* model_open_report's line for what model_load loaded. */
void model_report(const loaded_model *l);
void model_unload(loaded_model *l);

/* --temp, --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty,
 * --frequency-penalty, --repeat-last-n, --seed: like model_args_take. *seeded is set when
 * --seed was given. */
bool sampler_args_take(int argc, char **argv, int *i, pl_sampler_params *p, bool *seeded,
                       bool *err);
extern const char *const sampler_args_help;

#endif
