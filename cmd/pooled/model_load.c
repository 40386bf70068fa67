/* model_load.c - loading a model through the internal API, for the commands that need
 * more than pooled.h gives (a chain of local stages, a room's host, the MTP drafter, the
 * benchmarks' internals). */
#include "model_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "runtime/backend_open.h"

void gpu_opts_from_env(pl_gpu_backend_opts *o) {
    /* static: the options borrow the parsed text for the backend's life (the process's) */
    static char parsed[4096];
    const char *v;
    *o = (pl_gpu_backend_opts){0};
    snprintf(parsed, sizeof parsed, "%s", gpu_options_from_env());
    pl_gpu_opts_parse(parsed, o); /* (names it made itself: cannot fail) */
    o->tune_cache = gpu_tune_cache_dir();
    o->dawn_lib = (v = getenv("POOLED_DAWN")) && *v ? v : NULL;
    o->profile_path = getenv("POOLED_GPU_PROFILE");
}

/* --split n: n local stages over equal shares of the layers, each its own partial model. */
static pl_status load_stages(loaded_model *l, int n) {
    int L = pl_model_get_info(l->m)->n_layer;
    if (n > L) return pl_fail(PL_ERR_ARG, "--split %d: the model has only %d layers", n, L);
    for (int i = 0; i < n; i++) {
        int first = (int)((int64_t)i * L / n), last = (int)((int64_t)(i + 1) * L / n);
        pl_model_opts mo = {
            .prefault = true, .layer_first = first, .layer_last = last, .ends = PL_ENDS_NONE};
        pl_status s = pl_model_load(l->g, l->be, &mo, &l->parts[i]);
        if (!s) s = pl_stage_local_new(l->parts[i], &l->so, first, last, &l->stages[i]);
        l->n_stages = i + 1;
        if (s) return s;
    }
    return PL_OK;
}

pl_status model_drafter(const model_args *a, const loaded_model *l, pl_session *ses,
                        pl_drafter **out) {
    *out = NULL;
    if (a->spec == MODEL_SPEC_OFF) return PL_OK;
    if (l->so.draft) return pl_drafter_mtp_new(ses, 0, a->spec == MODEL_SPEC_AUTO, out);
    return pl_drafter_lookup_new(PL_SPEC_MAX, a->spec == MODEL_SPEC_AUTO, out);
}

const char *model_drafter_name(const model_args *a, const loaded_model *l) {
    return a->spec == MODEL_SPEC_OFF ? "off" : l->so.draft ? "mtp" : "lookup";
}

/* --spec mtp needs the model's block, which is loaded with the head (so a chain's host,
 * --split or a room's, has it too); auto takes it when the model has it. */
static pl_status want_draft(const model_args *a, loaded_model *l) {
    bool has = pl_model_get_info(l->m)->has_draft;
    if (a->spec == MODEL_SPEC_MTP && !has)
        return pl_fail(PL_ERR_ARG, "--spec mtp: this model (%s) has no MTP block (use lookup)",
                       pl_model_get_info(l->m)->arch);
    l->so.draft = has && (a->spec == MODEL_SPEC_MTP || a->spec == MODEL_SPEC_AUTO);
    return PL_OK;
}

void spec_report(const pl_gen_stats *st) {
    fprintf(stderr, "spec: %lld passes, %lld of %lld drafts accepted (%.1f%%), %.2f ids per pass\n",
            (long long)st->n_steps, (long long)st->n_accepted, (long long)st->n_drafted,
            st->n_drafted ? 100.0 * (double)st->n_accepted / (double)st->n_drafted : 0.0,
            st->n_steps ? (double)(st->n_decoded) / (double)st->n_steps : 0.0);
}

pl_status model_session(const loaded_model *l, pl_session **out) {
    if (!l->n_stages) return pl_session_new(l->m, &l->so, out);
    /* POOLED_ROOM_FRAME=N: the most columns of a prompt's frame through the stages (the A/B
     * of frame sizes; default 512, within the batch and every stage's cap) */
    pl_chain_opts co = pl_chain_opts_default();
    const char *v = getenv("POOLED_ROOM_FRAME");
    if (v && *v) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || n < 1 || n > PL_CHAIN_MAX_FRAME)
            return pl_fail(PL_ERR_ARG, "POOLED_ROOM_FRAME=%.32s: 1 to %d columns", v,
                           PL_CHAIN_MAX_FRAME);
        co.frame_cols = (int)n;
    }
    return pl_session_new_chain(l->m, &l->so, l->stages, l->n_stages, &co, out);
}

bool model_load(const model_args *a, bool want_tok, loaded_model *l) {
    memset(l, 0, sizeof *l);
    if (!a->path) return die("no model: give one with -m FILE"), false;
    pl_status s = pl_gguf_open(a->path, &l->g);
    pl_backend_open_opts bo = {.name = a->backend, .n_threads = (int)a->threads};
    gpu_opts_from_env(&bo.gpu);
    /* POOLED_CPU_COPY=0|1: the CPU backend's weights read from the file mapping, or copied
     * into anonymous memory (pl_cpu_opts.anon_weights; unset: auto) */
    bo.cpu.anon_weights = cpu_copy_from_env();
    if (!s && bo.cpu.anon_weights == -2) {
        die("POOLED_CPU_COPY=%.32s: expected 0 or 1", getenv("POOLED_CPU_COPY"));
        model_unload(l);
        return false;
    }
    if (!s && (s = pl_backend_open_with(&bo, &l->be, &l->note))) {
        die("--backend %s: %s", a->backend, pl_last_error()); /* not the file's fault */
        model_unload(l);
        return false;
    }
    if (!s) {
        l->be->act_q8 = a->act_q8;
        load_progress_state ps = {.last_pct = -1};
        pl_model_opts mo = {.progress = isatty(2) ? load_progress : NULL,
                            .progress_ud = &ps,
                            .prefault = true,
                            .layer_first = a->room_host ? a->host_first : 0,
                            .layer_last = a->room_host ? a->host_last : 0,
                            .ends = a->split || a->room_host ? PL_ENDS_EMBED | PL_ENDS_HEAD
                                                             : PL_ENDS_AUTO};
        s = pl_model_load(l->g, l->be, &mo, &l->m);
        if (ps.shown) fprintf(stderr, "\r%*s\r", 16, "");
    }
    if (!s && want_tok) s = pl_tok_load(l->g, &l->tok);
    if (!s) {
        l->so = pl_state_opts_default(l->m);
        if (a->ctx) l->so.n_ctx = (int)a->ctx;
        if (l->so.n_batch > l->so.n_ctx) l->so.n_batch = l->so.n_ctx;
        l->so.kv_type = model_kv_type(a->kv);
        if (a->spec != MODEL_SPEC_OFF) { /* a verify pass: 1 + 15 columns, each kept */
            int cols = PL_SPEC_MAX + 1 < l->so.n_batch ? PL_SPEC_MAX + 1 : l->so.n_batch;
            l->so.n_logits = l->so.n_snap = cols;
            s = want_draft(a, l);
        }
        if (!s && a->split) s = load_stages(l, (int)a->split);
    }
    if (s) {
        die_path(a->path, pl_last_error());
        model_unload(l);
        return false;
    }
    if (pl_model_get_info(l->m)->nonfinite[0])
        fprintf(stderr,
                "pooled: warning: %s: tensor %s holds NaN or Inf values: the model's "
                "output will be meaningless\n",
                a->path, pl_model_get_info(l->m)->nonfinite);
    return true;
}

void model_report(const loaded_model *l) {
    const pl_model_info *in = pl_model_get_info(l->m);
    pooled_model_info r = {.size = sizeof r,
                           .n_ctx_train = in->n_ctx_train,
                           .n_ctx = l->so.n_ctx,
                           .n_params = in->n_params,
                           .weight_bytes = in->weight_bytes,
                           .n_expert = in->n_expert,
                           .n_expert_used = in->n_expert_used,
                           .kv_type = l->so.kv_type == PL_TYPE_F32    ? POOLED_KV_F32
                                      : l->so.kv_type == PL_TYPE_Q8_0 ? POOLED_KV_Q8
                                                                      : POOLED_KV_F16};
    snprintf(r.arch, sizeof r.arch, "%s", in->arch);
    snprintf(r.name, sizeof r.name, "%s", in->name);
    snprintf(r.weight_type, sizeof r.weight_type, "%s", in->weight_type);
    snprintf(r.backend, sizeof r.backend, "%s", l->be->device);
    snprintf(r.note, sizeof r.note, "%s", l->note ? l->note : "");
    load_report(&r);
}

void model_unload(loaded_model *l) {
    if (l->tok) pl_tok_free(l->tok);
    for (int i = 0; i < l->n_stages; i++) {
        pl_stage_free(l->stages[i]);
        pl_model_free(l->parts[i]);
    }
    pl_model_free(l->m);
    pl_be_destroy(l->be);
    pl_gguf_free(l->g);
    memset(l, 0, sizeof *l);
}

const char *const sampler_args_help =
    "  --temp T             temperature, 0 = greedy (default 0.8)\n"
    "  --top-k K, --top-p P, --min-p P   (defaults 40, 0.95, 0.05; 0/1/0 turn them off)\n"
    "  --repeat-penalty P   transformers' repetition penalty (default 1 = off)\n"
    "  --presence-penalty P, --frequency-penalty P   OpenAI's (default 0)\n"
    "  --repeat-last-n N    ids the penalties look back over (default all)\n"
    "  --seed S             sampling seed (default: from the clock, shown with the timings)\n";

bool sampler_args_take(int argc, char **argv, int *i, pl_sampler_params *p, bool *seeded,
                       bool *err) {
    const char *v;
    int64_t iv;
    double fv;
#define FLOAT_OPT(name, lo, hi, field)                                                             \
    if (arg_take(argc, argv, i, name, NULL, &v, err)) {                                            \
        if (!*err && !arg_float(name, v, lo, hi, &fv)) *err = true;                                \
        if (!*err) p->field = (float)fv;                                                           \
        return true;                                                                               \
    }
    FLOAT_OPT("--temp", 0, 1e6, temp)
    FLOAT_OPT("--top-p", 1e-9, 1, top_p)
    FLOAT_OPT("--min-p", 0, 1, min_p)
    FLOAT_OPT("--repeat-penalty", 1e-6, 1e6, repeat_penalty)
    FLOAT_OPT("--presence-penalty", -1e6, 1e6, presence_penalty)
    FLOAT_OPT("--frequency-penalty", -1e6, 1e6, frequency_penalty)
#undef FLOAT_OPT
    if (arg_take(argc, argv, i, "--top-k", NULL, &v, err)) {
        if (!*err && !arg_int("--top-k", v, 0, INT32_MAX, &iv)) *err = true;
        if (!*err) p->top_k = (int)iv;
    } else if (arg_take(argc, argv, i, "--repeat-last-n", NULL, &v, err)) {
        if (!*err && !arg_int("--repeat-last-n", v, -1, INT32_MAX, &iv)) *err = true;
        if (!*err) p->penalty_last_n = (int)iv;
    } else if (arg_take(argc, argv, i, "--seed", "-s", &v, err)) {
        if (!*err && !arg_int("--seed", v, 0, INT64_MAX, &iv)) *err = true;
        if (!*err) p->seed = (uint64_t)iv;
        *seeded = true;
    } else {
        return false;
    }
    return true;
}
