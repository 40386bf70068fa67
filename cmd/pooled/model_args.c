/* model_args.c - shared model options, loading with a progress line, and the load report. */
#include "model_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "runtime/backend_open.h"

const char *const model_args_help =
    "  -m, --model FILE     the model (GGUF)\n"
    "  --backend NAME       auto, cpu or webgpu (default auto)\n"
    "  -t, --threads N      CPU threads (default: one per core)\n"
    "  -c, --ctx, --ctx-size N   context length in tokens (default: the model's, at most\n"
    "                       4096)\n"
    "  --kv f16|f32|q8      KV cache type (default f16; q8: int8 with an f16 scale per 32\n"
    "                       values, about half of f16's memory and reads)\n"
    "  --act q8|f32         activations of Q4_0/Q8_0 matmuls: quantised to Q8_0 blocks with\n"
    "                       integer dot products as llama.cpp does (default; on the CPU also\n"
    "                       Q4_1/Q5_0/Q5_1/IQ4_NL/IQ4_XS, and Q4_K/Q5_K/Q6_K per 256\n"
    "                       values), or exact f32\n"
    "  --spec off|lookup|mtp|auto  speculative decoding, the same output in fewer passes:\n"
    "                       drafts from earlier text (lookup) or the model's own MTP block\n"
    "                       (mtp, depth 3/5/7 by measured speed); auto: mtp when the model\n"
    "                       has the block, else lookup pausing drafts that are rarely\n"
    "                       accepted (default off)\n";

const char *model_kv_name(uint32_t kv_type) {
    return kv_type == PL_TYPE_F16 ? "f16" : kv_type == PL_TYPE_Q8_0 ? "q8" : "f32";
}

model_args model_args_defaults(void) {
    return (model_args){.backend = "auto", .kv = PL_TYPE_F16, .act_q8 = 1};
}

bool model_args_take(int argc, char **argv, int *i, model_args *a, bool *err) {
    const char *v;
    if (arg_take(argc, argv, i, "-m", "--model", &v, err)) {
        a->path = v;
    } else if (arg_take(argc, argv, i, "--backend", NULL, &v, err)) {
        a->backend = v;
        if (!*err && pl_backend_check_name(v)) {
            die("--backend: %s", pl_last_error());
            *err = true;
        }
    } else if (arg_take(argc, argv, i, "--threads", "-t", &v, err)) {
        if (!*err && !arg_int("--threads", v, 0, 256, &a->threads)) *err = true;
    } else if (arg_take(argc, argv, i, "--ctx", "-c", &v, err) ||
               arg_take(argc, argv, i, "--ctx-size", NULL, &v, err)) {
        if (!*err && !arg_int("--ctx", v, 1, 1 << 24, &a->ctx)) *err = true;
    } else if (arg_take(argc, argv, i, "--kv", NULL, &v, err)) {
        if (!*err && !strcmp(v, "f16"))
            a->kv = PL_TYPE_F16;
        else if (!*err && !strcmp(v, "f32"))
            a->kv = PL_TYPE_F32;
        else if (!*err && !strcmp(v, "q8"))
            a->kv = PL_TYPE_Q8_0;
        else if (!*err) {
            die("--kv: expected f16, f32 or q8, got '%s'", v);
            *err = true;
        }
    } else if (arg_take(argc, argv, i, "--spec", NULL, &v, err)) {
        if (*err) {
        } else if (!strcmp(v, "off")) {
            a->spec = MODEL_SPEC_OFF;
        } else if (!strcmp(v, "lookup")) {
            a->spec = MODEL_SPEC_LOOKUP;
        } else if (!strcmp(v, "auto")) {
            a->spec = MODEL_SPEC_AUTO;
        } else if (!strcmp(v, "mtp")) {
            a->spec = MODEL_SPEC_MTP;
        } else {
            die("--spec: expected off, lookup, mtp or auto, got '%s'", v);
            *err = true;
        }
    } else if (arg_take(argc, argv, i, "--act", NULL, &v, err)) {
        if (!*err && !strcmp(v, "q8"))
            a->act_q8 = 1;
        else if (!*err && !strcmp(v, "f32"))
            a->act_q8 = 0;
        else if (!*err) {
            die("--act: expected q8 or f32, got '%s'", v);
            *err = true;
        }
    } else {
        return false;
    }
    return true;
}

/* A backend switch from the environment: unset or empty 0 (auto), "0" -1 (off), "1" 1 (on),
 * anything else -2 (the backend refuses to open, naming the variable). */
/* "A" or "A,B" as numbers (B 0 when left out); false when anything else follows. */
static bool num_pair(const char *v, long *a, long *b) {
    char *end;
    *a = strtol(v, &end, 10), *b = 0;
    if (*end == ',') *b = strtol(end + 1, &end, 10);
    return !*end;
}

static int env_switch(const char *name) {
    const char *v = getenv(name);
    return !v || !*v ? 0 : !strcmp(v, "0") ? -1 : !strcmp(v, "1") ? 1 : -2;
}

void gpu_opts_from_env(pl_gpu_backend_opts *o) {
    /* static: the options borrow these strings for the backend's life (the process's) */
    static char cache[1024];
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME"), *v;
    *o = (pl_gpu_backend_opts){0};
    if (x && *x)
        snprintf(cache, sizeof cache, "%s/pooled", x);
    else if (home && *home)
        snprintf(cache, sizeof cache, "%s/.cache/pooled", home);
    else
        cache[0] = 0;
    o->tune_cache = cache[0] ? cache : NULL;
    o->dawn_lib = (v = getenv("POOLED_DAWN")) && *v ? v : NULL;
    o->no_fuse = (v = getenv("POOLED_GPU_FUSE")) && !strcmp(v, "0");
    o->no_tune = (v = getenv("POOLED_GPU_TUNE")) && !strcmp(v, "0");
    o->tune_verbose = v && !strcmp(v, "verbose");
    o->gemv = getenv("POOLED_GPU_GEMV");
    o->gemm = getenv("POOLED_GPU_GEMM");
    o->robust = (v = getenv("POOLED_GPU_ROBUST")) && *v == '1';
    o->toggles = getenv("POOLED_GPU_TOGGLES");
    o->q8_preload = (v = getenv("POOLED_GPU_PRELOAD")) && !strcmp(v, "1");
    o->gemv_xpre = !(v = getenv("POOLED_GPU_XPRE")) || !*v ? 0
                   : !strcmp(v, "0")                       ? -1
                   : (v[0] >= '1' && v[0] <= '2' && !v[1]) ? v[0] - '0'
                                                           : -2; /* refused at open */
    o->smx = !(v = getenv("POOLED_GPU_SMX")) || !*v ? 0
             : !strcmp(v, "0")                      ? -1
             : v[0] >= '5' && v[0] <= '7' && !v[1]  ? v[0] - '0'
                                                    : -2; /* refused at open */
    o->topk_rank = env_switch("POOLED_GPU_TOPK");
    o->moe_shgate = env_switch("POOLED_GPU_MOESH");
    o->moe_comb = env_switch("POOLED_GPU_MOECOMB");
    o->fa = env_switch("POOLED_GPU_FA");
    o->dr_chunk = env_switch("POOLED_GPU_DR");
    o->submit_every = !(v = getenv("POOLED_GPU_CHUNK")) || !*v ? 0 : atoi(v) > 0 ? atoi(v) : -1;
    long a, b;
    if ((v = getenv("POOLED_GPU_MC")) && *v) { /* columns a q8x GEMV workgroup[,accumulators] */
        bool whole = num_pair(v, &a, &b);
        o->gemv_cols = !whole || a < 0 || a == 1 || a > 64 ? 99 : a == 0 ? -1 : (int)a;
        o->gemv_cols_acc = b < 0 || b > 1000 ? 999 : (int)b; /* out of range: refused */
    }
    if ((v = getenv("POOLED_GPU_EXACT")) && *v) { /* the GEMV-order GEMM: min[,max] columns */
        bool whole = num_pair(v, &a, &b);
        o->gemm_exact_min = !whole || a < 0 || a == 1 || a > 65536 ? -2 : a == 0 ? -1 : (int)a;
        o->gemm_exact_max = b < 0 || b > 65536 ? -1 : (int)b; /* out of range: refused */
    }
    if ((v = getenv("POOLED_GPU_GEMM_MIN")) && *v) { /* the GEMM above N columns */
        char *end;
        long c = strtol(v, &end, 10);
        o->gemm_min_cols = *end || c < 1 || c > 65536 ? -1 : (int)c; /* -1: refused at open */
    }
    o->profile_path = getenv("POOLED_GPU_PROFILE");
    o->profile_at = (v = getenv("POOLED_GPU_PROFILE_AT")) ? atoi(v) : 0;
}

typedef struct {
    bool shown;
    int last_pct;
} progress_state;

/* A "loading NN%" line rewritten in place, only on a terminal and only for big files. */
static void progress(void *ud, uint64_t done, uint64_t total) {
    progress_state *p = ud;
    int pct = total ? (int)(done * 100 / total) : 100;
    if (pct == p->last_pct) return;
    p->last_pct = pct;
    fprintf(stderr, "\rloading %3d%%", pct);
    p->shown = true;
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
    bo.cpu.anon_weights = env_switch("POOLED_CPU_COPY");
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
        progress_state ps = {.last_pct = -1};
        bool big = pl_gguf_file_size(l->g) > (64u << 20) && isatty(2);
        pl_model_opts mo = {.progress = big ? progress : NULL,
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
        l->so.kv_type = a->kv;
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

static void human(double v, const char *const *units, char *buf, size_t cap, double step) {
    int u = 0;
    while (v >= step && units[u + 1]) v /= step, u++;
    snprintf(buf, cap, u ? "%.1f%s" : "%.0f%s", v, units[u]);
}

void model_report(const loaded_model *l) {
    const pl_model_info *in = pl_model_get_info(l->m);
    static const char *const count_u[] = {"", "K", "M", "B", "T", NULL};
    static const char *const byte_u[] = {" B", " KiB", " MiB", " GiB", " TiB", NULL};
    char params[64], bytes[32];
    human((double)in->n_params, count_u, params, sizeof params, 1000);
    if (in->n_expert) /* "576.2K params, 8 experts, 2 active" */
        snprintf(params + strlen(params), sizeof params - strlen(params),
                 " params, %d experts, %d active", in->n_expert, in->n_expert_used);
    else
        snprintf(params + strlen(params), sizeof params - strlen(params), " params");
    human((double)in->weight_bytes, byte_u, bytes, sizeof bytes, 1024);
    if (l->note) fprintf(stderr, "%s\n", l->note);
    fprintf(stderr, "loaded %s%s%s%s (%s, %s %s) | ctx %d of %d | kv %s | %s\n", in->arch,
            in->name[0] ? " '" : "", in->name, in->name[0] ? "'" : "", params, bytes,
            in->weight_type, l->so.n_ctx, in->n_ctx_train, model_kv_name(l->so.kv_type),
            l->be->device);
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

uint64_t sampler_args_clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40);
}

const char *const stop_args_help =
    "  --stop STRING        end the text before STRING (repeatable, at most 16, 1 to 256 bytes)\n";

bool stop_args_take(int argc, char **argv, int *i, stop_list *l, bool *err) {
    const char *v;
    if (!arg_take(argc, argv, i, "--stop", NULL, &v, err)) return false;
    if (*err) return true;
    if (l->n == PL_STOP_MAX || !*v || strlen(v) > PL_STOP_LEN) {
        die("--stop: at most %d strings of 1 to %d bytes", PL_STOP_MAX, PL_STOP_LEN);
        *err = true;
        return true;
    }
    l->s[l->n++] = v;
    return true;
}
