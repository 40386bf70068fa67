/* gpu_options.c - the GPU backend's tuning settings from one line of text (pooled.h's
 * pooled_model_opts.gpu_options; the pooled command makes it from its POOLED_GPU_*
 * environment variables), so a program can pass every experiment switch without the
 * library reading the environment. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

/* The settings, named as the command's POOLED_GPU_<NAME> variables in lower case. */
static const char *const keys[] = {"fuse",    "tune",    "gemv",     "gemm",      "robust",
                                   "toggles", "preload", "xpre",     "smx",       "topk",
                                   "moesh",   "moecomb", "fa",       "dr",        "chunk",
                                   "mc",      "exact",   "gemm_min", "profile_at"};
#define N_KEYS (sizeof keys / sizeof *keys)

/* An on/off switch: unset or empty 0 (auto), "0" -1 (off), "1" 1 (on), anything else -2
 * (the backend refuses to open, naming the setting). */
static int on_off(const char *v) {
    return !v || !*v ? 0 : !strcmp(v, "0") ? -1 : !strcmp(v, "1") ? 1 : -2;
}

/* "A" or "A,B" as numbers (B 0 when left out); false when anything else follows. */
static bool num_pair(const char *v, long *a, long *b) {
    char *end;
    *a = strtol(v, &end, 10), *b = 0;
    if (*end == ',') *b = strtol(end + 1, &end, 10);
    return !*end;
}

static const char *val_of(const char *const *val, const char *name) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(keys[i], name)) return val[i];
    return NULL;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
    return s;
}

pl_status pl_gpu_opts_parse(char *text, pl_gpu_backend_opts *o) {
    const char *val[N_KEYS] = {0};
    for (char *item = text, *next; item && *item; item = next) {
        next = strpbrk(item, ";\n");
        if (next) *next++ = 0;
        item = trim(item);
        if (!*item) continue;
        char *eq = strchr(item, '=');
        if (!eq) return pl_fail(PL_ERR_ARG, "gpu_options: '%.40s' is not NAME=VALUE", item);
        *eq = 0;
        char *k = trim(item), *v = trim(eq + 1);
        size_t i = 0;
        while (i < N_KEYS && strcmp(keys[i], k)) i++;
        if (i == N_KEYS) return pl_fail(PL_ERR_ARG, "gpu_options: unknown setting '%.40s'", k);
        val[i] = v;
    }
#define V(name) val_of(val, name)
    const char *v;
    o->no_fuse = (v = V("fuse")) && !strcmp(v, "0");
    o->no_tune = (v = V("tune")) && !strcmp(v, "0");
    o->tune_verbose = v && !strcmp(v, "verbose");
    o->gemv = (v = V("gemv")) && *v ? v : NULL;
    o->gemm = (v = V("gemm")) && *v ? v : NULL;
    o->robust = (v = V("robust")) && *v == '1';
    o->toggles = (v = V("toggles")) && *v ? v : NULL;
    o->q8_preload = (v = V("preload")) && !strcmp(v, "1");
    o->gemv_xpre = !(v = V("xpre")) || !*v                 ? 0
                   : !strcmp(v, "0")                       ? -1
                   : (v[0] >= '1' && v[0] <= '2' && !v[1]) ? v[0] - '0'
                                                           : -2; /* refused at open */
    o->smx = !(v = V("smx")) || !*v                ? 0
             : !strcmp(v, "0")                     ? -1
             : v[0] >= '5' && v[0] <= '7' && !v[1] ? v[0] - '0'
                                                   : -2; /* refused at open */
    o->topk_rank = on_off(V("topk"));
    o->moe_shgate = on_off(V("moesh"));
    o->moe_comb = on_off(V("moecomb"));
    o->fa = on_off(V("fa"));
    o->dr_chunk = on_off(V("dr"));
    o->submit_every = !(v = V("chunk")) || !*v ? 0 : atoi(v) > 0 ? atoi(v) : -1;
    long a, b;
    if ((v = V("mc")) && *v) { /* columns a q8x GEMV workgroup[,accumulators] */
        bool whole = num_pair(v, &a, &b);
        o->gemv_cols = !whole || a < 0 || a == 1 || a > 64 ? 99 : a == 0 ? -1 : (int)a;
        o->gemv_cols_acc = b < 0 || b > 1000 ? 999 : (int)b; /* out of range: refused */
    }
    if ((v = V("exact")) && *v) { /* the GEMV-order GEMM: min[,max] columns */
        bool whole = num_pair(v, &a, &b);
        o->gemm_exact_min = !whole || a < 0 || a == 1 || a > 65536 ? -2 : a == 0 ? -1 : (int)a;
        o->gemm_exact_max = b < 0 || b > 65536 ? -1 : (int)b; /* out of range: refused */
    }
    if ((v = V("gemm_min")) && *v) { /* the GEMM above N columns */
        char *end;
        long c = strtol(v, &end, 10);
        o->gemm_min_cols = *end || c < 1 || c > 65536 ? -1 : (int)c; /* -1: refused at open */
    }
    if ((v = V("profile_at")) && *v) o->profile_at = atoi(v);
#undef V
    return PL_OK;
}
