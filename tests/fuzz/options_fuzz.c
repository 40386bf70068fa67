/* options_fuzz.c - libFuzzer target for the option parsers of the commands that run a
 * model (run, chat, bench: their own options, the shared model and sampler options).
 *
 * The input's first byte picks the command; the rest, split at NUL bytes, is its argv
 * (at most 64 arguments). The parser must return 0, 1 or 2 without exiting; when it
 * accepts the options, every value is in its documented range, strings point into argv,
 * and the sampler parameters are ones pl_sampler_new accepts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_opts.h"
#include "api/api_internal.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "options_fuzz: %s failed (line %d)\n", #cond, __LINE__);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_ARGS 64

static const char *buf_lo, *buf_hi; /* the argument strings live here */

static void in_argv(const char *s) {
    REQUIRE(!s || (s >= buf_lo && s < buf_hi) || !strcmp(s, "auto"));
}

static void check_model_args(const model_args *a) {
    in_argv(a->path);
    in_argv(a->backend);
    REQUIRE(!strcmp(a->backend, "auto") || !strcmp(a->backend, "cpu") ||
            !strcmp(a->backend, "webgpu"));
    REQUIRE(a->threads >= 0 && a->threads <= 256);
    REQUIRE(a->ctx >= 0 && a->ctx <= (1 << 24));
    REQUIRE(a->kv == POOLED_KV_F16 || a->kv == POOLED_KV_F32 ||
            a->kv == POOLED_KV_Q8); /* --kv q8 too */
    REQUIRE(a->act_q8 == 0 || a->act_q8 == 1);
}

static void check_sampler(const pooled_sample_opts *o) {
    pl_sampler_params p = pl_api_sampler_params(o);
    pl_sampler *s = NULL;
    REQUIRE(pl_sampler_new(&p, 1000, &s) == PL_OK);
    pl_sampler_free(s);
    REQUIRE(p.top_k >= 0 && p.penalty_last_n >= -1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const names[] = {"run", "chat", "bench"};
    int cmd = data[0] % 3;
    char *text = malloc(size); /* the arguments, NUL-separated, with a final NUL */
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)names[cmd];
    for (char *p = text; p < text + size && argc <= MAX_ARGS; p += strlen(p) + 1) argv[argc++] = p;
    argv[argc] = NULL;
    buf_lo = text;
    buf_hi = text + size;
    int r;
    if (cmd == 0) {
        run_opts o;
        r = run_opts_parse(argc, argv, &o);
        if (r == 0) {
            check_model_args(&o.ma);
            check_sampler(&o.sp);
            /* exactly one prompt source: text, ids or a file (-f) */
            REQUIRE(!!o.prompt + !!o.prompt_ids + !!o.prompt_file == 1);
            in_argv(o.prompt);
            in_argv(o.prompt_ids);
            if (o.prompt_file && strcmp(o.prompt_file, "-"))
                in_argv(o.prompt_file); /* -p -: stdin */
            REQUIRE(o.n_predict >= 0 && o.n_predict <= INT32_MAX);
        }
    } else if (cmd == 1) {
        chat_opts o;
        r = chat_opts_parse(argc, argv, &o);
        if (r == 0) {
            check_model_args(&o.ma);
            check_sampler(&o.sp);
            in_argv(o.system);
            REQUIRE(o.n_predict >= -1 && o.n_predict <= INT32_MAX);
        }
    } else {
        bench_opts o;
        r = bench_opts_parse(argc, argv, &o);
        if (r == 0) {
            check_model_args(&o.ma);
            REQUIRE(o.n_prompt >= 0 && o.n_prompt <= (1 << 20) && o.n_gen >= 0 &&
                    o.n_gen <= (1 << 20) && (o.n_prompt || o.n_gen));
            REQUIRE(o.reps >= 1 && o.reps <= 1000);
            REQUIRE(o.n_verify >= 0 && o.n_verify <= BENCH_SPEC_MAX && (!o.n_verify || o.n_prompt));
            for (int i = 0; i < o.n_verify; i++) {
                REQUIRE(o.verify_k[i] >= 1 && o.verify_k[i] <= BENCH_SPEC_MAX);
                for (int j = 0; j < i; j++) REQUIRE(o.verify_k[i] != o.verify_k[j]);
            }
        }
    }
    REQUIRE(r >= 0 && r <= 2);
    free(text);
    return 0;
}
