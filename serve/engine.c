/* engine.c - the server's calls into libpooled, through its public API only (pooled.h):
 * prompts as ids, tokenize / detokenize, and one generation on a slot's session with stop
 * strings held back until they can no longer match. */
#include "engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "base/strbuf.h"

/* A slot: one session (its own KV cache) and whether a generation holds it. */
typedef struct {
    pooled_session *ses;
    bool busy;
    uint64_t used; /* when it was last taken (for the least recently used among equals) */
} slot;

struct srv_engine {
    pooled_model *m;
    int n_vocab;
    int64_t n_ctx;
    int32_t bos;        /* -1: none */
    bool adds_bos;      /* the vocabulary starts a text with BOS */
    bool ignore_eos;    /* an end-of-generation id is text like any other */
    int spec;           /* POOLED_SPEC_* of every generation */
    pthread_mutex_t mu; /* the slots' table */
    pthread_cond_t freed;
    uint64_t n_taken;
    int n_slots;
    slot slots[];
};

static bool lib_fail(char *err, size_t cap) {
    snprintf(err, cap, "%s", pooled_last_error());
    return false;
}

srv_engine *srv_engine_new(pooled_model *m, int n_slots, char *err, size_t cap) {
    if (n_slots < 1) return snprintf(err, cap, "no slots"), NULL;
    srv_engine *e = calloc(1, sizeof *e + sizeof(slot) * (size_t)n_slots);
    if (!e) return snprintf(err, cap, "out of memory"), NULL;
    pooled_model_info in = {.size = sizeof in};
    pooled_model_get_info(m, &in);
    e->m = m, e->n_vocab = in.n_vocab, e->n_ctx = in.n_ctx, e->bos = in.bos;
    e->n_slots = n_slots;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->freed, NULL);
    /* whether a text starts with BOS: what tokenizing nothing with the specials gives */
    int32_t *ids = NULL;
    size_t n = 0;
    if (!pooled_tokenize(m, "", 0, 1, 0, &ids, &n))
        e->adds_bos = e->bos >= 0 && n >= 1 && ids[0] == e->bos;
    pooled_free(ids);
    for (int i = 0; i < n_slots; i++)
        if (pooled_session_new(m, &e->slots[i].ses)) {
            snprintf(err, cap, "slot %d of %d: %s", i + 1, n_slots, pooled_last_error());
            srv_engine_free(e);
            return NULL;
        }
    return e;
}

void srv_engine_set_ignore_eos(srv_engine *e, bool on) {
    e->ignore_eos = on;
}

void srv_engine_set_spec(srv_engine *e, int spec) {
    e->spec = spec;
}

bool srv_engine_batched(const srv_engine *e) {
    pooled_model_stats st = {.size = sizeof st};
    return !pooled_model_get_stats(e->m, &st) && st.batched;
}

void srv_engine_batch_stats(srv_engine *e, uint64_t *steps, uint64_t *columns) {
    pooled_model_stats st = {.size = sizeof st};
    pooled_model_get_stats(e->m, &st);
    *steps = st.n_batched_steps, *columns = st.n_batched_columns;
}

void srv_engine_free(srv_engine *e) {
    if (!e) return;
    for (int i = 0; i < e->n_slots; i++) pooled_session_free(e->slots[i].ses);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->freed);
    free(e);
}

int64_t srv_engine_n_ctx(const srv_engine *e) {
    return e->n_ctx;
}

int srv_engine_n_slots(const srv_engine *e) {
    return e->n_slots;
}

static int64_t common_prefix(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    int64_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* A free slot for a prompt: the one whose cache shares the longest prefix with it when
 * that prefix is at least half the prompt, else the least recently used (a slot never used
 * first), so that a new conversation sharing only a BOS or a short system prompt keeps the
 * others' caches. Waits while every slot is busy (the server runs no more generations than
 * slots). */
static slot *slot_take(srv_engine *e, const int32_t *ids, int64_t n) {
    pthread_mutex_lock(&e->mu);
    slot *best = NULL, *lru = NULL;
    for (;;) {
        int64_t best_len = -1;
        for (int i = 0; i < e->n_slots; i++) {
            slot *s = &e->slots[i];
            if (s->busy) continue;
            int32_t *c = NULL;
            size_t nc = 0; /* (a free slot's session: no generation changes it meanwhile) */
            if (pooled_session_ids(s->ses, &c, &nc)) nc = 0;
            int64_t len = common_prefix(c, (int64_t)nc, ids, n);
            pooled_free(c);
            if (len > best_len) best = s, best_len = len;
            if (!lru || s->used < lru->used) lru = s;
        }
        if (best && best_len * 2 < n) best = lru;
        if (best) break;
        pthread_cond_wait(&e->freed, &e->mu);
    }
    best->busy = true;
    best->used = ++e->n_taken;
    pthread_mutex_unlock(&e->mu);
    return best;
}

static void slot_give(srv_engine *e, slot *s) {
    pthread_mutex_lock(&e->mu);
    s->busy = false;
    pthread_cond_signal(&e->freed);
    pthread_mutex_unlock(&e->mu);
}

bool srv_chat_context(const srv_request *r, char **msgs, const char **tools, char *err,
                      size_t cap) {
    *msgs = NULL;
    *tools = r->tools && r->tool_choice != SRV_TOOLS_NONE ? r->tools : NULL;
    pl_strbuf b = {0};
    pl_sb_putc(&b, '[');
    for (int i = 0; i < r->n_msgs; i++) {
        const srv_msg *m = &r->msgs[i];
        pl_sb_puts(&b, i ? ",{\"role\":" : "{\"role\":");
        pl_json_quote(&b, m->role, strlen(m->role), false);
        pl_sb_puts(&b, ",\"content\":");
        pl_json_quote(&b, m->content, strlen(m->content), false);
        if (m->reasoning) {
            pl_sb_puts(&b, ",\"reasoning_content\":");
            pl_json_quote(&b, m->reasoning, strlen(m->reasoning), false);
        }
        if (m->tool_calls) pl_sb_printf(&b, ",\"tool_calls\":%s", m->tool_calls);
        if (m->tool_call_id) {
            pl_sb_puts(&b, ",\"tool_call_id\":");
            pl_json_quote(&b, m->tool_call_id, strlen(m->tool_call_id), false);
        }
        pl_sb_putc(&b, '}');
    }
    pl_sb_putc(&b, ']');
    if (b.failed) return pl_sb_free(&b), snprintf(err, cap, "out of memory"), false;
    *msgs = b.s;
    return true;
}

static bool render_chat(srv_engine *e, const srv_request *r, char **text, char *err, size_t cap) {
    char *msgs;
    const char *tools;
    if (!srv_chat_context(r, &msgs, &tools, err, cap)) return false;
    /* a response_format or a forced call leaves no room for thinking: it is the whole
     * answer; the client may turn it off too (srv_request.no_think) */
    pooled_chat_opts co = pooled_chat_opts_default();
    co.no_think = r->schema || tf_forced(r) || r->no_think;
    int rc = pooled_chat_render_json(e->m, msgs, tools, &co, text);
    free(msgs);
    return rc ? lib_fail(err, cap) : true;
}

/* How the reply is split: <think> where the template knows it (and whether the prompt
 * opened it), tool calls in the template's format when the request offers tools. */
static tp_opts reply_format(const srv_engine *e, const srv_request *r, const char *prompt) {
    const char *t = pooled_chat_template(e->m);
    tp_opts o = {.think = t && strstr(t, "<think>")};
    const char *open = NULL;
    for (const char *p = prompt; (p = strstr(p, "<think>")); p++) open = p;
    o.in_think = o.think && open && !strstr(open, "</think>");
    bool xml;
    if (r->tools && r->tool_choice != SRV_TOOLS_NONE) o.calls = tf_calls_format(t, &xml);
    return o;
}

/* The library's ids (pooled_free) as the server's (free). */
static bool own_ids(int32_t *lib, size_t n, int32_t **ids, int64_t *n_ids, size_t extra, char *err,
                    size_t cap) {
    *ids = malloc(sizeof **ids * (n + extra + 1));
    if (!*ids) return pooled_free(lib), snprintf(err, cap, "out of memory"), false;
    if (n) memcpy(*ids + extra, lib, sizeof *lib * n);
    pooled_free(lib);
    *n_ids = (int64_t)(n + extra);
    return true;
}

bool srv_engine_prompt(srv_engine *e, const srv_request *r, int32_t **ids, int64_t *n_ids,
                       tp_opts *fmt, char *err, size_t cap) {
    *ids = NULL;
    *n_ids = 0;
    if (fmt) *fmt = (tp_opts){0};
    int32_t *lib = NULL;
    size_t n = 0;
    if (r->kind == SRV_COMPLETION) {
        if (pooled_tokenize(e->m, r->prompt, strlen(r->prompt), 1, 0, &lib, &n))
            return lib_fail(err, cap);
        if (n == 0) {
            pooled_free(lib);
            snprintf(err, cap, "the prompt is empty (and the model has no BOS)");
            return false;
        }
        return own_ids(lib, n, ids, n_ids, 0, err, cap);
    }
    char *text = NULL;
    if (!render_chat(e, r, &text, err, cap)) return false;
    if (fmt) *fmt = reply_format(e, r, text);
    int rc = pooled_tokenize(e->m, text, strlen(text), 0, 1, &lib, &n);
    pooled_free(text);
    if (rc) return lib_fail(err, cap);
    /* the template may have written BOS itself; else it comes first as in any text */
    bool bos = e->adds_bos && (n == 0 || lib[0] != e->bos);
    if (!own_ids(lib, n, ids, n_ids, bos, err, cap)) return false;
    if (bos) (*ids)[0] = e->bos;
    return true;
}

bool srv_engine_tokenize(srv_engine *e, const srv_request *r, int32_t **ids, int64_t *n_ids,
                         char ***pieces, char *err, size_t cap) {
    *pieces = NULL;
    *ids = NULL;
    int32_t *lib = NULL;
    size_t n = 0;
    if (pooled_tokenize(e->m, r->prompt, strlen(r->prompt), r->add_special, r->parse_special, &lib,
                        &n))
        return lib_fail(err, cap);
    if (!own_ids(lib, n, ids, n_ids, 0, err, cap)) return false;
    if (!r->with_pieces) return true;
    if (!(*pieces = calloc((size_t)*n_ids + 1, sizeof **pieces)))
        return snprintf(err, cap, "out of memory"), false;
    for (int64_t i = 0; i < *n_ids; i++) {
        char *t = NULL;
        size_t len;
        if (pooled_token_piece(e->m, (*ids)[i], 1, &t, &len)) return lib_fail(err, cap);
        (*pieces)[i] = strdup(t); /* (the caller frees with free) */
        pooled_free(t);
        if (!(*pieces)[i]) return snprintf(err, cap, "out of memory"), false;
    }
    return true;
}

bool srv_engine_piece(srv_engine *e, int32_t id, char **text, size_t *n) {
    *text = NULL;
    char *t = NULL;
    if (pooled_token_piece(e->m, id, 1, &t, n)) return false;
    *text = malloc(*n + 1);
    if (*text) memcpy(*text, t, *n + 1);
    pooled_free(t);
    return *text != NULL;
}

bool srv_engine_detokenize(srv_engine *e, const int32_t *ids, int64_t n, char **text, char *err,
                           size_t cap) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= e->n_vocab) {
            snprintf(err, cap, "tokens[%lld]: id %d is outside the vocabulary (0 to %d)",
                     (long long)i, ids[i], e->n_vocab - 1);
            return false;
        }
    char *t = NULL;
    size_t len = 0;
    if (pooled_detokenize(e->m, ids, (size_t)n, 0, &t, &len)) return lib_fail(err, cap);
    *text = malloc(len + 1);
    if (*text) memcpy(*text, t, len + 1);
    pooled_free(t);
    if (!*text) return snprintf(err, cap, "out of memory"), false;
    return true;
}

/* The generation in progress: text not yet emitted waits in held while it could still be
 * the start of a stop string. */
typedef struct {
    srv_engine *e;
    const srv_request *r;
    const srv_gen_io *io;
    pl_strbuf held;
    srv_gen_result *res;
    bool emit_failed;
    srv_logprob lp; /* the last pick's (pooled_sample_opts.on_logprob) */
    double t0, t_last;
    tp_think think; /* io->think: counting the reasoning ids */
} gen_state;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static bool emit(gen_state *g, size_t n) {
    if (n && !g->io->emit(g->io->ud, g->held.s, n)) g->emit_failed = true;
    memmove(g->held.s, g->held.s + n, g->held.len - n + 1);
    g->held.len -= n;
    return !g->emit_failed;
}

/* Add text; emit what is settled. False when a stop string matched (the text before it
 * emitted, finish set) or the output failed. final: nothing follows, emit everything. */
static bool settle(gen_state *g, const char *text, bool final) {
    pl_sb_puts(&g->held, text);
    if (g->held.failed) return g->emit_failed = true, false;
    if (!g->held.s) return true; /* nothing held, nothing added */
    const srv_request *r = g->r;
    size_t first = g->held.len;
    int which = -1;
    for (int i = 0; i < r->n_stop; i++) {
        const char *p = strstr(g->held.s, r->stop[i]);
        if (p && (size_t)(p - g->held.s) < first) first = (size_t)(p - g->held.s), which = i;
    }
    if (which >= 0) {
        emit(g, first);
        g->held.len = 0, g->held.s[0] = 0;
        g->res->finish = SRV_FINISH_STOP;
        g->res->stop_index = which;
        return false;
    }
    size_t keep = 0; /* the longest tail that begins some stop string */
    for (int i = 0; i < r->n_stop && !final; i++) {
        size_t sl = strlen(r->stop[i]);
        for (size_t k = sl - 1; k > keep; k--)
            if (k <= g->held.len && !memcmp(g->held.s + g->held.len - k, r->stop[i], k)) {
                keep = k;
                break;
            }
    }
    return emit(g, g->held.len - keep);
}

/* Each id with its text, while other slots' passes run (pooled.h: the callback runs
 * between the model's passes); id -1: the text held back at the end. Non-zero stops. */
static int on_token(void *ud, int32_t id, const char *text, size_t len) {
    gen_state *g = ud;
    (void)len;
    if (id < 0) { /* the end (the model's turn, the length): everything left goes */
        if (!g->emit_failed) settle(g, text, true);
        return 0;
    }
    g->t_last = now();
    if (g->res->t_first < 0) g->res->t_first = g->t_last - g->t0;
    if (atomic_load(g->io->cancel)) {
        g->res->finish = SRV_FINISH_CANCEL;
        return 1;
    }
    g->res->n_completion++;
    if (g->r->logprobs >= 0 && g->io->logprob) g->io->logprob(g->io->ud, &g->lp);
    if (g->io->think && tp_think_id(&g->think, text)) g->res->n_reasoning++;
    if (!settle(g, text, false)) {
        if (g->res->finish != SRV_FINISH_STOP) g->res->finish = SRV_FINISH_CANCEL;
        return 1;
    }
    if (atomic_load(g->io->cancel)) {
        g->res->finish = SRV_FINISH_CANCEL;
        return 1;
    }
    return 0;
}

/* The pick's log-probabilities, kept for its token callback (which an end-of-turn id does
 * not get: its entry is dropped, as the API's shapes want). */
static void on_logprob(void *ud, const pooled_logprob *lp) {
    ((gen_state *)ud)->lp = *lp;
}

static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40);
}

bool srv_engine_forced_call(srv_engine *e, const srv_request *r, tf_call *call, char *err,
                            size_t cap) {
    return tf_schema(r, pooled_chat_template(e->m), call, err, cap);
}

bool srv_engine_generate(srv_engine *e, const srv_request *r, const tf_call *con,
                         const int32_t *ids, int64_t n, const srv_gen_io *io, srv_gen_result *res,
                         char *err, size_t cap) {
    *res = (srv_gen_result){.finish = SRV_FINISH_LENGTH, .n_prompt = n, .t_first = -1};
    if (n >= e->n_ctx) {
        snprintf(err, cap, "the prompt is %lld tokens, the context holds %lld (the server's --ctx)",
                 (long long)n, (long long)e->n_ctx);
        return false;
    }
    gen_state g = {.e = e, .r = r, .io = io, .res = res, .t0 = now()};
    g.think.in = io->think == 2;
    pooled_sample_opts so = pooled_sample_opts_default();
    so.temperature = (float)r->temperature;
    so.top_k = 0;
    so.min_p = 0;
    so.top_p = (float)r->top_p;
    so.presence_penalty = (float)r->presence_penalty;
    so.frequency_penalty = (float)r->frequency_penalty;
    so.seed = r->has_seed ? r->seed : clock_seed();
    so.max_tokens = r->max_tokens; /* (-1: up to the end of the context) */
    so.ignore_eos = e->ignore_eos;
    so.spec = e->spec;
    if (con && con->schema) {
        so.json_schema = con->schema;
        so.json_prefix = con->prefix, so.json_suffix = con->suffix;
    }
    if (r->logprobs >= 0) {
        so.on_logprob = on_logprob, so.logprob_user = &g;
        so.top_logprobs = r->logprobs;
    }
    pooled_result pr = {.size = sizeof pr};
    slot *sl = slot_take(e, ids, n);
    bool ok =
        !pooled_generate(sl->ses, ids, (size_t)n, &so, on_token, &g, &pr) || lib_fail(err, cap);
    if (!ok) pooled_session_reset(sl->ses); /* a failed pass may leave the cache half-written */
    slot_give(e, sl);
    if (ok && res->finish == SRV_FINISH_LENGTH) /* (else the callback said why) */
        res->finish = pr.stop_reason == POOLED_STOP_EOG         ? SRV_FINISH_EOG
                      : pr.stop_reason == POOLED_STOP_CANCELLED ? SRV_FINISH_CANCEL
                                                                : SRV_FINISH_LENGTH;
    res->n_cached = n - pr.n_prompt_run;
    res->n_drafted = pr.n_drafted, res->n_accepted = pr.n_accepted;
    double t_end = now();
    if (res->t_first < 0 && pr.n_gen > 0) res->t_first = t_end - g.t0; /* only an end id */
    if (res->t_first >= 0) res->t_decode = (g.t_last > 0 ? g.t_last : t_end) - g.t0 - res->t_first;
    /* text still held for a stop string that never came (the library's own last call,
     * id -1, comes only when it held some itself) */
    if (ok && res->finish != SRV_FINISH_STOP && res->finish != SRV_FINISH_CANCEL && !g.emit_failed)
        settle(&g, "", true);
    if (g.emit_failed && res->finish != SRV_FINISH_STOP) res->finish = SRV_FINISH_CANCEL;
    pl_sb_free(&g.held);
    return ok;
}
