/* cmd_run.c - `pooled run`: continue a prompt. Only the generated text goes to stdout (or,
 * with --ids, the generated ids on one line); the load report and timings go to stderr.
 * On the public API (pooled.h) only. */
#include <inttypes.h>
#include <pooled.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "base/file_map.h"
#include "base/limits.h"
#include "cmd_opts.h"
#include "commands.h"
#include "base/prompt_ids.h"

static const char *const usage =
    "usage: pooled run -m FILE (-p PROMPT | -f FILE | --prompt-ids \"ID ...\") [options]\n"
    "  -p, --prompt TEXT    the prompt (BOS added as the model's tokenizer asks); -p - reads\n"
    "                       it from standard input\n"
    "  -f, --file FILE      the prompt from a file (- : standard input; at most 256 MiB)\n"
    "  --prompt-ids LIST    the prompt as token ids, space or comma separated\n"
    "  -n, --n-predict N    ids to generate (default 128)\n"
    "  --ids                print the generated ids on one line instead of text\n"
    "  --ignore-eos         keep going after an end-of-generation id\n";

int run_opts_parse(int argc, char **argv, run_opts *o) {
    *o = (run_opts){
        .ma = model_args_defaults(), .sp = pooled_sample_opts_default(), .n_predict = 128};
    bool err = false;
    for (int i = 1; i < argc && !err; i++) {
        const char *v;
        if (model_args_take(argc, argv, &i, &o->ma, &err)) continue;
        if (sampler_args_take(argc, argv, &i, &o->sp, &o->seeded, &err)) continue;
        if (stop_args_take(argc, argv, &i, &o->stop, &err)) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%s%s%s%s", usage, stop_args_help, sampler_args_help, model_args_help);
            return 2;
        } else if (!strcmp(argv[i], "--ids")) {
            o->print_ids = true;
        } else if (!strcmp(argv[i], "--ignore-eos")) {
            o->ignore_eos = true;
        } else if (arg_take(argc, argv, &i, "--prompt", "-p", &v, &err)) {
            o->prompt = v;
        } else if (arg_take(argc, argv, &i, "--file", "-f", &v, &err)) {
            o->prompt_file = v;
        } else if (arg_take(argc, argv, &i, "--prompt-ids", NULL, &v, &err)) {
            o->prompt_ids = v;
        } else if (arg_take(argc, argv, &i, "--n-predict", "-n", &v, &err)) {
            err = err || !arg_int("-n", v, 0, INT32_MAX, &o->n_predict);
        } else if (arg_take(argc, argv, &i, "--split", NULL, &v, &err)) {
            /* (not in --help: a test switch, documented in the README) */
            err = err || !arg_int("--split", v, 1, 63, &o->ma.split);
        } else if (!err) {
            /* argv[0]: "run", or "room host" when the room passes its options on */
            return die("%s: unknown option '%s' (pooled %s --help)", argv[0], argv[i], argv[0]);
        }
    }
    if (err) return 1;
    if (!!o->prompt + !!o->prompt_ids + !!o->prompt_file != 1)
        return die("%s: give the prompt with one of -p TEXT, -f FILE or --prompt-ids IDS", argv[0]);
    if (o->prompt && !strcmp(o->prompt, "-")) o->prompt = NULL, o->prompt_file = "-";
    return 0;
}

int cmd_run(int argc, char **argv) {
    run_opts ro;
    int pr = run_opts_parse(argc, argv, &ro);
    if (pr) return pr == 2 ? 0 : 1;
    return run_with(&ro, NULL, NULL);
}

/* What goes to stdout: the text (or the ids) as the library settles it. */
typedef struct {
    bool ids;
    int64_t n_out;
} run_out;

static int on_token(void *ud, int32_t id, const char *text, size_t len) {
    run_out *o = ud;
    if (o->ids && id >= 0) printf(o->n_out++ ? " %d" : "%d", id);
    if (!o->ids) fwrite(text, 1, len, stdout);
    return !out_flush(); /* stdout failed: stop generating (main reports it) */
}

/* The prompt's ids: --prompt-ids as parsed (each checked against the vocabulary), or the
 * text (-p, -f) tokenized as the model's tokenizer asks; within the context. */
static bool prompt_of(pooled_model *m, const char *text, int32_t **ids, size_t *n) {
    pooled_model_info in = {.size = sizeof in};
    pooled_model_get_info(m, &in);
    if (!text) {
        for (size_t i = 0; i < *n; i++)
            if ((*ids)[i] >= in.n_vocab)
                return die("--prompt-ids: id %d is outside the vocabulary (0 to %d)", (*ids)[i],
                           in.n_vocab - 1),
                       false;
    } else {
        int32_t *lib = NULL;
        if (pooled_tokenize(m, text, strlen(text), 1, 0, &lib, n))
            return die("%s", pooled_last_error()), false;
        *ids = malloc(sizeof **ids * (*n ? *n : 1));
        if (*ids && *n) memcpy(*ids, lib, sizeof **ids * *n);
        pooled_free(lib);
        if (!*ids) return die("out of memory"), false;
        if (!*n) return die("the prompt is empty (and the model has no BOS)"), false;
    }
    if (*n > (size_t)in.n_ctx)
        return die("the prompt is %zu tokens, longer than the context of %d (raise --ctx)", *n,
                   in.n_ctx),
               false;
    return true;
}

int run_with(const run_opts *ro_in, model_opener open, void *ud) {
    run_opts ro = *ro_in;
    pooled_sample_opts so = ro.sp;
    if (!ro.seeded) so.seed = sampler_args_clock_seed();
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int64_t nn = 0;
    if (ro.prompt_ids && pl_prompt_ids_parse(ro.prompt_ids, &ids, &nn))
        return die("--prompt-ids: %s", pl_last_error());
    n_ids = (size_t)nn;
    char *file_text = NULL; /* -f FILE, -p - */
    if (ro.prompt_file && pl_file_read(ro.prompt_file, PL_LIMIT_TEXT_FILE,
                                       PL_READ_TEXT | PL_READ_STDIN, &file_text, NULL))
        return free(ids), die_path(ro.prompt_file, pl_last_error());
    const char *text = file_text ? file_text : ro.prompt;
    pooled_model *m = open ? open(&ro.ma, ud) : model_open(&ro.ma, 0);
    if (!m) return free(ids), free(file_text), 1;
    int rc = 1;
    pooled_session *ses = NULL;
    if (!prompt_of(m, ro.prompt_ids ? NULL : text, &ids, &n_ids)) goto done;
    if (pooled_session_new(m, &ses)) {
        die("%s", pooled_last_error());
        goto done;
    }
    so.max_tokens = ro.n_predict;
    so.ignore_eos = ro.ignore_eos;
    so.stop = ro.stop.s;
    so.n_stop = (size_t)ro.stop.n;
    so.spec = ro.ma.spec;
    model_open_report(m);
    run_out out = {.ids = ro.print_ids};
    pooled_result r = {.size = sizeof r};
    int s = pooled_generate(ses, ids, n_ids, &so, on_token, &out, &r);
    if (ro.print_ids || isatty(1)) putchar('\n');
    fflush(stdout);
    fprintf(stderr,
            "prompt %lld tokens (%lld run) in %.1f ms, %.1f tok/s | generated %lld in %.1f ms, "
            "%.1f tok/s | seed %" PRIu64 "\n",
            (long long)r.n_prompt, (long long)r.n_prompt_run, r.t_prompt * 1e3,
            r.t_prompt > 0 ? r.n_prompt_run / r.t_prompt : 0.0, (long long)r.n_gen, r.t_gen * 1e3,
            r.t_gen > 0 ? r.n_decoded / r.t_gen : 0.0, so.seed);
    if (ro.ma.spec != MODEL_SPEC_OFF) spec_report(&r);
    if (s) {
        die("%s", pooled_last_error());
        goto done;
    }
    if (r.stop_reason == POOLED_STOP_LENGTH && r.n_gen < ro.n_predict) { /* -n past the end */
        pooled_model_info in = {.size = sizeof in};
        pooled_model_get_info(m, &in);
        die("context full: all %d positions are used (raise --ctx)", in.n_ctx);
        goto done;
    }
    rc = 0;
done:
    pooled_session_free(ses);
    pooled_model_close(m);
    free(ids);
    free(file_text);
    return rc;
}
