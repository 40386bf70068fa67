/* model_args.c - the options that choose a model and where it runs, shared by the
 * commands, and opening the model with them through the public API (pooled.h): a progress
 * line, the one-line load report. */
#include "model_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"

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

model_args model_args_defaults(void) {
    return (model_args){.backend = "auto", .kv = POOLED_KV_F16, .act_q8 = 1};
}

const char *model_kv_name(int kv) {
    return kv == POOLED_KV_F16 ? "f16" : kv == POOLED_KV_Q8 ? "q8" : "f32";
}

bool model_args_take(int argc, char **argv, int *i, model_args *a, bool *err) {
    const char *v;
    if (arg_take(argc, argv, i, "-m", "--model", &v, err)) {
        a->path = v;
    } else if (arg_take(argc, argv, i, "--backend", NULL, &v, err)) {
        a->backend = v;
        if (!*err && strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "webgpu")) {
            die("--backend: expected auto, cpu or webgpu, got '%s'", v);
            *err = true;
        }
    } else if (arg_take(argc, argv, i, "--threads", "-t", &v, err)) {
        if (!*err && !arg_int("--threads", v, 0, 256, &a->threads)) *err = true;
    } else if (arg_take(argc, argv, i, "--ctx", "-c", &v, err) ||
               arg_take(argc, argv, i, "--ctx-size", NULL, &v, err)) {
        if (!*err && !arg_int("--ctx", v, 1, 1 << 24, &a->ctx)) *err = true;
    } else if (arg_take(argc, argv, i, "--kv", NULL, &v, err)) {
        if (!*err && !strcmp(v, "f16"))
            a->kv = POOLED_KV_F16;
        else if (!*err && !strcmp(v, "f32"))
            a->kv = POOLED_KV_F32;
        else if (!*err && !strcmp(v, "q8"))
            a->kv = POOLED_KV_Q8;
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

static int env_switch(const char *name) {
    const char *v = getenv(name);
    return !v || !*v ? 0 : !strcmp(v, "0") ? -1 : !strcmp(v, "1") ? 1 : -2;
}

const char *gpu_options_from_env(void) {
    /* static: the backend's options borrow the parsed text for the process's life */
    static char text[4096];
    static const char *const names[] = {"FUSE",    "TUNE",    "GEMV",     "GEMM",      "ROBUST",
                                        "TOGGLES", "PRELOAD", "XPRE",     "SMX",       "TOPK",
                                        "MOESH",   "MOECOMB", "FA",       "DR",        "CHUNK",
                                        "MC",      "EXACT",   "GEMM_MIN", "PROFILE_AT"};
    size_t n = 0;
    text[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char var[32];
        snprintf(var, sizeof var, "POOLED_GPU_%s", names[i]);
        const char *v = getenv(var);
        if (!v || !*v || strpbrk(v, ";\n") || n >= sizeof text) continue;
        int w = snprintf(text + n, sizeof text - n, "%s%s=%.900s", n ? ";" : "", names[i], v);
        if (w < 0 || (size_t)w >= sizeof text - n) break;
        for (size_t k = n + (n ? 1 : 0); text[k] != '='; k++) /* the name in lower case */
            if (text[k] >= 'A' && text[k] <= 'Z') text[k] = (char)(text[k] - 'A' + 'a');
        n += (size_t)w;
    }
    text[n < sizeof text ? n : sizeof text - 1] = 0;
    return text;
}

const char *gpu_tune_cache_dir(void) {
    static char cache[1024]; /* the process's: the options borrow it */
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x)
        snprintf(cache, sizeof cache, "%s/pooled", x);
    else if (home && *home)
        snprintf(cache, sizeof cache, "%s/.cache/pooled", home);
    else
        return NULL;
    return cache;
}

int cpu_copy_from_env(void) {
    return env_switch("POOLED_CPU_COPY");
}

void load_progress(void *ud, uint64_t done, uint64_t total) {
    load_progress_state *p = ud;
    if (total < (64u << 20)) return; /* a small file loads at once: no line */
    int pct = total ? (int)(done * 100 / total) : 100;
    if (pct == p->last_pct) return;
    p->last_pct = pct;
    fprintf(stderr, "\rloading %3d%%", pct);
    p->shown = true;
}

static void human(double v, const char *const *units, char *buf, size_t cap, double step) {
    int u = 0;
    while (v >= step && units[u + 1]) v /= step, u++;
    snprintf(buf, cap, u ? "%.1f%s" : "%.0f%s", v, units[u]);
}

void load_report(const pooled_model_info *in) {
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
    if (in->note[0]) fprintf(stderr, "%s\n", in->note);
    fprintf(stderr, "loaded %s%s%s%s (%s, %s %s) | ctx %d of %d | kv %s | %s\n", in->arch,
            in->name[0] ? " '" : "", in->name, in->name[0] ? "'" : "", params, bytes,
            in->weight_type, in->n_ctx, in->n_ctx_train, model_kv_name(in->kv_type), in->backend);
}

/* "spec: 40 passes, 58 of 90 drafts accepted (64.4%), 2.45 ids per pass" on stderr. */
void spec_report(const pooled_result *r) {
    fprintf(stderr, "spec: %lld passes, %lld of %lld drafts accepted (%.1f%%), %.2f ids per pass\n",
            (long long)r->n_steps, (long long)r->n_accepted, (long long)r->n_drafted,
            r->n_drafted ? 100.0 * (double)r->n_accepted / (double)r->n_drafted : 0.0,
            r->n_steps ? (double)r->n_decoded / (double)r->n_steps : 0.0);
}

bool model_opts(const model_args *a, int n_parallel, pooled_model_opts *o) {
    if (!a->path) return die("no model: give one with -m FILE"), false;
    int copy = cpu_copy_from_env();
    if (copy == -2)
        return die("POOLED_CPU_COPY=%.32s: expected 0 or 1", getenv("POOLED_CPU_COPY")), false;
    /* POOLED_ROOM_FRAME=N: the most columns of a prompt's frame through a chain's stages
     * (the A/B of frame sizes; default 512) */
    const char *v = getenv("POOLED_ROOM_FRAME");
    long frame = 0;
    if (v && *v) {
        char *end;
        frame = strtol(v, &end, 10);
        if (*end || frame < 1 || frame > 4096)
            return die("POOLED_ROOM_FRAME=%.32s: 1 to 4096 columns", v), false;
    }
    *o = pooled_model_opts_default();
    o->backend = a->backend;
    o->n_threads = (int)a->threads;
    o->n_ctx = (int)a->ctx;
    o->kv_type = a->kv;
    o->act_type = a->act_q8 ? POOLED_ACT_Q8 : POOLED_ACT_F32;
    o->dawn_lib = (v = getenv("POOLED_DAWN")) && *v ? v : NULL;
    o->gpu_tune_cache = gpu_tune_cache_dir();
    o->gpu_profile = getenv("POOLED_GPU_PROFILE");
    o->gpu_options = gpu_options_from_env();
    o->cpu_weights = copy;
    o->n_parallel = n_parallel;
    o->spec = a->spec == MODEL_SPEC_OFF && a->verify ? POOLED_SPEC_LOOKUP : a->spec;
    o->n_batch = (int)a->n_batch;
    o->n_stages = (int)a->split;
    o->chain_frame = (int)frame;
    /* POOLED_ROOM_PREPARE=0: no pass prepared ahead on a room's host (the A/B) */
    v = getenv("POOLED_ROOM_PREPARE");
    o->chain_prepare = v && !strcmp(v, "0") ? -1 : 0;
    return true;
}

pooled_model *model_opened(const model_args *a, int rc, pooled_model *m,
                           const load_progress_state *ps) {
    if (ps->shown) fprintf(stderr, "\r%*s\r", 16, "");
    const char *why = pooled_last_error();
    if (rc && !strncmp(why, "backend ", 8)) return die("--%s", why), NULL; /* not the file's */
    if (rc) return die_path(a->path, why), NULL;
    pooled_model_info in = {.size = sizeof in};
    pooled_model_get_info(m, &in);
    if (in.nonfinite[0])
        fprintf(stderr,
                "pooled: warning: %s: tensor %s holds NaN or Inf values: the model's "
                "output will be meaningless\n",
                a->path, in.nonfinite);
    return m;
}

pooled_model *model_open(const model_args *a, int n_parallel) {
    pooled_model_opts o;
    if (!model_opts(a, n_parallel, &o)) return NULL;
    load_progress_state ps = {.last_pct = -1};
    if (isatty(2)) o.progress = load_progress, o.progress_user = &ps;
    pooled_model *m = NULL;
    int rc = pooled_model_open(a->path, &o, &m);
    return model_opened(a, rc, m, &ps);
}

void model_open_report(const pooled_model *m) {
    pooled_model_info in = {.size = sizeof in};
    if (!pooled_model_get_info(m, &in)) load_report(&in);
}

const char *const sampler_args_help =
    "  --temp T             temperature, 0 = greedy (default 0.8)\n"
    "  --top-k K, --top-p P, --min-p P   (defaults 40, 0.95, 0.05; 0/1/0 turn them off)\n"
    "  --repeat-penalty P   transformers' repetition penalty (default 1 = off)\n"
    "  --presence-penalty P, --frequency-penalty P   OpenAI's (default 0)\n"
    "  --repeat-last-n N    ids the penalties look back over (default all)\n"
    "  --seed S             sampling seed (default: from the clock, shown with the timings)\n";

bool sampler_args_take(int argc, char **argv, int *i, pooled_sample_opts *p, bool *seeded,
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
    FLOAT_OPT("--temp", 0, 1e6, temperature)
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
        if (!*err) p->repeat_last_n = (int)iv;
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
    if (l->n == STOP_ARGS_MAX || !*v || strlen(v) > STOP_ARGS_LEN) {
        die("--stop: at most %d strings of 1 to %d bytes", STOP_ARGS_MAX, STOP_ARGS_LEN);
        *err = true;
        return true;
    }
    l->s[l->n++] = v;
    return true;
}
