/* cmd_run.c - `pooled run`: continue a prompt. Only the generated text goes to stdout (or,
 * with --ids, the generated ids on one line); the load report and timings go to stderr. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "base/file_map.h"
#include "base/limits.h"
#include "cmd_opts.h"
#include "commands.h"
#include "model_load.h"
#include "runtime/generate.h"
#include "runtime/prompt_ids.h"

static const char *const usage =
    "usage: pooled run -m FILE (-p PROMPT | -f FILE | --prompt-ids \"ID ...\") [options]\n"
    "  -p, --prompt TEXT    the prompt (BOS added as the model's tokenizer asks); -p - reads\n"
    "                       it from standard input\n"
    "  -f, --file FILE      the prompt from a file (- : standard input; at most 256 MiB)\n"
    "  --prompt-ids LIST    the prompt as token ids, space or comma separated\n"
    "  -n, --n-predict N    ids to generate (default 128)\n"
    "  --ids                print the generated ids on one line instead of text\n"
    "  --ignore-eos         keep going after an end-of-generation id\n";

typedef struct {
    const pl_tokenizer *tok;
    pl_tok_stream *stream;
    pl_stop stop; /* --stop */
    bool ids;
    bool ignore_eos;
    bool failed;   /* out of memory in the stop filter */
    bool stop_hit; /* a stop string ended the text */
    int64_t n_out;
} run_out;

/* Text through the stop strings to stdout; false once one appeared (or on failure). */
static bool put_text(run_out *o, const char *text, bool last) {
    const char *out;
    size_t n;
    bool hit;
    if (pl_stop_feed(&o->stop, text, strlen(text), last, &out, &n, &hit)) {
        o->failed = true;
        return false;
    }
    fwrite(out, 1, n, stdout);
    o->stop_hit = o->stop_hit || hit;
    return !hit;
}

static bool on_token(void *ud, int32_t id) {
    run_out *o = ud;
    if (!o->ignore_eos && o->tok && pl_tok_is_eog(o->tok, id)) return false;
    bool more = true;
    if (o->ids) {
        printf(o->n_out ? " %d" : "%d", id);
    } else {
        more = put_text(o, pl_tok_stream_push(o->stream, id), false);
    }
    o->n_out++;
    return out_flush() && more; /* stdout failed: stop generating (main reports it) */
}

int run_opts_parse(int argc, char **argv, run_opts *o) {
    *o = (run_opts){.ma = model_args_defaults(), .sp = pl_sampler_defaults(), .n_predict = 128};
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
            err = err || !arg_int("--split", v, 1, PL_CHAIN_MAX_STAGES - 1, &o->ma.split);
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

int run_with(const run_opts *ro_in, bool (*attach)(loaded_model *lm, void *ud), void *ud) {
    run_opts ro = *ro_in;
    model_args ma = ro.ma;
    pl_sampler_params sp = ro.sp;
    const char *prompt = ro.prompt, *prompt_ids = ro.prompt_ids;
    int64_t n_predict = ro.n_predict;
    bool print_ids = ro.print_ids, ignore_eos = ro.ignore_eos;
    if (!ro.seeded) sp.seed = sampler_args_clock_seed();

    int32_t *ids = NULL;
    int64_t n_ids = 0;
    if (prompt_ids && pl_prompt_ids_parse(prompt_ids, &ids, &n_ids))
        return die("--prompt-ids: %s", pl_last_error());
    char *file_text = NULL; /* -f FILE, -p - */
    if (ro.prompt_file && pl_file_read(ro.prompt_file, PL_LIMIT_TEXT_FILE,
                                       PL_READ_TEXT | PL_READ_STDIN, &file_text, NULL))
        return die_path(ro.prompt_file, pl_last_error());
    if (file_text) prompt = file_text;
    loaded_model lm;
    /* the tokenizer is needed for a text prompt, text output, or the end-of-generation ids */
    if (!model_load(&ma, true, &lm)) {
        free(ids);
        free(file_text);
        return 1;
    }
    int rc = 1;
    pl_session *ses = NULL;
    pl_sampler *smp = NULL;
    pl_drafter *dr = NULL;
    run_out out = {.tok = lm.tok, .ids = print_ids, .ignore_eos = ignore_eos};
    pl_status s = PL_OK;
    if (prompt) {
        s = pl_tok_encode(lm.tok, prompt, strlen(prompt), true, false, &ids, &n_ids);
        if (!s && n_ids == 0)
            s = pl_fail(PL_ERR_ARG, "the prompt is empty (and the model has no BOS)");
    }
    int n_vocab = pl_model_get_info(lm.m)->n_vocab;
    for (int64_t i = 0; !s && prompt_ids && i < n_ids; i++)
        if (ids[i] >= n_vocab)
            s = pl_fail(PL_ERR_ARG, "--prompt-ids: id %d is outside the vocabulary (0 to %d)",
                        ids[i], n_vocab - 1);
    if (!s && n_ids > lm.so.n_ctx)
        s = pl_fail(PL_ERR_ARG,
                    "the prompt is %lld tokens, longer than the context of %d (raise --ctx)",
                    (long long)n_ids, lm.so.n_ctx);
    if (!s && attach && !attach(&lm, ud)) goto done;
    if (!s) s = model_session(&lm, &ses);
    if (!s) s = pl_sampler_new(&sp, pl_model_get_info(lm.m)->n_vocab, &smp);
    if (!s) s = model_drafter(&ma, &lm, ses, &dr);
    if (!s && !print_ids && !(out.stream = pl_tok_stream_new(lm.tok, false)))
        s = pl_fail(PL_ERR_NOMEM, "out of memory");
    if (!s) s = pl_stop_init(&out.stop, ro.stop.s, ro.stop.n, "--stop");
    if (s) {
        die("%s", pl_last_error());
        goto done;
    }
    model_report(&lm);
    pl_gen_opts go = {.n_predict = n_predict, .on_token = on_token, .ud = &out, .drafter = dr};
    pl_gen_stats st;
    s = pl_generate(ses, smp, ids, n_ids, &go, &st);
    if (out.stream && !out.stop_hit) put_text(&out, pl_tok_stream_flush(out.stream), true);
    if (!s && out.failed) s = PL_ERR_NOMEM;
    if (print_ids || isatty(1)) putchar('\n');
    fflush(stdout);
    fprintf(stderr,
            "prompt %lld tokens (%lld run) in %.1f ms, %.1f tok/s | generated %lld in %.1f ms, "
            "%.1f tok/s | seed %" PRIu64 "\n",
            (long long)n_ids, (long long)st.n_prompt_run, st.t_prompt * 1e3,
            st.t_prompt > 0 ? st.n_prompt_run / st.t_prompt : 0.0, (long long)st.n_generated,
            st.t_decode * 1e3, st.t_decode > 0 ? st.n_decoded / st.t_decode : 0.0, sp.seed);
    if (dr) spec_report(&st);
    if (s) {
        die("%s", pl_last_error());
        goto done;
    }
    rc = 0;
done:
    if (out.stream) pl_tok_stream_free(out.stream);
    pl_stop_free(&out.stop);
    free(file_text);
    pl_sampler_free(smp);
    pl_drafter_free(dr);
    pl_session_free(ses);
    model_unload(&lm);
    free(ids);
    return rc;
}
