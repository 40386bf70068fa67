/* room_test.c - a whole room in one process over inproc://: a host session over remote
 * stages (room/remote_stage.c) served by 2 and 3 worker threads (pl_room_join), each
 * loading its dealt layers from the file itself. With f32 frames the logits of every turn
 * are bit-identical to one session over the whole model and the greedy and seeded ids the
 * same (stories260K through chain_check.h's turns: frames, rewinds, resets; the qwen3_5
 * hybrid through a prompt, greedy and sampled steps); with f16 frames stories260K's greedy
 * ids are the same. The host of a qwen3_5-mtp room drafts with the MTP block (the whole
 * model's drafts; decoding with them gives plain decoding's ids). Also: a worker with a wrong key
 * is refused with one line while the room still gathers, a worker whose model does not fit the plan
 * fails the deal with its line, and a worker that dies mid-turn fails the turn with one line, not a
 * hang (or, where the host may take its layers over, a silent or leaving worker changes nothing).
 * Guests (room/guest.c) of a room of 2 workers: a raw ask's reply is one process's text, a
 * guest leaving mid-reply stops it, 4 asks wait and the 5th is busy, malformed asks and a
 * worker's hello are refused with one line. */
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "format/gguf_hash.h"
#include "room/guest.h"
#include "room/room.h"
#include "room/room_io.h"
#include "runtime/backend_open.h"
#include "runtime/generate.h"
#include "test.h"

#include "runtime/chain_check.h" /* (after test.h) */

#define KEY "room-test-key"

typedef struct {
    pl_room_join_opts o;
    pl_status s;
    char err[256];
    char listen[80]; /* where the previous worker of a chain dials it ("": nowhere) */
    pthread_t th;
} joiner;

static void *join_main(void *ud) {
    joiner *j = ud;
    j->s = pl_room_join(&j->o);
    snprintf(j->err, sizeof j->err, "%s", j->s ? pl_last_error() : "");
    return NULL;
}

/* The KV cache type of every member (joiners and the sessions compared). */
static uint32_t kv_type = PL_TYPE_F16;
/* Set: joiners have no model file and fetch their layers into this folder. */
static const char *fetch_dir;
/* What the host sent each worker of the last room dealt (pl_room_worker.sent). */
static uint64_t last_sent[4];
static bool narrow;        /* room_open: the workers' hellos without PL_CAP_WIDE */
static int lap_ms = 20000; /* room_open: the stages' lap timeout */
static int deal_snap;      /* room_open: the plan's n_snap (the host speculates) */

/* The joiners' backend, and what each served (joiner i of a room: join_counts[i]). */
static const char *join_backend = "cpu";
static struct pl_room_join_counts join_counts[4];

static void start_joiner(joiner *j, const char *url, const char *key, const char *model) {
    j->o = (pl_room_join_opts){.url = url,
                               .counts = j->o.counts,
                               .cache_dir = fetch_dir,
                               .test_die_after = j->o.test_die_after,
                               .want_first = j->o.want_first,
                               .want_last = j->o.want_last,
                               .lend = 1ull << 30,
                               .probe_s = 0.01,
                               .key = key,
                               .model = fetch_dir ? NULL : model,
                               .backend = join_backend,
                               .threads = 1,
                               .act_q8 = 1,
                               .kv_type = kv_type,
                               .plan_ms = 60000,
                               .mute_after = j->o.mute_after,
                               .slow_ms = j->o.slow_ms,
                               .stop = j->o.stop,
                               .listen = j->listen[0] ? j->listen : NULL};
    pthread_create(&j->th, NULL, join_main, j);
}

/* What the host knows for the plan: its own file g, workers' ranges from their --layers. */
static pl_room_deal_opts deal_opts(const pl_gguf *g, pl_wire_dtype dtype) {
    return (pl_room_deal_opts){.g = g,
                               .n_ctx = CC_CTX,
                               .dtype = dtype,
                               .load_ms = 60000,
                               .host_lend = 1ull << 30,
                               .host_speed = 1,
                               .host_backend = "cpu"};
}

/* Plan and deal the gathered w[0..*n) with the host holding only the ends. */
static pl_status plan_deal(pl_room_worker *w, int *n, const pl_room_deal_opts *d) {
    int hf, hl;
    pl_status s = pl_room_plan(w, n, d, &hf, &hl);
    if (!s && hf < hl) s = pl_fail(PL_ERR, "the plan gave the host layers %d..%d", hf, hl);
    if (!s) s = pl_room_deal(w, *n, d, hf, hl);
    return s;
}

typedef struct {
    pl_listener *L;
    pl_gguf *g; /* the host's copy */
    joiner j[4];
    pl_room_worker w[4];
    pl_link *link[4]; /* each worker's link, kept by its stage (for the link's counters) */
    pl_stage *st[4];
    int n, n_st;                /* workers, stages (a chain: one) */
    volatile sig_atomic_t stop; /* worker 1 leaves (bye) once this is set */
} room;

/* n workers on their own copies of rel, gathered, dealt, one remote stage each (a star) or
 * one stage over all (chain: each listens for the previous one). Worker 1 goes silent
 * after mute_after frames (0: never), takes slow_ms longer over its first frame and leaves
 * when r->stop is set. */
static bool room_open(room *r, const char *url, const char *rel, int n, int n_layer, int n_embd,
                      pl_wire_dtype dtype, int mute_after, int slow_ms, bool chain) {
    memset(r, 0, sizeof *r);
    r->n = n;
    CHECK(pl_link_listen(url, KEY, NULL, &r->L) == PL_OK, "%s", pl_last_error());
    CHECK(pl_gguf_open(test_shared(rel), &r->g) == PL_OK, "%s", pl_last_error());
    if (!r->L || !r->g) return false;
    for (int i = 0; i < n; i++) { /* equal shares, each worker's --layers */
        memset(&r->j[i], 0, sizeof r->j[i]);
        if (i == 1)
            r->j[i].o =
                (pl_room_join_opts){.mute_after = mute_after, .slow_ms = slow_ms, .stop = &r->stop};
        r->j[i].o.want_first = i * n_layer / n, r->j[i].o.want_last = (i + 1) * n_layer / n;
        if (chain) snprintf(r->j[i].listen, sizeof r->j[i].listen, "%s-w%d", url, i);
        join_counts[i] = (struct pl_room_join_counts){0, 0};
        r->j[i].o.counts = &join_counts[i];
        start_joiner(&r->j[i], url, KEY, test_shared(rel));
    }
    uint8_t meta[32];
    pl_status s = pl_gguf_meta_digest(r->g, meta);
    if (!s) s = pl_room_gather(r->L, n, 60000, NULL, false, meta, r->w);
    pl_room_deal_opts d = deal_opts(r->g, dtype);
    d.model_path = test_shared(rel);
    d.n_snap = deal_snap;
    int kept = n;
    if (!s) s = plan_deal(r->w, &kept, &d);
    if (!s && kept != n) s = pl_fail(PL_ERR, "%d of %d workers idle", n - kept, n);
    for (int i = 0; !s && i < n; i++) last_sent[i] = r->w[i].sent;
    if (!s && chain != pl_room_chain(r->w, n, false))
        s = pl_fail(PL_ERR, "a %s where a %s was due", chain ? "star" : "chain",
                    chain ? "chain" : "star");
    for (int i = 0; !s && i < n; i++) {
        r->link[i] = r->w[i].link;
        if (narrow) r->w[i].hello.caps &= ~PL_CAP_WIDE; /* a worker of protocol 4 */
    }
    for (int i = 0; !s && i < (chain ? 1 : n); i++) {
        s = pl_room_stage_new(&r->w[i], chain ? n : 1, n_layer, n_embd, CC_CTX, dtype, lap_ms,
                              &r->st[i]);
        if (!s) r->n_st++;
    }
    CHECK(!s, "%s, %d workers: %s", rel, n, pl_last_error());
    return !s;
}

/* Free the stages (bye to each worker), join the threads: every worker left cleanly. */
static void room_close(room *r, bool want_ok) {
    for (int i = 0; i < r->n_st; i++) pl_stage_free(r->st[i]);
    for (int i = 0; i < r->n; i++) pl_room_worker_bye(r->w[i].link); /* not in a stage */
    for (int i = 0; i < r->n; i++) {
        pthread_join(r->j[i].th, NULL);
        if (want_ok) CHECK(r->j[i].s == PL_OK, "worker %d: %s", i, r->j[i].err);
    }
    pl_listener_close(r->L);
    pl_gguf_free(r->g);
}

/* Prompt, 6 greedy steps, 5 seeded sampled steps, a diverging turn, a reset: the same
 * logits bits and ids. */
static void short_turns(const cc_pair *p) {
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = (int32_t)((i * 7919 + 13) % p->V);
    cc_set(p, ids, 24, "prompt");
    cc_greedy(p, 6, 0, "greedy");
    cc_sampled(p, 5);
    /* a turn that diverges at 10: a recurrent worker cannot go back there, starts afresh
     * and says so, and the session runs everything again, as over the whole model */
    int64_t n;
    const int32_t *cached = pl_session_ids(p->w, &n);
    memcpy(ids, cached, sizeof *ids * 10);
    for (int i = 10; i < 15; i++) ids[i] = (int32_t)((i * 101 + 5) % p->V);
    cc_set(p, ids, 15, "diverging turn");
    pl_session_reset(p->w);
    pl_session_reset(p->c);
    cc_set(p, ids, 12, "after a reset");
}

static void check_room(pl_backend *be, const char *rel, int n, pl_wire_dtype dtype, bool full,
                       bool chain) {
    char url[64], what[160];
    static int count;
    snprintf(url, sizeof url, "inproc://room-%d", count++);
    snprintf(what, sizeof what, "%s, %d workers, %s frames, %s", rel, n,
             dtype == PL_WIRE_F16 ? "f16" : "f32", chain ? "chain" : "star");
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s: %s", rel, pl_last_error());
    pl_model *w = g ? cc_load(g, be, 0, 0, PL_ENDS_AUTO) : NULL;
    pl_model *host = g ? cc_load(g, be, 0, 0, PL_ENDS_EMBED | PL_ENDS_HEAD) : NULL;
    room r;
    if (w && host) {
        const pl_model_info *in = pl_model_get_info(w);
        bool ok = room_open(&r, url, rel, n, in->n_layer, in->n_embd, dtype, 0, 0, chain);
        pl_state_opts o = cc_opts(w);
        o.kv_type = kv_type;
        pl_chain_opts co = {.frame_cols = 4, .in_flight = 3};
        pl_session *ws = NULL, *cs = NULL;
        CHECK(pl_session_new(w, &o, &ws) == PL_OK, "%s", pl_last_error());
        if (ok)
            CHECK(pl_session_new_chain(host, &o, r.st, r.n_st, &co, &cs) == PL_OK, "%s: %s", what,
                  pl_last_error());
        cc_pair p = {ws, cs, in->n_vocab, what};
        if (ws && cs && dtype == PL_WIRE_F16) {
            int32_t ids[21];
            for (int i = 0; i < 21; i++) ids[i] = (int32_t)((i * 7919 + 13) % p.V);
            CHECK(!pl_session_set(ws, ids, 21, NULL) && !pl_session_set(cs, ids, 21, NULL),
                  "%s: %s", what, pl_last_error());
            cc_greedy(&p, 24, 0, "greedy over f16 frames");
        } else if (ws && cs) {
            full ? cc_turns(&p) : short_turns(&p);
        }
        pl_session_free(ws);
        pl_session_free(cs);
        room_close(&r, true);
    }
    pl_model_free(host);
    pl_model_free(w);
    pl_gguf_free(g);
}

/* A room over stories260K for the wide-frame checks: the whole model, the host's ends, n
 * workers (worker 1 slow_ms longer over its first frame; room_open's narrow and lap_ms
 * apply) and a session on each, a batch of 64 and the default chain options. */
typedef struct {
    pl_gguf *g;
    pl_model *w, *host;
    room r;
    bool open; /* room_open was called */
    pl_session *ws, *cs;
    int V;
} wide_room;

static bool wide_open(wide_room *x, pl_backend *be, const char *url, int n, int slow_ms) {
    const char *rel = "models/stories260K.gguf";
    memset(x, 0, sizeof *x);
    CHECK(pl_gguf_open(test_shared(rel), &x->g) == PL_OK, "%s: %s", rel, pl_last_error());
    x->w = x->g ? cc_load(x->g, be, 0, 0, PL_ENDS_AUTO) : NULL;
    x->host = x->g ? cc_load(x->g, be, 0, 0, PL_ENDS_EMBED | PL_ENDS_HEAD) : NULL;
    const pl_model_info *in = x->w ? pl_model_get_info(x->w) : NULL;
    x->open = in && x->host; /* room_close frees what room_open made, failed or not */
    if (!x->open ||
        !room_open(&x->r, url, rel, n, in->n_layer, in->n_embd, PL_WIRE_F32, 0, slow_ms, false))
        return false;
    x->V = in->n_vocab;
    pl_state_opts o = cc_opts(x->w), ow = o;
    o.n_batch = 64;
    /* the whole model runs a prompt in calls as wide as the room's frames: the CPU's
     * attention over an F16 cache takes calls of 64 rows or more in float32 tiles
     * (cpu_attention_tiled.c), shorter ones as llama.cpp's one-token path does */
    ow.n_batch = narrow ? PL_WIRE_NARROW_COLS : 64;
    CHECK(pl_session_new(x->w, &ow, &x->ws) == PL_OK, "%s", pl_last_error());
    CHECK(pl_session_new_chain(x->host, &o, x->r.st, x->r.n_st, NULL, &x->cs) == PL_OK, "%s: %s",
          url, pl_last_error());
    return x->ws && x->cs;
}

static void wide_close(wide_room *x) {
    pl_session_free(x->ws);
    pl_session_free(x->cs);
    if (x->open) room_close(&x->r, true);
    pl_model_free(x->host);
    pl_model_free(x->w);
    pl_gguf_free(x->g);
}

/* A frame of 8 columns at position 0 (a fresh start) submitted with st->tail: a worker with
 * PL_CAP_WIDE answers with the last column alone, into its place (the others keep what was
 * there: NaN here), with the bits of the whole frame's answer; else every column comes back. */
static void check_tail(pl_stage *st, bool wide, const char *what) {
    enum { N = 8 };
    int64_t d = st->n_embd, got;
    float *in = malloc(sizeof(float) * N * d), *a = malloc(sizeof(float) * N * d),
          *b = malloc(sizeof(float) * N * d);
    uint64_t tag;
    if (!in || !a || !b) goto done;
    for (int64_t i = 0; i < N * d; i++) in[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    for (int64_t i = 0; i < N * d; i++) a[i] = b[i] = NAN;
    st->tail = true;
    pl_status s = pl_stage_submit(st, in, N, 0, 1);
    st->tail = false;
    if (!s) s = pl_stage_collect(st, a, &got, &tag);
    if (!s) s = pl_stage_submit(st, in, N, 0, 2);
    if (!s) s = pl_stage_collect(st, b, &got, &tag);
    CHECK(!s, "%s, tail frames: %s", what, pl_last_error());
    int64_t left = 0, wrong = 0;
    for (int64_t i = 0; i < (N - 1) * d; i++) left += !isnan(a[i]);
    for (int64_t i = (N - 1) * d; i < N * d; i++)
        wrong += isnan(b[i]) || memcmp(&a[i], &b[i], sizeof *a);
    CHECK(wide ? left == 0 : left == (N - 1) * d,
          "%s: a tail frame filled %lld of the %lld values before its last column", what,
          (long long)left, (long long)((N - 1) * d));
    CHECK(!wrong, "%s: %lld values of a tail frame's last column differ", what, (long long)wrong);
done:
    free(in), free(a), free(b);
}

/* The prompt goes through a worker in as few frames as the chain's batch allows (the
 * default chain options): a 64-id prompt is one frame of 64 columns (the GPU runs more than
 * 16 as a GEMM), not four of 16, with the same logits bits as the whole model; a worker
 * without PL_CAP_WIDE (protocol 4) gets frames of 16 at most. */
static void check_wide_frames(pl_backend *be, bool old_worker) {
    char what[96];
    snprintf(what, sizeof what, "a 64-id prompt to a %s worker", old_worker ? "narrow" : "wide");
    wide_room x;
    narrow = old_worker;
    bool ok = wide_open(&x, be, old_worker ? "inproc://narrow" : "inproc://wide", 1, 0);
    narrow = false;
    if (ok) {
        CHECK(x.r.st[0]->max_cols == (old_worker ? PL_WIRE_NARROW_COLS : PL_WIRE_MAX_COLS),
              "%s: the stage takes %d columns a frame", what, x.r.st[0]->max_cols);
        cc_pair p = {x.ws, x.cs, x.V, what};
        int32_t ids[64];
        for (int i = 0; i < 64; i++) ids[i] = (int32_t)((i * 7919 + 13) % p.V);
        pl_link_stats a, b;
        pl_link_get_stats(x.r.link[0], &a);
        cc_set(&p, ids, 64, "prompt");
        pl_link_get_stats(x.r.link[0], &b);
        int want = old_worker ? 4 : 1;
        CHECK(b.sent - a.sent == (uint64_t)want && b.received - a.received == (uint64_t)want,
              "%s: %llu frames out and %llu results back, not %d", what,
              (unsigned long long)(b.sent - a.sent), (unsigned long long)(b.received - a.received),
              want);
        cc_greedy(&p, 3, 0, "greedy");
        check_tail(x.r.st[0], !old_worker, what);
    }
    wide_close(&x);
}

/* The lap timeout is per 16 columns: a worker that takes 500 ms over a 64-column frame is
 * within a lap of 400 ms (1.6 s for the frame), and the answer is the whole model's. */
static void check_wide_lap(pl_backend *be) {
    wide_room x;
    lap_ms = 400;
    bool ok = wide_open(&x, be, "inproc://wide-lap", 2, 500);
    lap_ms = 20000;
    if (ok) {
        cc_pair p = {x.ws, x.cs, x.V, "a slow 64-column frame, a lap of 400 ms"};
        int32_t ids[64];
        for (int i = 0; i < 64; i++) ids[i] = (int32_t)((i * 31 + 7) % p.V);
        cc_set(&p, ids, 64, "prompt");
        cc_greedy(&p, 2, 0, "greedy");
    }
    wide_close(&x);
}

/* Generate n ids after prompt on s (a drafter or none) into out. */
static pl_status room_gen(pl_session *s, const pl_sampler_params *sp, int V, const int32_t *prompt,
                          int np, int n, pl_drafter *dr, cc_ids *out, pl_gen_stats *st) {
    pl_sampler *smp = NULL;
    pl_status e = pl_sampler_new(sp, V, &smp);
    *out = (cc_ids){0};
    pl_gen_opts o = {.n_predict = n, .on_token = cc_take, .ud = out, .drafter = dr};
    if (!e) e = pl_generate(s, smp, prompt, np, &o, st);
    pl_sampler_free(smp);
    return e;
}

/* --spec mtp through a room: the host holds the MTP block with the head and drafts on its
 * own (2 workers in a chain, f32 frames, the qwen3_5-mtp fixture). After a prompt it drafts
 * the ids a whole model drafts, and decoding with the MTP drafter gives plain decoding's
 * ids, greedy and seeded with penalties. With the plan's n_snap (snap: 16, as `room host
 * --spec` deals) the workers go back to a rejected draft's position without starting afresh;
 * with none (0, a worker of an earlier build: greedy only) they start afresh, same ids. */
static void check_room_mtp(pl_backend *be, int snap) {
    const char *rel = "fixtures/hf/qwen3_5/qwen3_5-mtp-q8_0.gguf";
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s: %s", rel, pl_last_error());
    pl_model *w = g ? cc_load(g, be, 0, 0, PL_ENDS_AUTO) : NULL;
    pl_model *host = g ? cc_load(g, be, 0, 0, PL_ENDS_EMBED | PL_ENDS_HEAD) : NULL;
    if (!w || !host) goto out;
    CHECK(pl_model_get_info(host)->has_draft, "a host of the ends holds the MTP block");
    const pl_model_info *in = pl_model_get_info(w);
    room r;
    deal_snap = snap;
    bool opened = room_open(&r, snap ? "inproc://room-mtp" : "inproc://room-mtp0", rel, 2,
                            in->n_layer, in->n_embd, PL_WIRE_F32, 0, 0, true);
    deal_snap = 0;
    if (!opened) goto out;
    pl_state_opts po = cc_opts(w), so = po;
    so.n_logits = so.n_snap = PL_SPEC_MAX + 1;
    so.draft = true;
    pl_session *plain = NULL, *whole = NULL, *rs = NULL;
    pl_status e = pl_session_new(w, &po, &plain);
    if (!e) e = pl_session_new(w, &so, &whole);
    if (!e) e = pl_session_new_chain(host, &so, r.st, r.n_st, NULL, &rs);
    CHECK(!e, "mtp room sessions: %s", pl_last_error());
    int32_t prompt[8] = {51, 270, 220, 386, 298, 74, 310, 291}, dw[5], dr_[5];
    if (!snap) goto gen; /* the drafts were checked with snap */
    if (!e) e = pl_session_set(whole, prompt, 8, NULL);
    if (!e) e = pl_session_set(rs, prompt, 8, NULL);
    int nw = e ? -1 : pl_session_draft_model(whole, 7, 5, dw);
    int nr = e ? -2 : pl_session_draft_model(rs, 7, 5, dr_);
    CHECK(!e && nw == 5 && nr == nw && !memcmp(dw, dr_, sizeof dw),
          "the room's host drafts %d ids, the whole model %d (%s)", nr, nw,
          e ? pl_last_error() : "");
    /* 4 more ids: the room runs them as a second pass, whose block entry at position 7 comes
     * from the first pass's last hidden row and the new id at 8 (not 7, the id the drafts
     * above started from); the whole model runs all 12 in one pass */
    int32_t more[12] = {51, 270, 220, 386, 298, 74, 310, 291, 30, 500, 12, 640};
    pl_session_reset(whole);
    if (!e) e = pl_session_set(whole, more, 12, NULL);
    if (!e) e = pl_session_set(rs, more, 12, NULL);
    nw = e ? -1 : pl_session_draft_model(whole, 9, 5, dw);
    nr = e ? -2 : pl_session_draft_model(rs, 9, 5, dr_);
    CHECK(!e && nw == 5 && nr == nw && !memcmp(dw, dr_, sizeof dw),
          "a second pass: the room's host drafts %d ids, the whole model %d (%s)", nr, nw,
          e ? pl_last_error() : "");
    /* the last draft step's logits, bit for bit (the ids alone hide a wrong entry) */
    float *lw = calloc((size_t)in->n_vocab, sizeof *lw), *lr = calloc((size_t)in->n_vocab, 4);
    int64_t bytes = (int64_t)in->n_vocab * 4;
    if (!e && lw && lr)
        e = pl_be_read(pl_state_draft_logits(pl_session_state(whole)), 0, lw, bytes);
    if (!e && lw && lr) e = pl_be_read(pl_state_draft_logits(pl_session_state(rs)), 0, lr, bytes);
    CHECK(!e && lw && lr && !memcmp(lw, lr, (size_t)bytes),
          "a second pass: the room's last draft logits differ from the whole model's (%s)",
          e ? pl_last_error() : "");
    free(lw), free(lr);
gen:;
    pl_sampler_params sp[2] = {pl_sampler_defaults(), pl_sampler_defaults()};
    sp[0].temp = 0;
    sp[1].temp = 0.8f, sp[1].top_k = 40, sp[1].top_p = 0.9f, sp[1].seed = 11;
    sp[1].repeat_penalty = 1.1f, sp[1].presence_penalty = 0.2f, sp[1].penalty_last_n = 32;
    int64_t rejected = 0;
    for (int k = 0; !e && k < (snap ? 2 : 1); k++) {
        cc_ids a, b;
        pl_gen_stats sa, sb;
        pl_drafter *dr = NULL;
        /* from position 0: a rewind to the prompt's end (no snapshot there) is no draft's */
        pl_session_reset(rs);
        e = pl_drafter_mtp_new(rs, 0, false, &dr);
        if (!e) e = room_gen(plain, &sp[k], in->n_vocab, prompt, 8, 24, NULL, &a, &sa);
        if (!e) e = room_gen(rs, &sp[k], in->n_vocab, prompt, 8, 24, dr, &b, &sb);
        pl_drafter_free(dr);
        CHECK(!e && a.n == 24 && b.n == 24 && !memcmp(a.ids, b.ids, sizeof(int32_t) * 24),
              "mtp through a room, %s: ids differ from plain decoding's (%s)",
              k ? "seeded" : "greedy", e ? pl_last_error() : "");
        CHECK(!e && sb.n_drafted >= 3 * (sb.n_steps - 1) && sb.n_steps > 0,
              "mtp through a room: %lld drafts in %lld passes", (long long)sb.n_drafted,
              (long long)sb.n_steps);
        rejected += sb.n_drafted - sb.n_accepted;
    }
    /* rejected drafts rewound the chain: with snapshots not one worker started afresh */
    int64_t restarts = 0;
    for (int i = 0; i < r.n_st; i++) restarts += pl_room_stage_restarts(r.st[i]);
    CHECK(!e && rejected > 0, "mtp through a room: no draft was rejected (nothing rewound)");
    CHECK(!e && (snap ? restarts == 0 : restarts > 0),
          "mtp through a room, %d snapshots: the workers started afresh %lld times", snap,
          (long long)restarts);
    pl_session_free(plain), pl_session_free(whole), pl_session_free(rs);
    room_close(&r, true);
out:
    pl_model_free(host);
    pl_model_free(w);
    pl_gguf_free(g);
}

/* A wrong key is refused on the joining side with one line, and so is a worker whose file
 * has other metadata (another model: its hello); the room still gathers the right ones. A
 * worker whose file holds other weights for its layers (qwen3_5 q4_0 against the host's
 * q8_0: the same metadata) fails the deal with one line naming it and its layers, and is
 * told why. */
static void check_refusals(void) {
    const char *S = test_shared("models/stories260K.gguf");
    const char *Q8 = test_shared("fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf");
    const char *Q4 = test_shared("fixtures/hf/qwen3_5/qwen3_5-q4_0.gguf");
    pl_listener *L = NULL;
    pl_gguf *gs = NULL, *gq = NULL;
    CHECK(pl_link_listen("inproc://refusals", KEY, NULL, &L) == PL_OK, "%s", pl_last_error());
    CHECK(!pl_gguf_open(S, &gs) && !pl_gguf_open(Q8, &gq), "%s", pl_last_error());
    if (!L || !gs || !gq) goto out;
    joiner bad, other, good;
    memset(&bad, 0, sizeof bad), memset(&other, 0, sizeof other), memset(&good, 0, sizeof good);
    start_joiner(&bad, "inproc://refusals", "not-the-key", S);
    start_joiner(&other, "inproc://refusals", KEY, Q8);
    uint8_t meta[32];
    pl_gguf_meta_digest(gs, meta);
    pl_room_worker w[1];
    /* the other model is refused at its hello: nobody joins within 3 s */
    pl_status s = pl_room_gather(L, 1, 3000, NULL, false, meta, w);
    CHECK(s != PL_OK, "the worker with another model joined");
    pthread_join(other.th, NULL);
    start_joiner(&good, "inproc://refusals", KEY, S);
    s = pl_room_gather(L, 1, 30000, NULL, false, meta, w);
    CHECK(!s, "gather past a wrong key and another model: %s", pl_last_error());
    pthread_join(bad.th, NULL);
    CHECK(bad.s != PL_OK && bad.err[0] && !strchr(bad.err, '\n'), "wrong key: %d '%s'", bad.s,
          bad.err);
    CHECK(other.s != PL_OK && strstr(other.err, "other metadata") && !strchr(other.err, '\n'),
          "another model: %d '%s'", other.s, other.err);
    if (!s) pl_room_worker_bye(w[0].link);
    pthread_join(good.th, NULL);
    CHECK(good.s == PL_OK, "the worker told bye before its plan leaves cleanly: %s", good.err);

    /* the same metadata, other weights: the identity of the dealt layers differs */
    joiner q4;
    memset(&q4, 0, sizeof q4);
    start_joiner(&q4, "inproc://refusals", KEY, Q4);
    pl_gguf_meta_digest(gq, meta);
    s = pl_room_gather(L, 1, 30000, NULL, false, meta, w);
    CHECK(!s, "the q4_0 worker's hello passes (same metadata): %s", pl_last_error());
    if (!s) {
        pl_room_deal_opts d = deal_opts(gq, PL_WIRE_F32);
        int n = 1;
        s = plan_deal(w, &n, &d);
        CHECK(s != PL_OK && strstr(pl_last_error(), "differ from the host's") &&
                  strstr(pl_last_error(), "layers 0..") && !strchr(pl_last_error(), '\n'),
              "a worker with other weights: '%s'", s ? pl_last_error() : "dealt");
        pl_room_worker_bye(w[0].link);
    }
    pthread_join(q4.th, NULL);
    CHECK(q4.s != PL_OK && strstr(q4.err, "differ from the host's") && !strchr(q4.err, '\n'),
          "the q4_0 worker is told: '%s'", q4.err);
out:
    pl_listener_close(L);
    pl_gguf_free(gs);
    pl_gguf_free(gq);
}

/* A fake worker: its hello says speed, lend and --layers as given; it takes its plan (or a
 * bye: idle), says it is ready with its range's identity (from the real file, or all zero
 * with bad_id), echoes rewinds, then goes silent (mode 0) or leaves (mode 1) at the first
 * frame. */
typedef struct {
    const char *url;
    int mode;
    float speed;
    uint64_t lend;
    int want_first, want_last;
    bool bad_id;
    int first, last; /* what it was dealt (-1: a bye instead) */
    pthread_t th;
} faker;

static void *fake_main(void *ud) {
    faker *f = ud;
    pl_link *l = NULL;
    f->first = f->last = -1;
    if (pl_link_dial(f->url, KEY, 10000, NULL, &l)) return NULL;
    pl_wire_msg m = {.type = PL_MSG_HELLO};
    m.hello = (pl_wire_hello){.caps = PL_CAP_F16_WIRE,
                              .has_model = true, /* its layers' identity: from the real file */
                              .model_id = {1},
                              .speed = f->speed,
                              .mem_lent = f->lend ? f->lend : 1ull << 30,
                              .want_first = (uint32_t)f->want_first,
                              .want_last = (uint32_t)f->want_last};
    strcpy(m.hello.backend, "cpu");
    pl_room_send(l, &m, 1000);
    while (!pl_room_recv(l, &m, 10000) && m.type != PL_MSG_PLAN && m.type != PL_MSG_BYE) {
    }
    if (m.type != PL_MSG_PLAN) {
        pl_link_close(l);
        return NULL;
    }
    for (uint32_t i = 0; i < m.plan.n_members; i++)
        if (m.plan.members[i].id == 0)
            f->first = (int)m.plan.members[i].first, f->last = (int)m.plan.members[i].last;
    pl_wire_msg r = {.type = PL_MSG_READY};
    r.ready.first = (uint32_t)f->first, r.ready.last = (uint32_t)f->last;
    pl_gguf *g = NULL;
    if (!f->bad_id && !pl_gguf_open(test_shared("models/stories260K.gguf"), &g))
        pl_room_part_id(g, f->first, f->last, NULL, r.ready.part_id);
    pl_gguf_free(g);
    pl_room_send(l, &r, 1000);
    while (!pl_room_recv(l, &m, 10000) && m.type != PL_MSG_HIDDEN && m.type != PL_MSG_BYE)
        if (m.type == PL_MSG_REWIND) pl_room_send(l, &m, 1000); /* the echo */
    if (f->mode == 0 && m.type == PL_MSG_HIDDEN)                /* silent until the host says bye */
        while (!pl_room_recv(l, &m, 10000) && m.type != PL_MSG_BYE) {
        }
    pl_link_close(l);
    return NULL;
}

/* The plan over what the hellos say (stories260K: 5 layers): by speed, the fastest first,
 * within memory; a worker that lends nothing stays idle and is told bye; --layers on every
 * worker are followed as given; a room that cannot hold the model fails with one line; a
 * ready whose identity differs from the host's fails the deal naming the worker. */
static void check_plan(void) {
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &g) == PL_OK, "%s", pl_last_error());
    pl_listener *L = NULL;
    CHECK(pl_link_listen("inproc://plan", KEY, NULL, &L) == PL_OK, "%s", pl_last_error());
    if (!g || !L) goto out;
    pl_room_deal_opts d = deal_opts(g, PL_WIRE_F32);
    d.host_lend = 1u << 20; /* the ends and nothing more: the host holds no layers */
    d.host_speed = 1e-3;
    struct {
        float speed[3];
        uint64_t lend[3];
        int want[3][2];
        bool bad_id;
        int first[3], last[3]; /* -1: idle (bye) */
        const char *err;       /* the deal fails with this */
    } cases[] = {
        {{100, 300, 100}, {1 << 30, 1 << 30, 1}, {{0}}, false, {4, 0, -1}, {5, 4, -1}, NULL},
        {{100, 100, 100},
         {1 << 30, 1 << 30, 1 << 30},
         {{3, 5}, {0, 1}, {1, 3}},
         false,
         {3, 0, 1},
         {5, 1, 3},
         NULL},
        {{100, 100, 100}, {1, 1, 1}, {{0}}, false, {-1, -1, -1}, {-1, -1, -1}, "lends"},
        {{100, 100, 100},
         {1 << 30, 1 << 30, 1 << 30},
         {{0, 2}, {2, 5}, {0}},
         true,
         {0, 2, -1},
         {2, 5, -1},
         "differ from the host's"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        faker f[3];
        pl_room_worker w[3];
        int n = 0;
        for (int i = 0; i < 3; i++) { /* one at a time: w[i] is f[i] */
            f[i] = (faker){.url = "inproc://plan",
                           .mode = 1,
                           .speed = cases[c].speed[i],
                           .lend = cases[c].lend[i],
                           .want_first = cases[c].want[i][0],
                           .want_last = cases[c].want[i][1],
                           .bad_id = cases[c].bad_id};
            pthread_create(&f[i].th, NULL, fake_main, &f[i]);
            if (!pl_room_gather(L, 1, 30000, NULL, false, NULL, &w[n])) n++;
        }
        CHECK(n == 3, "case %zu: %d of 3 fakers gathered", c, n);
        int hf = -1, hl = -1;
        pl_status s = pl_room_plan(w, &n, &d, &hf, &hl);
        if (!s) s = pl_room_deal(w, n, &d, hf, hl);
        if (cases[c].err)
            CHECK(s != PL_OK && strstr(pl_last_error(), cases[c].err) &&
                      !strchr(pl_last_error(), '\n'),
                  "case %zu: '%s'", c, s ? pl_last_error() : "dealt");
        else
            CHECK(!s && hf == hl, "case %zu: %s (host %d..%d)", c, s ? pl_last_error() : "", hf,
                  hl);
        for (int i = 0; i < n; i++) pl_room_worker_bye(w[i].link);
        for (int i = 0; i < 3; i++) {
            pthread_join(f[i].th, NULL);
            CHECK(f[i].first == cases[c].first[i] && f[i].last == cases[c].last[i],
                  "case %zu, worker %d: dealt %d..%d, want %d..%d", c, i, f[i].first, f[i].last,
                  cases[c].first[i], cases[c].last[i]);
        }
    }
out:
    pl_listener_close(L);
    pl_gguf_free(g);
}

/* A worker that does not answer within the lap timeout, or leaves, fails the turn with one
 * line naming it, in about the lap timeout, not a hang. */
static void check_lost_worker(pl_backend *be, int mode) {
    const char *url = mode ? "inproc://leaver" : "inproc://silent";
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &g) == PL_OK, "%s", pl_last_error());
    pl_model *host = g ? cc_load(g, be, 0, 0, PL_ENDS_EMBED | PL_ENDS_HEAD) : NULL;
    pl_listener *L = NULL;
    CHECK(pl_link_listen(url, KEY, NULL, &L) == PL_OK, "%s", pl_last_error());
    if (!host || !L) goto out;
    const pl_model_info *in = pl_model_get_info(host);
    faker f = {.url = url, .mode = mode, .want_first = 0, .want_last = in->n_layer};
    pthread_create(&f.th, NULL, fake_main, &f);
    pl_room_worker w[1];
    pl_stage *st = NULL;
    pl_status s = pl_room_gather(L, 1, 30000, NULL, false, NULL, w);
    pl_room_deal_opts d = deal_opts(g, PL_WIRE_F32);
    int n = 1;
    if (!s) s = plan_deal(w, &n, &d);
    if (!s) s = pl_room_stage_new(w, 1, in->n_layer, in->n_embd, CC_CTX, PL_WIRE_F32, 300, &st);
    CHECK(!s, "a room with a fake worker: %s", pl_last_error());
    pl_state_opts o = cc_opts(host);
    pl_session *cs = NULL;
    if (st) CHECK(!pl_session_new_chain(host, &o, &st, 1, NULL, &cs), "%s", pl_last_error());
    if (cs) {
        int32_t ids[3] = {1, 2, 3};
        s = pl_session_set(cs, ids, 3, NULL);
        const char *want = mode ? "left the room" : "did not answer a frame within 300 ms";
        CHECK(s != PL_OK && strstr(pl_last_error(), want) && !strchr(pl_last_error(), '\n'),
              "a %s worker: '%s'", mode ? "leaving" : "silent", pl_last_error());
    }
    pl_session_free(cs);
    pl_stage_free(st); /* bye: the silent one leaves too */
    pthread_join(f.th, NULL);
out:
    pl_listener_close(L);
    pl_model_free(host);
    pl_gguf_free(g);
}

/* Survival: with 2 real workers, worker 1 goes silent mid-answer (mode 0: after 10 frames,
 * the prompt's 6 and 4 decode steps) or leaves with bye (mode 1: after 3 decode steps), or
 * (mode 2) computes its first frame for 4.5 s: slow but alive (its pongs say so), not lost;
 * the host takes its layers over (pl_room_stage_survive) and the answer goes on with the
 * logits bit-identical to the whole model's, and a later turn reuses the rebuilt caches. */
static void check_survival(pl_backend *be, int mode, bool chain) {
    const char *rel = "models/stories260K.gguf";
    char url[64];
    snprintf(url, sizeof url, "%s%s",
             mode == 2 ? "inproc://survive-slow"
             : mode    ? "inproc://survive-bye"
                       : "inproc://survive-mute",
             chain ? "-chain" : "");
    const char *what = mode == 2 ? "a slow worker"
                       : mode    ? "a worker leaving mid-answer"
                                 : "a worker silent mid-answer";
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s: %s", rel, pl_last_error());
    pl_model *w = g ? cc_load(g, be, 0, 0, PL_ENDS_AUTO) : NULL;
    pl_model *host = g ? cc_load(g, be, 0, 0, PL_ENDS_EMBED | PL_ENDS_HEAD) : NULL;
    if (!w || !host) goto out;
    const pl_model_info *in = pl_model_get_info(w);
    room r;
    bool ok = room_open(&r, url, rel, 2, in->n_layer, in->n_embd, PL_WIRE_F32, mode ? 0 : 10,
                        mode == 2 ? 4500 : 0, chain);
    pl_state_opts o = cc_opts(w);
    for (int i = 0; ok && mode != 2 && i < r.n_st; i++) /* a slow worker must not need it */
        CHECK(!pl_room_stage_survive(r.st[i], g, be, &o), "%s", pl_last_error());
    pl_chain_opts co = {.frame_cols = 4, .in_flight = 3};
    pl_session *ws = NULL, *cs = NULL;
    CHECK(pl_session_new(w, &o, &ws) == PL_OK, "%s", pl_last_error());
    if (ok)
        CHECK(pl_session_new_chain(host, &o, r.st, r.n_st, &co, &cs) == PL_OK, "%s: %s", what,
              pl_last_error());
    cc_pair p = {ws, cs, in->n_vocab, what};
    if (ws && cs) {
        int32_t ids[24];
        for (int i = 0; i < 24; i++) ids[i] = (int32_t)((i * 7919 + 13) % p.V);
        cc_set(&p, ids, 24, "prompt");
        cc_greedy(&p, 3, 0, "greedy before");
        if (mode == 1) {
            r.stop = 1;
            usleep(500 * 1000); /* it has said bye */
        }
        cc_greedy(&p, 12, 0, "greedy through the loss");
        int64_t n;
        const int32_t *cached = pl_session_ids(p.w, &n);
        int32_t more[48];
        memcpy(more, cached, sizeof *more * (size_t)n);
        for (int i = 0; i < 4; i++) more[n + i] = (int32_t)((i * 101 + 5) % p.V);
        cc_set(&p, more, n + 4, "a later turn");
        cc_greedy(&p, 4, 0, "greedy after");
    }
    pl_session_free(ws);
    pl_session_free(cs);
    if (ok) room_close(&r, true);
out:
    pl_model_free(host);
    pl_model_free(w);
    pl_gguf_free(g);
}

/* The part files (part-*.gguf) in dir, and the temporary ones (.part-*). */
static int count_parts(const char *dir, bool temporary) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += !strncmp(e->d_name, temporary ? ".part-" : "part-", temporary ? 6 : 5);
    if (d) closedir(d);
    return n;
}

/* One room of 2 workers without the model file (f16 frames, a chain): the greedy ids of
 * the whole model (check_room); sent[i]: the bytes the host sent worker i. */
static void fetch_room(pl_backend *be, uint64_t sent[2]) {
    last_sent[0] = last_sent[1] = UINT64_MAX;
    check_room(be, "models/stories260K.gguf", 2, PL_WIRE_F16, false, true);
    sent[0] = last_sent[0], sent[1] = last_sent[1];
}

/* Flip one byte near the end (tensor data) of the file at path. */
static void corrupt(const char *path) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    fseek(f, -100, SEEK_END);
    int c = fgetc(f);
    fseek(f, -100, SEEK_END);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

/* A worker without the model fetches its layers; the host's pieces are refused when they
 * are another tensor's or longer than asked (one line); a worker that dies mid-download
 * leaves no part file. In a fresh cache folder each. */
static void check_bad_fetch(int bad, int die_after) {
    char dir[512], what[64];
    static int count;
    snprintf(dir, sizeof dir, "%s/bad-fetch-%d", test_tmpdir(), count++);
    snprintf(what, sizeof what, "bad piece %d, dying after %d pieces", bad, die_after);
    mkdir(dir, 0700);
    const char *S = test_shared("models/stories260K.gguf");
    pl_gguf *g = NULL;
    pl_listener *L = NULL;
    CHECK(pl_link_listen("inproc://bad-fetch", KEY, NULL, &L) == PL_OK, "%s", pl_last_error());
    CHECK(pl_gguf_open(S, &g) == PL_OK, "%s", pl_last_error());
    if (!L || !g) goto out;
    fetch_dir = dir;
    joiner j;
    memset(&j, 0, sizeof j);
    j.o.want_first = 0, j.o.want_last = 5, j.o.test_die_after = die_after;
    start_joiner(&j, "inproc://bad-fetch", KEY, S);
    fetch_dir = NULL;
    pl_room_worker w[1];
    pl_status s = pl_room_gather(L, 1, 30000, NULL, false, NULL, w);
    CHECK(!s, "%s: %s", what, pl_last_error());
    if (!s) {
        pl_room_deal_opts d = deal_opts(g, PL_WIRE_F32);
        d.model_path = S, d.test_bad_piece = bad;
        int n = 1;
        s = plan_deal(w, &n, &d);
        CHECK(s != PL_OK && !strchr(pl_last_error(), '\n'), "%s: '%s'", what,
              s ? pl_last_error() : "dealt");
        pl_room_worker_bye(w[0].link);
    }
    pthread_join(j.th, NULL);
    const char *want = die_after ? "dies after" : bad == 1 ? "where tensor" : "was asked: refused";
    CHECK(j.s != PL_OK && strstr(j.err, want) && !strchr(j.err, '\n'), "%s: the worker says '%s'",
          what, j.err);
    CHECK(!count_parts(dir, false) && !count_parts(dir, true),
          "%s: %d part files, %d temporary ones left", what, count_parts(dir, false),
          count_parts(dir, true));
out:
    pl_listener_close(L);
    pl_gguf_free(g);
}

/* Weights over the link: 2 workers without the model answer as the whole model; a second
 * room with the same model and ranges fetches nothing (the cache); a cached part with a
 * flipped byte is refused and fetched again; bad pieces and a dying worker (above). */
static void check_fetch(pl_backend *be) {
    char dir[512], path[1024];
    snprintf(dir, sizeof dir, "%s/parts", test_tmpdir());
    mkdir(dir, 0700);
    uint64_t sent[2];
    fetch_dir = dir;
    fetch_room(be, sent);
    CHECK(sent[0] && sent[1] && sent[0] != UINT64_MAX && sent[1] != UINT64_MAX,
          "the first room sends the workers their layers: %llu, %llu bytes",
          (unsigned long long)sent[0], (unsigned long long)sent[1]);
    CHECK(count_parts(dir, false) == 2 && !count_parts(dir, true), "%d part files, %d temporary",
          count_parts(dir, false), count_parts(dir, true));
    fetch_room(be, sent);
    CHECK(!sent[0] && !sent[1], "the second room sends %llu, %llu bytes: not nothing",
          (unsigned long long)sent[0], (unsigned long long)sent[1]);
    /* corrupt the part of layers 0.. (the first worker's, the larger file is the second's) */
    DIR *d = opendir(dir);
    struct stat st;
    off_t smallest = -1;
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (!strncmp(e->d_name, "part-", 5) && !stat(p, &st) &&
            (smallest < 0 || st.st_size < smallest))
            smallest = st.st_size, snprintf(path, sizeof path, "%s", p);
    }
    if (d) closedir(d);
    CHECK(smallest > 0, "no part file in %s", dir);
    if (smallest > 0) corrupt(path);
    fetch_room(be, sent);
    CHECK((sent[0] > 0) != (sent[1] > 0) && sent[0] != UINT64_MAX && sent[1] != UINT64_MAX,
          "exactly the corrupted part is fetched again: %llu, %llu bytes",
          (unsigned long long)sent[0], (unsigned long long)sent[1]);
    fetch_dir = NULL;
    check_bad_fetch(1, 0);
    check_bad_fetch(2, 0);
    check_bad_fetch(0, 3);
}

/* ---- guests (room/guest.c) ---- */

typedef struct {
    char text[4096];
    size_t n;
    int pieces, stop_after; /* a callback return of non-zero after stop_after pieces */
} heard;

static int hear_text(void *ud, const char *t, size_t n) {
    heard *h = ud;
    if (h->n + n < sizeof h->text) memcpy(h->text + h->n, t, n), h->n += n, h->text[h->n] = 0;
    return h->stop_after && ++h->pieces >= h->stop_after;
}

typedef struct {
    pl_listener *L;
    pl_room_answerer a;
    volatile sig_atomic_t stop;
    pl_room_guest_stats st;
    pthread_t th;
} guest_host;

/* pl_room_answer with 2 ms more per piece; a long ask (400 ids: the guests that leave
 * mid-reply) is held after its first piece until its guest leaves (the host still polls:
 * new guests are accepted and their asks heard), so it cannot end on its own before the
 * test has its other guests in place, however slow the machine (a 400-id reply that ended
 * while five guests dialled under load let the 6th guest's ask wait instead of being
 * refused); 60 s at most. */
typedef struct {
    pl_room_emit_fn emit;
    void *ctx;
    bool hold;
} slow_ctx;

static int slow_emit(void *ctx, const char *text, size_t n) {
    slow_ctx *c = ctx;
    nanosleep(&(struct timespec){0, 2000000}, NULL);
    int rc = c->emit(c->ctx, text, n);
    for (int t = 0; c->hold && !rc && t < 30000; t++) {
        nanosleep(&(struct timespec){0, 2000000}, NULL);
        rc = c->emit(c->ctx, "", 0);
    }
    return rc;
}

static pl_status slow_answer(void *ud, const pl_wire_ask *ask, pl_room_emit_fn emit, void *ctx,
                             pl_wire_done *done) {
    slow_ctx c = {emit, ctx, ask->n_predict >= 400};
    return pl_room_answer(ud, ask, slow_emit, &c, done);
}

static void *guest_host_main(void *ud) {
    guest_host *gh = ud;
    pl_room_guest_opts o = {
        .answer = slow_answer, .ud = &gh->a, .stop = &gh->stop, .stats = &gh->st};
    pl_room_guests_serve(gh->L, &o);
    return NULL;
}

/* What `pooled run -p user -n n --temp 0` prints in one process: greedy, the pieces. */
static void reference(pl_model *m, const pl_tokenizer *tok, const char *user, int n, heard *out) {
    pl_state_opts o = cc_opts(m);
    pl_session *ses = NULL;
    pl_sampler *smp = NULL;
    pl_sampler_params sp = pl_sampler_defaults();
    sp.temp = 0;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    memset(out, 0, sizeof *out);
    CHECK(pl_session_new(m, &o, &ses) == PL_OK &&
              pl_sampler_new(&sp, pl_model_get_info(m)->n_vocab, &smp) == PL_OK &&
              pl_tok_encode(tok, user, strlen(user), true, false, &ids, &n_ids) == PL_OK,
          "%s", pl_last_error());
    cc_ids rec = {0};
    pl_gen_opts go = {.n_predict = n, .on_token = cc_take, .ud = &rec};
    pl_gen_stats st;
    if (ids) CHECK(pl_generate(ses, smp, ids, n_ids, &go, &st) == PL_OK, "%s", pl_last_error());
    pl_tok_stream *ts = pl_tok_stream_new(tok, false);
    for (int i = 0; ts && i <= rec.n; i++) {
        bool end = i == rec.n || pl_tok_is_eog(tok, rec.ids[i]);
        const char *piece = end ? pl_tok_stream_flush(ts) : pl_tok_stream_push(ts, rec.ids[i]);
        hear_text(out, piece, strlen(piece));
        if (end) break;
    }
    pl_tok_stream_free(ts);
    free(ids);
    pl_sampler_free(smp);
    pl_session_free(ses);
}

static void check_guests(pl_backend *be) {
    const char *rel = "models/stories260K.gguf";
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s", pl_last_error());
    pl_model *w = g ? cc_load(g, be, 0, 0, PL_ENDS_AUTO) : NULL;
    pl_model *host = g ? cc_load(g, be, 0, 0, PL_ENDS_EMBED | PL_ENDS_HEAD) : NULL;
    pl_tokenizer *tok = NULL;
    if (g) CHECK(pl_tok_load(g, &tok) == PL_OK, "%s", pl_last_error());
    room r;
    guest_host gh = {0};
    if (!w || !host || !tok) goto out;
    const pl_model_info *in = pl_model_get_info(w);
    if (!room_open(&r, "inproc://guests", rel, 2, in->n_layer, in->n_embd, PL_WIRE_F32, 0, 0,
                   false))
        goto out;
    /* the host as `room host --serve` has it: a pooled_model of the ends whose chain gets the
     * workers' stages (closing the model frees them), one session answering every guest */
    pooled_model_opts mo = pooled_model_opts_default();
    mo.backend = "cpu", mo.n_threads = 1, mo.n_ctx = CC_CTX, mo.spec = POOLED_SPEC_OFF;
    pooled_model *pm = NULL;
    pooled_session *cs = NULL;
    CHECK(pl_api_open_host(test_shared(rel), &mo, 0, 0, &pm) == POOLED_OK, "%s",
          pooled_last_error());
    if (pm) {
        pl_model_parts *pp = pl_api_parts(pm);
        for (int i = 0; i < r.n_st; i++) pp->stages[pp->n_stages++] = r.st[i];
        r.n_st = 0; /* the model's now */
        CHECK(pooled_session_new(pm, &cs) == POOLED_OK, "%s", pooled_last_error());
    }
    gh.L = r.L;
    pooled_sample_opts greedy = pooled_sample_opts_default();
    greedy.temperature = 0;
    gh.a = (pl_room_answerer){.m = pm, .ses = cs, .sp = greedy, .think = true};
    if (cs) pthread_create(&gh.th, NULL, guest_host_main, &gh);
    heard want;
    reference(w, tok, "Once upon a time", 8, &want);
    CHECK(want.n > 0, "the reference said nothing");
    pl_wire_ask ask = {.n_predict = 8, .n_turns = 1, .flags = PL_ASK_SEEDED | PL_ASK_RAW};
    ask.turns[0] = (pl_wire_turn){PL_ROLE_USER, 16, "Once upon a time"};
    for (int round = 0; cs && round < 3; round++) {
        pl_link *l = NULL;
        heard h = {0};
        pl_wire_done done = {0};
        CHECK(pl_room_guest_dial("inproc://guests", KEY, 10000, &l) == PL_OK, "%s",
              pl_last_error());
        if (!l) break;
        if (round == 1) { /* leaves after the first piece of a long reply */
            pl_wire_ask longer = ask;
            longer.n_predict = 400;
            h.stop_after = 1;
            CHECK(pl_room_guest_ask(l, &longer, hear_text, &h, 20000, &done) == PL_ERR,
                  "the guest should stop");
        } else {
            CHECK(pl_room_guest_ask(l, &ask, hear_text, &h, 20000, &done) == PL_OK, "round %d: %s",
                  round, pl_last_error());
            CHECK(!strcmp(h.text, want.text), "round %d: the guest heard '%s', one process '%s'",
                  round, h.text, want.text);
            /* 8 ids and no end: a reply that goes on is longer than the one stopped below */
            CHECK(done.n_gen == 8, "round %d: %u ids", round, done.n_gen);
        }
        pl_link_close(l);
    }
    /* the reply of the guest that left stopped within a few ids (it asked for 400) */
    CHECK(gh.st.asks == 3 && gh.st.left == 1 && gh.st.left_gen < 40,
          "%d asks, %d left mid-reply, that generation made %u ids", gh.st.asks, gh.st.left,
          gh.st.left_gen);
    /* while one reply is made, 4 asks wait and the next is refused as busy; the 4 are
     * answered in turn, each as one process */
    pl_link *q[6] = {NULL};
    for (int k = 0; cs && k < 6; k++) {
        CHECK(pl_room_guest_dial("inproc://guests", KEY, 10000, &q[k]) == PL_OK, "%s",
              pl_last_error());
        pl_wire_msg m = {.type = PL_MSG_ASK, .ask = ask};
        if (k == 0) m.ask.n_predict = 400;
        if (q[k]) CHECK(pl_room_send(q[k], &m, 5000) == PL_OK, "%s", pl_last_error());
        if (k == 0 && q[0]) /* the long reply has begun before the others ask */
            CHECK(pl_room_recv(q[0], &m, 10000) == PL_OK && m.type == PL_MSG_TEXT,
                  "the first guest's reply");
    }
    /* the refused one first: the five asks race to the host, whose poll hears the links in
     * an order of its own, so the 5th it hears (any of them) is refused; found by polling
     * all five, never waiting on a queued one (they get nothing until guest 0 leaves) */
    int refused = -1;
    for (double t0 = pl_now(); cs && refused < 0 && pl_now() - t0 < 20;) {
        for (int k = 1; k < 6 && refused < 0; k++) {
            pl_wire_msg m;
            if (!q[k] || pl_room_recv(q[k], &m, 20) != PL_OK) continue;
            CHECK(m.type == PL_MSG_ERROR && m.error.code == PL_WERR_BUSY &&
                      strstr(m.error.text, "busy"),
                  "guest %d before guest 0 left: %s %u", k, pl_wire_type_name(m.type),
                  m.error.code);
            refused = k;
        }
    }
    CHECK(!cs || refused > 0, "none of the five later guests was refused as busy");
    pl_link_close(q[0]), q[0] = NULL;   /* leaves mid-reply, too */
    for (int k = 1; cs && k < 6; k++) { /* the other four, each as one process */
        heard h = {0};
        pl_wire_msg m = {0};
        if (k == refused) continue;
        while (q[k] && pl_room_recv(q[k], &m, 20000) == PL_OK && m.type == PL_MSG_TEXT)
            hear_text(&h, m.text.data, m.text.n);
        CHECK(m.type == PL_MSG_DONE && !strcmp(h.text, want.text), "waiting guest %d: %s '%s'", k,
              pl_wire_type_name(m.type), h.text);
    }
    for (int k = 0; k < 6; k++) pl_link_close(q[k]);
    /* a malformed ask (truncated) and a worker's hello: one line each, then dropped */
    for (int k = 0; cs && k < 2; k++) {
        pl_link *l = NULL;
        CHECK(pl_link_dial("inproc://guests", KEY, 10000, NULL, &l) == PL_OK, "%s",
              pl_last_error());
        if (!l) break;
        pl_wire_msg m = {.type = PL_MSG_HELLO, .hello = {.backend = "cpu"}};
        if (k == 0) m.hello.caps = PL_CAP_GUEST;
        CHECK(pl_room_send(l, &m, 5000) == PL_OK, "%s", pl_last_error());
        uint8_t bad[] = {PL_WIRE_VERSION, 0, PL_MSG_ASK, 0, 8, 0, 0};
        if (k == 0) CHECK(pl_link_send(l, bad, sizeof bad, 5000) == PL_OK, "%s", pl_last_error());
        pl_status s = pl_room_recv(l, &m, 10000);
        CHECK(s == PL_OK && m.type == PL_MSG_ERROR && !strchr(m.error.text, '\n') &&
                  strstr(m.error.text, k == 0 ? "truncated" : "guests only"),
              "case %d: %d %s '%s'", k, s, pl_wire_type_name(m.type), m.error.text);
        CHECK(pl_room_recv(l, &m, 10000) == PL_ERR_IO, "case %d: the host keeps the peer", k);
        pl_link_close(l);
    }
    gh.stop = 1;
    if (cs) pthread_join(gh.th, NULL);
    pooled_session_free(cs);
    pooled_model_close(pm); /* its stages first: their workers end when their links close */
    room_close(&r, true);
out:
    pl_tok_free(tok);
    pl_model_free(host);
    pl_model_free(w);
    pl_gguf_free(g);
}

/* The host and 2 workers on the WebGPU backend (lavapipe in CI): the logits bits and ids of
 * one session over the whole model on it, and the workers' decode frames go through passes
 * prepared ahead (backend.h's prepare), which change nothing. Without an adapter this
 * fails, as the GPU tests do; POOLED_SKIP_GPU=1 outside CI skips. */
static void check_gpu_room(void) {
    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0); /* loader noise */
    pl_backend *gpu = NULL;
    const char *note;
    if (pl_backend_open("webgpu", 1, &gpu, &note) != PL_OK) {
        test_no_gpu("the webgpu backend", pl_last_error());
        return;
    }
    gpu->act_q8 = 1;
    join_backend = "webgpu";
    check_room(gpu, "models/stories260K.gguf", 2, PL_WIRE_F32, false, false);
    join_backend = "cpu";
    for (int i = 0; i < 2; i++)
        CHECK(join_counts[i].frames > 10 && join_counts[i].prepared > 5,
              "gpu worker %d: %lld frames, %lld through a prepared pass", i,
              (long long)join_counts[i].frames, (long long)join_counts[i].prepared);
    pl_be_destroy(gpu);
}

static void run_tests(void) {
    pl_backend *be = NULL;
    const char *note;
    CHECK(pl_backend_open("cpu", 1, &be, &note) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    be->act_q8 = 1;
    check_wide_frames(be, false);
    check_wide_frames(be, true);
    check_wide_lap(be);
    check_guests(be);
    check_fetch(be);
    check_room(be, "models/stories260K.gguf", 2, PL_WIRE_F32, true, false);
    check_room(be, "models/stories260K.gguf", 3, PL_WIRE_F32, true, false);
    check_room(be, "models/stories260K.gguf", 3, PL_WIRE_F32, true, true);
    check_room(be, "models/stories260K.gguf", 2, PL_WIRE_F16, false, false);
    kv_type = PL_TYPE_F32; /* an f32 cache on every member (0: not a default to f16) */
    check_room(be, "models/stories260K.gguf", 2, PL_WIRE_F32, false, false);
    kv_type = PL_TYPE_F16;
    check_room(be, "models/stories260K.gguf", 2, PL_WIRE_F16, false, true);
    check_room(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", 2, PL_WIRE_F32, false, false);
    check_room(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", 3, PL_WIRE_F32, false, false);
    check_room(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", 3, PL_WIRE_F32, false, true);
    check_room_mtp(be, PL_SPEC_MAX + 1);
    check_room_mtp(be, 0);
    check_refusals();
    check_plan();
    check_lost_worker(be, 0);
    check_lost_worker(be, 1);
    check_survival(be, 0, false);
    check_survival(be, 1, false);
    check_survival(be, 2, false);
    check_survival(be, 0, true);
    check_survival(be, 1, true);
    pl_be_destroy(be);
    check_gpu_room();
}
