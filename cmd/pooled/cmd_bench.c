/* cmd_bench.c - `pooled bench`: prompt processing (prefill) and generation (decode) speed,
 * measured like llama-bench's pp/tg tests: prefill runs P ids as one batch into an empty
 * cache, and the time to the first id adds the head and the greedy pick of it; decode runs N ids
 * one at a time from an empty cache, each picked by argmax of the previous step. Each is repeated R
 * times after a warm-up; the median is reported, with the peak resident memory of the process. With
 * --json stdout is one JSON object (one line) and the table goes to stderr.
 *
 * --verify-cost K,...: what a speculative verify pass costs. At the depth of the -p prompt,
 * one plain decode step (one id, its argmax on the device) and one verify pass of 1 + K
 * columns (pooled_session_verify: the batch, every column's argmax on the device) are
 * timed, median of R; the drafts are the ids plain greedy steps make there, so every draft
 * is accepted and the pass does all its work. After each the cache goes back to the
 * prompt (a recurrent state that cannot runs the prompt again, untimed).
 *
 * --streams N,...: N sessions stepped together as serve's slots are (bench_streams.c).
 *
 * Everything goes through the public API (pooled.h): prefill and the first id are one
 * pooled_generate of one id (its t_prompt, and the call's time), decode a pooled_generate
 * of N ids from one (greedy, past end-of-generation ids), as a program on the library
 * gets them. */
#include <pooled.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "args.h"
#include "base/json_write.h"
#include "bench_streams.h"
#include "cmd_opts.h"
#include "commands.h"

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
    "  --streams N[,N...]   for each N (1 to 64, at most 8 values): N sessions, each its\n"
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

double bench_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

pooled_sample_opts bench_greedy(int64_t n, int spec) {
    pooled_sample_opts o = pooled_sample_opts_default();
    o.temperature = 0; /* the largest logit's id, on the device */
    o.max_tokens = n;
    o.ignore_eos = 1; /* every run does the same work */
    o.spec = spec;
    return o;
}

/* Seconds to prefill ids[0..n) into an empty cache (*secs: the prompt's pass, its logits
 * ready) and to the first generated id (*first_secs: the prefill, the head and the greedy
 * pick of the id, read back to the host: what a user waits for before the first token of
 * an answer). */
static int time_prefill(pooled_session *s, const int32_t *ids, int64_t n, double *secs,
                        double *first_secs) {
    pooled_session_reset(s);
    pooled_sample_opts o = bench_greedy(1, POOLED_SPEC_OFF);
    pooled_result r = {.size = sizeof r};
    double t0 = bench_now();
    int rc = pooled_generate(s, ids, (size_t)n, &o, NULL, NULL, &r);
    *first_secs = bench_now() - t0;
    *secs = r.t_prompt;
    return rc;
}

/* Seconds to decode n ids one at a time from an empty cache (greedy; with spec by verify
 * passes, *r gets the counts). */
static int time_decode(pooled_session *s, int spec, int32_t first, int64_t n, double *secs,
                       pooled_result *r) {
    pooled_session_reset(s);
    pooled_sample_opts o = bench_greedy(n, spec);
    *r = (pooled_result){.size = sizeof *r};
    double t0 = bench_now();
    int rc = pooled_generate(s, &first, 1, &o, NULL, NULL, r);
    *secs = bench_now() - t0;
    return rc;
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
    double step_ms;                 /* one plain decode step */
    double pass_ms[BENCH_SPEC_MAX]; /* one verify pass of 1 + verify_k[i] columns */
    int accepted[BENCH_SPEC_MAX];   /* drafts that pass accepted (all, unless columns differ
                                       from plain steps) */
} verify_cost;

/* Ids one pass yields when each draft is accepted with probability a, independently, until
 * the first rejection: 1 + a + ... + a^k = (1 - a^(k+1)) / (1 - a). */
static double ids_per_pass(double a, int k) {
    double n = 0, p = 1;
    for (int j = 0; j <= k; j++, p *= a) n += p;
    return n;
}

/* The ids a generation gives, kept in order (at most PL_BENCH_IDS). */
enum { BENCH_IDS = BENCH_SPEC_MAX + 2 };
typedef struct {
    int32_t ids[BENCH_IDS];
    int n;
} id_list;

static int keep_id(void *user, int32_t id, const char *text, size_t len) {
    (void)text, (void)len;
    id_list *l = user;
    if (id >= 0 && l->n < BENCH_IDS) l->ids[l->n++] = id;
    return 0;
}

/* The --verify-cost measurements at depth n_prompt (see the file's comment). */
static int time_verify(pooled_session *s, const int32_t *ids, const bench_opts *bo,
                       verify_cost *vc) {
    int64_t P = bo->n_prompt, reps = bo->reps;
    int kmax = 0;
    for (int i = 0; i < bo->n_verify; i++)
        if (bo->verify_k[i] > kmax) kmax = bo->verify_k[i];
    int32_t next[BENCH_SPEC_MAX + 1];
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t) return die("bench: out of memory"), 1;
    /* the drafts: what plain greedy steps choose after the prompt, g.ids[0] the first */
    id_list g = {.n = 0};
    pooled_session_reset(s);
    pooled_sample_opts o = bench_greedy(kmax + 2, POOLED_SPEC_OFF);
    int rc = pooled_generate(s, ids, (size_t)P, &o, keep_id, &g, NULL);
    if (!rc && g.n < kmax + 2) rc = die("bench: --verify-cost: the model gave %d ids", g.n);
    if (!rc) rc = pooled_session_truncate(s, (size_t)P);
    /* one plain step: the first rep is a warm-up, as is each K's */
    for (int64_t r = -1; !rc && r < reps; r++) {
        double t0 = bench_now();
        rc = pooled_session_verify(s, g.ids, 1, next);
        if (r >= 0) t[r] = bench_now() - t0;
        if (!rc) rc = pooled_session_truncate(s, (size_t)P);
    }
    if (!rc) vc->step_ms = 1e3 * bench_median(t, (int)reps);
    for (int i = 0; !rc && i < bo->n_verify; i++) {
        int k = bo->verify_k[i];
        for (int64_t r = -1; !rc && r < reps; r++) {
            double t0 = bench_now();
            rc = pooled_session_verify(s, g.ids, (size_t)k + 1, next);
            if (r >= 0) t[r] = bench_now() - t0;
            if (!rc) rc = pooled_session_truncate(s, (size_t)P);
        }
        /* drafts accepted as a verify step takes them: until the first that differs */
        int a = 0;
        while (a < k && next[a] == g.ids[a + 1]) a++;
        vc->accepted[i] = a;
        if (!rc) vc->pass_ms[i] = 1e3 * bench_median(t, (int)reps);
    }
    free(t);
    return rc;
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
            err = err || !parse_list("--verify-cost", "K", v, BENCH_SPEC_MAX, BENCH_SPEC_MAX,
                                     o->verify_k, &o->n_verify);
        } else if (arg_take(argc, argv, &i, "--streams", NULL, &v, &err)) {
            err = err || !parse_list("--streams", "N", v, BENCH_STREAM_LIMIT, BENCH_STREAMS_MAX,
                                     o->streams, &o->n_streams);
        } else if (arg_take(argc, argv, &i, "--split", NULL, &v, &err)) {
            /* (as run's: a test switch, documented in the README) the model as a host and
             * N - 1 local stages, one chain in one process: a room's passes without the wire */
            err = err || !arg_int("--split", v, 1, 63, &o->ma.split);
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

/* "off", "lookup" or "mtp": the drafter a generation with spec gets on this model. */
static const char *drafter_name(int spec, const pooled_model_info *in) {
    return spec == MODEL_SPEC_OFF ? "off" : in->spec == POOLED_SPEC_MTP ? "mtp" : "lookup";
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
    int64_t wide = ma.spec != MODEL_SPEC_OFF ? BENCH_SPEC_MAX + 1 : 1;
    if (bo->n_verify && wide < cols) wide = cols;
    if (ma.n_batch < wide) ma.n_batch = ma.ctx < wide ? ma.ctx : wide;
    ma.verify = bo->n_verify > 0;
    pooled_model *m = open ? open(&ma, ud) : model_open(&ma, 0);
    if (!m) return 1;
    pooled_model_info info = {.size = sizeof info};
    pooled_model_get_info(m, &info);
    int rc = 1;
    pooled_session *ses = NULL;
    pooled_result gs = {.size = sizeof gs};
    bench_streams *bs = NULL;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n_prompt + 1));
    double *tp = calloc((size_t)reps, sizeof *tp), *td = calloc((size_t)reps, sizeof *td),
           *tf = calloc((size_t)reps, sizeof *tf);
    if (!ids || !tp || !td || !tf) {
        die("bench: out of memory");
        goto done;
    }
    if (pooled_session_new(m, &ses)) {
        die("bench: %s", pooled_last_error());
        goto done;
    }
    /* before any run: refuse what memory cannot hold */
    if (bo->n_streams && bench_streams_check(bo, &info, pooled_session_bytes(ses))) goto done;
    bench_prompt(12345u, info.n_vocab, ids, n_prompt + 1);
    model_open_report(m);
    double t, t1;
    int e = 0;
    /* warm-up: caches, page faults, thread start */
    if (n_prompt) e = time_prefill(ses, ids, n_prompt, &t, &t1);
    if (!e && n_gen) e = time_decode(ses, ma.spec, ids[0], n_gen < 8 ? n_gen : 8, &t, &gs);
    for (int64_t r = 0; r < reps && !e; r++) {
        if (n_prompt) e = time_prefill(ses, ids, n_prompt, &tp[r], &tf[r]);
        if (!e && n_gen) e = time_decode(ses, ma.spec, ids[0], n_gen, &td[r], &gs);
    }
    verify_cost vc = {0};
    if (!e && bo->n_verify) e = time_verify(ses, ids, bo, &vc);
    int64_t state_bytes = pooled_session_bytes(ses);
    FILE *tab = json ? stderr : stdout; /* --json: stdout is the JSON object only */
    if (e) {
        die("bench: %s", pooled_last_error());
        goto done;
    }
    if (bo->n_streams) { /* a model of its own, with n_parallel: this one goes first */
        pooled_session_free(ses);
        pooled_model_close(m);
        ses = NULL, m = NULL;
        if (bench_streams_run(&ma, bo, tab, &bs)) goto done;
    }
    double pp = n_prompt ? n_prompt / bench_median(tp, (int)reps) : 0;
    double tg = n_gen ? n_gen / bench_median(td, (int)reps) : 0;
    double ttft_ms = n_prompt ? 1000 * bench_median(tf, (int)reps) : 0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak_mib = (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
    fprintf(tab, "model      %s (%s, %s)\n", ma.path, info.arch, info.weight_type);
    fprintf(tab, "backend    %s | kv %s\n", info.backend, model_kv_name(ma.kv));
    if (n_prompt) fprintf(tab, "prefill    pp%-6lld %10.1f tok/s\n", (long long)n_prompt, pp);
    if (n_prompt) fprintf(tab, "first id   pp%-6lld %10.1f ms\n", (long long)n_prompt, ttft_ms);
    if (n_gen) fprintf(tab, "decode     tg%-6lld %10.1f tok/s\n", (long long)n_gen, tg);
    double acc = gs.n_drafted ? (double)gs.n_accepted / (double)gs.n_drafted : 0;
    double per = gs.n_steps ? (double)gs.n_decoded / (double)gs.n_steps : 0;
    if (n_gen && ma.spec != MODEL_SPEC_OFF)
        fprintf(tab, "spec       %s: %.1f%% of %lld drafts accepted, %.2f ids per pass\n",
                drafter_name(ma.spec, &info), 100 * acc, (long long)gs.n_drafted, per);
    /* decode reads the weights a token needs once per token (decode_bytes: the experts it
     * runs, one embedding row), times tok/s; the file's size for scale */
    if (n_gen)
        fprintf(tab, "weights    %.4g MB read per token (file %.4g MB), %.1f GB/s in decode\n",
                (double)info.decode_bytes / 1e6, (double)info.weight_bytes / 1e6,
                (double)info.decode_bytes * tg / 1e9);
    /* what the state's buffers hold: the KV cache of --ctx positions and the activations */
    bool mib = state_bytes >= 1024 * 1024;
    fprintf(tab, "state      %.1f %s   (KV cache %s of %d positions, activations)\n",
            (double)state_bytes / (mib ? 1024.0 * 1024.0 : 1024.0), mib ? "MiB" : "KiB",
            model_kv_name(ma.kv), info.n_ctx);
    if (bo->n_verify) verify_print(tab, bo, &vc);
    if (bs) bench_streams_print(bs, tab);
    fprintf(tab, "peak rss   %.1f MiB   (median of %lld repetitions)\n", peak_mib, (long long)reps);
    if (json) {
        printf("{\"model\":");
        pl_json_str(stdout, ma.path, strlen(ma.path));
        printf(",\"arch\":");
        pl_json_str(stdout, info.arch, strlen(info.arch));
        printf(",\"weight_type\":\"%s\",\"backend\":\"%s\",\"device\":", info.weight_type,
               info.backend_name);
        pl_json_str(stdout, info.backend, strlen(info.backend));
        printf(",\"kv\":\"%s\",\"n_prompt\":%lld,\"n_gen\":%lld,\"repetitions\":%lld,"
               "\"prefill_tok_s\":",
               model_kv_name(ma.kv), (long long)n_prompt, (long long)n_gen, (long long)reps);
        pl_json_num(stdout, pp, 0);
        printf(",\"ttft_ms\":");
        pl_json_num(stdout, ttft_ms, 0);
        printf(",\"decode_tok_s\":");
        pl_json_num(stdout, tg, 0);
        printf(",\"decode_weight_gb_s\":");
        pl_json_num(stdout, (double)info.decode_bytes * tg / 1e9, 0);
        printf(",\"spec\":\"%s\",\"spec_acceptance\":", drafter_name(ma.spec, &info));
        pl_json_num(stdout, acc, 0);
        printf(",\"spec_ids_per_pass\":");
        pl_json_num(stdout, per, 0);
        if (bo->n_verify) verify_json(bo, &vc);
        if (bs) bench_streams_json(bs);
        printf(",\"peak_rss_mib\":");
        pl_json_num(stdout, peak_mib, 0);
        printf(",\"weight_bytes\":%llu,\"decode_bytes\":%llu,\"n_params\":%lld,"
               "\"state_bytes\":%lld}\n",
               (unsigned long long)info.weight_bytes, (unsigned long long)info.decode_bytes,
               (long long)info.n_params, (long long)state_bytes);
    }
    rc = 0;
done:
    free(ids);
    free(tp);
    free(td);
    free(tf);
    bench_streams_free(bs);
    pooled_session_free(ses);
    pooled_model_close(m);
    return rc;
}
