/* cmd_bench.c - `pooled bench`: prompt processing (prefill) and generation (decode) speed,
 * measured like llama-bench's pp/tg tests: prefill runs P ids as one batch into an empty
 * cache, and the time to the first id adds the head and the greedy pick of it; decode runs N ids
 * one at a time from an empty cache, each picked by argmax of the previous step. Each is repeated R
 * times after a warm-up; the median is reported, with the peak resident memory of the process. With
 * --json stdout is one JSON object (one line) and the table goes to stderr.
 *
 * --verify-cost K,...: what a speculative verify pass costs. At the depth of the -p prompt,
 * one plain decode step (push + device argmax) and one verify pass of 1 + K columns
 * (pl_session_spec_step: the batch, every column's argmax on the device, the choices) are
 * timed, median of R; the drafts are the ids plain greedy steps make there, so every draft
 * is accepted and the pass does all its work. After each the cache goes back to the
 * prompt (a recurrent state that cannot runs the prompt again, untimed).
 *
 * --streams N,...: N sessions stepped together as serve's slots are (bench_streams.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "args.h"
#include "base/json_write.h"
#include "bench_streams.h"
#include "cmd_opts.h"
#include "commands.h"
#include "api/api_internal.h"
#include "model/model.h"
#include "runtime/draft.h"
#include "runtime/generate.h"

static const char *const usage =
    "usage: pooled bench -m FILE [-p 512] [-n 128] [-r 5] [--json] [--verify-cost K,...]\n"
    "       [options]\n"
    "  -p, --n-prompt N     prompt ids processed as one batch, and the time to the first\n"
    "                       id after them (0: skip)\n"
    "  -n, --n-gen N        ids generated one at a time (0: skip)\n"
    "  -r, --repetitions N  repetitions; the median is reported\n"
    "  --json               print one JSON object of the results on stdout (the table goes\n"
    "                       to stderr)\n"
    "  --verify-cost K[,K...]  after the -p prompt, time one decode step and one verify\n"
    "                       pass of 1 + K columns for each K (1 to 15, at most 15 values):\n"
    "                       ms per pass, ratio to the step, and projected tok/s when each\n"
    "                       draft is accepted with probability 50, 70, 90%\n"
    "  --streams N[,N...]   for each N (1 to 256, at most 8 values): N sessions, each its\n"
    "                       own cache, read their -p prompts one after another (time to\n"
    "                       first id: median, max), then -n steps append one greedy id to\n"
    "                       all N in one batched pass: aggregate tok/s, ms per step, ratio\n"
    "                       to N = 1 (default --ctx: -p + -n rounded up to 64)\n"
    "  --ids                with --streams: print each stream's prompt and generated ids\n"
    "  (--spec lookup|mtp|auto: decode by verify passes; reports acceptance and ids per pass)\n";

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bench_prompt(uint32_t seed, int32_t n_vocab, int32_t *ids, int64_t n) {
    uint32_t x = seed;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = (int32_t)((x >> 8) % (uint32_t)n_vocab);
    }
}

/* Seconds to prefill ids[0..n) into an empty cache (*secs) and to the first generated id
 * (*first_secs: the prefill, the head and the greedy pick of the id, read back to the
 * host: what a user waits for before the first token of an answer). */
static pl_status time_prefill(pl_session *s, pl_sampler *greedy, const int32_t *ids, int64_t n,
                              double *secs, double *first_secs) {
    pl_session_reset(s);
    double t0 = pl_now();
    pl_status st = pl_session_set(s, ids, n, NULL);
    /* a backend may defer its work (the GPU records it): reading a value waits for it */
    float first;
    if (!st) st = pl_be_read(pl_state_logits(pl_session_state(s)), 0, &first, sizeof first);
    *secs = pl_now() - t0;
    int32_t id;
    if (!st) st = pl_session_pick(s, greedy, &id);
    *first_secs = pl_now() - t0;
    return st;
}

/* Seconds to decode n ids one at a time from an empty cache (greedy, the ids kept on the
 * device as pl_generate does), or with a drafter by verify passes (*gs gets the counts). */
static pl_status time_decode(pl_session *s, pl_sampler *greedy, pl_drafter *dr, int32_t first,
                             int64_t n, double *secs, pl_gen_stats *gs) {
    pl_session_reset(s);
    double t0 = pl_now();
    pl_status st;
    memset(gs, 0, sizeof *gs);
    if (dr) {
        pl_gen_opts go = {.n_predict = n, .drafter = dr};
        st = pl_generate(s, greedy, &first, 1, &go, gs);
    } else {
        st = pl_session_set(s, &first, 1, NULL);
        int64_t got = 0;
        if (!st && n > 1) st = pl_session_greedy(s, n, NULL, NULL, &got);
    }
    *secs = pl_now() - t0;
    return st;
}

/* A list like --verify-cost "1,3,7,15" (what: "K") into out[0..*n): at most max distinct
 * values of 1 to hi, in the order given. */
static bool parse_list(const char *opt, const char *what, const char *v, int hi, int max, int *out,
                       int *n) {
    *n = 0;
    for (const char *p = v;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char one[16];
        int64_t k;
        if (len >= sizeof one) /* far too long for a value */
            return die("%s: expected %s[,%s...] of 1 to %d, got '%s'", opt, what, what, hi, v),
                   false;
        memcpy(one, p, len);
        one[len] = 0;
        if (!arg_int(opt, one, 1, hi, &k)) return false;
        for (int i = 0; i < *n; i++)
            if (out[i] == k)
                return die("%s: %s %d given twice in '%s'", opt, what, (int)k, v), false;
        if (*n == max) return die("%s: at most %d values, got '%s'", opt, max, v), false;
        out[(*n)++] = (int)k;
        if (!end) return true;
        p = end + 1;
    }
}

/* ---- --verify-cost ---- */

/* The acceptance rates the projection is made for. */
static const double verify_acc[] = {0.5, 0.7, 0.9};
#define N_ACC ((int)(sizeof verify_acc / sizeof verify_acc[0]))

typedef struct {
    double step_ms;              /* one plain decode step */
    double pass_ms[PL_SPEC_MAX]; /* one verify pass of 1 + verify_k[i] columns */
    int accepted[PL_SPEC_MAX];   /* drafts that pass accepted (all, unless columns differ
                                    from plain steps) */
} verify_cost;

/* Ids one pass yields when each draft is accepted with probability a, independently, until
 * the first rejection: 1 + a + ... + a^k = (1 - a^(k+1)) / (1 - a). */
static double ids_per_pass(double a, int k) {
    double n = 0, p = 1;
    for (int j = 0; j <= k; j++, p *= a) n += p;
    return n;
}

/* Back to the first n ids, and wait for the device when that ran them again: a recurrent
 * state (the Qwen3.5 hybrids) cannot go back past a snapshot, so the session re-runs the
 * prompt, and on the GPU that work would otherwise run inside the next timed step (the
 * 27B's plain step measured 513 ms, its prefill). */
static pl_status back_to(pl_session *s, int64_t n, float *logits) {
    pl_status st = pl_session_truncate(s, n);
    if (!st) (void)pl_session_logits(s, logits); /* fails when nothing re-ran: no wait owed */
    return st;
}

/* The --verify-cost measurements at depth n_prompt (see the file's comment). */
static pl_status time_verify(pl_session *s, pl_sampler *greedy, const int32_t *ids, int64_t n_vocab,
                             const bench_opts *bo, verify_cost *vc) {
    int64_t P = bo->n_prompt, reps = bo->reps;
    int kmax = 0;
    for (int i = 0; i < bo->n_verify; i++)
        if (bo->verify_k[i] > kmax) kmax = bo->verify_k[i];
    int32_t g[PL_SPEC_MAX + 2], out[PL_SPEC_MAX + 1], got;
    double *t = calloc((size_t)reps, sizeof *t);
    float *lg = malloc(sizeof *lg * (size_t)n_vocab);
    if (!t || !lg) return free(t), free(lg), pl_fail(PL_ERR_NOMEM, "out of memory");
    /* the drafts: what plain greedy steps choose after the prompt, g[0] the first */
    pl_session_reset(s);
    pl_status st = pl_session_set(s, ids, P, NULL);
    if (!st) st = pl_session_pick(s, greedy, &g[0]);
    for (int j = 1; !st && j <= kmax + 1; j++) {
        st = pl_session_push(s, g[j - 1]);
        if (!st) st = pl_session_pick(s, greedy, &g[j]);
    }
    if (!st) st = back_to(s, P, lg);
    /* one plain step: the first rep is a warm-up, as is each K's */
    for (int64_t r = -1; !st && r < reps; r++) {
        double t0 = pl_now();
        st = pl_session_push(s, g[0]);
        if (!st) st = pl_session_pick(s, greedy, &got);
        if (r >= 0) t[r] = pl_now() - t0;
        if (!st) st = back_to(s, P, lg);
    }
    if (!st) vc->step_ms = 1e3 * bench_median(t, (int)reps);
    for (int i = 0; !st && i < bo->n_verify; i++) {
        int k = bo->verify_k[i], n_out = 0;
        for (int64_t r = -1; !st && r < reps; r++) {
            double t0 = pl_now();
            st = pl_session_spec_step(s, greedy, g[0], g + 1, k, out, &n_out);
            if (r >= 0) t[r] = pl_now() - t0;
            if (!st) st = back_to(s, P, lg);
        }
        vc->accepted[i] = n_out - 1;
        if (!st) vc->pass_ms[i] = 1e3 * bench_median(t, (int)reps);
    }
    free(t);
    free(lg);
    return st;
}

static void verify_print(FILE *f, const bench_opts *bo, const verify_cost *vc) {
    fprintf(f, "verify     at depth %lld: one decode step %.3f ms (%.1f tok/s)\n",
            (long long)bo->n_prompt, vc->step_ms, 1e3 / vc->step_ms);
    fprintf(f, "verify      K   ms/pass   x step  tok/s at a = 50%%      70%%      90%%\n");
    for (int i = 0; i < bo->n_verify; i++) {
        int k = bo->verify_k[i];
        fprintf(f, "verify     %2d %9.3f %8.2f         ", k, vc->pass_ms[i],
                vc->pass_ms[i] / vc->step_ms);
        for (int a = 0; a < N_ACC; a++)
            fprintf(f, " %8.1f", 1e3 * ids_per_pass(verify_acc[a], k) / vc->pass_ms[i]);
        fprintf(f, "\n");
        if (vc->accepted[i] != k)
            fprintf(f,
                    "verify     warning: K=%d accepted %d of the %d drafts plain steps made "
                    "(verify columns differ from plain steps)\n",
                    k, vc->accepted[i], k);
    }
    fprintf(f, "verify     (projected: each draft accepted with probability a, independently: "
               "(1 - a^(K+1)) / (1 - a) ids per pass, over the pass's time; drafting not "
               "counted)\n");
}

static void verify_json(const bench_opts *bo, const verify_cost *vc) {
    printf(",\"verify_depth\":%lld,\"verify_step_ms\":", (long long)bo->n_prompt);
    pl_json_num(stdout, vc->step_ms, 0);
    printf(",\"verify\":[");
    for (int i = 0; i < bo->n_verify; i++) {
        int k = bo->verify_k[i];
        printf("%s{\"k\":%d,\"accepted\":%d,\"pass_ms\":", i ? "," : "", k, vc->accepted[i]);
        pl_json_num(stdout, vc->pass_ms[i], 0);
        printf(",\"ratio\":");
        pl_json_num(stdout, vc->pass_ms[i] / vc->step_ms, 0);
        for (int a = 0; a < N_ACC; a++) {
            printf(",\"tok_s_a%d\":", (int)(verify_acc[a] * 100 + 0.5));
            pl_json_num(stdout, 1e3 * ids_per_pass(verify_acc[a], k) / vc->pass_ms[i], 0);
        }
        printf("}");
    }
    printf("]");
}

int bench_opts_parse(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){.ma = model_args_defaults(), .n_prompt = 512, .n_gen = 128, .reps = 5};
    bool err = false;
    for (int i = 1; i < argc && !err; i++) {
        const char *v;
        if (model_args_take(argc, argv, &i, &o->ma, &err)) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%s%s", usage, model_args_help);
            return 2;
        } else if (!strcmp(argv[i], "--json")) {
            o->json = true;
        } else if (arg_take(argc, argv, &i, "-p", "--n-prompt", &v, &err)) {
            err = err || !arg_int("-p", v, 0, 1 << 20, &o->n_prompt);
        } else if (arg_take(argc, argv, &i, "-n", "--n-gen", &v, &err)) {
            err = err || !arg_int("-n", v, 0, 1 << 20, &o->n_gen);
        } else if (arg_take(argc, argv, &i, "-r", "--repetitions", &v, &err)) {
            err = err || !arg_int("-r", v, 1, 1000, &o->reps);
        } else if (arg_take(argc, argv, &i, "--verify-cost", NULL, &v, &err)) {
            err = err || !parse_list("--verify-cost", "K", v, PL_SPEC_MAX, PL_SPEC_MAX, o->verify_k,
                                     &o->n_verify);
        } else if (arg_take(argc, argv, &i, "--streams", NULL, &v, &err)) {
            err = err || !parse_list("--streams", "N", v, BENCH_STREAM_LIMIT, BENCH_STREAMS_MAX,
                                     o->streams, &o->n_streams);
        } else if (!strcmp(argv[i], "--ids")) {
            o->print_ids = true;
        } else if (!err) {
            return die("bench: unknown option '%s' (pooled bench --help)", argv[i]);
        }
    }
    if (err) return 1;
    if (!o->n_prompt && !o->n_gen) return die("bench: nothing to measure (-p 0 and -n 0)");
    if (o->n_verify && !o->n_prompt)
        return die("bench: --verify-cost verifies after the -p prompt: give -p 1 or more");
    if (o->n_streams && (!o->n_prompt || !o->n_gen))
        return die("bench: --streams reads a -p prompt and decodes -n steps: give both 1 or more");
    if (o->print_ids && !o->n_streams)
        return die("bench: --ids prints the streams' ids: give --streams");
    return 0;
}

int cmd_bench(int argc, char **argv) {
    bench_opts bo;
    int pr = bench_opts_parse(argc, argv, &bo);
    if (pr) return pr == 2 ? 0 : 1;
    return bench_with(&bo, NULL, NULL);
}

_Static_assert(BENCH_SPEC_MAX == PL_SPEC_MAX, "--verify-cost's K is the library's");

/* "off", "lookup" or "mtp": what pl_api_drafter_new makes. */
static const char *drafter_name(int spec, const pl_model_parts *p) {
    return spec == MODEL_SPEC_OFF ? "off" : p->so.draft ? "mtp" : "lookup";
}

int bench_with(const bench_opts *bo, model_opener open, void *ud) {
    model_args ma = bo->ma;
    int64_t n_prompt = bo->n_prompt, n_gen = bo->n_gen, reps = bo->reps;
    bool json = bo->json;
    if (bo->n_streams && open) /* a room's host: its workers' stages */
        return die("bench: --streams steps whole sessions on this machine, not through a room");
    int64_t need = n_prompt > n_gen ? n_prompt : n_gen;
    int cols = 1; /* --verify-cost: the widest pass, 1 + the largest K */
    for (int i = 0; i < bo->n_verify; i++)
        if (bo->verify_k[i] + 1 > cols) cols = bo->verify_k[i] + 1;
    if (bo->n_verify && n_prompt + cols > need) need = n_prompt + cols;
    if (bo->n_streams && n_prompt + n_gen > need) need = n_prompt + n_gen; /* a stream's ids */
    if (!ma.ctx) ma.ctx = bo->n_streams ? (need + 63) / 64 * 64 : need;
    if (ma.ctx < need)
        return die("bench: --ctx %lld is smaller than the %lld ids a test needs", (long long)ma.ctx,
                   (long long)need);
    /* the prompt in one pass; a verify pass (1 + K columns, every one's logits and state
     * kept) fits the batch */
    ma.n_batch = n_prompt > 0 ? n_prompt : 1;
    int64_t wide = ma.spec != MODEL_SPEC_OFF ? PL_SPEC_MAX + 1 : 1;
    if (bo->n_verify && wide < cols) wide = cols;
    if (ma.n_batch < wide) ma.n_batch = ma.ctx < wide ? ma.ctx : wide;
    ma.verify = bo->n_verify > 0;
    pooled_model *m = open ? open(&ma, ud) : model_open(&ma, 0);
    if (!m) return 1;
    pl_model_parts *lp = pl_api_parts(m);
    const pl_model_info *info = pl_model_get_info(lp->m);
    int rc = 1;
    pooled_session *pses = NULL;
    pl_session *ses = NULL;
    pl_sampler *greedy = NULL;
    pl_drafter *dr = NULL;
    pl_gen_stats gs = {0};
    bench_streams *bs = NULL;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n_prompt + 1));
    double *tp = calloc((size_t)reps, sizeof *tp), *td = calloc((size_t)reps, sizeof *td),
           *tf = calloc((size_t)reps, sizeof *tf);
    pl_sampler_params gp = pl_sampler_defaults();
    gp.temp = 0;
    pl_status s = ids && tp && td && tf ? PL_OK : pl_fail(PL_ERR_NOMEM, "out of memory");
    if (!s && pooled_session_new(m, &pses)) s = PL_ERR;
    if (!s) ses = pl_api_session(pses);
    if (!s) s = pl_sampler_new(&gp, info->n_vocab, &greedy);
    if (!s) s = pl_api_drafter_new(lp, ses, ma.spec, &dr);
    if (!s && bo->n_streams) /* before any run: it refuses what memory cannot hold */
        s = bench_streams_new(lp, bo, pl_state_bytes(pl_session_state(ses)), &bs);
    if (ids) bench_prompt(12345u, info->n_vocab, ids, n_prompt + 1);
    if (s) {
        die("bench: %s", pl_last_error());
        goto done;
    }
    model_open_report(m);
    double t, t1;
    /* warm-up: caches, page faults, thread start */
    if (!s && n_prompt) s = time_prefill(ses, greedy, ids, n_prompt, &t, &t1);
    if (!s && n_gen) s = time_decode(ses, greedy, dr, ids[0], n_gen < 8 ? n_gen : 8, &t, &gs);
    for (int64_t r = 0; r < reps && !s; r++) {
        if (n_prompt) s = time_prefill(ses, greedy, ids, n_prompt, &tp[r], &tf[r]);
        if (!s && n_gen) s = time_decode(ses, greedy, dr, ids[0], n_gen, &td[r], &gs);
    }
    verify_cost vc = {0};
    if (!s && bo->n_verify) s = time_verify(ses, greedy, ids, info->n_vocab, bo, &vc);
    FILE *tab = json ? stderr : stdout; /* --json: stdout is the JSON object only */
    if (!s && bs) s = bench_streams_run(bs, tab);
    if (s) {
        die("bench: %s", pl_last_error());
        goto done;
    }
    double pp = n_prompt ? n_prompt / bench_median(tp, (int)reps) : 0;
    double tg = n_gen ? n_gen / bench_median(td, (int)reps) : 0;
    double ttft_ms = n_prompt ? 1000 * bench_median(tf, (int)reps) : 0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak_mib = (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
    fprintf(tab, "model      %s (%s, %s)\n", ma.path, info->arch, info->weight_type);
    fprintf(tab, "backend    %s | kv %s\n", lp->be->device, model_kv_name(ma.kv));
    if (n_prompt) fprintf(tab, "prefill    pp%-6lld %10.1f tok/s\n", (long long)n_prompt, pp);
    if (n_prompt) fprintf(tab, "first id   pp%-6lld %10.1f ms\n", (long long)n_prompt, ttft_ms);
    if (n_gen) fprintf(tab, "decode     tg%-6lld %10.1f tok/s\n", (long long)n_gen, tg);
    double acc = gs.n_drafted ? (double)gs.n_accepted / (double)gs.n_drafted : 0;
    double per = gs.n_steps ? (double)gs.n_decoded / (double)gs.n_steps : 0;
    if (n_gen && dr)
        fprintf(tab, "spec       %s: %.1f%% of %lld drafts accepted, %.2f ids per pass\n",
                drafter_name(ma.spec, lp), 100 * acc, (long long)gs.n_drafted, per);
    /* decode reads the weights a token needs once per token (decode_bytes: the experts it
     * runs, one embedding row), times tok/s; the file's size for scale */
    if (n_gen)
        fprintf(tab, "weights    %.4g MB read per token (file %.4g MB), %.1f GB/s in decode\n",
                info->decode_bytes / 1e6, info->weight_bytes / 1e6, info->decode_bytes * tg / 1e9);
    /* what the state's buffers hold: the KV cache of --ctx positions and the activations */
    int64_t state_bytes = pl_state_bytes(pl_session_state(ses));
    bool mib = state_bytes >= 1024 * 1024;
    fprintf(tab, "state      %.1f %s   (KV cache %s of %d positions, activations)\n",
            (double)state_bytes / (mib ? 1024.0 * 1024.0 : 1024.0), mib ? "MiB" : "KiB",
            model_kv_name(ma.kv), lp->so.n_ctx);
    if (bo->n_verify) verify_print(tab, bo, &vc);
    if (bs) bench_streams_print(bs, tab);
    fprintf(tab, "peak rss   %.1f MiB   (median of %lld repetitions)\n", peak_mib, (long long)reps);
    if (json) {
        printf("{\"model\":");
        pl_json_str(stdout, ma.path, strlen(ma.path));
        printf(",\"arch\":");
        pl_json_str(stdout, info->arch, strlen(info->arch));
        printf(",\"weight_type\":\"%s\",\"backend\":\"%s\",\"device\":", info->weight_type,
               lp->be->name);
        pl_json_str(stdout, lp->be->device, strlen(lp->be->device));
        printf(",\"kv\":\"%s\",\"n_prompt\":%lld,\"n_gen\":%lld,\"repetitions\":%lld,"
               "\"prefill_tok_s\":",
               model_kv_name(ma.kv), (long long)n_prompt, (long long)n_gen, (long long)reps);
        pl_json_num(stdout, pp, 0);
        printf(",\"ttft_ms\":");
        pl_json_num(stdout, ttft_ms, 0);
        printf(",\"decode_tok_s\":");
        pl_json_num(stdout, tg, 0);
        printf(",\"decode_weight_gb_s\":");
        pl_json_num(stdout, info->decode_bytes * tg / 1e9, 0);
        printf(",\"spec\":\"%s\",\"spec_acceptance\":", drafter_name(ma.spec, lp));
        pl_json_num(stdout, acc, 0);
        printf(",\"spec_ids_per_pass\":");
        pl_json_num(stdout, per, 0);
        if (bo->n_verify) verify_json(bo, &vc);
        if (bs) bench_streams_json(bs);
        printf(",\"peak_rss_mib\":");
        pl_json_num(stdout, peak_mib, 0);
        printf(",\"weight_bytes\":%llu,\"decode_bytes\":%llu,\"n_params\":%lld,"
               "\"state_bytes\":%lld}\n",
               (unsigned long long)info->weight_bytes, (unsigned long long)info->decode_bytes,
               (long long)info->n_params, (long long)state_bytes);
    }
    rc = 0;
done:
    free(ids);
    free(tp);
    free(td);
    free(tf);
    pl_sampler_free(greedy);
    pl_drafter_free(dr);
    bench_streams_free(bs);
    pooled_session_free(pses);
    pooled_model_close(m);
    return rc;
}
